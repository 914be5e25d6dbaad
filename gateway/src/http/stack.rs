//! The tower stack around the gateway's handler.

use std::any::Any;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::http::tls::Tls;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;

use crate::admit::access::AuthLayer;
use crate::error::GatewayError;
use crate::http::Body;
use crate::http::request_id::RequestIdLayer;
use crate::http::request_span::RequestSpanLayer;
use crate::http::sensitive::SensitiveHeadersLayer;

use crate::state::app::App;
use crate::state::live::Live;

/// Serves the gateway on `listener` until `shutdown` resolves, then drains
/// for up to `grace`.
///
/// Middleware, outermost first:
/// 1. `CatchPanicLayer`: a panic anywhere below becomes a 500 in the OpenAI
///    error shape instead of a dropped connection.
/// 2. `RequestIdLayer`: every request gets an `x-request-id` (the caller's
///    own when it sent one), so logs and support tickets can name it, and
///    its response carries the same id.
/// 3. `RequestSpanLayer`: one span per request, carrying that id;
///    everything logged while serving it, its body included, is inside the
///    span.
/// 4. `SensitiveHeadersLayer`: API keys and cookies are marked
///    sensitive so no layer or log below prints them.
/// 5. `AuthLayer`: pins the config the request is served with (the one
///    live when it arrives, kept through a reload until it ends) and
///    resolves the virtual key (401 when missing or unknown, when keys are
///    configured), before any body is read. The handler then
///    applies its requests-per-minute limit (429), still before the body is
///    read, where a refused model request gets its ledger row.
///    Tokens-per-minute and budgets need the body and are applied at
///    admission.
///
/// Body size and media-type limits are applied by the handler while it reads
/// the body, so their errors come in the endpoint's own dialect.
pub async fn serve(
    live: Arc<Live>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    tls: Option<Arc<Tls>>,
) {
    let app = live.app();
    let limits = app.connection_limits;
    let handler_live = live.clone();
    let service = ServiceBuilder::new()
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(RequestIdLayer)
        .layer(RequestSpanLayer)
        .layer(SensitiveHeadersLayer)
        .layer(AuthLayer::new(live.clone()))
        .service_fn(move |(app, req): (Arc<App>, Request<Incoming>)| {
            let live = handler_live.clone();
            // Boxed here, once: the handler's state is kilobytes, and each
            // layer above wraps the future it gets by value.
            switchyard_adapters::boxed::pinned_in_place(|| async move {
                Ok::<_, Infallible>(crate::ingress::paths::handle(&live, app, req).await)
            })
        });
    // Every config shares the process's ledger.
    let ledger = app.ledger.clone();
    let last = live.clone();
    let stopped_at = Arc::new(std::sync::OnceLock::new());
    let stopping = stopped_at.clone();
    let draining = async move {
        shutdown.await;
        let _ = stopping.set(std::time::Instant::now());
        // Readiness fails from here on, so balancers stop sending (the
        // flag is shared by every config's state); no more shadow copies
        // are taken.
        let app = live.app();
        app.begin_shutdown();
        app.shadows.close();
    };
    let keeper = tokio::spawn(keep_a_timer_pending());
    crate::http::server::serve(listener, service, draining, grace, limits, tls).await;
    // Shadow copies get what is left of the grace; every config's copies
    // share one set of tasks.
    let deadline = stopped_at
        .get()
        .copied()
        .unwrap_or_else(std::time::Instant::now)
        + grace;
    let app = last.app();
    app.shadows.finish(deadline, &app.metrics).await;
    keeper.abort();
    // Every row of every finished request reaches the disk before exit.
    ledger.close().await;
}

/// Keeps a timer pending while the gateway serves. Tokio's time driver
/// wakes its parked thread (an eventfd write, then one more trip through
/// epoll) whenever a new timer is due sooner than every pending one. At low
/// load the only timers are the requests' own first-byte timeouts, so each
/// request paid that syscall and wake-up: strace counted one eventfd write
/// and three epoll_waits per request at c=1, against the bare hop's two
/// epoll_waits. A timer firing every second is always due sooner than a
/// request's timeout (seconds to minutes away), so those wake nothing.
async fn keep_a_timer_pending() {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response<Body> {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(panic = detail, "handler panicked");
    GatewayError::Internal {
        message: "the gateway hit a bug while serving this request; it has been logged".into(),
    }
    .into_response()
}
