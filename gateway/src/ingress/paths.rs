//! Every request's first step: its path (the query string is ignored)
//! picks the endpoint, model endpoints or the admin plane.

use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;

use crate::admit::access::Caller;
use crate::error::{Dialect, GatewayError};
use crate::http::Body;
use crate::http::request_id::REQUEST_ID;
use crate::state::app::App;
use crate::state::live::Live;

use crate::admin::{api as admin, dashboard, explain, health, keys, models, requests};
use crate::dispatch::endpoint::Endpoint;
use crate::dispatch::pipeline as endpoint;
use crate::ingress::{chat, completions, embeddings, gemini, gemini_paths, messages, responses};
use crate::settle::refusal::RefusalGuard;

/// Serves one request with `app`, the config live when it arrived; `live`
/// is for reloading it.
pub async fn handle(live: &Live, app: Arc<App>, mut req: Request<Incoming>) -> Response<Body> {
    // Accept both `/v1/...` and bare paths: clients disagree on whether the
    // base URL they are given ends in /v1.
    let path = req.uri().path();
    let dialect = Dialect::of_request(path, req.headers());
    let endpoint = gemini_paths::endpoint(path).unwrap_or_else(|| {
        known_endpoint(
            path.strip_prefix("/v1")
                .filter(|rest| rest.starts_with('/'))
                .unwrap_or(path),
        )
    });
    let trace = crate::telemetry::get()
        .filter(|_| !matches!(endpoint, "/healthz" | "/readyz" | "/metrics" | "/"))
        .map(|telemetry| {
            let id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok());
            telemetry.server_span(
                req.method(),
                route_template(path, endpoint),
                req.headers(),
                id,
            )
        });
    if let Some(trace) = &trace {
        req.extensions_mut().insert(trace.clone());
    }
    // Made before anything can refuse the request, so every refusal of a
    // model request (and a client that leaves) leaves a ledger row.
    let guard =
        model_endpoint(endpoint).map(|name| RefusalGuard::new(&app, &mut req, name, dialect));
    let counted = match req.extensions().get::<Caller>() {
        // A routed request is counted in Redis with its first reservation
        // (admission), when limits are shared; anything else a key sends
        // is counted here, in Redis too. Boxed: rare, and its state would
        // otherwise be part of every request's future.
        Some(caller) if guard.is_none() && app.rates.is_shared() => {
            Box::pin(app.rates.check_unrouted(&caller.key)).await
        }
        _ => requests_per_minute(&app, &req),
    };
    let result = match counted {
        Ok(()) => serve_endpoint(live, &app, endpoint, req).await,
        Err(err) => Err(err),
    };
    let response = result.unwrap_or_else(|err| err.into_response_for(dialect));
    if let Some(guard) = guard {
        guard.answered(&response);
    }
    if let Some(trace) = trace {
        trace.answered(response.status());
    }
    response
}

/// A path as spans name it: the endpoint as the caller wrote it (with or
/// without `/v1`), `/v1/models/{model}`, or empty for anything else.
fn route_template(path: &str, endpoint: &'static str) -> &'static str {
    if endpoint.starts_with("/gemini/") {
        return gemini_paths::route_template(endpoint, path);
    }
    let v1 = path.starts_with("/v1/");
    match ENDPOINTS
        .iter()
        .position(|e| *e == endpoint && !e.is_empty())
    {
        Some(at) if v1 => V1_ENDPOINTS[at],
        Some(_) => endpoint,
        None if one_model(path).is_some() => "/v1/models/{model}",
        None => "",
    }
}

/// Counts the request against its key's requests-per-minute limit (here,
/// not in the auth layer, so a refusal of a model request has its row).
fn requests_per_minute(app: &App, req: &Request<Incoming>) -> Result<(), GatewayError> {
    match req.extensions().get::<Caller>() {
        Some(caller) => app.rates.check_request(&caller.key),
        None => Ok(()),
    }
}

/// The endpoints that call models, by the name their ledger rows give.
fn model_endpoint(endpoint: &str) -> Option<&'static str> {
    Some(match endpoint {
        "/chat/completions" => chat::Chat::NAME,
        "/messages" => messages::Messages::NAME,
        "/responses" => responses::Responses::NAME,
        "/completions" => completions::Completions::NAME,
        "/embeddings" => embeddings::Embeddings::NAME,
        gemini_paths::GENERATE => gemini::Generate::NAME,
        gemini_paths::STREAM => gemini::StreamGenerate::NAME,
        _ => return None,
    })
}

