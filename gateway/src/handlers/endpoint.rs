//! The path every model call takes, whatever the endpoint: read, parse,
//! route, then try the decision's backends in order (fallbacks on failures
//! before the first byte, escalation for cascades), answer with receipts.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_adapters::types::Usage;
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::{AnswerSummary, Decision, Reason, RequestView, failed_check};

use super::record::RequestRecord;
use super::stream;
use crate::app::App;
use crate::error::GatewayError;
use crate::http::{Body, json_response, parse_json, read_json_body, sse_response};
use crate::receipts::{self, Served};
use crate::routing::{BodyHints, complete_view, encode_for_routing};

/// A backend's chunks.
pub type Chunks<C> = BoxStream<'static, Result<C, AdapterError>>;

/// One OpenAI-compatible model endpoint that can answer whole or streamed.
pub trait Endpoint {
    /// For logs and metrics.
    const NAME: &'static str;
    type Request: DeserializeOwned + Clone + Send + 'static;
    type Response: Serialize + Send + 'static;
    type Chunk: Serialize + Send + 'static;

    /// The router's view of the request (session, profile and headers are
    /// filled in by the caller).
    fn view(req: &Self::Request) -> RequestView<'_>;
    fn hints(req: &Self::Request) -> BodyHints<'_>;
    fn set_model(req: &mut Self::Request, model: &str);
    /// Checks serde cannot express (empty lists, zero counts).
    fn validate(req: &Self::Request) -> Result<(), GatewayError>;
    fn is_stream(req: &Self::Request) -> bool;
    /// Asks the backend for a final usage chunk, which accounting needs;
    /// returns whether the client asked for it too (else it is not forwarded).
    fn request_stream_usage(req: &mut Self::Request) -> bool;
    fn response_usage(resp: &Self::Response) -> Option<&Usage>;
    fn chunk_usage(chunk: &Self::Chunk) -> Option<&Usage>;
    /// A chunk with no choices that only carries usage.
    fn chunk_is_usage_only(chunk: &Self::Chunk) -> bool;
    /// A chunk carrying generated output (text or a tool call): the first one
    /// marks the time to first token.
    fn chunk_has_output(chunk: &Self::Chunk) -> bool;
    /// What cascade checks look at, from a whole answer or a streamed one.
    fn summarize(resp: &Self::Response) -> AnswerSummary;
    fn summarize_chunks(chunks: &[Self::Chunk]) -> AnswerSummary;

