//! A config's backends: what a request needs of one (its clients per
//! replica, limits, queue and breaker), how they are built, and what a
//! reload keeps of the old ones (clients, in-flight counts, breakers,
//! concurrency limits resized as requests end).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use http::HeaderValue;
use switchyard_adapters::anthropic::AnthropicClient;
use switchyard_adapters::azure::AzureClient;
use switchyard_adapters::bedrock::sigv4::Keys;
use switchyard_adapters::bedrock::{AwsCredentials, BedrockClient};
use switchyard_adapters::credentials::Refresher;
use switchyard_adapters::gemini::GeminiClient;
use switchyard_adapters::openai::OpenAiClient;
use switchyard_adapters::sim::SimBackend;
use switchyard_adapters::upstream::Link;
use switchyard_adapters::vertex::{Google, VertexClient};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_policies::{AzureAuth, Backend, BackendAdapter, Balance, Engine, Pricing, Tier};
use tokio::sync::Semaphore;

use crate::admit::breaker::Breaker;
use crate::admit::priority::{Class, Classes, Slot};
use crate::dispatch::prompt_cache::PromptCache;
use crate::error::GatewayError;

/// A backend ready to call.
pub struct BackendHandle {
    pub name: String,
    /// `name` as the backend receipt's value, made once.
    pub name_receipt: Option<HeaderValue>,
    pub tier: Tier,
    /// What it is sent stays on the operator's machines (`local`, from
    /// the tier unless set): sensitive-data policies may send it all.
    pub local: bool,
    pub upstream_model: String,
    /// The provider and servers, as spans name them.
    pub peer: crate::telemetry::Peer,
    /// Servers of this model (one unless the config lists replicas).
    pub replicas: Vec<ReplicaHandle>,
    pub(crate) balance: Balance,
    pub(crate) max_imbalance: u32,
    /// Round-robin position.
    pub(crate) turn: AtomicUsize,
    /// The server software, for its extra request fields.
    pub engine: Engine,
    /// llama.cpp's slot count, when declared.
    pub slots: Option<u32>,
    /// What the provider's prompt cache needs from us.
    pub prompt_cache: PromptCache,
    pub pricing: Pricing,
    /// Priced by the built-in list for its model (no `price:`): a wildcard
    /// route's request is priced for the model it names.
    pub price_from_list: bool,
    /// The longest a request may take to start answering, and so the
    /// longest it waits in the backend's queue.
    pub first_byte_timeout: Duration,
    /// The largest whole answer (or held-back stream) read from it.
    pub max_response_bytes: usize,
    /// Requests this gateway has in flight to the backend.
    pub(crate) in_flight: Arc<AtomicU32>,
    /// The concurrency limit; `None` when unlimited.
    pub(crate) limit: Option<Arc<Semaphore>>,
    /// Requests that may wait for a slot, and those waiting now.
    pub(crate) max_queue: usize,
    pub(crate) waiting: Arc<AtomicUsize>,
    /// Who waits for a slot, by priority class, and the slots batch lines
    /// leave free.
    pub(crate) classes: Arc<Classes>,
    pub breaker: Arc<Breaker>,
    /// Price multipliers of the provider's service tiers.
    pub service_tiers: Vec<(String, f64)>,
    /// Request fields never sent to this backend.
    pub deny_fields: Vec<String>,
}

impl BackendHandle {
    /// The price of a call, given the list price of the model a wildcard
    /// route named (`listed`): that, for a backend priced by the list
    /// (`Unpriced` when the model is not on it); else the backend's own.
    pub fn pricing_for(&self, listed: Option<Option<switchyard_policies::TokenPrice>>) -> Pricing {
        match listed {
            Some(listed) if self.price_from_list => {
                listed.map_or(Pricing::Unpriced, Pricing::Tokens)
            }
            _ => self.pricing,
        }
    }

