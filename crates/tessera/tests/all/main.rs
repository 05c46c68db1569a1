//! The library's integration tests as one test binary (`cargo test -p tessera --test all`),
//! so the library is linked into one executable rather than one per file. Each file here
//! is a module named after what it tests (`cargo test -p tessera --test all aero::` runs
//! one); `common` holds the helpers several of them share. Test data stays in
//! `tests/data` (paths relative to `CARGO_MANIFEST_DIR`); proptest regression files sit
//! beside the module they belong to. The tests run as threads of one process: none may
//! change process-wide state (environment, current directory, global thread pool), and
//! `gptrs_streaming`, which measures with the binary's counting allocator, measures in a
//! subprocess of this binary that runs it alone.

mod common;

mod aero;
mod aero_invalid;
mod aero_roundtrip;
mod aeroset;
mod corruption;
mod dcp;
mod fold;
mod fold_carry;
mod fold_checkpoint;
mod fold_invalid;
mod fold_tsav;
mod fuzz_regressions;
mod gguf;
mod gguf_hostile;
mod gguf_quants;
mod gguf_roundtrip;
mod gptrs;
mod gptrs_invalid;
mod gptrs_streaming;
mod hdf5;
mod identity_sets;
mod interop_manifest;
mod matrix;
mod model_signing;
mod npy;
mod onnx;
mod open_reads;
mod pages;
mod pytorch;
mod pytorch_write;
mod readback;
mod remote;
mod remote_cache;
mod safetensors;
mod sets;
mod sets_more;
mod tessera_sets;
mod typed_api;
mod vectors;
mod verify_progress;
mod wtxt;
mod wtxt_delta;
mod ztensor2;
mod ztensor2_shards;
mod ztensor_interop;
mod ztensor_invalid;
mod ztensor_vectors;
mod ztensor_write;