    fn call(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<Self::Response, AdapterError>>;
    fn call_stream(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<Chunks<Self::Chunk>, AdapterError>>;
}

pub async fn serve<E: Endpoint>(
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = read_json_body(&parts, body, app.max_body_bytes).await?;
    let request: E::Request = parse_json(&bytes)?;
    E::validate(&request)?;
    let view = complete_view(
        E::view(&request),
        &parts.headers,
        E::hints(&request),
        &app.router,
    )?;
    let encoded = encode_for_routing(app, &view).await;
    let decision = app.decide(&RequestView {
        encoded: &encoded,
        ..view
    })?;
    let (result, served) = dispatch::<E>(app, &decision, request).await;
    let mut response = result.unwrap_or_else(GatewayError::into_response);
    receipts::apply(app, &decision, served, response.headers_mut());
    Ok(response)
}

/// What one backend gave.
enum Answer<E: Endpoint> {
    Whole(E::Response),
    Stream(Chunks<E::Chunk>),
    /// A streamed answer held back for a cascade check.
    Collected(Vec<E::Chunk>),
}

/// Tries the decision's backends in order until one answers. A retryable
/// failure before anything reached the client moves on to the next
/// (fallback); in a cascade, an answer failing a check does too.
async fn dispatch<E: Endpoint>(
    app: &App,
    decision: &Decision,
    request: E::Request,
) -> (Result<Response<Body>, GatewayError>, Served) {
    let cascade = decision.route.and_then(|r| app.router.cascade(r));
    let streaming = E::is_stream(&request);
    let mut request = Some(request);
    let mut served = Served::first_choice(decision);
    let mut last_error = None;
    for (attempt, &backend_index) in decision.targets.iter().enumerate() {
        let is_last = attempt + 1 == decision.targets.len();
        served.backend = backend_index;
        if attempt > 0 && served.reason != Reason::CascadeEscalated {
            served.reason = Reason::Fallback;
        }
        let admission = match app.admit(backend_index) {
            Ok(admission) => admission,
            Err(err) if !is_last => {
                last_error = Some(err);
                continue;
            }
            Err(err) => return (Err(err), served),
        };
        let backend = &app.backends[backend_index];
        // Clone only when another backend may need the request.
        let mut req = match (is_last, &request) {
            (false, Some(r)) => r.clone(),
            _ => match request.take() {
                Some(r) => r,
                None => break,
            },
        };
        E::set_model(&mut req, &backend.upstream_model);
        let route = decision.route.map(|r| app.router.route_name(r));
        let mut record = RequestRecord::new(E::NAME, route, served.reason, backend);
        let client_wants_usage = streaming && E::request_stream_usage(&mut req);
        let checked = cascade.filter(|_| !is_last);
        let answer = match (streaming, checked) {
            (false, _) => E::call(&*backend.provider, req)
                .await
                .map(Answer::<E>::Whole),
            (true, None) => E::call_stream(&*backend.provider, req)
                .await
                .map(Answer::Stream),
            (true, Some(_)) => match E::call_stream(&*backend.provider, req).await {
                Ok(chunks) => collect(chunks).await.map(Answer::Collected),
                Err(err) => Err(err),
            },
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => {
                let err = GatewayError::from(err);
                record.finish(err.kind());
                let retry = matches!(&err, GatewayError::Upstream(e) if e.retryable());
                if retry && !is_last {
                    last_error = Some(err);
                    continue;
                }
                return (Err(err), served);
            }
        };
        if let Some((checks, min_mean_logprob)) = checked {
            let summary = match &answer {
                Answer::Whole(resp) => E::summarize(resp),
                Answer::Collected(chunks) => E::summarize_chunks(chunks),
                Answer::Stream(_) => AnswerSummary::default(),
            };
            if let Some(failed) = failed_check(&summary, checks, min_mean_logprob) {
                tracing::info!(backend = %backend.name, check = failed.name(), "cascade escalates");
                record_answer::<E>(&mut record, &answer);
                record.finish("escalated");
                served.reason = Reason::CascadeEscalated;
                continue;
            }
        }
        let response = match answer {
            Answer::Whole(resp) => {
                record.first_output();
                record.usage(E::response_usage(&resp));
                record.finish("ok");
                json_response(StatusCode::OK, &resp)
            }
            Answer::Stream(chunks) => sse_response(stream::encode::<E>(
                chunks,
                client_wants_usage,
                record,
                admission,
            )),
            Answer::Collected(chunks) => {
                let replay = futures_util::stream::iter(chunks.into_iter().map(Ok)).boxed();
                sse_response(stream::encode::<E>(
                    replay,
                    client_wants_usage,
                    record,
                    admission,
                ))
            }
        };
        return (Ok(response), served);
    }
    let err = last_error.unwrap_or(GatewayError::Internal {
        message: "no backend to try".into(),
    });
    (Err(err), served)
}

/// Reads a whole stream, for a cascade to check before anything is sent.
async fn collect<C>(mut chunks: Chunks<C>) -> Result<Vec<C>, AdapterError> {
    let mut all = Vec::new();
    while let Some(chunk) = chunks.next().await {
        all.push(chunk?);
    }
    Ok(all)
}

fn record_answer<E: Endpoint>(record: &mut RequestRecord, answer: &Answer<E>) {
    record.first_output();
    match answer {
        Answer::Whole(resp) => record.usage(E::response_usage(resp)),
        Answer::Collected(chunks) => chunks.iter().for_each(|c| record.usage(E::chunk_usage(c))),
        Answer::Stream(_) => {}
    }
}
