//! Credentials a backend's provider hands out for a while (Vertex AI's
//! OAuth2 access tokens, AWS keys from a web identity), fetched on first
//! use and refreshed in the background before they expire: requests never
//! wait for a refresh while what they hold is good. A refresh that fails
//! keeps the old credential until it expires, tries again with backoff,
//! and says so in `/readyz`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};
use std::time::Duration;

use tokio::time::Instant;

use futures_util::future::BoxFuture;

use crate::error::AdapterError;

/// Where credentials come from.
pub trait Source: Send + Sync + 'static {
    type Credential: Clone + Send + Sync + 'static;
    /// For `/readyz`: `service_account`, `metadata`, `web_identity`.
    fn name(&self) -> &'static str;
    /// A new credential and how long it lasts, or why there is none, in
    /// fixed words (never a server's text, which may echo a secret).
    fn fetch(&self) -> BoxFuture<'_, Result<(Self::Credential, Duration), String>>;
}

/// Where a credential stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialState {
    /// None fetched yet (the first request fetches it).
    NotYetFetched,
    /// The last one lapsed unused, with nothing wrong: the next request
    /// fetches another.
    Idle,
    Fresh,
    /// Good, but the last refresh failed: it is kept until it expires.
    Stale,
    /// None good: requests fail until a refresh succeeds.
    Expired,
}

impl CredentialState {
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialState::NotYetFetched => "not_yet_fetched",
            CredentialState::Idle => "idle",
            CredentialState::Fresh => "fresh",
            CredentialState::Stale => "stale",
            CredentialState::Expired => "expired",
        }
    }
}

/// How a backend's credentials stand, for `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialStatus {
    pub source: &'static str,
    pub state: CredentialState,
    /// How long the credential held lasts.
    pub expires_in: Option<Duration>,
    /// The last refresh's failure, in fixed words.
    pub last_error: Option<String>,
}

/// The longest wait between failed refreshes.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The longest a credential is trusted, whatever its server says: a
/// lifetime past this is a server's mistake, not a reason to keep it.
const MAX_LIFETIME: Duration = Duration::from_secs(12 * 3600);

struct Held<C> {
    credential: C,
    expires_at: Instant,
    /// When a background refresh is due: five minutes before expiry, or
    /// half the credential's life before when that is shorter.
    refresh_at: Instant,
}

struct State<C> {
    held: Option<Held<C>>,
    last_error: Option<String>,
    failures: u32,
    /// No refresh before this, after a failure.
    retry_at: Option<Instant>,
}

/// Credentials from one source, shared by a backend's requests.
pub struct Refresher<S: Source> {
    source: S,
    state: RwLock<State<S::Credential>>,
    refreshing: AtomicBool,
    /// One fetch at a time when requests must wait for a credential.
    first: tokio::sync::Mutex<()>,
}

impl<S: Source> Refresher<S> {
    pub fn new(source: S) -> Arc<Self> {
        Arc::new(Refresher {
            source,
            state: RwLock::new(State {
                held: None,
                last_error: None,
                failures: 0,
                retry_at: None,
            }),
            refreshing: AtomicBool::new(false),
            first: tokio::sync::Mutex::new(()),
        })
    }

    /// A good credential: the one held, or a new one when none has not
    /// expired (requests that need one then wait for a single fetch).
    pub async fn get(self: &Arc<Self>) -> Result<S::Credential, AdapterError> {
        if let Some(credential) = self.good() {
            return Ok(credential);
        }
        let _one = self.first.lock().await;
        if let Some(credential) = self.good() {
            return Ok(credential);
        }
        if let Some(at) = self.read().retry_at
            && Instant::now() < at
        {
            return Err(self.unavailable());
        }
        self.refresh().await;
        self.good().ok_or_else(|| self.unavailable())
    }

    /// The credential held when it has not expired; starts a background
    /// refresh when one is due.
    fn good(self: &Arc<Self>) -> Option<S::Credential> {
        let now = Instant::now();
        let state = self.read();
        let held = state.held.as_ref().filter(|h| now < h.expires_at)?;
        let due = now >= held.refresh_at && state.retry_at.is_none_or(|at| now >= at);
        let credential = held.credential.clone();
        drop(state);
        if due && !self.refreshing.swap(true, Ordering::AcqRel) {
            let refresher = Arc::clone(self);
            tokio::spawn(async move {
                // Cleared however the refresh ends, so the next is not barred.
                let _done = Refreshing(&refresher.refreshing);
                refresher.refresh().await;
            });
        }
        Some(credential)
    }

