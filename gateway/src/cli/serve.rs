//! `switchyard serve` and `switchyard sim`: build, listen, announce the
//! address on stdout, serve until a shutdown signal, drain.

use std::io::Write;

use crate::cli::sim_server;
use crate::http::stack;
use crate::state::live::Live;
use crate::state::{app, config_file};

pub async fn serve(
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
        .map(crate::http::tls::Tls::load)
        .transpose()?;
    if let Some(endpoint) = crate::telemetry::start(config.telemetry.as_ref())? {
        tracing::info!(%endpoint, "exporting traces over OTLP/HTTP");
    }
    let live = Live::start(app::App::build(&config)?, config_path);
    live.reload_on_sighup();
    live.reload_on_file_change();
    live.watch_stored_keys();
    crate::batch::runner::spawn(live.clone());
    let addr = listen.unwrap_or(config.server.listen);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| anyhow::anyhow!("cannot listen on {addr}: {err}"))?;
    if let Some(tls) = &tls {
        tls.spawn_reload();
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Before the address is out: a SIGTERM from then on stops gracefully.
    let stop = crate::http::server::shutdown_signal();
    announce("switchyard", scheme, listener.local_addr()?)?;
    tracing::info!(models = ?live.app().router.model_names(), "serving");
    stack::serve(live, listener, stop, config.server.shutdown_grace, tls).await;
    // Every request has ended, and with it its spans.
    if let Some(telemetry) = crate::telemetry::get() {
        telemetry.flush().await;
    }
    Ok(())
}

pub async fn sim(
    params: switchyard_policies::SimParams,
    listen: std::net::SocketAddr,
) -> anyhow::Result<()> {
    switchyard_adapters::tokens::warm_up();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|err| anyhow::anyhow!("cannot listen on {listen}: {err}"))?;
    let stop = crate::http::server::shutdown_signal();
    announce("switchyard sim", "http", listener.local_addr()?)?;
    sim_server::serve(
        switchyard_adapters::sim::SimBackend::new(params),
        listener,
        stop,
    )
    .await;
    Ok(())
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
