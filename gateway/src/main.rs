//! `switchyard`: parse arguments, load config, build, serve.

use clap::Parser;
use switchyard::cli::args::Cli;

fn main() -> std::process::ExitCode {
    // Each request allocates and frees many small buffers, often on another
    // thread than the one that made them; glibc's malloc spent about an
    // eighth of the gateway's CPU on them under load, mimalloc much less.
    // mimalloc stands in for malloc itself (its `override` feature), and
    // Rust's default allocator calls malloc for alignments up to 16 (no
    // larger than the size): its fast path. As the `#[global_allocator]`,
    // the crate sent every allocation through `mi_malloc_aligned`, which in
    // mimalloc 3 costs nearly twice the instructions (5,317 a proxied
    // request against 2,885 in malloc; 102,839 a request in all before,
    // 100,238 after, callgrind). A crate the code does not name is not
    // linked: asking its version names it.
    let _linked = mimalloc::MiMalloc.version();
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
