//! Replays a mix of the use cases (`docs/src/routing/profiles.md`) against a gateway route
//! at a fixed concurrency, streamed, and writes one JSON line per request
//! as the client measured it (first-token time, decode rate, receipts, the
//! gateway's request id for the ledger's cost) and one per agentic task
//! (its whole time, tool time included). `scripts/bench-budgets.sh` runs it
//! once per policy and `scripts/budget_report.py` sums the lines up.
//!
//! Usage: `workload-replay BASE_URL ROUTE JOBS CONCURRENCY SEED OUT.jsonl`
//! (`REPLAY_PROFILES=chat,code,...` sends only those profiles' jobs).

mod mix;
mod stream;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use mix::{AGENT_TURNS, Profile};
use stream::{HttpClient, Measured};

struct Run {
    url: String,
    route: String,
    seed: u64,
    jobs: u64,
    next: AtomicU64,
    out: Mutex<std::fs::File>,
}

impl Run {
    fn write(&self, line: &Value) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "{line}");
    }

    fn record(&self, job: &mix::Job, turn: usize, m: &Measured) {
        self.write(&json!({
            "policy": self.route, "job": job.id, "profile": job.profile.name(), "turn": turn,
            "status": m.status, "error": m.error, "ttft_ms": m.ttft_ms, "total_ms": m.total_ms,
            "decode_tokens_per_s": m.decode_tokens_per_s(), "output_tokens": m.output_tokens,
            "prompt_tokens": m.prompt_tokens, "backend": m.backend, "reason": m.reason,
            "predicted_ttft_ms": m.predicted_ttft_ms, "request_id": m.request_id,
        }));
    }
}

async fn run_job(run: &Run, client: &HttpClient, id: u64) {
    let mut job = mix::job(run.seed, id);
    // `REPLAY_PROFILES=chat,code`: only those jobs are sent (the batch
    // benchmark's interactive traffic leaves the batch items out).
    if let Ok(profiles) = std::env::var("REPLAY_PROFILES")
        && !profiles.split(',').any(|p| p.trim() == job.profile.name())
    {
        return;
    }
    job.body["model"] = json!(run.route);
    let mut headers = vec![("x-switchyard-profile", job.profile.name().to_owned())];
    if job.profile != Profile::Agentic {
        let measured = stream::send(client, &run.url, &job.body, &headers).await;
        run.record(&job, 0, &measured);
        return;
    }
    // A session: the same id on every turn, tool time between them.
    headers.push(("x-session-id", format!("task-{}-{id}", run.seed)));
    let started = Instant::now();
    let mut failed = false;
    for turn in 0..AGENT_TURNS {
        let measured = stream::send(client, &run.url, &job.body, &headers).await;
        run.record(&job, turn, &measured);
        if measured.status != 200 || measured.error.is_some() {
            failed = true;
            break;
        }
        if turn + 1 < AGENT_TURNS {
            let tool_ms = mix::tool_ms(run.seed, id, turn);
            tokio::time::sleep(Duration::from_millis(tool_ms)).await;
            mix::next_turn(&mut job.body, &measured.text, &measured.tool_calls, turn);
        }
    }
    run.write(&json!({
        "policy": run.route, "task": id, "profile": "agentic", "failed": failed,
        "task_ms": started.elapsed().as_secs_f64() * 1000.0,
    }));
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |i: usize| args.get(i).and_then(|v| v.parse::<u64>().ok());
    let (Some(base), Some(route), Some(jobs), Some(concurrency), Some(seed), Some(out)) = (
        args.get(1),
        args.get(2),
        number(3),
        number(4),
        number(5),
        args.get(6),
    ) else {
        eprintln!("usage: workload-replay BASE_URL ROUTE JOBS CONCURRENCY SEED OUT.jsonl");
        std::process::exit(2);
    };
    let out = match std::fs::File::create(out) {
        Ok(file) => file,
        Err(err) => {
            eprintln!("cannot write {out}: {err}");
            std::process::exit(1);
        }
    };
    let run = Arc::new(Run {
        url: format!("{}/v1/chat/completions", base.trim_end_matches('/')),
        route: route.clone(),
        seed,
        jobs,
        next: AtomicU64::new(0),
        out: Mutex::new(out),
    });
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let run = run.clone();
            tokio::spawn(async move {
                let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
                loop {
                    let id = run.next.fetch_add(1, Ordering::Relaxed);
                    if id >= run.jobs {
                        break;
                    }
                    run_job(&run, &client, id).await;
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.await;
    }
    eprintln!(
        "{route}: {jobs} jobs at concurrency {concurrency} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
