//! The `tessera` binary: parse arguments, run the verb, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = tessera_cli::Cli::parse();
    let mut stdout = std::io::stdout().lock();
    match tessera_cli::run(cli, &mut stdout) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tessera: {e:#}");
            ExitCode::from(tessera_cli::exit_code_for(&e))
        }
    }
}
