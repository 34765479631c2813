#![doc = include_str!("../README.md")]

mod args;
mod aws;
mod commands;
mod error;
mod output;
mod progress;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::args::Cli;

fn main() -> ExitCode {
    // Usage errors exit with status 2 (clap's), `--help` and `--version` with 0.
    let cli = Cli::parse();
    let Some(table) = cli.global.table.clone() else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "no table: pass --table NAME or set DYNATREE_TABLE",
            )
            .exit();
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&error::CliError::msg(format!("cannot start: {e}"))),
    };
    match runtime.block_on(commands::run(cli, table)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Prints the one-line error and turns it into the exit status.
fn fail(e: &error::CliError) -> ExitCode {
    if e.code() == error::EXIT_INTERRUPTED {
        eprintln!("dynatree: {}", e.message());
    } else {
        eprintln!("dynatree: error: {}", e.message());
    }
    ExitCode::from(e.code())
}
