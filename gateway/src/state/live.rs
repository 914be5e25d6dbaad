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

use crate::ledger::keys::KeptConnection;
use crate::state::app::App;
use crate::state::config_file;
use crate::state::stored_keys::Unreadable;

/// The gateway's current config and what serves it.
pub struct Live {
    current: ArcSwap<App>,
    /// The config file; `None` for the embedded default, which a reload
    /// reads again (and finds unchanged).
    path: Option<PathBuf>,
    /// The config the process started with: the listener, TLS and ledger
    /// settings stay as it set them until a restart.
    started: Arc<Config>,
    /// One reload at a time; it holds the config file's bytes as last
    /// read, so the file watch reloads only on a real change.
    reloading: tokio::sync::Mutex<Option<Vec<u8>>>,
    /// Tasks that read backends' state for the current config (context
    /// windows, engine metrics); replaced with each config.
    watchers: Mutex<Vec<AbortHandle>>,
}

/// What a reload did, as `POST /admin/reload` answers it.
#[derive(Debug, Serialize)]
pub struct Reloaded {
    /// Whether the file's config differed from the running one (a reload
    /// applies either way: certificate files a backend names may have been
    /// renewed).
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
        let app = app.into_shared();
        let live = Arc::new(Live {
            started: app.config.clone(),
            current: ArcSwap::new(app.clone()),
            reloading: tokio::sync::Mutex::new(file_bytes(path.as_deref())),
            path,
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
    /// `trigger` says why, for the log. A config that would open access
    /// the running one guards (a key's limit dropped, the admin key
    /// removed) goes live only when `widen` says the operator means it;
    /// one that drops every key only when it says `auth: {disabled: true}`.
    pub async fn reload(&self, trigger: &str, widen: bool) -> Result<Reloaded, anyhow::Error> {
        let mut last = self.reloading.lock().await;
        *last = self.read_file();
        self.reload_locked(trigger, widen).await
    }

    /// Reloads when the file's bytes differ from what the last reload (of
    /// any trigger) read: editors and ConfigMaps touch a file, or its
    /// directory, more often than they change it.
    async fn reload_if_changed(&self) {
        let mut last = self.reloading.lock().await;
        let now = self.read_file();
        if now.is_none() || now == *last {
            return;
        }
        *last = now;
        let _ = self.reload_locked("config file changed", false).await;
    }

    fn read_file(&self) -> Option<Vec<u8>> {
        file_bytes(self.path.as_deref())
    }

    /// The reload itself; the caller holds `reloading`.
    async fn reload_locked(&self, trigger: &str, widen: bool) -> Result<Reloaded, anyhow::Error> {
        let current = self.app();
        // Building reads the ledger (to seed new budgets), certificate files
        // and the trust store: blocking work, kept off the request threads.
        let (path, previous) = (self.path.clone(), current.clone());
        let built = tokio::task::spawn_blocking(move || {
            let config = config_file::load(path.as_deref())?;
            let app = App::carrying(&config, Some(&previous), Unreadable::KeepRunning)?;
            anyhow::Ok((config, app))
        })
        .await
        .map_err(anyhow::Error::from)
        .and_then(|built| built);
        // The built config (the file's and the stored keys) against the
        // running one, stored keys on both sides.
        let built = built.and_then(|(config, app)| {
            held_back(&current.config.auth, &app.config.auth, widen).map(|()| (config, app))
        });
        let (config, app) = match built {
            Ok(built) => built,
            Err(err) => {
                current.metrics.reloaded(false);
                tracing::error!(trigger, error = %err, "config not reloaded; the running config stays");
                return Err(err);
            }
        };
        let changed = *app.config != *current.config;
        let restart_needed = restart_only_changes(&self.started, &config);
        for setting in &restart_needed {
            tracing::warn!(
                setting,
                "changed in the config file; the running value stays until restart"
            );
        }
        if changed {
            for warning in config.warnings() {
                tracing::warn!("{warning}");
            }
        }
        let app = self.go_live(app);
        app.metrics.reloaded(true);
        tracing::info!(trigger, changed, models = ?app.router.model_names(), "config reloaded");
        Ok(Reloaded {
            changed,
            restart_needed,
            models: app.router.model_names().to_vec(),
        })
    }

    /// Swaps `app` in for the requests that arrive from now on.
    fn go_live(&self, app: App) -> Arc<App> {
        let app = app.into_shared();
        // No await between these two: a dropped reload either did nothing
        // or went live with its limits resized.
        self.current.store(app.clone());
        app.apply_limit_changes();
        self.restart_watchers(&app);
        app
    }

    /// Builds the running config again without reading the file (the
    /// stored keys are read again as every build reads them), and swaps it
    /// in. One at a time with reloads.
    pub async fn rebuild_running(&self, trigger: &str) -> anyhow::Result<()> {
        let _reloading = self.reloading.lock().await;
        let current = self.app();
        let previous = current.clone();
        let app = tokio::task::spawn_blocking(move || {
            App::carrying(&previous.config, Some(&previous), Unreadable::Fail)
        })
        .await??;
        let app = self.go_live(app);
        tracing::info!(
            trigger,
            keys = app.config.auth.keys.len(),
            "running config rebuilt"
        );
        Ok(())
    }

    /// Rebuilds whenever the stored keys' fingerprint is not the running
    /// config's, for as long as the process runs.
    pub fn watch_stored_keys(self: &Arc<Self>) {
        let live = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut kept = KeptConnection::default();
            // The first look is at once, not a poll later: it opens the
            // connection kept from look to look, and SQLite reads the
            // schema to prepare the query (a few hundred thousand
            // instructions), as the gateway starts rather than among its
            // first requests. It also catches a change made between the
            // config's build and this watcher's start.
            while let Some(strong) = live.upgrade() {
                strong.look_at_stored_keys(&mut kept).await;
                // Not held while waiting: the watcher must not keep the
                // gateway's state alive.
                drop(strong);
                tokio::time::sleep(crate::state::stored_keys::POLL).await;
            }
        });
    }