async fn serve_endpoint(
    live: &Live,
    app: &App,
    endpoint: &'static str,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    // The admin API answers only the admin key, even about what it does
    // not have or which methods it takes: which admin paths exist is not
    // for others to probe.
    // The dashboard's pages read these with the browser's Basic password
    // (or openly, when the config sets no keys at all).
    let for_dashboard = (matches!(endpoint, "/admin/stats" | "/admin/requests")
        || requests::requested_id(req.uri().path()).is_some())
        && dashboard::may_see(app, req.headers());
    if is_admin_path(req.uri().path()) && !for_dashboard && !app.keys.is_admin(req.headers()) {
        return Err(admin::unauthorized());
    }
    // Only the model endpoints' futures are awaited in place; every other
    // one is boxed where it is taken, so the largest of them does not set
    // the size of every request's future (which is copied whole into its
    // box when a connection's request starts).
    match endpoint {
        "/chat/completions" => match allow(&req, Method::POST, "POST") {
            Ok(()) => endpoint::serve::<chat::Chat>(app, req).await,
            Err(err) => Err(err),
        },
        "/messages" => match allow(&req, Method::POST, "POST") {
            Ok(()) => endpoint::serve::<messages::Messages>(app, req).await,
            Err(err) => Err(err),
        },
        "/messages/count_tokens" => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(messages::count_tokens(app, req)).await,
            Err(err) => Err(err),
        },
        "/" if req.method() == Method::HEAD => Ok(health::live()),
        // Boxed, as is embeddings: the two largest endpoint futures would
        // otherwise set the size of (and be copied with) every request's.
        "/responses" => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(responses::serve(app, req)).await,
            Err(err) => Err(err),
        },
        "/completions" => match allow(&req, Method::POST, "POST") {
            Ok(()) => endpoint::serve::<completions::Completions>(app, req).await,
            Err(err) => Err(err),
        },
        "/embeddings" => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(endpoint::serve::<embeddings::Embeddings>(app, req)).await,
            Err(err) => Err(err),
        },
        // Boxed: rare next to the OpenAI endpoints, and as large.
        gemini_paths::GENERATE => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(endpoint::serve::<gemini::Generate>(app, req)).await,
            Err(err) => Err(err),
        },
        gemini_paths::STREAM => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(endpoint::serve::<gemini::StreamGenerate>(app, req)).await,
            Err(err) => Err(err),
        },
        gemini_paths::COUNT_TOKENS => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(gemini::count_tokens(app, req)).await,
            Err(err) => Err(err),
        },
        gemini_paths::LIST => allow(&req, Method::GET, "GET")
            .map(|()| models::list(app, req.extensions().get::<Caller>(), Dialect::Gemini)),
        gemini_paths::ONE => allow(&req, Method::GET, "GET").and_then(|()| {
            let path = req.uri().path();
            let name = path.strip_prefix("/v1beta/models/").unwrap_or(path);
            models::retrieve(app, req.extensions().get::<Caller>(), name, Dialect::Gemini)
        }),
        "/route/explain" => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(explain::serve(app, req)).await,
            Err(err) => Err(err),
        },
        "/models" => allow(&req, Method::GET, "GET")
            .map(|()| models::list(app, req.extensions().get::<Caller>(), dialect_of(&req))),
        "/admin/spend" => match allow(&req, Method::GET, "GET") {
            Ok(()) => Box::pin(admin::spend(app, req)).await,
            Err(err) => Err(err),
        },
        "/admin/budgets" => match allow(&req, Method::GET, "GET") {
            Ok(()) => Box::pin(admin::budgets(app, req)).await,
            Err(err) => Err(err),
        },
        "/admin/sessions" => match allow(&req, Method::GET, "GET") {
            Ok(()) => Box::pin(admin::sessions(app, req)).await,
            Err(err) => Err(err),
        },
        "/admin/advice" => match allow(&req, Method::GET, "GET") {
            Ok(()) => Box::pin(admin::advice(app, req)).await,
            Err(err) => Err(err),
        },
        "/admin/compare" => match allow(&req, Method::GET, "GET") {
            Ok(()) => Box::pin(admin::compare(app, req)).await,
            Err(err) => Err(err),
        },
        "/admin/keys" => Box::pin(keys::collection(live, app, req)).await,
        "/admin/requests" => match allow(&req, Method::GET, "GET") {
            Ok(()) => Box::pin(requests::list(app, req)).await,
            Err(err) => Err(err),
        },
        "/admin/stats" => match allow(&req, Method::GET, "GET") {
            Ok(()) => Box::pin(dashboard::stats(app, req)).await,
            Err(err) => Err(err),
        },
        "/admin/predictors" => {
            allow(&req, Method::GET, "GET").and_then(|()| admin::predictors(app, &req))
        }
        "/admin/reload" => match allow(&req, Method::POST, "POST") {
            Ok(()) => Box::pin(admin::reload(live, &req)).await,
            Err(err) => Err(err),
        },
        "/healthz" => Ok(health::live()),
        "/metrics" => allow(&req, Method::GET, "GET").and_then(|()| {
            if app.keys.may_scrape(req.headers()) {
                Ok(health::metrics(app, req.headers()))
            } else {
                Err(GatewayError::Unauthorized {
                    message: "`/metrics` needs the scraper's key (auth.metrics_key_hash) or the admin key".into(),
                })
            }
        }),
        "/readyz" => Ok(health::ready(app, req.headers())),
        // Boxed: its future is large and the path rare next to the models'.
        "/mcp" => Box::pin(crate::mcp::endpoint::serve(app, req)).await,
        _ => match one_model(req.uri().path()) {
            Some(name) => allow(&req, Method::GET, "GET").and_then(|()| {
                models::retrieve(
                    app,
                    req.extensions().get::<Caller>(),
                    name,
                    dialect_of(&req),
                )
            }),
            None if let Some((name, rotate)) = keys::key_path(req.uri().path()) => {
                let name = name.to_owned();
                Box::pin(keys::one(live, app, req, name, rotate)).await
            }
            None if let Some(id) = requests::requested_id(req.uri().path()) => {
                let id = id.to_owned();
                match allow(&req, Method::GET, "GET") {
                    Ok(()) => Box::pin(requests::one(app, req, id)).await,
                    Err(err) => Err(err),
                }
            }
            None if dashboard::is_dashboard_path(req.uri().path()) => {
                allow(&req, Method::GET, "GET").and_then(|()| dashboard::asset(app, &req))
            }
            None if is_stored_response(req.uri().path()) => Err(GatewayError::ResponsesNotStored),
            // Boxed: rare next to the models'.
            None if crate::batch::api::is_batch_path(req.uri().path()) => {
                Box::pin(crate::batch::api::serve(app, req)).await
            }
            None => Err(GatewayError::NotFound {
                path: req.uri().path().to_owned(),
            }),
        },
    }
}

