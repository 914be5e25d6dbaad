//! The probe's outputs: a Markdown report, and a latency-hints file the
//! gateway's latency model can start from (`latency_hints:` in a config).

use std::fmt::Write;

use switchyard_policies::Profile;

use crate::cli::probe::model::{
    ClassRun, Fitted, NEW_TURN_TOKENS, Point, PrefixReuse, Verdict, verdict,
};

/// Everything measured on one backend.
pub struct BackendProbe {
    pub name: String,
    pub tier: &'static str,
    pub model: String,
    pub engine: &'static str,
    pub window: Option<u32>,
    pub points: Vec<Point>,
    pub over_context: Vec<u32>,
    pub prefix: Option<PrefixReuse>,
    pub classes: Vec<ClassRun>,
    pub failures: Vec<String>,
}

impl BackendProbe {
    pub fn fit(&self) -> Option<Fitted> {
        Fitted::of(&self.points)
    }
}

/// The use cases of the table, with the contexts they are judged at.
pub const USE_CASES: [Profile; 5] = [
    Profile::Chat,
    Profile::Code,
    Profile::Agentic,
    Profile::Rag,
    Profile::Batch,
];
pub const CONTEXTS: [u32; 2] = [4096, 32_768];

fn budget_text(profile: Profile) -> String {
    let b = profile.budget();
    match (profile, b.ttft) {
        (Profile::Batch, _) => "tokens/hour".to_owned(),
        (Profile::Rag, Some(t)) => format!(
            ">= {:.0} tok/s, TTFT <= {:.0} s + 1 s per 2k prompt tokens",
            b.min_tokens_per_s,
            t.as_secs_f64()
        ),
        (_, Some(t)) => format!(
            ">= {:.0} tok/s, TTFT <= {:.1} s",
            b.min_tokens_per_s,
            t.as_secs_f64()
        ),
        (_, None) => format!(">= {:.0} tok/s", b.min_tokens_per_s),
    }
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Meets {
            tokens_per_s,
            ttft_ms,
        } => format!(
            "yes: {tokens_per_s:.0} tok/s, TTFT {:.2} s",
            ttft_ms / 1000.0
        ),
        Verdict::Misses { why } => format!("no: {why}"),
        Verdict::TokensPerHour(t) => format!("{:.0}k tokens/h", t / 1000.0),
        Verdict::OverContext => "no: past the context window".to_owned(),
        Verdict::Unknown => "unknown".to_owned(),
    }
}

/// The use-case table of one backend.
pub fn use_case_table(probe: &BackendProbe, out: &mut String) {
    let Some(fit) = probe.fit() else {
        out.push_str("No measurements: no use-case verdicts.\n");
        return;
    };
    let _ = writeln!(
        out,
        "| use case | budget | at 4k context | at 32k context |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for profile in USE_CASES {
        let cells: Vec<String> = CONTEXTS
            .iter()
            .map(|&c| verdict_text(&verdict(&fit, probe.window, profile, c)))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            profile.name(),
            budget_text(profile),
            cells[0],
            cells[1]
        );
    }
}

pub fn markdown(probes: &[BackendProbe], header: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Switchyard probe\n\n{header}\n");
    out.push_str(
        "Each backend is called directly (no routing, no queue), one streamed request at a time, \
         temperature 0. Cold prompts start with a line no earlier request had, so no prefix cache \
         helps. Use cases: chat, code and agentic keep the conversation in the prefix cache, so \
         only a new turn of 128 tokens is prefilled; RAG prefills its whole prompt against its \
         longer first-token budget; batch is tokens per hour of one stream. Figures past the \
         longest prompt measured are extrapolated from the fits: first-token time is an \
         overhead plus prefill whose cost per token grows linearly with its position, and time \
         per output token grows linearly with the context.\n\n",
    );
    for probe in probes {
        backend_section(probe, &mut out);
    }
    out
}

