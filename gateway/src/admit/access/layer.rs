//! The tower layer that picks the config a request is served with and
//! authenticates its virtual key, before any body is read. (Keys'
//! requests-per-minute limit is applied by the handler, so that a refused
//! model request gets its ledger row.)

use std::convert::Infallible;
use std::future::Ready;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::Either;
use http::{Request, Response};
use tower::{Layer, Service};

use crate::error::Dialect;
use crate::http::Body;
use crate::state::app::App;
use crate::state::live::Live;

/// Paths that answer without a key: probes, Prometheus scrapes, and the
/// admin API (also under `/v1`) and dashboard, which check the admin key
/// themselves.
fn is_open(path: &str) -> bool {
    path.starts_with("/v1/admin/")
        || matches!(
            path,
            "/healthz" | "/readyz" | "/metrics" | "/" | "/dashboard"
        )
        || path.starts_with("/admin/")
        || path.starts_with("/dashboard/")
}

#[derive(Clone)]
pub struct AuthLayer {
    live: Arc<Live>,
}

impl AuthLayer {
    pub fn new(live: Arc<Live>) -> Self {
        AuthLayer { live }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            live: self.live.clone(),
        }
    }
}

#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    live: Arc<Live>,
}

/// The inner service gets the config with the request, as a pair (in the
/// request's extensions it cost an insert and a removal, a few hundred
/// instructions a request).
impl<S, B> Service<Request<B>> for AuthService<S>
where
    S: Service<(Arc<App>, Request<B>), Response = Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    /// Not boxed again: the handler's future comes boxed (see `stack`).
    type Future = Either<S::Future, Ready<Result<Response<Body>, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        // The config this request is served with, start to end: the keys
        // that admit it are the ones whose limits and budgets apply.
        let app: Arc<App> = self.live.app();
        if !app.keys.enabled() || is_open(req.uri().path()) {
            return Either::Left(self.inner.call((app, req)));
        }
        match app.keys.authenticate_request(req.headers(), req.uri()) {
            Ok(caller) => {
                req.extensions_mut().insert(caller);
                Either::Left(self.inner.call((app, req)))
            }
            Err(err) => {
                app.metrics.unauthenticated();
                let dialect = Dialect::of_path(req.uri().path());
                Either::Right(std::future::ready(Ok(err.into_response_for(dialect))))
            }
        }
    }
}
