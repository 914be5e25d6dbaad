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

/// The request's JSON body, as serde_json would write it.
pub(crate) fn chat_request_json(request: &ChatRequest) -> Result<Bytes, AdapterError> {
    // Sized for a typical chat request, so writing it does not regrow.
    let mut out = Vec::with_capacity(1024);
    write_chat_request(&mut out, request).map_err(|err| AdapterError::Internal {
        message: err.to_string(),
    })?;
    Ok(Bytes::from(out))
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
    if let Some(stream) = stream {
        key(out, "stream");
        boolean(out, *stream);
    }
    by_serde(out, "stream_options", stream_options.as_ref())?;
    if let Some(limit) = max_tokens {
        key(out, "max_tokens");
        unsigned(out, u64::from(*limit));
    }
    if let Some(limit) = max_completion_tokens {
        key(out, "max_completion_tokens");
        unsigned(out, u64::from(*limit));
    }
    // serde_json's float text (and `null` for what is not finite) is kept
    // by letting serde write it.
    by_serde(out, "temperature", temperature.as_ref())?;
    if let Some(n) = n {
        key(out, "n");
        unsigned(out, u64::from(*n));
    }
    if let Some(seed) = seed {
        key(out, "seed");
        if *seed < 0 {
            out.push(b'-');
        }
        unsigned(out, seed.unsigned_abs());
    }
    by_serde(out, "tools", tools.as_ref())?;
    by_serde(out, "tool_choice", tool_choice.as_ref())?;
    if let Some(parallel) = parallel_tool_calls {
        key(out, "parallel_tool_calls");
        boolean(out, *parallel);
    }
    by_serde(out, "response_format", response_format.as_ref())?;
    if let Some(logprobs) = logprobs {
        key(out, "logprobs");
        boolean(out, *logprobs);
    }
    if let Some(top) = top_logprobs {
        key(out, "top_logprobs");
        unsigned(out, u64::from(*top));
    }
    if let Some(user) = user {
        key(out, "user");
        string(out, user);
    }
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
    if let Some(name) = name {
        key(out, "name");
        string(out, name);
    }
    by_serde(out, "tool_calls", tool_calls.as_ref())?;
    if let Some(id) = tool_call_id {
        key(out, "tool_call_id");
        string(out, id);
    }
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

fn unsigned(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
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