fn dialect_of(req: &Request<Incoming>) -> Dialect {
    Dialect::of_request(req.uri().path(), req.headers())
}

/// `/v1/responses/{id}` and below: a stored response, which Switchyard does
/// not keep.
fn is_stored_response(path: &str) -> bool {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    path.strip_prefix("/responses/")
        .is_some_and(|id| !id.is_empty())
}

/// The model a `/v1/models/{model}` path names (percent-decoding is not
/// needed: model names are of a URL-safe alphabet).
fn one_model(path: &str) -> Option<&str> {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    path.strip_prefix("/models/")
        .filter(|name| !name.is_empty())
}

fn is_admin_path(path: &str) -> bool {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    path == "/admin" || path.starts_with("/admin/")
}

/// The paths served (after any `/v1`), as `'static` strings: the request
/// itself moves into its endpoint, and a copy of its path would cost an
/// allocation on every request.
const ENDPOINTS: [&str; 23] = [
    "/chat/completions",
    "/messages",
    "/messages/count_tokens",
    "/",
    "/responses",
    "/completions",
    "/embeddings",
    "/route/explain",
    "/models",
    "/admin/spend",
    "/admin/budgets",
    "/admin/sessions",
    "/admin/advice",
    "/admin/compare",
    "/admin/keys",
    "/admin/requests",
    "/admin/stats",
    "/admin/reload",
    "/admin/predictors",
    "/healthz",
    "/metrics",
    "/readyz",
    "/mcp",
];

/// [`ENDPOINTS`] as written under `/v1`.
const V1_ENDPOINTS: [&str; 23] = [
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/",
    "/v1/responses",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/route/explain",
    "/v1/models",
    "/v1/admin/spend",
    "/v1/admin/budgets",
    "/v1/admin/sessions",
    "/v1/admin/advice",
    "/v1/admin/compare",
    "/v1/admin/keys",
    "/v1/admin/requests",
    "/v1/admin/stats",
    "/v1/admin/reload",
    "/v1/admin/predictors",
    "/v1/healthz",
    "/v1/metrics",
    "/v1/readyz",
    "/v1/mcp",
];

fn known_endpoint(path: &str) -> &'static str {
    ENDPOINTS.iter().copied().find(|e| *e == path).unwrap_or("")
}

fn allow(
    req: &Request<Incoming>,
    method: Method,
    allowed: &'static str,
) -> Result<(), GatewayError> {
    if req.method() == method {
        Ok(())
    } else {
        Err(GatewayError::MethodNotAllowed {
            path: req.uri().path().to_owned(),
            method: req.method().to_string(),
            allowed,
        })
    }
}
