//! `switchyard train-router` and `switchyard replay`: the learned router
//! trained offline, and any config's routes replayed over recorded
//! requests and answers, both through the routing code a live request
//! takes.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;
use switchyard_adapters::types::{ChatRequest, ChatResponse};
use switchyard_policies::Config;
use switchyard_router::learned::{DENSE, FEATURE_SET, NGRAM_SLOTS, Sample, TrainOptions, train};
use switchyard_router::{Router, Target, failed_check, unit_from_key};

use crate::admin::explain::{decide_chat_with, sample_chat, summarize_chat};

/// One line of `train-router`'s input: a chat request, or the features a
/// predictor recorded of one (`predictors.*.record`), and whether the
/// backend's answer to it failed.
#[derive(Deserialize)]
struct Example {
    request: Option<ChatRequest>,
    sample: Option<RecordedSample>,
    /// The feature set a recorded sample was computed with.
    features: Option<String>,
    failed: bool,
}

/// A sample as an outcome record holds it: the dense features, and the
/// n-gram slots that are not zero.
#[derive(Deserialize)]
struct RecordedSample {
    dense: Vec<f64>,
    ngram: BTreeMap<usize, f32>,
}

impl RecordedSample {
    fn into_sample(self) -> Option<Sample> {
        let mut ngram = vec![0.0; NGRAM_SLOTS];
        for (slot, value) in self.ngram {
            *ngram.get_mut(slot)? = value;
        }
        Some(Sample {
            dense: self.dense.try_into().ok()?,
            ngram,
        })
    }
}

/// Fewest examples of each class `train-router` learns from.
const MIN_PER_CLASS: usize = 10;

pub struct TrainSettings<'a> {
    pub from: &'a Path,
    pub out: &'a Path,
    /// Written into the file: what the label means, whose answers.
    pub label: &'a str,
    pub backend: &'a str,
    /// When set, every request is seen as sent to this model name (a
    /// learned route, say), with that route's profile.
    pub model: Option<&'a str>,
    pub options: TrainOptions,
}

/// Trains weights on a JSONL file of `{"request": {...chat...}, "failed":
/// bool}` lines and writes them (a temporary file, then a rename); prints
/// the held-out figures.
pub fn train_router(
    config: &Config,
    settings: &TrainSettings<'_>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let router = Router::new(config);
    let mut examples = Vec::new();
    let mut other_features = 0;
    let from = settings.from.display();
    for (number, line) in lines(settings.from)? {
        let example: Example = serde_json::from_str(&line).with_context(|| {
            format!("{from}:{number}: not a {{request or sample, failed}} line")
        })?;
        let sample = match (example.request, example.sample) {
            (Some(mut request), _) => {
                if let Some(model) = settings.model {
                    request.model = model.to_owned();
                }
                sample_chat(&router, &request)
                    .map_err(|err| anyhow::anyhow!("{from}:{number}: {err}"))?
            }
            (None, Some(recorded)) => {
                // Features another version computed mean something else.
                if example.features.as_deref() != Some(FEATURE_SET) {
                    other_features += 1;
                    continue;
                }
                recorded
                    .into_sample()
                    .with_context(|| format!("{from}:{number}: a sample needs {} dense features and n-gram slots below {NGRAM_SLOTS}", DENSE.len()))?
            }
            (None, None) => anyhow::bail!("{from}:{number}: neither `request` nor `sample`"),
        };
        examples.push((sample, example.failed));
    }
    if other_features > 0 {
        writeln!(
            out,
            "skipped {other_features} recorded samples of another feature set than `{FEATURE_SET}`"
        )?;
    }
    let failed = examples.iter().filter(|(_, f)| *f).count();
    let passed = examples.len() - failed;
    if failed.min(passed) < MIN_PER_CLASS {
        anyhow::bail!(
            "{} has {failed} failed and {passed} passed examples: at least {MIN_PER_CLASS} of each are needed to learn anything",
            settings.from.display()
        );
    }
    let (mut weights, validation) = train(&examples, &settings.options);
    let source = std::fs::read(settings.from)?;
    weights.about.label = Some(settings.label.to_owned());
    weights.about.backend = Some(settings.backend.to_owned());
    weights.about.training = Some(serde_json::json!({
        "examples": examples.len(),
        "failed": failed,
        "epochs": settings.options.epochs,
        "learning_rate": settings.options.learning_rate,
        "l2": settings.options.l2,
        "seed": settings.options.seed,
        "balance": settings.options.balance,
        "source": settings.from.file_name().map(|n| n.to_string_lossy().into_owned()),
        "source_xxh3": format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&source)),
    }));
    weights.about.validation = Some(serde_json::to_value(validation)?);
    let temporary = settings.out.with_extension("json.tmp");
    std::fs::write(&temporary, weights.to_json() + "\n")
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, settings.out)?;
    writeln!(
        out,
        "trained on {} examples ({failed} failed); held-out fifth: {} examples, AUC {}, log loss {:.3}, accuracy {:.3}; weights {} in {}",
        examples.len(),
        validation.examples,
        validation
            .auc
            .map_or("n/a".to_owned(), |a| format!("{a:.3}")),
        validation.log_loss,
        validation.accuracy,
        weights.version(),
        settings.out.display()
    )?;
    Ok(())
}

