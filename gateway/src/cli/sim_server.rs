//! `switchyard sim`: the simulator as a standalone OpenAI-compatible server,
//! so load tests and peer gateways can use the same upstream as Switchyard.
//! It answers any model name, and fails the way real servers fail: HTTP
//! errors, 503 when its queue is full, connections dropped mid-response.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::header::RETRY_AFTER;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use switchyard_adapters::sim::SimBackend;
use switchyard_adapters::sse::{DONE, data_event};
use switchyard_adapters::{AdapterError, Provider};
use tokio::net::TcpListener;

use crate::error::GatewayError;
use crate::http::{Body, BodyLimits, json_response, parse_json, read_json_body};

/// Bodies that can fail, so a simulated reset cuts the connection.
type SimBody = UnsyncBoxBody<Bytes, AdapterError>;

/// The largest request body the simulator reads.
const MAX_BODY: usize = 64 * 1024 * 1024;

pub async fn serve(sim: SimBackend, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let sim = Arc::new(sim);
    let service = tower::service_fn(move |req: Request<Incoming>| {
        let sim = sim.clone();
        async move { handle(&sim, req).await }
    });
    crate::http::server::serve(
        listener,
        service,
        shutdown,
        Duration::from_secs(5),
        crate::http::connection::ConnectionLimits::of(
            &switchyard_policies::ServerSettings::default(),
        ),
        None,
    )
    .await;
}

/// `Err` drops the connection without an answer (a simulated reset).
async fn handle(
    sim: &SimBackend,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, AdapterError> {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    match (method, path.as_str()) {
        (Method::POST, "/v1/chat/completions") => {
            model_call(
                req,
                |r| sim.chat(r),
                |r| sim.chat_stream(r),
                |r: &switchyard_adapters::types::ChatRequest| r.is_stream(),
            )
            .await
        }
        (Method::POST, "/v1/completions") => {
            model_call(
                req,
                |r| sim.completion(r),
                |r| sim.completion_stream(r),
                |r: &switchyard_adapters::types::CompletionRequest| r.is_stream(),
            )
            .await
        }
        (Method::POST, "/v1/embeddings") => {
            let request = match read::<switchyard_adapters::types::EmbeddingRequest>(req).await {
                Ok(request) => request,
                Err(err) => return Ok(plain(err.into_response())),
            };
            whole(sim.embeddings(request).await)
        }
        (Method::GET, "/v1/models") => Ok(plain(json_response(
            StatusCode::OK,
            // `max_model_len` as vLLM reports it: gateways read their
            // backends' context windows from it.
            &json!({"object": "list", "data": [{"id": "sim", "object": "model", "created": 0, "owned_by": "switchyard-sim", "max_model_len": sim.params().context_window}]}),
        ))),
        (Method::GET, "/sim/stats") => Ok(plain(json_response(StatusCode::OK, &sim.stats()))),
        (Method::GET, "/healthz" | "/health") => Ok(plain(json_response(
            StatusCode::OK,
            &json!({"status": "ok"}),
        ))),
        _ => Ok(plain(GatewayError::NotFound { path }.into_response())),
    }
}

async fn read<T: DeserializeOwned>(req: Request<Incoming>) -> Result<T, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = read_json_body(
        &parts,
        body,
        BodyLimits {
            max_bytes: MAX_BODY,
            read_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        },
    )
    .await?;
    parse_json(&bytes)
}

async fn model_call<'a, Req, Resp, Chunk, W, S, IsStream>(
    req: Request<Incoming>,
    call_whole: W,
    call_stream: S,
    is_stream: IsStream,
) -> Result<Response<SimBody>, AdapterError>
where
    Req: DeserializeOwned,
    Resp: Serialize,
    Chunk: Serialize + Send + 'static,
    W: FnOnce(Req) -> futures_util::future::BoxFuture<'a, Result<Resp, AdapterError>>,
    S: FnOnce(
        Req,
    ) -> futures_util::future::BoxFuture<
        'a,
        Result<BoxStream<'static, Result<Chunk, AdapterError>>, AdapterError>,
    >,
    IsStream: FnOnce(&Req) -> bool,
{
    let request: Req = match read(req).await {
        Ok(request) => request,
        Err(err) => return Ok(plain(err.into_response())),
    };
    if is_stream(&request) {
        match call_stream(request).await {
            Ok(chunks) => Ok(sse(chunks)),
            Err(err) => failure(err),
        }
    } else {
        whole(call_whole(request).await)
    }
}

fn whole<T: Serialize>(result: Result<T, AdapterError>) -> Result<Response<SimBody>, AdapterError> {
    match result {
        Ok(value) => Ok(plain(json_response(StatusCode::OK, &value))),
        Err(err) => failure(err),
    }
}

/// How a real server reports each failure.
fn failure(err: AdapterError) -> Result<Response<SimBody>, AdapterError> {
    match err {
        AdapterError::Reset { .. } => Err(err),
        AdapterError::Overloaded { retry_after } => {
            let body = json!({"error": {"message": "simulated server is at capacity", "type": "server_error", "code": 503}});
            let mut response = plain(json_response(StatusCode::SERVICE_UNAVAILABLE, &body));
            let seconds = retry_after.map(|d| d.as_secs().max(1)).unwrap_or(1);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
            Ok(response)
        }
        AdapterError::Status {
            status,
            message,
            body,
            ..
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let error = body.unwrap_or_else(|| json!({"message": message, "type": "server_error"}));
            Ok(plain(json_response(status, &json!({ "error": error }))))
        }
        other => {
            let body = json!({"error": {"message": other.to_string(), "type": "server_error"}});
            Ok(plain(json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &body,
            )))
        }
    }
}

fn plain(response: Response<Body>) -> Response<SimBody> {
    response.map(|body| body.map_err(|never| match never {}).boxed_unsync())
}

/// Streams chunks as SSE; a reset fails the body (the connection is cut
/// mid-stream), any other error is sent as an error event.
fn sse<C: Serialize + Send + 'static>(
    chunks: BoxStream<'static, Result<C, AdapterError>>,
) -> Response<SimBody> {
    let events = chunks
        .map(|item| match item {
            Ok(chunk) => Ok(data_event(&serde_json::to_vec(&chunk).unwrap_or_default())),
            Err(err @ AdapterError::Reset { .. }) => Err(err),
            Err(err) => Ok(data_event(
                &serde_json::to_vec(
                    &json!({"error": {"message": err.to_string(), "type": "server_error"}}),
                )
                .unwrap_or_default(),
            )),
        })
        .chain(futures_util::stream::once(async {
            Ok(Bytes::from_static(DONE))
        }))
        .map(|item| item.map(Frame::data));
    let mut response = Response::new(StreamBody::new(events).boxed_unsync());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}
