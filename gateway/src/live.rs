//! The running config, and reloading it without a restart.
//!
//! Every request loads the current [`App`] once, when it arrives, and
//! keeps that `Arc` until it ends; a reload builds a whole new `App` from
//! the file ([`App::carrying`] keeps what the old one learned and counted)
//! and swaps it in atomically. So requests in flight finish on the config
//! they started with, new ones get the new one, and a removed backend drains
//! as its last requests end. A file that does not validate changes nothing:
//! the error is logged with its field path and line, and counted.
//!
//! Reloads come from SIGHUP, from a change to the config file (when
//! `server.watch_config` is on) and from `POST /admin/reload`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::Serialize;
use switchyard_policies::Config;
use tokio::task::AbortHandle;

use crate::app::App;
use crate::config_file;

/// The gateway's current config and what serves it.
pub struct Live {
    current: ArcSwap<App>,
    /// The config file; `None` for the embedded default, which a reload
    /// reads again (and finds unchanged).
    path: Option<PathBuf>,
    /// The config the process started with: the listener, TLS and ledger
    /// settings stay as it set them until a restart.
    started: Arc<Config>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// Tasks that read backends' state for the current config (context
    /// windows, engine metrics); replaced with each config.
    watchers: Mutex<Vec<AbortHandle>>,
}

/// What a reload did, as `POST /admin/reload` answers it.
#[derive(Debug, Serialize)]
pub struct Reloaded {
    /// Whether the file differed from the running config.
    pub changed: bool,
    /// Settings the file changes that apply only at restart (the running
    /// values stay until then).
    pub restart_needed: Vec<&'static str>,
    /// The model names served now.
    pub models: Vec<String>,
}

impl Live {
    /// Starts serving `app`, built from the file at `path` (or the embedded
    /// default), and its watchers.
    pub fn start(app: App, path: Option<PathBuf>) -> Arc<Live> {
        let app = Arc::new(app);
        let live = Arc::new(Live {
            started: app.config.clone(),
            current: ArcSwap::new(app.clone()),
            path,
            reloading: tokio::sync::Mutex::new(()),
            watchers: Mutex::new(Vec::new()),
        });
        live.restart_watchers(&app);
        live
    }

    /// The config requests arriving now are served with.
    pub fn app(&self) -> Arc<App> {
        self.current.load_full()
    }

    /// Reads the config file again and, when it is valid, swaps it in.
    /// `trigger` says why, for the log.
    pub async fn reload(&self, trigger: &str) -> Result<Reloaded, anyhow::Error> {
        let _one_at_a_time = self.reloading.lock().await;
        let current = self.app();
        let built = config_file::load(self.path.as_deref()).and_then(|config| {
            let changed = config != *current.config;
            let app = if changed {
                Some(App::carrying(&config, Some(&current))?)
            } else {
                None
            };
            Ok((config, app))
        });
        let (config, app) = match built {
            Ok(built) => built,
            Err(err) => {
                current.metrics.reloaded(false);
                tracing::error!(trigger, error = %err, "config not reloaded; the running config stays");
                return Err(err);
            }
        };
        current.metrics.reloaded(true);
        let restart_needed = restart_only_changes(&self.started, &config);
        for setting in &restart_needed {
            tracing::warn!(
                setting,
                "changed in the config file; the running value stays until restart"
            );
        }
        let changed = app.is_some();
        if let Some(app) = app {
            for warning in config.warnings() {
                tracing::warn!("{warning}");
            }
            let app = Arc::new(app);
            self.current.store(app.clone());
            self.restart_watchers(&app);
            tracing::info!(trigger, models = ?app.router.model_names(), "config reloaded");
        } else {
            tracing::info!(trigger, "config file unchanged; nothing to reload");
        }
        Ok(Reloaded {
            changed,
            restart_needed,
            models: self.app().router.model_names().to_vec(),
        })
    }

    /// Stops the previous config's watchers and starts the new one's.
    fn restart_watchers(&self, app: &Arc<App>) {
        let mut watchers = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        for watcher in watchers.drain(..) {
            watcher.abort();
        }
        watchers.extend(crate::engine_watch::spawn(&app.config, app.metrics.clone()));
        watchers.extend(crate::context_watch::spawn(&app.config, app.clone()));
    }

    /// Reloads on every SIGHUP, for as long as the process runs.
    pub fn reload_on_sighup(self: &Arc<Self>) {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; reload with POST /admin/reload");
            return;
        };
        let live = self.clone();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let _ = live.reload("SIGHUP").await;
            }
        });
    }

    /// Reloads when the config file's contents change, when
    /// `server.watch_config` is on and the config is a file.
    pub fn reload_on_file_change(self: &Arc<Self>) -> anyhow::Result<()> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        if !self.started.server.watch_config {
            return Ok(());
        }
        let (changes, mut changed) = tokio::sync::mpsc::channel::<()>(1);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok() {
                    // Full means a reload is already due; one is enough.
                    let _ = changes.try_send(());
                }
            })?;
        // The directory, not the file: editors and Kubernetes replace a
        // file by renaming another over it (a ConfigMap swaps a symlink),
        // which a watch on the old file would never see.
        use notify::Watcher;
        watcher.watch(directory_of(&path), notify::RecursiveMode::NonRecursive)?;
        let live = self.clone();
        tokio::spawn(async move {
            // The watcher stops when dropped: it lives as long as this task.
            let _watcher = watcher;
            let mut last = std::fs::read(&path).ok();
            while changed.recv().await.is_some() {
                // Writes come in bursts (truncate, write, rename): let the
                // burst end, then look once.
                tokio::time::sleep(SETTLE).await;
                while changed.try_recv().is_ok() {}
                let now = std::fs::read(&path).ok();
                if now.is_some() && now != last {
                    last = now;
                    let _ = live.reload("config file changed").await;
                }
            }
        });
        Ok(())
    }
}

/// How long file events must stop before the file is read.
const SETTLE: Duration = Duration::from_millis(200);

fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Settings `new` changes from `started` that only a restart applies.
fn restart_only_changes(started: &Config, new: &Config) -> Vec<&'static str> {
    let (a, b) = (&started.server, &new.server);
    [
        ("server.listen", a.listen != b.listen),
        ("server.tls", a.tls != b.tls),
        (
            "server.header_read_timeout_ms",
            a.header_read_timeout != b.header_read_timeout,
        ),
        (
            "server.max_header_bytes",
            a.max_header_bytes != b.max_header_bytes,
        ),
        (
            "server.max_connections",
            a.max_connections != b.max_connections,
        ),
        (
            "server.http2_max_concurrent_streams",
            a.http2_max_concurrent_streams != b.http2_max_concurrent_streams,
        ),
        (
            "server.shutdown_grace_ms",
            a.shutdown_grace != b.shutdown_grace,
        ),
        ("server.watch_config", a.watch_config != b.watch_config),
        ("ledger", started.ledger != new.ledger),
    ]
    .into_iter()
    .filter_map(|(name, changed)| changed.then_some(name))
    .collect()
}