    /// A concurrency slot: at once, after waiting in the queue (no longer
    /// than the first-byte timeout; behind every request of a higher
    /// class), or 503 when the queue is full.
    pub(crate) async fn wait_for_slot(
        &self,
        limit: &Arc<Semaphore>,
        class: Class,
    ) -> Result<Slot, GatewayError> {
        // At once when it may take a free slot, unless others of its
        // (lower) class came first: they are served in order.
        let first_of_class = class == Class::Interactive || self.classes.waiting(class) == 0;
        if first_of_class && let Some(slot) = self.classes.try_take(class, limit) {
            return Ok(slot);
        }
        let full = || GatewayError::Overloaded {
            what: format!(
                "backend `{}` is at its concurrency limit and queue",
                self.name
            ),
        };
        // Unattended and batch requests may fill half the queue: the rest
        // stays for interactive ones.
        let places = match class {
            Class::Interactive => self.max_queue,
            _ => self.max_queue / 2,
        };
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= places {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(full());
        }
        let slot =
            tokio::time::timeout(self.first_byte_timeout, self.classes.take(class, limit)).await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        match slot {
            Ok(Some(slot)) => Ok(slot),
            _ => Err(full()),
        }
    }

    /// Requests this gateway has running on the backend, and waiting for
    /// one of its slots.
    pub fn load(&self) -> (u32, usize) {
        (
            self.in_flight.load(Ordering::Relaxed),
            self.waiting.load(Ordering::Relaxed),
        )
    }

    /// Cloud tiers count against cloud budgets.
    pub fn is_cloud(&self) -> bool {
        !self.tier.is_local()
    }
}

/// One server of a backend.
#[derive(Clone)]
pub struct ReplicaHandle {
    pub provider: Arc<dyn Provider>,
    pub(crate) in_flight: Arc<AtomicU32>,
}

/// A backend's handle; with `old` (its handle and config before a
/// reload), it keeps the old clients when its config is unchanged (and
/// names no certificate files, which may have been renewed), its in-flight
/// counts and concurrency limit (resized when the new config goes live),
/// and, when it still reaches the same servers, its breaker (unless its
/// settings changed) and per-replica counts.
pub(crate) fn build_backend(
    backend: &Backend,
    old: Option<(&BackendHandle, &Backend)>,
    limit_changes: &mut Vec<LimitChange>,
) -> anyhow::Result<BackendHandle> {
    let openai = match &backend.adapter {
        BackendAdapter::OpenAi(openai) => Some(openai),
        _ => None,
    };
    let unchanged = old
        .filter(|(_, config)| *config == backend && backend.tls == Default::default())
        .map(|(h, _)| h);
    let same_server = old.filter(|(_, config)| config.same_server(backend));
    let replicas = match unchanged {
        Some(handle) => handle.replicas.clone(),
        None => new_replicas(backend, openai, same_server.map(|(h, _)| &h.replicas[..]))?,
    };
    let limit = match (old, backend.max_concurrency) {
        (Some((handle, config)), Some(now)) => match (&handle.limit, config.max_concurrency) {
            (Some(limit), Some(was)) => Some(LimitChange::keep(
                (limit, Some(&handle.classes)),
                was,
                now,
                limit_changes,
            )),
            _ => Some(Arc::new(Semaphore::new(now))),
        },
        (_, now) => now.map(|n| Arc::new(Semaphore::new(n))),
    };
    let breaker = match same_server {
        Some((handle, config)) if config.breaker == backend.breaker => handle.breaker.clone(),
        _ => Arc::new(match old {
            Some((handle, _)) => Breaker::continuing(backend.breaker, &handle.breaker),
            None => Breaker::new(backend.breaker),
        }),
    };
    Ok(BackendHandle {
        name: backend.name.clone(),
        // Config validation keeps names to a header-safe alphabet.
        name_receipt: HeaderValue::from_str(&backend.name).ok(),
        tier: backend.tier,
        local: backend.local,
        upstream_model: backend.upstream_model.clone(),
        peer: crate::telemetry::Peer::of(backend),
        replicas,
        balance: backend.prefix_cache.balance,
        max_imbalance: backend.prefix_cache.max_imbalance,
        turn: AtomicUsize::new(0),
        engine: openai.map_or(Engine::Generic, |o| o.engine),
        slots: openai.and_then(|o| o.slots),
        prompt_cache: match &backend.adapter {
            BackendAdapter::OpenAi(o) if o.prompt_cache_key => PromptCache::OpenAiKey,
            BackendAdapter::Anthropic(a) if a.prompt_caching => PromptCache::AnthropicMarkers,
            // Cache points on Bedrock, cache_control on Vertex's Claude:
            // both from Anthropic's markers.
            BackendAdapter::Bedrock(b) if b.prompt_caching => PromptCache::AnthropicMarkers,
            BackendAdapter::Vertex(v) if v.prompt_caching => PromptCache::AnthropicMarkers,
            _ => PromptCache::None,
        },
        pricing: backend.pricing,
        price_from_list: backend.price_from_list,
        first_byte_timeout: backend.timeouts.first_byte,
        max_response_bytes: backend.max_response_bytes,
        in_flight: old.map_or_else(Arc::default, |(h, _)| h.in_flight.clone()),
        limit,
        max_queue: backend.max_queue,
        waiting: old.map_or_else(Arc::default, |(h, _)| h.waiting.clone()),
        // Kept across a reload with who waits in it; the reserve is the
        // new config's (set when it goes live would be no sooner: a
        // request admitted meanwhile is the old config's either way).
        classes: match old {
            Some((handle, _)) => {
                handle.classes.set_reserve(backend.interactive_reserve);
                handle.classes.wake();
                handle.classes.clone()
            }
            None => Arc::new(Classes::new(backend.interactive_reserve)),
        },
        breaker,
        service_tiers: backend.service_tiers.clone(),
        deny_fields: backend.deny_fields.clone(),
    })
}