    fn read(&self) -> RwLockReadGuard<'_, State<S::Credential>> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn unavailable(&self) -> AdapterError {
        AdapterError::Credentials {
            message: self
                .read()
                .last_error
                .clone()
                .unwrap_or_else(|| "none fetched".into()),
        }
    }

    /// Fetches and keeps a credential; a failure keeps the old one and
    /// sets when to try again.
    async fn refresh(&self) {
        let fetched = self.source.fetch().await;
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match fetched {
            Ok((credential, lifetime)) => {
                let lifetime = lifetime.min(MAX_LIFETIME);
                let early = (lifetime / 2).min(Duration::from_secs(300));
                state.held = Some(Held {
                    credential,
                    expires_at: now + lifetime,
                    refresh_at: now + lifetime - early,
                });
                state.last_error = None;
                state.failures = 0;
                state.retry_at = None;
            }
            Err(why) => {
                tracing::warn!(source = self.source.name(), error = %why, "credential refresh failed");
                // One second after the first failure, doubling to a minute.
                let backoff = Duration::from_secs(1 << state.failures.min(6)).min(MAX_BACKOFF);
                state.failures = state.failures.saturating_add(1);
                state.retry_at = Some(now + backoff);
                state.last_error = Some(why);
            }
        }
    }

    pub fn status(&self) -> CredentialStatus {
        let state = self.read();
        let now = Instant::now();
        let held = state.held.as_ref();
        CredentialStatus {
            source: self.source.name(),
            state: match (held, &state.last_error) {
                (Some(h), None) if now >= h.expires_at => CredentialState::Idle,
                (Some(h), _) if now >= h.expires_at => CredentialState::Expired,
                (Some(_), Some(_)) => CredentialState::Stale,
                (Some(_), None) => CredentialState::Fresh,
                (None, Some(_)) => CredentialState::Expired,
                (None, None) => CredentialState::NotYetFetched,
            },
            expires_in: held.map(|h| h.expires_at.saturating_duration_since(now)),
            last_error: state.last_error.clone(),
        }
    }
}

/// Clears the in-flight flag of a background refresh when dropped.
struct Refreshing<'a>(&'a AtomicBool);

impl Drop for Refreshing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A token server's failure in fixed words: its status, or what kind of
/// failure reaching it was.
pub fn fetch_failure(what: &str, err: &AdapterError) -> String {
    match err {
        AdapterError::Status { status, .. } => {
            format!("{what} refused the request (HTTP {status})")
        }
        AdapterError::Timeout { .. } => format!("{what} did not answer in time"),
        AdapterError::Certificate { .. } => format!("{what}'s TLS certificate was refused"),
        _ => format!("{what} could not be reached"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use futures_util::FutureExt;

    use super::*;

    /// Hands out numbered credentials lasting `life`, or fails when told.
    struct Counter {
        fetched: AtomicU32,
        fail: AtomicBool,
        life: Duration,
    }

    impl Source for Arc<Counter> {
        type Credential = u32;
        fn name(&self) -> &'static str {
            "counter"
        }
        fn fetch(&self) -> BoxFuture<'_, Result<(u32, Duration), String>> {
            async move {
                if self.fail.load(Ordering::Relaxed) {
                    return Err("refused".into());
                }
                Ok((self.fetched.fetch_add(1, Ordering::Relaxed) + 1, self.life))
            }
            .boxed()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn refreshes_in_the_background_and_keeps_the_old_one_when_a_refresh_fails() {
        let counter = Arc::new(Counter {
            fetched: AtomicU32::new(0),
            fail: AtomicBool::new(false),
            life: Duration::from_secs(6),
        });
        let refresher = Refresher::new(Arc::clone(&counter));
        assert_eq!(refresher.status().state, CredentialState::NotYetFetched);
        assert_eq!(refresher.get().await.unwrap(), 1);
        assert_eq!(refresher.get().await.unwrap(), 1, "reused");
        // Past half its life: the old one still serves while a new one comes.
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(refresher.get().await.unwrap(), 1);
        tokio::task::yield_now().await;
        assert_eq!(refresher.get().await.unwrap(), 2);
        // The source fails: the one held serves until it expires.
        counter.fail.store(true, Ordering::Relaxed);
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(refresher.get().await.unwrap(), 2);
        tokio::task::yield_now().await;
        let status = refresher.status();
        assert_eq!(status.state, CredentialState::Stale);
        assert_eq!(status.last_error.as_deref(), Some("refused"));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(matches!(
            refresher.get().await,
            Err(AdapterError::Credentials { .. })
        ));
        assert_eq!(refresher.status().state, CredentialState::Expired);
        // The source recovers: after the backoff, the next request fetches.
        counter.fail.store(false, Ordering::Relaxed);
        tokio::time::advance(MAX_BACKOFF).await;
        assert_eq!(refresher.get().await.unwrap(), 3);
        assert_eq!(refresher.status().state, CredentialState::Fresh);
        // Left unused past its life, with nothing wrong: idle, not failing.
        tokio::time::advance(Duration::from_secs(7)).await;
        assert_eq!(refresher.status().state, CredentialState::Idle);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifetime_past_twelve_hours_is_not_believed() {
        let counter = Arc::new(Counter {
            fetched: AtomicU32::new(0),
            fail: AtomicBool::new(false),
            life: Duration::from_secs(u64::MAX / 4),
        });
        let refresher = Refresher::new(Arc::clone(&counter));
        assert_eq!(refresher.get().await.unwrap(), 1);
        let left = refresher.status().expires_in.unwrap();
        assert_eq!(left, MAX_LIFETIME);
    }
}
