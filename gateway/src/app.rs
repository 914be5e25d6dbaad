//! The gateway's state for one config: backends with their clients, the
//! router, and the admission limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use switchyard_adapters::Provider;
use switchyard_adapters::openai::OpenAiClient;
use switchyard_adapters::sim::SimBackend;
use switchyard_policies::{Backend, BackendAdapter, Config, Tier};
use switchyard_router::Router;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::GatewayError;

/// A backend ready to call.
pub struct BackendHandle {
    pub name: String,
    pub tier: Tier,
    pub upstream_model: String,
    pub provider: Arc<dyn Provider>,
    /// Requests in flight to this backend; `None` when unlimited.
    limit: Option<Arc<Semaphore>>,
}

/// Slots a request holds while it runs (its whole stream, when streaming).
pub struct Admission {
    _gateway: OwnedSemaphorePermit,
    _backend: Option<OwnedSemaphorePermit>,
}

pub struct App {
    /// Indexed like the router's backends (config order).
    pub backends: Vec<BackendHandle>,
    pub router: Router,
    pub max_body_bytes: usize,
    in_flight: Arc<Semaphore>,
    shutting_down: AtomicBool,
}

impl App {
    /// Builds clients for every backend and compiles the routes. Fails when
    /// a backend's API key variable is unset or its client cannot be built.
    pub fn build(config: &Config) -> anyhow::Result<Self> {
        let router = Router::new(config);
        let backends = config
            .backends
            .values()
            .map(build_backend)
            .collect::<anyhow::Result<Vec<_>>>()?;
        debug_assert!(
            backends
                .iter()
                .map(|b| &b.name)
                .eq(router.backends().iter())
        );
        Ok(App {
            backends,
            router,
            max_body_bytes: config.server.max_body_bytes,
            in_flight: Arc::new(Semaphore::new(config.server.max_concurrent_requests)),
            shutting_down: AtomicBool::new(false),
        })
    }

    /// Takes a slot in the gateway and in the backend, or says it is full.
    pub fn admit(&self, backend: usize) -> Result<Admission, GatewayError> {
        let gateway =
            self.in_flight
                .clone()
                .try_acquire_owned()
                .map_err(|_| GatewayError::Overloaded {
                    what: "the gateway is at its concurrent request limit".into(),
                })?;
        let backend = &self.backends[backend];
        let backend_permit =
            match &backend.limit {
                None => None,
                Some(limit) => Some(limit.clone().try_acquire_owned().map_err(|_| {
                    GatewayError::Overloaded {
                        what: format!("backend `{}` is at its concurrency limit", backend.name),
                    }
                })?),
            };
        Ok(Admission {
            _gateway: gateway,
            _backend: backend_permit,
        })
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}

fn build_backend(backend: &Backend) -> anyhow::Result<BackendHandle> {
    let provider: Arc<dyn Provider> = match &backend.adapter {
        BackendAdapter::Sim(params) => Arc::new(SimBackend::new(params.clone())),
        BackendAdapter::OpenAi(openai) => {
            let key = match &openai.api_key_env {
                None => None,
                Some(var) => Some(std::env::var(var).map_err(|_| {
                    anyhow::anyhow!(
                        "backend `{}`: environment variable {var} (its api_key) is not set",
                        backend.name
                    )
                })?),
            };
            Arc::new(
                OpenAiClient::new(openai, backend.timeouts, key.as_deref())
                    .map_err(|err| anyhow::anyhow!("backend `{}`: {err}", backend.name))?,
            )
        }
    };
    Ok(BackendHandle {
        name: backend.name.clone(),
        tier: backend.tier,
        upstream_model: backend.upstream_model.clone(),
        provider,
        limit: backend.max_concurrency.map(|n| Arc::new(Semaphore::new(n))),
    })
}