    /// One look of `watch_stored_keys`.
    async fn look_at_stored_keys(&self, kept: &mut KeptConnection) {
        let app = self.app();
        let ledger = app.ledger.clone();
        let mut connection = std::mem::take(kept);
        let now = tokio::task::spawn_blocking(move || {
            let read = ledger.keys_fingerprint(&mut connection);
            (read, connection)
        })
        .await
        .map_err(anyhow::Error::from)
        .and_then(|(read, connection)| {
            *kept = connection;
            read
        });
        match now {
            // Against the running config's own: a change made while it was
            // built, or a rebuild that failed, is caught at the next look.
            Ok(now) if app.keys_fingerprint != Some(now) => {
                drop(app);
                if let Err(err) = self.rebuild_running("stored keys changed").await {
                    tracing::error!(error = %err, "stored keys changed; the running keys stay until they can be read");
                }
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the stored keys' fingerprint")
            }
        }
    }

    /// Stops the previous config's watchers and starts the new one's.
    fn restart_watchers(&self, app: &Arc<App>) {
        let mut watchers = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        for watcher in watchers.drain(..) {
            watcher.abort();
        }
        watchers.extend(crate::state::engine_watch::spawn(
            &app.config,
            app.metrics.clone(),
            app.router.latency().clone(),
        ));
        watchers.extend(crate::state::context_watch::spawn(&app.config, app.clone()));
        watchers.extend(crate::state::health_watch::spawn(&app.config, app));
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
                let _ = live.reload("SIGHUP", false).await;
            }
        });
    }

    /// Reloads when the config file's contents change, when
    /// `server.watch_config` is on and the config is a file. A watch that
    /// cannot be set up (the host is out of inotify watches, say) is
    /// logged, and SIGHUP and `POST /admin/reload` still work.
    pub fn reload_on_file_change(self: &Arc<Self>) {
        let Some(path) = self.path.clone() else {
            return;
        };
        if !self.started.server.watch_config {
            return;
        }
        if let Err(err) = self.watch(&path) {
            tracing::warn!(file = %path.display(), error = %err, "cannot watch the config file; reload with SIGHUP or POST /admin/reload");
        }
    }

    fn watch(self: &Arc<Self>, path: &Path) -> notify::Result<()> {
        use notify::Watcher;
        let name = path.file_name().map(ToOwned::to_owned);
        let (changes, mut changed) = tokio::sync::mpsc::channel::<()>(1);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // The file itself, or (in a Kubernetes ConfigMap) the `..data`
                // link that is swapped to publish a new version; not the
                // directory's other files (a ledger beside the config, say).
                let ours = event.is_ok_and(|event| {
                    event.paths.iter().any(|p| {
                        let file = p.file_name();
                        file == name.as_deref()
                            || file.is_some_and(|f| f.to_string_lossy().starts_with(".."))
                    })
                });
                if ours {
                    // Full means a look is already due; one is enough.
                    let _ = changes.try_send(());
                }
            })?;
        // The directory, not the file: editors and Kubernetes replace a
        // file by renaming another over it, which a watch on the old file
        // would never see.
        watcher.watch(directory_of(path), notify::RecursiveMode::NonRecursive)?;
        let live = self.clone();
        tokio::spawn(async move {
            // The watcher stops when dropped: it lives as long as this task.
            let _watcher = watcher;
            while changed.recv().await.is_some() {
                // Writes come in bursts (truncate, write, rename): let the
                // burst end, then look once.
                tokio::time::sleep(SETTLE).await;
                while changed.try_recv().is_ok() {}
                live.reload_if_changed().await;
            }
        });
        Ok(())
    }
}