/// One line of `replay`'s input: a request with an id, and what each
/// backend answered it (OpenAI chat responses), for the checks a cascade
/// runs.
#[derive(Deserialize)]
struct Recorded {
    id: String,
    request: ChatRequest,
    #[serde(default)]
    answers: BTreeMap<String, ChatResponse>,
}

/// Replays `routes` (every route when empty) over recorded requests, in
/// file order, writing a JSON line per route and request: where the route
/// sends it, why, the score and predicted failure it decided on, and for
/// cascades which answer failed which check and who served. Cascade
/// outcomes train the predictors that learn from them, as live.
pub fn replay(
    config: &Config,
    from: &Path,
    routes: &[String],
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let routes: Vec<String> = if routes.is_empty() {
        config.routes.keys().cloned().collect()
    } else {
        routes.to_vec()
    };
    for route in &routes {
        if !config.routes.contains_key(route) {
            anyhow::bail!(
                "unknown route `{route}`; the config has: {}",
                config.routes.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
    let backends: Vec<&str> = config.backends.keys().map(String::as_str).collect();
    let recorded: Vec<Recorded> = lines(from)?
        .into_iter()
        .map(|(number, line)| {
            serde_json::from_str(&line).with_context(|| {
                format!(
                    "{}:{number}: not an {{id, request, answers}} line",
                    from.display()
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let headers = http::HeaderMap::new();
    for route in &routes {
        // A router of its own per route: what one route's outcomes teach a
        // shared predictor must not reach another route's decisions on the
        // same requests.
        let router = Router::new(config);
        let strategy = match router.target(route) {
            Some(Target::Route(number)) => Some(router.strategy_name(number)),
            _ => None,
        };
        for line in &recorded {
            let mut request = line.request.clone();
            request.model = route.clone();
            let unit = unit_from_key(&format!("{route}/{}", line.id));
            let decision = decide_chat_with(&router, &request, &headers, unit)
                .map_err(|err| anyhow::anyhow!("{}: {err}", line.id))?;
            let cascade = router.cascade(&decision);
            // The backends called, in order; all but the last were
            // collected whole and checked before the caller saw a byte.
            let mut tried = vec![decision.primary()];
            let mut failed = None;
            if let Some((checks, min_mean_logprob)) = cascade {
                tried.clear();
                // Every target but the last is checked, as dispatch does.
                for (step, &target) in decision.targets.iter().enumerate() {
                    tried.push(target);
                    if step + 1 == decision.targets.len() {
                        break;
                    }
                    let answer = line.answers.get(backends[target]).with_context(|| {
                        format!(
                            "{}: no recorded answer of `{}`, which route `{route}` checks",
                            line.id, backends[target]
                        )
                    })?;
                    let check = failed_check(&summarize_chat(answer), checks, min_mean_logprob);
                    if step == 0 {
                        router.observe(&decision, target, check.is_some());
                    }
                    match check {
                        Some(check) => failed = failed.or(Some(check.name())),
                        None => break,
                    }
                }
            }
            let served = tried[tried.len() - 1];
            let row = serde_json::json!({
                "route": route,
                "strategy": strategy,
                "id": line.id,
                "backend": backends[decision.primary()],
                "targets": decision.targets.iter().map(|&t| backends[t]).collect::<Vec<_>>(),
                "reason": decision.reason.as_str(),
                "score": decision.features.score,
                "predicted_fail": decision.features.predicted_fail,
                "failed_check": failed,
                "tried": tried.iter().map(|&t| backends[t]).collect::<Vec<_>>(),
                "served": backends[served],
                "escalated": served != decision.primary(),
                // The answers before the served one were collected whole
                // and checked before anything reached the caller; the
                // served one too when the route checks its answers.
                "checked": cascade.is_some() && decision.targets.len() > 1,
            });
            writeln!(out, "{row}")?;
        }
    }
    Ok(())
}

/// A JSONL file's non-empty lines, numbered from 1.
fn lines(path: &Path) -> anyhow::Result<Vec<(usize, String)>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if !line.trim().is_empty() {
            lines.push((i + 1, line));
        }
    }
    Ok(lines)
}