/// A semaphore the previous config's requests hold, to be resized from
/// `was` permits to `now` when the new config goes live: permits are added
/// at once, or taken out as they come free (a task waits for them), so the
/// requests in flight count against the new limit. (Requests already
/// waiting in a backend's queue are served before the permits owed.)
pub(crate) struct LimitChange {
    pub(crate) limit: Arc<Semaphore>,
    /// A backend's classes, woken when slots are added.
    pub(crate) classes: Option<Arc<Classes>>,
    pub(crate) was: usize,
    pub(crate) now: usize,
}

impl LimitChange {
    /// `limit`, kept for the new config, with its resize noted in `changes`.
    pub(crate) fn keep(
        (limit, classes): (&Arc<Semaphore>, Option<&Arc<Classes>>),
        was: usize,
        now: usize,
        changes: &mut Vec<LimitChange>,
    ) -> Arc<Semaphore> {
        if was != now {
            changes.push(LimitChange {
                limit: limit.clone(),
                classes: classes.cloned(),
                was,
                now,
            });
        }
        limit.clone()
    }

    pub(crate) fn apply(self) {
        let LimitChange {
            limit,
            classes,
            was,
            now,
        } = self;
        if now > was {
            limit.add_permits(now - was);
            if let Some(classes) = classes {
                classes.wake();
            }
        } else {
            let owed = (was - now) - limit.forget_permits(was - now);
            if owed > 0 {
                tokio::spawn(async move {
                    let owed = u32::try_from(owed).unwrap_or(u32::MAX);
                    if let Ok(permits) = limit.acquire_many_owned(owed).await {
                        permits.forget();
                    }
                });
            }
        }
    }
}

