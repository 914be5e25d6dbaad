//! HTTP plumbing shared by the gateway and the simulator server: bodies,
//! JSON and SSE responses, reading request bodies within limits.

pub mod after_poll;
pub(crate) mod connection;
mod idle_body;
pub mod multipart;
pub mod redact;
mod request;
pub mod request_id;
pub mod request_span;
mod response;
pub mod sensitive;
pub mod server;
pub mod stack;
pub mod tls;
mod woken;

pub use crate::http::request::{BodyLimits, parse_json, read_json_body, read_upload_body};
pub use crate::http::response::{
    Body, bytes_response, empty_response, json_bytes_response, json_response, sse_response,
};
