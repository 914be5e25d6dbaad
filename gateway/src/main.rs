//! `switchyard`: parse arguments, load config, build, serve.

use clap::Parser;
use switchyard::cli::args::Cli;

/// Each request allocates and frees many small buffers, often on another
/// thread than the one that made them; glibc's malloc spent about an eighth
/// of the gateway's CPU on them under load, mimalloc much less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            // Start-up errors are for a person: the chain of causes, no backtrace.
            eprintln!("switchyard: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logs()?;
    switchyard::cli::commands::run(cli.command)
}

/// Logs go to stderr, filtered by `SWITCHYARD_LOG` (else `RUST_LOG`, else
/// `info`), as text, or as one JSON object per line with
/// `SWITCHYARD_LOG_FORMAT=json` (for log collectors).
fn init_logs() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match std::env::var("SWITCHYARD_LOG_FORMAT").as_deref() {
        Ok("json") => logs.json().init(),
        Ok("text") | Err(_) => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        Ok(other) => anyhow::bail!("SWITCHYARD_LOG_FORMAT={other}: write json or text"),
    }
    Ok(())
}
