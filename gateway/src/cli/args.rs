//! The command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "switchyard", version, about = "Multi-model routing gateway")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the gateway (on the embedded default config unless --config).
    Serve {
        /// YAML config file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Address to listen on; overrides the config. Port 0 picks a free
        /// port; the bound address is printed on stdout.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Validate a config file without serving; prints what it defines.
    Check {
        /// YAML config file (or `--config FILE`; the embedded default when
        /// neither is given).
        file: Option<PathBuf>,
        /// YAML config file, as the other commands take it.
        #[arg(long, conflicts_with = "file")]
        config: Option<PathBuf>,
        /// An `env:NAME` that is not set here is a warning, not an error
        /// (for checking a file where it will not run: an image build, CI).
        #[arg(long)]
        allow_missing_env: bool,
    },
    /// Measure backends as a waiting person feels them: first-token time
    /// against prompt length, decode speed against context, the speed-up of
    /// a repeated prefix, drafting on code and prose. Writes report.md, a
    /// plot per backend and latency-hints.yaml.
    Probe {
        /// YAML config file (the embedded default when absent).
        #[arg(long)]
        config: Option<PathBuf>,
        /// A backend to probe (repeatable); every non-cloud backend when absent.
        #[arg(long = "backend")]
        backends: Vec<String>,
        /// Folder for the report.
        #[arg(long, default_value = "probe")]
        out: PathBuf,
        /// Cold prompt lengths in tokens, comma-separated.
        #[arg(long, default_value = "128,1024,4096", value_delimiter = ',')]
        lengths: Vec<u32>,
        /// Output tokens per request.
        #[arg(long, default_value_t = 64)]
        output_tokens: u32,
    },
    /// Explain how a chat request would be routed, without calling a model.
    Explain {
        /// A chat completions request body (JSON), or `--request FILE`.
        #[arg(required_unless_present = "request")]
        file: Option<PathBuf>,
        /// The request body file, as a flag.
        #[arg(long, conflicts_with = "file")]
        request: Option<PathBuf>,
        /// json (the default), table or csv: the decision's fields one per
        /// row, nested ones by their dotted path.
        #[arg(long, default_value = "json")]
        format: String,
        /// YAML config file (the embedded default when absent).
        #[arg(long)]
        config: Option<PathBuf>,
        /// A request header, e.g. `--header x-switchyard-profile:code`.
        #[arg(long = "header", value_name = "NAME:VALUE")]
        headers: Vec<String>,
    },
    /// Train a learned router's weights from requests with outcomes: a JSONL
    /// file of `{"request": {chat body}, "failed": true|false}` lines
    /// (scripts/routing_replay_inputs.py writes them from the benchmark's
    /// answers) or of the outcomes a predictor recorded while serving
    /// (`predictors.*.record`). Prints how it did on a held-out fifth.
    TrainRouter {
        /// The examples (JSONL).
        #[arg(long)]
        from: PathBuf,
        /// The weights file to write (a config's `predictors.*.weights`).
        #[arg(long)]
        out: PathBuf,
        /// Whose answers the labels are about (recorded in the file).
        #[arg(long, default_value = "small")]
        backend: String,
        /// What `failed` means (recorded in the file), e.g. `fail` (the
        /// answer was wrong) or `gain` (wrong, where the large tier was right).
        #[arg(long, default_value = "fail")]
        label: String,
        /// See every request as sent to this model name (a route's profile
        /// applies); the request's own model when absent.
        #[arg(long)]
        model: Option<String>,
        /// The config whose routes `--model` names (the embedded default when absent).
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[arg(long, default_value_t = 40)]
        epochs: u32,
    },
    /// Replay a config's routes over recorded requests and answers, without
    /// calling a model: a JSON line per route and request (where it goes,
    /// why, its score and predicted failure, which check failed, who served).
    /// Input: JSONL of `{"id", "request": {chat body}, "answers": {backend:
    /// chat response}}`.
    Replay {
        /// The recorded requests (JSONL).
        #[arg(long)]
        from: PathBuf,
        /// YAML config file (the embedded default when absent).
        #[arg(long)]
        config: Option<PathBuf>,
        /// A route to replay (repeatable); every route when absent.
        #[arg(long = "route")]
        routes: Vec<String>,
    },
    /// Report spend from the ledger: cloud against local, and savings against
    /// the reference cloud model; with --budgets, each key's and team's
    /// spend budget against what was spent today and this month.
    Spend {
        /// The spend budgets (money) instead: limit, spent, remaining.
        /// (Latency budgets are `switchyard budgets`.)
        #[arg(long)]
        budgets: bool,
        /// How far back: 7d, 24h, 30m.
        #[arg(long, default_value = "7d")]
        since: String,
        /// Group by key, team, route, backend, tier, provider or day.
        #[arg(long, default_value = "key")]
        by: String,
        /// table, json or csv.
        #[arg(long, default_value = "table")]
        format: String,
        /// The config whose ledger to read (the embedded default's when absent).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Report latency-budget attainment from the ledger: the share of
    /// requests that got the speed their use case (profile) needs, and the
    /// traffic served far faster than it needs on a paid cloud tier.
    /// (Spend budgets, in money, are `switchyard spend --budgets`.)
    Budgets {
        /// How far back: 7d, 24h, 30m.
        #[arg(long, default_value = "7d")]
        since: String,
        /// Group by profile, route or backend.
        #[arg(long, default_value = "profile")]
        by: String,
        /// table, json or csv.
        #[arg(long, default_value = "table")]
        format: String,
        /// The config whose ledger to read (the embedded default's when absent).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Advise, per route, the cheapest split of its traffic over its
    /// backends that keeps at least `target` of it within budget, from the
    /// ledger's window and the latency model taught by it; the over-served
    /// traffic; and whether a local backend could take the cloud traffic.
    Advise {
        /// How far back: 7d, 24h, 30m.
        #[arg(long, default_value = "7d")]
        since: String,
        /// The share of each route's requests to keep within budget.
        #[arg(long, default_value_t = 0.95)]
        target: f64,
        /// table, yaml (the splits to paste) or json.
        #[arg(long, default_value = "table")]
        format: String,
        /// The config whose ledger to read (the embedded default's when absent).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Compare each route's shadow candidate with what served the same
    /// requests, from the ledger: first-token p50/p90, decode speed, the
    /// share within budget, cost per request and per day, and agreement.
    Compare {
        /// How far back: 7d, 24h, 30m.
        #[arg(long, default_value = "7d")]
        since: String,
        /// Only this route's candidate.
        #[arg(long)]
        route: Option<String>,
        /// table, json or csv.
        #[arg(long, default_value = "table")]
        format: String,
        /// The config whose ledger to read (the embedded default's when absent).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// The batches in the store beside the ledger, newest first, each with
    /// a progress bar of its answered lines.
    Batches {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// table, json or csv.
        #[arg(long, default_value = "table")]
        format: String,
        /// The config whose batch store to read (the embedded default's when absent).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Report agent task time per session from the ledger: calls, time
    /// waiting on models, time between them (tools, people), tokens, cost.
    Sessions {
        /// How far back: 7d, 24h, 30m.
        #[arg(long, default_value = "7d")]
        since: String,
        /// Only sessions whose first call went to this route.
        #[arg(long)]
        route: Option<String>,
        /// table, json or csv.
        #[arg(long, default_value = "table")]
        format: String,
        /// The config whose ledger to read (the embedded default's when absent).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// The request log from the ledger, newest first: who asked, which
    /// route and backend served, how it ended and why, time, tokens, cost.
    /// With an id (the `x-request-id` a caller saw), that request's whole
    /// record: its decision and every call made for it.
    Requests(Box<crate::cli::requests::RequestsArgs>),
    /// Keys made through the admin API of a running gateway: list, create,
    /// get, update, rotate, revoke (the admin key from SWITCHYARD_ADMIN_KEY).
    Keys(Box<crate::cli::keys::KeysArgs>),
    /// Print the hash of an API key, for `auth.keys[].hash` in the config.
    KeyHash {
        /// The key (anything hard to guess, e.g. from `openssl rand -hex 24`).
        /// Without it, or `-`, the key is read from standard input (its first
        /// line), so it stays out of the shell's history.
        key: Option<String>,
    },
    /// Run the model-server simulator alone, as an OpenAI-compatible server.
    Sim {
        /// Address to listen on (port 0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:8081")]
        listen: SocketAddr,
        /// Preset: small, mid or large (a backend's `sim: {preset}`;
        /// `--profile` is its older name).
        #[arg(long, alias = "profile", default_value = "small")]
        preset: String,
        /// Override a simulator parameter, as in a backend's `sim:` section,
        /// e.g. `--set decode_tokens_per_s=200 --set faults.stall_rate=0.05`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
}
