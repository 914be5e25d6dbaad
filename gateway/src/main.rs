//! `switchyard`: parse arguments, load config, build, serve.

use std::io::Write;

use clap::Parser;
use switchyard::admin::explain;
use switchyard::cli::args::{Cli, Command};
use switchyard::cli::{sim as sim_cli, sim_server};
use switchyard::http::stack;
use switchyard::state::live::Live;
use switchyard::state::{app, config_file};

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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
                .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Check { file } => check(&file),
        Command::Spend {
            since,
            by,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            switchyard::cli::spend::run(
                &config.ledger,
                &since,
                &by,
                &format,
                &mut std::io::stdout().lock(),
            )
        }
        Command::Sessions {
            since,
            route,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            switchyard::cli::sessions::run(
                &config.ledger,
                &since,
                route.as_deref(),
                &format,
                &mut std::io::stdout().lock(),
            )
        }
        Command::Budgets {
            since,
            by,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            switchyard::cli::budgets::run(
                &config,
                &since,
                &by,
                &format,
                &mut std::io::stdout().lock(),
            )
        }
        Command::Advise {
            since,
            target,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            switchyard::cli::advice::run(
                &config,
                &since,
                target,
                &format,
                &mut std::io::stdout().lock(),
            )
        }
        Command::KeyHash { key } => {
            let hash = switchyard::admit::access::hash_key(&key);
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            writeln!(std::io::stdout().lock(), "sha256:{hex}")?;
            Ok(())
        }
        Command::Explain {
            file,
            config,
            headers,
        } => explain(&file, config.as_deref(), &headers),
        Command::TrainRouter {
            from,
            out,
            backend,
            label,
            model,
            config,
            seed,
            epochs,
        } => {
            let config = config_file::load(config.as_deref())?;
            let settings = switchyard::cli::route::TrainSettings {
                from: &from,
                out: &out,
                label: &label,
                backend: &backend,
                model: model.as_deref(),
                options: switchyard_router::learned::TrainOptions {
                    seed,
                    epochs,
                    ..Default::default()
                },
            };
            switchyard::cli::route::train_router(&config, &settings, &mut std::io::stdout().lock())
        }
        Command::Replay {
            from,
            config,
            routes,
        } => {
            let config = config_file::load(config.as_deref())?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            switchyard::cli::route::replay(&config, &from, &routes, &mut out)?;
            out.flush()?;
            Ok(())
        }
        Command::Serve { config, listen } => runtime()?.block_on(serve(config, listen)),
        Command::Probe {
            config,
            backends,
            out,
            lengths,
            output_tokens,
        } => {
            let source = config
                .as_ref()
                .map_or("<embedded default>".to_owned(), |p| p.display().to_string());
            let config = config_file::load(config.as_deref())?;
            switchyard_adapters::tokens::warm_up();
            let options = switchyard::cli::probe::Options {
                backends,
                out: out.clone(),
                lengths,
                output_tokens,
            };
            let report =
                runtime()?.block_on(switchyard::cli::probe::run(&config, &source, &options))?;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{report}")?;
            writeln!(stdout, "(written to {})", out.join("report.md").display())?;
            Ok(())
        }
        Command::Sim {
            listen,
            profile,
            overrides,
        } => {
            let params = sim_cli::params(&profile, &overrides)?;
            runtime()?.block_on(sim(params, listen))
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// Tells scripts where we listen: one line on stdout, flushed at once
/// (stdout is the CLI's own output; logs go to stderr).
fn announce(what: &str, scheme: &str, addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    #[allow(clippy::print_stdout)]
    {
        writeln!(out, "{what} listening on {scheme}://{addr}")?;
    }
    out.flush()?;
    Ok(())
}

fn check(file: &std::path::Path) -> anyhow::Result<()> {
    let config = config_file::load(Some(file))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}: ok", file.display())?;
    for warning in config.warnings() {
        writeln!(out, "  warning: {warning}")?;
    }
    for backend in config.backends.values() {
        writeln!(
            out,
            "  backend {} ({}) -> {}",
            backend.name,
            backend.tier.as_str(),
            backend.upstream_model
        )?;
        let hints = &backend.latency;
        if let Some(ttft) = hints.ttft {
            writeln!(out, "    latency hint: ttft {} ms", ttft.as_millis())?;
        }
        if let Some(rate) = hints.prefill_tokens_per_s {
            writeln!(out, "    latency hint: prefill {rate} tokens/s")?;
        }
        if let Some(rate) = hints.decode_tokens_per_s {
            writeln!(out, "    latency hint: decode {rate} tokens/s")?;
        }
    }
    for route in config.routes.values() {
        writeln!(out, "  route {}", route.name)?;
    }
    for predictor in config.predictors.values() {
        // The file was read and checked by `load`.
        let weights = predictor
            .weights_text
            .as_deref()
            .and_then(|text| switchyard_router::learned::Weights::from_json(text).ok());
        writeln!(
            out,
            "  predictor {} -> P({} fails), {}",
            predictor.name,
            predictor.backend,
            weights.map_or("no weights file: starts at 0.5".to_owned(), |w| format!(
                "weights {}",
                w.version()
            ))
        )?;
    }
    Ok(())
}

