//! The HTTP client for OpenAI-compatible backends.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_policies::{OpenAiBackend, Timeouts};

use super::convert::{parse_json, status_error};
use super::stream::json_events;
use crate::error::{AdapterError, TimeoutPhase};
use crate::provider::{ChatStream, CompletionStream, Provider};
use crate::types::{
    ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, EmbeddingRequest,
    EmbeddingResponse,
};

/// A pooled HTTP/1.1 + HTTP/2 client, HTTPS through rustls.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Builds a pooled client. `TCP_NODELAY` is set: streamed tokens are small
/// writes, and Nagle's algorithm would hold each one back for an ACK.
pub fn http_client(connect_timeout: Duration) -> Result<HttpClient, AdapterError> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.enforce_http(false);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|err| AdapterError::Internal {
            message: format!("TLS setup: {err}"),
        })?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(https))
}

/// One OpenAI-compatible backend.
pub struct OpenAiClient {
    http: HttpClient,
    base_url: String,
    authorization: Option<HeaderValue>,
    timeouts: Timeouts,
}

impl OpenAiClient {
    /// `api_key` is the key itself, already read from the environment.
    pub fn new(
        config: &OpenAiBackend,
        timeouts: Timeouts,
        api_key: Option<&str>,
    ) -> Result<Self, AdapterError> {
        let authorization = api_key
            .map(|key| {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    AdapterError::Internal {
                        message: "the API key holds characters a header cannot".into(),
                    }
                })?;
                value.set_sensitive(true);
                Ok::<_, AdapterError>(value)
            })
            .transpose()?;
        Ok(OpenAiClient {
            http: http_client(timeouts.connect)?,
            base_url: config.base_url.clone(),
            authorization,
            timeouts,
        })
    }

    /// Sends a POST and waits for the response head, within the first-byte
    /// timeout. Error statuses are read and turned into errors here.
    async fn send<B: Serialize>(
        &self,
        path: &str,
        body: &B,
        deadline: Instant,
    ) -> Result<Incoming, AdapterError> {
        let json = serde_json::to_vec(body).map_err(|err| AdapterError::Internal {
            message: err.to_string(),
        })?;
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}{path}", self.base_url))
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(auth) = &self.authorization {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let request =
            request
                .body(Full::new(Bytes::from(json)))
                .map_err(|err| AdapterError::Internal {
                    message: err.to_string(),
                })?;
        let response = tokio::time::timeout_at(deadline.into(), self.http.request(request))
            .await
            .map_err(|_| self.first_byte_timeout())?
            .map_err(|err| client_error(err, self.timeouts.connect))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response.into_body());
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = read_body(response.into_body(), deadline, self.timeouts.first_byte).await?;
        Err(status_error(status.as_u16(), retry_after, &body))
    }

    fn first_byte_timeout(&self) -> AdapterError {
        AdapterError::Timeout {
            phase: TimeoutPhase::FirstByte,
            after: self.timeouts.first_byte,
        }
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, AdapterError> {
        let deadline = Instant::now() + self.timeouts.first_byte;
        let incoming = self.send(path, body, deadline).await?;
        let bytes = read_body(incoming, deadline, self.timeouts.first_byte).await?;
        parse_json(&bytes)
    }

    async fn stream<B: Serialize, T: DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError> {
        let deadline = Instant::now() + self.timeouts.first_byte;
        let incoming = self.send(path, body, deadline).await?;
        Ok(json_events(incoming, self.timeouts.idle))
    }
}

async fn read_body(
    body: Incoming,
    deadline: Instant,
    limit: Duration,
) -> Result<Bytes, AdapterError> {
    tokio::time::timeout_at(deadline.into(), body.collect())
        .await
        .map_err(|_| AdapterError::Timeout {
            phase: TimeoutPhase::FirstByte,
            after: limit,
        })?
        .map(|collected| collected.to_bytes())
        .map_err(|err| AdapterError::Reset {
            message: err.to_string(),
        })
}

/// Connection failures are told apart from a peer that hung up mid-exchange.
fn client_error(err: hyper_util::client::legacy::Error, connect_timeout: Duration) -> AdapterError {
    let message = match std::error::Error::source(&err) {
        Some(source) => format!("{err}: {source}"),
        None => err.to_string(),
    };
    if err.is_connect() && caused_by_timeout(&err) {
        AdapterError::Timeout {
            phase: TimeoutPhase::Connect,
            after: connect_timeout,
        }
    } else if err.is_connect() {
        AdapterError::Connect { message }
    } else {
        AdapterError::Reset { message }
    }
}

/// Whether an I/O timeout is somewhere in the error's chain (the connector's
/// connect timeout surfaces that way).
fn caused_by_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = err.source();
    while let Some(cause) = source {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

impl Provider for OpenAiClient {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        async move { self.call("/chat/completions", &req).await }.boxed()
    }

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        async move { self.stream("/chat/completions", &req).await }.boxed()
    }

    fn completion(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        async move { self.call("/completions", &req).await }.boxed()
    }

    fn completion_stream(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionStream, AdapterError>> {
        async move { self.stream("/completions", &req).await }.boxed()
    }

    fn embeddings(
        &self,
        req: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, AdapterError>> {
        async move { self.call("/embeddings", &req).await }.boxed()
    }
}
