//! The path every model call takes, whatever the endpoint: read, parse,
//! route, admit, call (whole or streamed), answer with receipts.

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_adapters::types::Usage;
use switchyard_adapters::{AdapterError, Provider};

use super::record::RequestRecord;
use super::stream;
use crate::app::App;
use crate::error::GatewayError;
use crate::http::{Body, json_response, parse_json, read_json_body, sse_response};
use crate::receipts;
use crate::routing::{Decision, session_key};

/// One OpenAI-compatible model endpoint that can answer whole or streamed.
pub trait Endpoint {
    /// For logs and metrics.
    const NAME: &'static str;
    type Request: DeserializeOwned + Send + 'static;
    type Response: Serialize + Send + 'static;
    type Chunk: Serialize + Send + 'static;

    fn model(req: &Self::Request) -> &str;
    fn set_model(req: &mut Self::Request, model: &str);
    /// The body's own notion of who is calling (`user`, `metadata.user_id`).
    fn user(req: &Self::Request) -> Option<&str>;
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

    fn call(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<Self::Response, AdapterError>>;
    #[allow(clippy::type_complexity)]
    fn call_stream(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<BoxStream<'static, Result<Self::Chunk, AdapterError>>, AdapterError>>;
}

pub async fn serve<E: Endpoint>(
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = read_json_body(&parts, body, app.max_body_bytes).await?;
    let request: E::Request = parse_json(&bytes)?;
    E::validate(&request)?;
    let session = session_key(&parts.headers, E::user(&request));
    let decision = app.decide(E::model(&request), session.as_deref())?;
    let mut response = dispatch::<E>(app, &decision, request)
        .await
        .unwrap_or_else(GatewayError::into_response);
    receipts::apply(app, &decision, response.headers_mut());
    Ok(response)
}

async fn dispatch<E: Endpoint>(
    app: &App,
    decision: &Decision,
    mut request: E::Request,
) -> Result<Response<Body>, GatewayError> {
    let admission = app.admit(decision.backend)?;
    let backend = &app.backends[decision.backend];
    E::set_model(&mut request, &backend.upstream_model);
    let mut record = RequestRecord::new(E::NAME, decision, backend);
    if E::is_stream(&request) {
        let client_wants_usage = E::request_stream_usage(&mut request);
        match E::call_stream(&*backend.provider, request).await {
            Ok(upstream) => Ok(sse_response(stream::encode::<E>(
                upstream,
                client_wants_usage,
                record,
                admission,
            ))),
            Err(err) => {
                let err = GatewayError::from(err);
                record.finish(err.kind());
                Err(err)
            }
        }
    } else {
        match E::call(&*backend.provider, request).await {
            Ok(response) => {
                record.first_output();
                record.usage(E::response_usage(&response));
                record.finish("ok");
                Ok(json_response(StatusCode::OK, &response))
            }
            Err(err) => {
                let err = GatewayError::from(err);
                record.finish(err.kind());
                Err(err)
            }
        }
    }
}
