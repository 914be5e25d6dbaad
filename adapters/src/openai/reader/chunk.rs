//! A streamed chat chunk.

use super::{Cursor, once, whole};
use std::borrow::Cow;

use crate::types::{CHUNK_OBJECT, ChatChunk, ChunkChoice, Delta, Extra};

/// `text` read as a chat chunk, or `None` where serde must read it (see
/// the module's note).
pub(crate) fn read_chunk(text: &str) -> Option<ChatChunk> {
    whole(text, Cursor::chunk)
}

impl Cursor<'_> {
    fn chunk(&mut self) -> Option<ChatChunk> {
        let top = self.top(Self::chunk_choice)?;
        let spec_fields_sent = top.object.is_some()
            && top.created.is_some()
            && top.model.is_some()
            && top.choices.is_some();
        Some(ChatChunk {
            id: top.id?,
            object: top.object.unwrap_or(Cow::Borrowed(CHUNK_OBJECT)),
            created: top.created.unwrap_or_default(),
            model: top.model.unwrap_or_default(),
            choices: top.choices.unwrap_or_default(),
            usage_sent: top.usage.is_some(),
            usage: top.usage.flatten().map(Box::new),
            system_fingerprint: top.fingerprint.flatten(),
            timings: top.timings.flatten(),
            extra: top.extra,
            verbatim: None,
            spec_fields_sent,
        })
    }

    fn chunk_choice(&mut self) -> Option<ChunkChoice> {
        let (mut index, mut delta, mut finish, mut logprobs) = (None, None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "index" => once(&mut index, c.unsigned_32()),
            "delta" => once(&mut delta, c.delta()),
            "finish_reason" => once(&mut finish, c.string_or_null()),
            "logprobs" => once(&mut logprobs, c.or_null(Self::by_serde)),
            _ => c.extra(&mut extra, key),
        })?;
        let spec_fields_sent = index.is_some() && delta.is_some() && finish.is_some();
        Some(ChunkChoice {
            index: index.unwrap_or_default(),
            delta: delta.unwrap_or_default(),
            finish_reason: finish.flatten(),
            logprobs: logprobs.flatten(),
            extra,
            spec_fields_sent,
        })
    }

    fn delta(&mut self) -> Option<Delta> {
        let (mut role, mut content, mut tool_calls) = (None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "role" => once(&mut role, c.or_null(Self::role)),
            "content" => once(&mut content, c.string_or_null()),
            "tool_calls" => once(&mut tool_calls, c.by_serde()),
            _ => c.extra(&mut extra, key),
        })?;
        Some(Delta {
            role: role.flatten(),
            content: content.flatten(),
            tool_calls: tool_calls.flatten(),
            extra,
        })
    }
}
