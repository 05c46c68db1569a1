//! The `tessera` binary: parse arguments, run the verb, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = tessera_cli::Cli::parse();
    // Everything printed passes through the escaper: text from a file never reaches
    // the terminal raw (see `term`).
    let mut stdout = tessera_cli::term::SafeWriter::new(std::io::stdout().lock());
    let result = tessera_cli::run(cli, &mut stdout);
    drop(stdout);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            tessera_cli::term::warn(&format!("tessera: {e:#}"));
            ExitCode::from(tessera_cli::exit_code_for(&e))
        }
    }
}