fn backend_section(probe: &BackendProbe, out: &mut String) {
    let window = probe
        .window
        .map_or("unknown".to_owned(), |w| format!("{w} tokens"));
    let _ = writeln!(
        out,
        "## {}\n\nTier {}, model `{}`, engine {}, context window {window}.\n\n![{}]({}.svg)\n",
        probe.name, probe.tier, probe.model, probe.engine, probe.name, probe.name
    );
    let _ = writeln!(
        out,
        "| prompt tokens | TTFT ms | decode tok/s | engine prefill tok/s |\n|---|---|---|---|"
    );
    for p in &probe.points {
        let decode = p
            .decode_tokens_per_s
            .map_or("-".to_owned(), |d| format!("{d:.1}"));
        let prefill = p
            .reported_prefill_tokens_per_s
            .map_or("-".to_owned(), |r| format!("{r:.0}"));
        let _ = writeln!(
            out,
            "| {} | {:.0} | {decode} | {prefill} |",
            p.prompt_tokens, p.ttft_ms
        );
    }
    for length in &probe.over_context {
        let _ = writeln!(out, "| ~{length} | over the context window | | |");
    }
    out.push('\n');
    if let Some(prefix) = &probe.prefix {
        let _ = writeln!(
            out,
            "Repeated prefix ({} prompt tokens): TTFT {:.0} ms cold, {:.0} ms warm, {:.1}x faster; \
             {} tokens reported cached.\n",
            prefix.prompt_tokens,
            prefix.cold_ttft_ms,
            prefix.warm_ttft_ms,
            prefix.speedup(),
            prefix.cached_tokens
        );
    }
    if !probe.classes.is_empty() {
        let _ = writeln!(
            out,
            "| prompt | decode tok/s | drafted | accepted | acceptance |\n|---|---|---|---|---|"
        );
        for run in &probe.classes {
            let decode = run
                .decode_tokens_per_s
                .map_or("-".to_owned(), |d| format!("{d:.1}"));
            let (drafted, accepted, rate) = match (run.drafts, run.acceptance()) {
                (Some((d, a)), Some(r)) => {
                    (d.to_string(), a.to_string(), format!("{:.0}%", r * 100.0))
                }
                _ => ("-".into(), "-".into(), "no drafting reported".into()),
            };
            let _ = writeln!(
                out,
                "| {} prompt | {decode} | {drafted} | {accepted} | {rate} |",
                run.class.as_str()
            );
        }
        out.push('\n');
    }
    use_case_table(probe, out);
    for failure in &probe.failures {
        let _ = writeln!(out, "\nFailed: {failure}");
    }
    out.push('\n');
}

/// Starting figures per backend, in the shape of a backend's `latency:`.
pub fn hints_yaml(probes: &[BackendProbe], header: &str) -> String {
    let mut out = format!(
        "# Latency hints from `switchyard probe`. {header}\n\
         # Name this file in a config as `latency_hints: <path>`; a backend's own\n\
         # `latency:` fields win over these.\n"
    );
    for probe in probes {
        let Some(fit) = probe.fit() else { continue };
        let reported: Vec<f64> = probe
            .points
            .iter()
            .filter_map(|p| p.reported_prefill_tokens_per_s)
            .collect();
        let prefill = if reported.is_empty() {
            fit.prefill.tokens_per_s(2048.0)
        } else {
            Some(reported.iter().sum::<f64>() / reported.len() as f64)
        };
        let _ = writeln!(out, "{}:", probe.name);
        let _ = writeln!(out, "  ttft_ms: {:.0}", fit.prefill.overhead_ms.max(1.0));
        if let Some(prefill) = prefill {
            let _ = writeln!(out, "  prefill_tokens_per_s: {prefill:.1}");
        }
        if let Some(decode) = fit.decode_at(NEW_TURN_TOKENS) {
            let _ = writeln!(out, "  decode_tokens_per_s: {decode:.1}");
        }
    }
    out
}
