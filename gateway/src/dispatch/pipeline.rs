//! The path every model call takes, whatever the endpoint: read, parse,
//! route, then try the decision's backends in order (`attempts`), answer
//! with receipts.

use crate::dispatch::endpoint::Call;
use crate::telemetry::RequestTrace;
use std::sync::Arc;
use switchyard_adapters::types::CanonicalRequest;

use http::request::Parts;
use http::{Request, Response};
use hyper::body::Incoming;
use switchyard_router::{Decision, RequestView};

use crate::admit::access::Caller;
use crate::admit::admission::{self, Size};
use crate::dispatch::attempts::{Shared, dispatch};
use crate::dispatch::endpoint::Endpoint;
use crate::dispatch::response_cache::{Slot, replay};
use crate::error::GatewayError;
use crate::http::Body;
use crate::route::encoder::encode_for_routing;
use crate::route::receipts::{self, CacheUse, Served};
use crate::route::sensitive::{self, Assessment};
use crate::route::view::complete_view;
use crate::settle::context::RequestContext;
use crate::state::app::App;

pub async fn serve<E: Endpoint>(
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    serve_body::<E>(app, parts, &bytes).await
}

/// Serves a request whose body is read: a caller's, or a batch line's.
pub async fn serve_body<E: Endpoint>(
    app: &App,
    parts: Parts,
    bytes: &[u8],
) -> Result<Response<Body>, GatewayError> {
    let mut request: E::Request = E::decode_request(&parts, bytes)?;
    E::forward_headers(&mut request, &parts.headers);
    request.validate()?;
    if let Some(caller) = parts.extensions.get::<Caller>() {
        request.check_caller(caller)?;
    }
    // The route's name, once, for its sensitive-data policy and its hooks.
    let route = app.route_of(request.model());
    let caller = parts.extensions.get::<Caller>();
    let assessment = sensitive::assess_request(app, caller, route.as_deref(), &request)?;
    crate::dispatch::guardrails::before(app, &parts, route.as_deref(), &request).await?;
    let mut decision = decide::<E>(app, &parts, &request, assessment.as_ref()).await?;
    if let Some(assessment) = &assessment {
        sensitive::enforce(app, assessment, &mut decision)?;
    }
    let mut response = serve_decided::<E>(app, &parts, request, decision).await?;
    if let Some(receipt) = assessment.and_then(|a| a.receipt) {
        response
            .headers_mut()
            .insert(sensitive::SENSITIVE_HEADER, receipt);
    }
    Ok(response)
}

/// Routes a decoded request: its view (with the caller's key and team and
/// any encoder embeddings, which read only what its sensitive-data
/// assessment lets them), the decision, and whether the key may name a
/// backend directly.
pub async fn decide<E: Endpoint>(
    app: &App,
    parts: &Parts,
    request: &E::Request,
    assessment: Option<&Assessment>,
) -> Result<Decision, GatewayError> {
    let caller = parts.extensions.get::<Caller>();
    admission::check_model(app, caller, request.model())?;
    let mut view = complete_view(request.view(), &parts.headers, request.hints(), &app.router)?;
    if let Some(caller) = caller {
        view.key = Some(&caller.key.name);
        view.team = caller.key.team.as_deref();
        view.tenant = app.keys.tenant(caller);
    }
    view.prefix = request.prefix_chain().map(Arc::new);
    let trace = parts.extensions.get::<RequestTrace>();
    let started = trace.map(|_| std::time::SystemTime::now());
    let handling = assessment.map(|a| &a.handling);
    let (encoded, _) = encode_for_routing(app, parts, &view, handling).await;
    let decision = app
        .decide(&RequestView {
            encoded: &encoded,
            ..view
        })
        .map_err(|err| admission::for_caller(err, app, caller))?;
    if let (Some(trace), Some(started)) = (trace, started) {
        trace.routed(
            started,
            crate::settle::attempt_span::routing(app, &decision),
        );
    }
    admission::check_direct(app, caller, &decision)?;
    Ok(decision)
}

/// Serves a request already decided: limits, dispatch, receipts.
pub async fn serve_decided<E: Endpoint>(
    app: &App,
    parts: &Parts,
    request: E::Request,
    decision: Decision,
) -> Result<Response<Body>, GatewayError> {
    let caller = parts.extensions.get::<Caller>().cloned();
    let size = Size::of_decision(&decision);
    let request = Arc::new(Shared::<E>(request));
    let context = RequestContext::new(
        app,
        parts,
        (E::NAME, E::DIALECT),
        request.0.model().to_owned(),
        &decision,
        request.clone(),
    );
    admission::admit_request(app, caller.as_ref(), size)?;
    let slot = Slot::of(app, parts, &request.0, &decision);
    // A hit from a backend the config no longer has is a miss.
    let cached = slot.as_ref().and_then(Slot::get).and_then(|cached| {
        let backend = app
            .backends
            .iter()
            .position(|b| *b.name == *cached.backend)?;
        Some((cached, backend))
    });
    if slot.as_ref().is_some_and(Slot::looks_up) {
        app.metrics.response_cache(cached.is_some());
    }
    if let Some((cached, backend)) = cached
        && let Some(mut response) = Box::pin(replay::<E>(
            app,
            request.0.clone(),
            context.clone(),
            (&cached, backend),
            &decision,
        ))
        .await
    {
        let served = Served {
            backend,
            reason: decision.reason,
            cache: CacheUse::Hit,
        };
        receipts::apply(app, &decision, served, response.headers_mut());
        return Ok(response);
    }
    // Boxed: dispatch's state is most of a request's future, and a future
    // is copied whole into its parent's at each level that awaits it
    // (boxed, this function's future went from 6.7 KB to 0.9 KB). Made in
    // its box, though the optimizer still copies about half of it there.
    let (result, served) = switchyard_adapters::boxed::pinned_in_place(|| {
        dispatch::<E>(app, &decision, request, context, size, slot)
    })
    .await;
    let mut response = result.unwrap_or_else(|err| err.into_response_for(E::DIALECT));
    receipts::apply(app, &decision, served, response.headers_mut());
    Ok(response)
}
