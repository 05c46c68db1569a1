//! One module per format. Each `formats/<fmt>/mod.rs` opens with its byte layout, what we
//! support and every deviation from the spec, and exposes the same entry points:
//!
//! - `OPEN: Option<OpenFn>`: parse + validate a file's bytes into a [`crate::Container`];
//! - `WRITE…: Option<WriteFn>`: stream a [`crate::TensorSource`] out in this format;
//! - `capabilities()`: what the format can hold ([`crate::convert::Capabilities`]).
//!
//! `None` means "detected, not supported yet".

pub mod aero;
pub mod fold;
pub mod gguf;
pub mod gptrs;
pub mod npy;
pub mod pytorch;
pub mod safetensors;
pub mod wtxt;
pub mod ztensor;
pub mod ztensor2;
