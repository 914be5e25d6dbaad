//! `switchyard probe`: measures each backend as a waiting person feels it
//! (first-token time against prompt length, decode speed against context,
//! what a repeated prefix saves, drafting on code and prose) and writes a
//! report, a plot per backend and latency hints.

mod measure;
mod model;
mod report;
mod svg;

use std::path::PathBuf;
use std::time::Duration;

use switchyard_adapters::engine_metrics;
use switchyard_adapters::upstream::http_client;
use switchyard_policies::{Backend, BackendAdapter, Config, Engine, Tier};

use crate::cli::probe::measure::Target;
pub use crate::cli::probe::report::BackendProbe;

pub struct Options {
    /// Backends to probe; every non-cloud backend when empty.
    pub backends: Vec<String>,
    pub out: PathBuf,
    /// Cold prompt lengths, in tokens.
    pub lengths: Vec<u32>,
    /// Output tokens per request.
    pub output_tokens: u32,
}

/// Probes, writes `report.md`, `<backend>.svg` and `latency-hints.yaml`
/// into the output folder, and returns the report.
pub async fn run(config: &Config, source: &str, options: &Options) -> anyhow::Result<String> {
    let chosen: Vec<&Backend> = if options.backends.is_empty() {
        // Cloud calls cost money: only when named.
        config
            .backends
            .values()
            .filter(|b| b.tier != Tier::Cloud)
            .collect()
    } else {
        options
            .backends
            .iter()
            .map(|name| {
                config.backends.get(name).ok_or_else(|| {
                    let known: Vec<&str> = config.backends.keys().map(String::as_str).collect();
                    anyhow::anyhow!("no backend `{name}`; the config has {}", known.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    std::fs::create_dir_all(&options.out)
        .map_err(|err| anyhow::anyhow!("cannot create {}: {err}", options.out.display()))?;
    let mut probes = Vec::new();
    for backend in chosen {
        tracing::info!(backend = %backend.name, "probing");
        probes.push(probe(backend, options).await?);
    }
    let header = format!(
        "Run {} UTC with `{source}`; prompts of {:?} tokens, {} output tokens each.",
        utc_now(),
        options.lengths,
        options.output_tokens
    );
    for probe in &probes {
        if let Some(fit) = probe.fit() {
            let context = report::CONTEXTS[1].min(probe.window.unwrap_or(u32::MAX));
            write(
                options.out.join(format!("{}.svg", probe.name)),
                &svg::plot(&probe.name, &probe.points, &fit, context),
            )?;
        }
    }
    let markdown = report::markdown(&probes, &header);
    write(options.out.join("report.md"), &markdown)?;
    write(
        options.out.join("latency-hints.yaml"),
        &report::hints_yaml(&probes, &header),
    )?;
    Ok(markdown)
}

fn write(path: PathBuf, text: &str) -> anyhow::Result<()> {
    std::fs::write(&path, text)
        .map_err(|err| anyhow::anyhow!("cannot write {}: {err}", path.display()))
}

async fn probe(backend: &Backend, options: &Options) -> anyhow::Result<BackendProbe> {
    let provider = crate::state::backends::build_provider(backend)?;
    let engine = match &backend.adapter {
        BackendAdapter::OpenAi(openai) => openai.engine,
        _ => Engine::Generic,
    };
    let target = Target {
        provider: &*provider,
        model: &backend.upstream_model,
        engine,
    };
    let window = context_window(backend).await;
    let mut failures = Vec::new();
    // Prompts longer than the window would only be refused.
    let lengths: Vec<u32> = options.lengths.clone();
    let (points, over_context) =
        measure::cold_points(&target, &lengths, options.output_tokens, &mut failures).await;
    let reuse_length = lengths
        .iter()
        .copied()
        .filter(|&l| !over_context.contains(&l))
        .find(|&l| l >= 1000)
        .or_else(|| lengths.iter().copied().max());
    let prefix = match reuse_length {
        Some(length) => match measure::prefix_reuse(&target, length).await {
            Ok(prefix) => Some(prefix),
            Err(err) => {
                failures.push(format!("repeated prefix: {err}"));
                None
            }
        },
        None => None,
    };
    let mut classes = Vec::new();
    for run in measure::classes(&target, options.output_tokens).await {
        match run {
            Ok(run) => classes.push(run),
            Err(err) => failures.push(err),
        }
    }
    Ok(BackendProbe {
        name: backend.name.clone(),
        tier: backend.tier.as_str(),
        model: backend.upstream_model.clone(),
        engine: engine.as_str(),
        window,
        points,
        over_context,
        prefix,
        classes,
        failures,
    })
}

/// The backend's context window: the simulator's setting, or what
/// llama-server's `/props` reports.
async fn context_window(backend: &Backend) -> Option<u32> {
    match &backend.adapter {
        BackendAdapter::Sim(sim) => Some(sim.context_window),
        BackendAdapter::OpenAi(openai) if openai.engine == Engine::Llamacpp => {
            let origin = openai.origin();
            let client = http_client(Duration::from_secs(3)).ok()?;
            let text =
                engine_metrics::fetch(&client, &format!("{origin}/props"), Duration::from_secs(5))
                    .await
                    .ok()?;
            let props: serde_json::Value = serde_json::from_str(&text).ok()?;
            let n_ctx = props["default_generation_settings"]["n_ctx"]
                .as_u64()
                .or_else(|| props["n_ctx"].as_u64())?;
            u32::try_from(n_ctx).ok()
        }
        _ => None,
    }
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = switchyard_policies::calendar::civil_from_days((secs / 86_400) as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        (secs % 86_400) / 3600,
        (secs % 3600) / 60
    )
}
