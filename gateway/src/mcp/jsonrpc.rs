//! JSON-RPC 2.0 as MCP uses it: what a message is, and the errors.

use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// A tool server that did not answer in time, or is not running.
pub const SERVER_UNAVAILABLE: i64 = -32001;
/// A call its caller cancelled (the code LSP gives one; MCP sends no
/// answer at all, but an HTTP request needs one, which nobody reads).
pub const REQUEST_CANCELLED: i64 = -32800;

/// One message of a body, by what it asks of the receiver.
#[derive(Debug)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// Nothing to answer (`initialized`, `cancelled`).
    Notification {
        method: String,
        params: Value,
    },
    /// A response to something the receiver asked: the gateway asks its
    /// callers nothing, so there is nothing to do with one.
    Response,
    Invalid {
        id: Value,
        why: &'static str,
    },
}

impl Message {
    pub fn read(value: Value) -> Message {
        let Value::Object(mut object) = value else {
            return Message::Invalid {
                id: Value::Null,
                why: "a message is a JSON object",
            };
        };
        let id = object.remove("id");
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Message::Invalid {
                id: id.unwrap_or(Value::Null),
                why: "`jsonrpc` must be \"2.0\"",
            };
        }
        match (object.remove("method"), id) {
            (Some(Value::String(method)), Some(id)) if id.is_string() || id.is_number() => {
                let params = object.remove("params").unwrap_or(Value::Null);
                Message::Request { id, method, params }
            }
            (Some(Value::String(_)), Some(_)) => Message::Invalid {
                id: Value::Null,
                why: "a request's `id` is a string or a number",
            },
            (Some(Value::String(method)), None) => Message::Notification {
                method,
                params: object.remove("params").unwrap_or(Value::Null),
            },
            (Some(_), id) => Message::Invalid {
                id: id.unwrap_or(Value::Null),
                why: "`method` is a string",
            },
            (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
                Message::Response
            }
            (None, id) => Message::Invalid {
                id: id.unwrap_or(Value::Null),
                why: "a message has a `method`, or a `result` or `error`",
            },
        }
    }
}

/// The answer to a request a server sent the gateway (`message` has a
/// `method` and an `id`): `ping` is answered, as MCP requires; the gateway
/// declares no client capabilities, so nothing else is asked of it.
pub fn answer_server_request(message: &Value) -> Option<Value> {
    let id = message.get("id")?;
    Some(match message.get("method")?.as_str() {
        Some("ping") => result(id, json!({})),
        _ => error(
            id,
            METHOD_NOT_FOUND,
            "the gateway takes no requests from its servers",
        ),
    })
}

/// Tells a server that request `id`'s answer is no longer wanted: the
/// gateway's caller stopped waiting for it.
pub fn cancelled(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": id, "reason": "the gateway's caller stopped waiting"}})
}

pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

pub fn request(id: u64, method: &str, params: &Value) -> Value {
    let mut out = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if !params.is_null() {
        out["params"] = params.clone();
    }
    out
}

pub fn notification(method: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": method})
}

/// A failure to get an answer from an upstream server.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamError {
    /// The server answered with a JSON-RPC error: passed on as it is.
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// It could not be reached, or it is not running (fixed words).
    Unavailable(String),
    /// Its answer was not MCP, or was too large (fixed words).
    Protocol(String),
    /// It went away during the call.
    Gone,
    /// The caller cancelled the call.
    Cancelled,
}

impl UpstreamError {
    /// The JSON-RPC error object this failure is reported as.
    pub fn to_error(&self) -> Value {
        match self {
            UpstreamError::Rpc {
                code,
                message,
                data,
            } => {
                let mut error = json!({"code": code, "message": message});
                if let Some(data) = data {
                    error["data"] = data.clone();
                }
                error
            }
            UpstreamError::Unavailable(why) => json!({"code": SERVER_UNAVAILABLE, "message": why}),
            UpstreamError::Protocol(why) => json!({"code": INTERNAL_ERROR, "message": why}),
            UpstreamError::Gone => {
                json!({"code": SERVER_UNAVAILABLE, "message": "the tool server went away during the call"})
            }
            UpstreamError::Cancelled => {
                json!({"code": REQUEST_CANCELLED, "message": "the call was cancelled"})
            }
        }
    }

    /// Reads a JSON-RPC response: its result, or its error.
    pub fn from_response(mut response: Value) -> Result<Value, UpstreamError> {
        if let Some(error) = response.get_mut("error").map(Value::take) {
            return Err(UpstreamError::Rpc {
                code: error["code"].as_i64().unwrap_or(INTERNAL_ERROR),
                message: error["message"].as_str().unwrap_or("error").to_owned(),
                data: error.get("data").cloned(),
            });
        }
        response.get_mut("result").map(Value::take).ok_or_else(|| {
            UpstreamError::Protocol("an answer with neither result nor error".into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart_and_bad_ones_named() {
        let read = |v: Value| Message::read(v);
        assert!(matches!(
            read(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            Message::Request { method, .. } if method == "ping"
        ));
        assert!(matches!(
            read(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})),
            Message::Notification { method, params } if method == "notifications/cancelled" && params["requestId"] == 3
        ));
        assert!(matches!(
            read(json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            Message::Response
        ));
        for bad in [
            json!([1]),
            json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
            json!({"jsonrpc": "2.0", "id": 1}),
        ] {
            assert!(
                matches!(read(bad.clone()), Message::Invalid { .. }),
                "{bad}"
            );
        }
        assert_eq!(
            UpstreamError::from_response(
                json!({"id": 1, "error": {"code": -32602, "message": "no"}})
            ),
            Err(UpstreamError::Rpc {
                code: -32602,
                message: "no".into(),
                data: None
            })
        );
    }
}