/// New clients for a backend's servers (one per replica URL). With `old`
/// (the replicas before a reload), each keeps its predecessor's in-flight
/// count when the number of replicas is unchanged.
pub(crate) fn new_replicas(
    backend: &Backend,
    openai: Option<&switchyard_policies::OpenAiBackend>,
    old: Option<&[ReplicaHandle]>,
) -> anyhow::Result<Vec<ReplicaHandle>> {
    let providers = match openai {
        Some(openai) if openai.replicas.len() > 1 => openai
            .replicas
            .iter()
            .map(|url| {
                let mut one = backend.clone();
                if let BackendAdapter::OpenAi(o) = &mut one.adapter {
                    o.base_url.clone_from(url);
                }
                build_provider(&one)
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
        _ => vec![build_provider(backend)?],
    };
    let old = old.filter(|r| r.len() == providers.len());
    Ok(providers
        .into_iter()
        .enumerate()
        .map(|(i, provider)| ReplicaHandle {
            provider,
            in_flight: old.map_or_else(Arc::default, |r| r[i].in_flight.clone()),
        })
        .collect())
}

/// The client for a backend: its adapter with the API key from the
/// environment.
pub fn build_provider(backend: &Backend) -> anyhow::Result<Arc<dyn Provider>> {
    // Keys come from the environment at start-up; a missing one stops the start.
    let key = |env: &Option<String>| -> anyhow::Result<Option<String>> {
        env.as_ref()
            .map(|var| {
                std::env::var(var).map_err(|_| {
                    anyhow::anyhow!(
                        "backend `{}`: environment variable {var} (its api_key) is not set",
                        backend.name
                    )
                })
            })
            .transpose()
    };
    let required = |var: &str, field: &str| -> anyhow::Result<String> {
        std::env::var(var).map_err(|_| {
            anyhow::anyhow!(
                "backend `{}`: environment variable {var} (its {field}) is not set",
                backend.name
            )
        })
    };
    let failed = |err: AdapterError| anyhow::anyhow!("backend `{}`: {err}", backend.name);
    let link = Link {
        timeouts: backend.timeouts,
        max_response_bytes: backend.max_response_bytes,
        tls: &backend.tls,
    };
    let provider: Arc<dyn Provider> = match &backend.adapter {
        BackendAdapter::Sim(params) => Arc::new(SimBackend::new(params.clone())),
        BackendAdapter::OpenAi(openai) => Arc::new(
            OpenAiClient::new(openai, link, key(&openai.api_key_env)?.as_deref())
                .map_err(failed)?,
        ),
        BackendAdapter::Anthropic(anthropic) => Arc::new(
            AnthropicClient::new(anthropic, link, key(&anthropic.api_key_env)?.as_deref())
                .map_err(failed)?,
        ),
        BackendAdapter::Gemini(gemini) => Arc::new(
            GeminiClient::new(gemini, link, &required(&gemini.api_key_env, "api_key")?)
                .map_err(failed)?,
        ),
        BackendAdapter::Azure(azure) => {
            let secret = match &azure.auth {
                AzureAuth::ApiKey(var) => required(var, "api_key")?,
                AzureAuth::EntraToken(var) => required(var, "entra_token")?,
            };
            Arc::new(AzureClient::new(azure, link, &secret).map_err(failed)?)
        }
        BackendAdapter::Vertex(vertex) => {
            // The config's key file, else Google's variable for one, else
            // the machine's own service account.
            let file = vertex
                .credentials_file
                .clone()
                .or_else(|| std::env::var("GOOGLE_APPLICATION_CREDENTIALS").ok());
            let source = match file {
                Some(path) => Google::key_file(&path, link),
                None => Google::metadata_server(link),
            }
            .map_err(failed)?;
            Arc::new(VertexClient::new(vertex, link, Refresher::new(source)).map_err(failed)?)
        }
        BackendAdapter::Bedrock(bedrock) => {
            let credentials = match &bedrock.keys {
                Some(keys) => AwsCredentials::Static(Keys {
                    access_key_id: required(&keys.access_key_id_env, "access_key_id")?,
                    secret_access_key: required(&keys.secret_access_key_env, "secret_access_key")?,
                    session_token: keys
                        .session_token_env
                        .as_deref()
                        .map(|var| required(var, "session_token"))
                        .transpose()?,
                }),
                None => AwsCredentials::from_environment(&bedrock.region, link).map_err(failed)?,
            };
            Arc::new(BedrockClient::new(bedrock, link, credentials).map_err(failed)?)
        }
    };
    Ok(provider)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_limit_resized_by_a_reload_counts_what_is_in_flight() {
        let limit = Arc::new(Semaphore::new(4));
        let held: Vec<_> = (0..3)
            .map(|_| limit.clone().try_acquire_owned().unwrap())
            .collect();
        // Down to 2 with 3 in flight: nothing more may start until two end.
        let mut changes = Vec::new();
        let classes = Arc::new(Classes::default());
        let limit = LimitChange::keep((&limit, Some(&classes)), 4, 2, &mut changes);
        assert_eq!(
            limit.available_permits(),
            1,
            "nothing changes before the config goes live"
        );
        changes.into_iter().for_each(LimitChange::apply);
        assert_eq!(limit.available_permits(), 0);
        let mut held = held.into_iter();
        drop(held.next());
        tokio::task::yield_now().await;
        assert_eq!(limit.available_permits(), 0, "the freed permit was owed");
        drop(held.next());
        drop(held.next());
        tokio::task::yield_now().await;
        assert_eq!(limit.available_permits(), 2);
        // Up again: added at once.
        let mut changes = Vec::new();
        let limit = LimitChange::keep((&limit, None), 2, 5, &mut changes);
        changes.into_iter().for_each(LimitChange::apply);
        assert_eq!(limit.available_permits(), 5);
    }
}
