//! The Bedrock runtime client: Converse for whole answers, ConverseStream
//! (AWS event-stream frames) for streams, each request signed with SigV4
//! over the exact bytes sent.

use std::time::SystemTime;

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use serde_json::Value;
use switchyard_policies::BedrockBackend;

use super::credentials::AwsCredentials;
use super::eventstream::{Message as Frame, Parser};
use super::from_converse::{EventsToChunks, chat_from_converse};
use super::sigv4::{self, Keys};
use super::to_converse::converse_request;
use crate::credentials::CredentialStatus;
use crate::error::AdapterError;
use crate::openai::parse_json;
use crate::provider::{ChatStream, Provider};
use crate::types::{ChatChunk, ChatRequest, ChatResponse};
use crate::upstream::{EventDecoder, Framer, Items, Link, Upstream};

const JSON: &str = "application/json";

pub struct BedrockClient {
    upstream: Upstream,
    /// The endpoint's authority as hyper sends it in `Host` (no default
    /// port), which is signed.
    host: String,
    /// A path the endpoint's URL puts before `/model/...` (a proxy's),
    /// which is signed too.
    prefix: String,
    region: String,
    credentials: AwsCredentials,
}

/// `https://bedrock-runtime.{region}.amazonaws.com` unless the config
/// names an endpoint.
pub fn endpoint_for(region: &str) -> String {
    format!("https://bedrock-runtime.{region}.amazonaws.com")
}

impl BedrockClient {
    pub fn new(
        config: &BedrockBackend,
        link: Link<'_>,
        credentials: AwsCredentials,
    ) -> Result<Self, AdapterError> {
        let endpoint = config
            .endpoint
            .clone()
            .unwrap_or_else(|| endpoint_for(&config.region));
        let uri: http::Uri = endpoint.parse().map_err(|err| AdapterError::Internal {
            message: format!("bedrock endpoint {endpoint}: {err}"),
        })?;
        let authority = uri.authority().ok_or_else(|| AdapterError::Internal {
            message: format!("bedrock endpoint {endpoint} has no host"),
        })?;
        let default_port = if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        };
        // As hyper writes `Host`: the port only when it is not the default.
        let host = match authority.port_u16() {
            Some(port) if port != default_port => format!("{}:{port}", authority.host()),
            _ => authority.host().to_owned(),
        };
        Ok(BedrockClient {
            upstream: Upstream::new(&endpoint, Vec::new(), link)?,
            host,
            prefix: uri.path().trim_end_matches('/').to_owned(),
            region: config.region.clone(),
            credentials,
        })
    }

    /// The body and the headers that sign it.
    async fn signed(
        &self,
        path: &str,
        req: &ChatRequest,
    ) -> Result<(Bytes, Vec<(HeaderName, HeaderValue)>), AdapterError> {
        let body = converse_request(req).map_err(|err| AdapterError::InvalidRequest {
            message: err.to_string(),
            param: Some(err.param),
        })?;
        let body = Bytes::from(
            serde_json::to_vec(&body).map_err(|e| AdapterError::Internal {
                message: e.to_string(),
            })?,
        );
        let keys: Keys = self.credentials.keys().await?;
        let signed_path = format!("{}{path}", self.prefix);
        let request = sigv4::Request {
            method: "POST",
            host: &self.host,
            path: &signed_path,
            content_type: JSON,
            body: &body,
        };
        let mut headers = Vec::new();
        for (name, value) in sigv4::sign(&keys, &self.region, &request, SystemTime::now()) {
            let mut value = HeaderValue::from_str(&value).map_err(|_| AdapterError::Internal {
                message: "AWS credentials hold characters a header cannot".into(),
            })?;
            value.set_sensitive(name != "x-amz-date");
            headers.push((HeaderName::from_static(name), value));
        }
        Ok((body, headers))
    }

    fn path(model: &str, method: &str) -> String {
        format!("/model/{}/{method}", sigv4::path_segment(model))
    }
}

/// ConverseStream's frames as chat chunks.
impl EventDecoder<ChatChunk, Frame> for EventsToChunks {
    fn decode(&mut self, frame: Frame, out: &mut Items<ChatChunk>) -> bool {
        match self.on_frame(&frame) {
            Ok((chunks, end)) => {
                out.extend(chunks.into_iter().map(Ok));
                end
            }
            Err(err) => {
                out.push_back(Err(err));
                true
            }
        }
    }
}

impl Framer for Parser {
    type Frame = Frame;

    fn feed(&mut self, data: &[u8], out: &mut Vec<Frame>) -> Result<(), AdapterError> {
        let frames =
            Parser::feed(self, data).map_err(|message| AdapterError::Protocol { message })?;
        out.extend(frames);
        Ok(())
    }

    fn has_partial(&self) -> bool {
        Parser::has_partial(self)
    }
}

impl Provider for BedrockClient {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        async move {
            let path = Self::path(&req.model, "converse");
            let (body, headers) = self.signed(&path, &req).await?;
            let answer = self
                .upstream
                .call_bytes(&path, JSON, body, &headers)
                .await?;
            let answer: Value = parse_json(&answer)?;
            Ok(chat_from_converse(&answer, &req.model))
        }
        .boxed()
    }

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        async move {
            let path = Self::path(&req.model, "converse-stream");
            let (body, headers) = self.signed(&path, &req).await?;
            let framer = Parser::new(self.upstream.max_response_bytes());
            self.upstream
                .stream_bytes(
                    &path,
                    JSON,
                    body,
                    &headers,
                    framer,
                    EventsToChunks::new(&req.model),
                )
                .await
        }
        .boxed()
    }

    fn api(&self) -> &'static str {
        "Bedrock's Converse API"
    }

    fn credentials(&self) -> Option<CredentialStatus> {
        self.credentials.status()
    }
}
