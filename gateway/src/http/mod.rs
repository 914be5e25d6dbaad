//! HTTP plumbing shared by the gateway and the simulator server: bodies,
//! JSON and SSE responses, reading request bodies within limits.

mod idle_body;
mod request;
pub mod request_id;
mod response;
pub mod server;
pub mod tls;

pub use request::{BodyLimits, parse_json, read_json_body};
pub use response::{Body, json_bytes_response, json_response, sse_response};
