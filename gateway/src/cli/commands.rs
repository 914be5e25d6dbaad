//! Every subcommand, dispatched: `main.rs` parses the arguments and calls
//! `run`. The commands' own output goes to stdout; logs go to stderr.

use std::io::Write;

use crate::admin::explain;
use crate::cli::args::Command;
use crate::cli::serve::{serve, sim};
use crate::cli::sim as sim_cli;
use crate::state::config_file;

/// Runs one subcommand to its end.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Check {
            file,
            config,
            allow_missing_env,
        } => check(file.or(config).as_deref(), allow_missing_env),
        Command::Spend {
            budgets: true,
            format,
            config,
            ..
        } => {
            let config = config_file::load(config.as_deref())?;
            crate::cli::spend_budgets::run(&config, &format, &mut std::io::stdout().lock())
        }
        Command::Spend {
            since,
            by,
            format,
            config,
            ..
        } => {
            let config = config_file::load(config.as_deref())?;
            crate::cli::spend::run(&config, &since, &by, &format, &mut std::io::stdout().lock())
        }
        Command::Compare {
            since,
            route,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            crate::cli::compare::run(
                &config,
                &since,
                route.as_deref(),
                &format,
                &mut std::io::stdout().lock(),
            )
        }
        Command::Batches {
            limit,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            crate::cli::batches::run(&config, limit, &format, &mut std::io::stdout().lock())
        }
        Command::Sessions {
            since,
            route,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            crate::cli::sessions::run(
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
            crate::cli::budgets::run(&config, &since, &by, &format, &mut std::io::stdout().lock())
        }
        Command::Advise {
            since,
            target,
            format,
            config,
        } => {
            let config = config_file::load(config.as_deref())?;
            crate::cli::advice::run(
                &config,
                &since,
                target,
                &format,
                &mut std::io::stdout().lock(),
            )
        }
        Command::Keys(args) => crate::cli::keys::run(&args, &mut std::io::stdout().lock()),
        Command::Requests(args) => crate::cli::requests::run(&args, &mut std::io::stdout().lock()),
        Command::KeyHash { key } => {
            let key = match key.filter(|k| k != "-") {
                Some(key) => key,
                None => key_from_stdin()?,
            };
            writeln!(
                std::io::stdout().lock(),
                "{}",
                crate::admit::access::hash_text(&key)
            )?;
            Ok(())
        }
        Command::Explain {
            file,
            request,
            format,
            config,
            headers,
        } => {
            let file = file.or(request).unwrap_or_default();
            explain(&file, config.as_deref(), &headers, &format)
        }
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
            let config = config_file::load_for_training(config.as_deref())?;
            let settings = crate::cli::route::TrainSettings {
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
            crate::cli::route::train_router(&config, &settings, &mut std::io::stdout().lock())
        }
        Command::Replay {
            from,
            config,
            routes,
        } => {
            let config = config_file::load(config.as_deref())?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            crate::cli::route::replay(&config, &from, &routes, &mut out)?;
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
            let options = crate::cli::probe::Options {
                backends,
                out: out.clone(),
                lengths,
                output_tokens,
            };
            let report = runtime()?.block_on(crate::cli::probe::run(&config, &source, &options))?;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{report}")?;
            writeln!(stdout, "(written to {})", out.join("report.md").display())?;
            Ok(())
        }
        Command::Sim {
            listen,
            preset,
            overrides,
        } => {
            let params = sim_cli::params(&preset, &overrides)?;
            runtime()?.block_on(sim(params, listen))
        }
    }
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn check(file: Option<&std::path::Path>, allow_missing_env: bool) -> anyhow::Result<()> {
    let config = config_file::load(file)?;
    // What `serve` would stop at: an `env:NAME` with nothing in it.
    let missing: Vec<String> = config
        .env_references()
        .into_iter()
        .filter(|(_, var)| std::env::var_os(var).is_none())
        .map(|(path, var)| format!("{path}: env:{var} is not set"))
        .collect();
    let name = file.map_or("<embedded default>".into(), |f| f.display().to_string());
    if !missing.is_empty() && !allow_missing_env {
        anyhow::bail!(
            "{name}: `serve` would stop here:\n  {}\n(--allow-missing-env checks the file alone, where it will not run)",
            missing.join("\n  ")
        );
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{name}: ok")?;
    for warning in config.warnings().into_iter().chain(missing) {
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
    format: &str,
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
    let mut rows = Vec::new();
    crate::cli::report_text::flatten("", &serde_json::to_value(&explanation)?, &mut rows);
    crate::cli::report_text::write(&mut out, format, &explanation, ("field", &["value"], &rows))
}

/// A key typed or piped on standard input: its first line, without the
/// line ending.
fn key_from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let key = line.trim_end_matches(['\n', '\r']);
    if key.is_empty() {
        anyhow::bail!("no key: give it as an argument or on standard input");
    }
    Ok(key.to_owned())
}
