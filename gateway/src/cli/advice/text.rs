//! Advice for a person (a table with its reasons), as YAML to paste, or
//! JSON.

use std::fmt::Write as _;
use std::io::Write;

use crate::cli::advice::{Advice, RouteAdvice, Split};

/// The route's strategy as config YAML, to paste under `routes:`.
pub fn snippet(route: &str, split: &Split) -> String {
    let weights: Vec<String> = split
        .weights
        .iter()
        .map(|(b, w)| format!("{b}: {w}"))
        .collect();
    format!(
        "{route}:\n  strategy:\n    split:\n      weights: {{{}}}\n",
        weights.join(", ")
    )
}

pub fn write(out: &mut impl Write, format: &str, advice: &Advice) -> anyhow::Result<()> {
    match format {
        "json" => {
            serde_json::to_writer_pretty(&mut *out, advice)?;
            writeln!(out)?;
        }
        "yaml" => {
            writeln!(
                out,
                "# switchyard advise: each route's new strategy (target {:.0}% within budget); its other settings stay",
                advice.target * 100.0
            )?;
            for route in &advice.routes {
                if route.keep_current {
                    writeln!(
                        out,
                        "# {}: keep it as it is: it measured the target, {}",
                        route.route,
                        why_keep(route)
                    )?;
                }
                if !route.reaches_target && route.snippet.is_some() {
                    writeln!(
                        out,
                        "# {}: no split is predicted to reach the target; this one comes closest",
                        route.route
                    )?;
                }
                if let (Some(snippet), Some(split)) = (&route.snippet, &route.advised) {
                    writeln!(
                        out,
                        "# {}: {} requests; predicted {} within budget at {} (now {} at {})",
                        route.route,
                        route.requests,
                        percent(Some(split.within_budget)),
                        usd(split.cost_usd),
                        percent(route.measured_within_budget),
                        usd(route.measured_cost_usd),
                    )?;
                    write!(out, "{snippet}")?;
                }
            }
        }
        "table" => write!(out, "{}", table(advice))?,
        other => anyhow::bail!("--format `{other}`: write table, yaml or json"),
    }
    Ok(())
}

fn table(advice: &Advice) -> String {
    let mut s = String::new();
    let minutes = (advice.now_ms - advice.since_ms) as f64 / 60_000.0;
    let window = match minutes {
        m if m < 120.0 => format!("{m:.0} minutes"),
        m if m < 2880.0 => format!("{:.0} hours", m / 60.0),
        m => format!("{:.0} days", m / 1440.0),
    };
    let _ = writeln!(
        s,
        "Advice from the last {window} of traffic, for at least {:.0}% of each route's requests within budget.",
        advice.target * 100.0
    );
    for route in &advice.routes {
        route_table(&mut s, route);
    }
    if !advice.trials.is_empty() {
        let _ = writeln!(s, "\nTried on the same requests (shadow copies):");
        for trial in &advice.trials {
            let _ = writeln!(s, "  route {}: {}.", trial.route, trial.verdict);
        }
    }
    if advice.cloud_requests > 0 {
        let _ = writeln!(
            s,
            "\nCloud traffic: {} requests, {}.",
            advice.cloud_requests,
            usd(advice.cloud_cost_usd)
        );
        for local in &advice.local_options {
            let _ = write!(
                s,
                "  {} (${}/h) could have served {} of them within budget ({} of cloud spend, {:.0} a day)",
                local.backend,
                local.usd_per_hour,
                percent(Some(local.could_serve)),
                usd(local.cloud_cost_of_those_usd),
                local.requests_per_day,
            );
            match local.break_even_requests_per_day {
                Some(n) => {
                    let _ = writeln!(s, "; it pays for itself above {n:.0} such requests a day.");
                }
                None => {
                    let _ = writeln!(s, ".");
                }
            }
        }
    }
    s
}

fn route_table(s: &mut String, route: &RouteAdvice) {
    let _ = writeln!(
        s,
        "\nroute {}: {} requests; now {} within budget (measured), {}",
        route.route,
        route.requests,
        percent(route.measured_within_budget),
        usd(route.measured_cost_usd)
    );
    let _ = writeln!(
        s,
        "  {:<16} {:>14} {:>12} {:>14}",
        "all on", "within budget", "cost", "measured calls"
    );
    for c in &route.candidates {
        let _ = writeln!(
            s,
            "  {:<16} {:>14} {:>12} {:>14}",
            c.backend,
            percent(Some(c.within_budget)),
            usd(c.cost_usd),
            c.measured_calls
        );
    }
    if let Some(split) = &route.advised {
        let verdict = match (route.keep_current, route.reaches_target) {
            (true, _) => "the best split",
            (false, true) => "advised split",
            (false, false) => "no split reaches the target; the closest",
        };
        let _ = writeln!(
            s,
            "  {verdict}: {} -> {} within budget, {}",
            weights(split),
            percent(Some(split.within_budget)),
            usd(split.cost_usd)
        );
    }
    if route.keep_current {
        let _ = writeln!(
            s,
            "  keep the route as it is: it measured {} within budget for {}, {}",
            percent(route.measured_within_budget),
            usd(route.measured_cost_usd),
            why_keep(route)
        );
    }
    if route.over_served > 0 {
        let moved = match route.over_served_savings_usd {
            Some(saved) => format!(
                "{} of them moved to the route's cheapest local backend predicted to meet their budgets would have saved {}",
                route.over_served_movable,
                usd(saved)
            ),
            None => "no local backend of the route is predicted to meet their budgets".to_owned(),
        };
        let _ = writeln!(
            s,
            "  over-served: {} requests on a cloud tier far faster than needed, {}; {moved}",
            route.over_served,
            usd(route.over_served_usd),
        );
    }
}

/// Why a route that measured its target should stay as it is.
fn why_keep(route: &RouteAdvice) -> &'static str {
    if route.reaches_target {
        "for less than the best split is predicted to cost"
    } else {
        "which no split is predicted to reach"
    }
}

fn weights(split: &Split) -> String {
    split
        .weights
        .iter()
        .map(|(b, w)| format!("{b} {w}%"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn usd(v: f64) -> String {
    crate::cli::report_text::dollars(v)
}