/// The config file's bytes, when there is one and it can be read.
/// `Err` with every reason when the new auth section would open access
/// the running one guards, and the reload may not (see [`Live::reload`]).
fn held_back(
    running: &switchyard_policies::Auth,
    next: &switchyard_policies::Auth,
    widen: bool,
) -> Result<(), anyhow::Error> {
    use switchyard_policies::Widening;
    // The file's keys only: a stored key's change was made through the
    // admin API, already with the admin key, and another replica's may
    // arrive between two reloads here.
    let file_only = |auth: &switchyard_policies::Auth| {
        let mut auth = auth.clone();
        auth.keys.retain(|k| !k.from_api);
        auth
    };
    let widenings = file_only(running).widenings(&file_only(next));
    let refused: Vec<String> = widenings
        .iter()
        .filter(|w| !widen || **w == Widening::AuthRemoved)
        .map(ToString::to_string)
        .collect();
    if refused.is_empty() {
        for w in &widenings {
            tracing::warn!(widening = %w, "access widened by an explicit reload");
        }
        return Ok(());
    }
    let how = if widenings.contains(&Widening::AuthRemoved) {
        ""
    } else {
        "; to apply it, `POST /admin/reload?widen=true` with the admin key"
    };
    Err(anyhow::anyhow!(
        "the new config would widen access: {}{how}",
        refused.join("; ")
    ))
}

fn file_bytes(path: Option<&Path>) -> Option<Vec<u8>> {
    path.and_then(|p| std::fs::read(p).ok())
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
        (
            "server.http2_idle_timeout_ms",
            a.http2_idle_timeout != b.http2_idle_timeout,
        ),
        (
            "server.http2_keepalive_interval_ms",
            a.http2_keepalive_interval != b.http2_keepalive_interval,
        ),
        (
            "server.http2_keepalive_timeout_ms",
            a.http2_keepalive_timeout != b.http2_keepalive_timeout,
        ),
        (
            "server.max_connection_age_ms",
            a.max_connection_age != b.max_connection_age,
        ),
        ("server.watch_config", a.watch_config != b.watch_config),
        ("ledger", started.ledger != new.ledger),
        ("telemetry", started.telemetry != new.telemetry),
        ("state", started.state != new.state),
    ]
    .into_iter()
    .filter_map(|(name, changed)| changed.then_some(name))
    .collect()
}
