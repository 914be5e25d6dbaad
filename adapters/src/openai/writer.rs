//! Chat requests written as JSON without serde's machinery: byte for byte
//! what `serde_json::to_writer` writes of a [`ChatRequest`], in a fraction
//! of the instructions.
//!
//! serde_json spent about 3,100 instructions writing the overhead
//! benchmark's two-message request for the backend, most of them in its
//! map machinery (a request with `extra` is a map to serde) and in its
//! byte-at-a-time search for characters to escape. Here the fields the
//! types model are written by hand, strings are searched eight bytes at a
//! time, and only values the types leave to serde (tool calls, content
//! parts, settings in `extra`, fractions) are written by serde. The tests
//! hold the output to serde's on common and generated requests.

use bytes::Bytes;
use serde::Serialize;

use super::reader::string_stop;
use crate::error::AdapterError;
use crate::types::{ChatRequest, Content, Extra, Message};
use crate::upstream::json_body;

/// The request's JSON body, as serde_json would write it.
pub(crate) fn chat_request_json(request: &ChatRequest) -> Result<Bytes, AdapterError> {
    json_body(|out| write_chat_request(out, request))
}

fn write_chat_request(out: &mut Vec<u8>, request: &ChatRequest) -> serde_json::Result<()> {
    // Every field named, so a field added to `ChatRequest` is a compile
    // error here until the writer writes it (in declaration order, as
    // serde does).
    let ChatRequest {
        model,
        messages,
        stream,
        stream_options,
        max_tokens,
        max_completion_tokens,
        temperature,
        n,
        seed,
        tools,
        tool_choice,
        parallel_tool_calls,
        response_format,
        logprobs,
        top_logprobs,
        user,
        metadata,
        extra,
        forward_headers: _,
        echo: _,
    } = request;
    out.extend_from_slice(b"{\"model\":");
    string(out, model);
    out.extend_from_slice(b",\"messages\":[");
    for (i, message) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_message(out, message)?;
    }
    out.push(b']');
    optional(out, "stream", *stream, boolean);
    by_serde(out, "stream_options", stream_options.as_ref())?;
    optional(out, "max_tokens", max_tokens.map(u64::from), unsigned);
    let max_completion_tokens = max_completion_tokens.map(u64::from);
    optional(
        out,
        "max_completion_tokens",
        max_completion_tokens,
        unsigned,
    );
    // serde_json's float text (and `null` for what is not finite) is kept
    // by letting serde write it.
    by_serde(out, "temperature", temperature.as_ref())?;
    optional(out, "n", n.map(u64::from), unsigned);
    optional(out, "seed", *seed, signed);
    by_serde(out, "tools", tools.as_ref())?;
    by_serde(out, "tool_choice", tool_choice.as_ref())?;
    optional(out, "parallel_tool_calls", *parallel_tool_calls, boolean);
    by_serde(out, "response_format", response_format.as_ref())?;
    optional(out, "logprobs", *logprobs, boolean);
    optional(out, "top_logprobs", top_logprobs.map(u64::from), unsigned);
    optional(out, "user", user.as_deref(), string);
    by_serde(out, "metadata", metadata.as_ref())?;
    flattened(out, extra)?;
    out.push(b'}');
    Ok(())
}

fn write_message(out: &mut Vec<u8>, message: &Message) -> serde_json::Result<()> {
    // Every field named, as above.
    let Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        extra,
    } = message;
    out.extend_from_slice(b"{\"role\":\"");
    // A role's wire name has nothing to escape.
    out.extend_from_slice(role.as_str().as_bytes());
    out.extend_from_slice(b"\",\"content\":");
    // `content` is written even when absent, as `null`.
    match content {
        None => out.extend_from_slice(b"null"),
        Some(Content::Text(text)) => string(out, text),
        Some(parts @ Content::Parts(_)) => serde_json::to_writer(&mut *out, parts)?,
    }
    optional(out, "name", name.as_deref(), string);
    by_serde(out, "tool_calls", tool_calls.as_ref())?;
    optional(out, "tool_call_id", tool_call_id.as_deref(), string);
    flattened(out, extra)?;
    out.push(b'}');
    Ok(())
}

/// `,"name":` for a field after the first; `name` has nothing to escape.
fn key(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// A field written by `write`, when present.
fn optional<T>(out: &mut Vec<u8>, name: &str, value: Option<T>, write: fn(&mut Vec<u8>, T)) {
    if let Some(value) = value {
        key(out, name);
        write(out, value);
    }
}

/// A field serde writes, when present.
fn by_serde<T: Serialize>(
    out: &mut Vec<u8>,
    name: &str,
    value: Option<&T>,
) -> serde_json::Result<()> {
    if let Some(value) = value {
        key(out, name);
        serde_json::to_writer(&mut *out, value)?;
    }
    Ok(())
}

/// The fields of `extra` as members of the object being written, in the
/// map's order, as `#[serde(flatten)]` writes them.
fn flattened(out: &mut Vec<u8>, extra: &Extra) -> serde_json::Result<()> {
    for (name, value) in extra.iter() {
        out.push(b',');
        string(out, name);
        out.push(b':');
        serde_json::to_writer(&mut *out, value)?;
    }
    Ok(())
}

fn boolean(out: &mut Vec<u8>, value: bool) {
    out.extend_from_slice(if value { b"true" } else { b"false" });
}

fn signed(out: &mut Vec<u8>, value: i64) {
    if value < 0 {
        out.push(b'-');
    }
    unsigned(out, value.unsigned_abs());
}

fn unsigned(out: &mut Vec<u8>, value: u64) {
    let mut buffer = [0; crate::decimal::MAX_DIGITS];
    out.extend_from_slice(crate::decimal::digits(&mut buffer, value));
}

/// A JSON string with serde_json's escapes: `\"`, `\\`, the short forms
/// `\b \f \n \r \t`, and `\u00XX` (lowercase hex) for other control
/// characters; everything else as it is.
fn string(out: &mut Vec<u8>, text: &str) {
    let mut rest = text.as_bytes();
    out.reserve(rest.len() + 2);
    out.push(b'"');
    while let Some(stop) = string_stop(rest) {
        out.extend_from_slice(&rest[..stop]);
        let byte = rest[stop];
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(byte >> 4)]);
                out.push(HEX[usize::from(byte & 0xf)]);
            }
        }
        rest = &rest[stop + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

#[cfg(test)]
mod tests;
