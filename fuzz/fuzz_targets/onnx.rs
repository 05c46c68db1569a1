#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera::fuzzing::exercise(tessera::Format::Onnx, data);
});
