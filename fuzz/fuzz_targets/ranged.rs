#![no_main]
use libfuzzer_sys::fuzz_target;

// Every format read by range, opened from memory and over a source that is not in
// memory; the two must agree.
fuzz_target!(|data: &[u8]| {
    tessera::fuzzing::ranged(data);
});
