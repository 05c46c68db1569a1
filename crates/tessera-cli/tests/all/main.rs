//! The CLI's integration tests as one test binary (`cargo test -p tessera-cli --test all`),
//! so the library and the CLI are linked into one executable rather than one per file.
//! Each file here is a module named after what it tests (`cargo test -p tessera-cli
//! --test all habits::` runs one); `common` holds the helpers several of them share.
//! Test data is the library's (`../tessera/tests/data`, relative to
//! `CARGO_MANIFEST_DIR`). The tests run as threads of one process and run `tessera` as a
//! child process; none may change process-wide state (environment, current directory,
//! signal handlers).

mod common;

mod checked_reads;
mod cli;
mod diff_values;
mod durability;
mod fold_cli;
mod habits;
mod identity;
mod interrupts;
mod keys;
mod manners;
mod options;
mod pages;
mod quantized;
mod remote;
mod rough_edges;
mod set_writes;
mod sets;
mod slices;
mod stats;
mod terminal_safety;
mod verify_report;