fn explain(
    file: &std::path::Path,
    config: Option<&std::path::Path>,
    headers: &[String],
) -> anyhow::Result<()> {
    let config = config_file::load(config)?;
    let router = switchyard_router::Router::new(&config);
    let body = std::fs::read(file)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", file.display()))?;
    let mut map = ::http::HeaderMap::new();
    for header in headers {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("--header `{header}`: write NAME:VALUE"))?;
        map.insert(
            ::http::HeaderName::from_bytes(name.trim().as_bytes())?,
            ::http::HeaderValue::from_str(value.trim())?,
        );
    }
    let explanation =
        explain::explain_chat(&router, &body, &map).map_err(|err| anyhow::anyhow!("{err}"))?;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &explanation)?;
    writeln!(out)?;
    Ok(())
}

async fn serve(
    config: Option<std::path::PathBuf>,
    listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let config_path = config;
    let config = config_file::load(config_path.as_deref())?;
    switchyard_adapters::tokens::warm_up();
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    // Certificates first: a bad file stops the start before anything opens.
    let tls = config
        .server
        .tls
        .as_ref()
        .map(switchyard::http::tls::Tls::load)
        .transpose()?;
    if let Some(endpoint) = switchyard::telemetry::start(config.telemetry.as_ref())? {
        tracing::info!(%endpoint, "exporting traces over OTLP/HTTP");
    }
    let live = Live::start(app::App::build(&config)?, config_path);
    live.reload_on_sighup();
    live.reload_on_file_change();
    let addr = listen.unwrap_or(config.server.listen);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| anyhow::anyhow!("cannot listen on {addr}: {err}"))?;
    if let Some(tls) = &tls {
        tls.spawn_reload();
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Before the address is out: a SIGTERM from then on stops gracefully.
    let stop = switchyard::http::server::shutdown_signal();
    announce("switchyard", scheme, listener.local_addr()?)?;
    tracing::info!(models = ?live.app().router.model_names(), "serving");
    stack::serve(live, listener, stop, config.server.shutdown_grace, tls).await;
    // Every request has ended, and with it its spans.
    if let Some(telemetry) = switchyard::telemetry::get() {
        telemetry.flush().await;
    }
    Ok(())
}

async fn sim(
    params: switchyard_policies::SimParams,
    listen: std::net::SocketAddr,
) -> anyhow::Result<()> {
    switchyard_adapters::tokens::warm_up();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|err| anyhow::anyhow!("cannot listen on {listen}: {err}"))?;
    let stop = switchyard::http::server::shutdown_signal();
    announce("switchyard sim", "http", listener.local_addr()?)?;
    sim_server::serve(
        switchyard_adapters::sim::SimBackend::new(params),
        listener,
        stop,
    )
    .await;
    Ok(())
}
