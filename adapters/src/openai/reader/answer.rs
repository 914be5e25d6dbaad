//! A whole chat answer.

use super::{Cursor, once, whole};
use crate::types::{ChatResponse, Choice, Content, Extra, Message, Timings, Usage, UsageDetails};

/// `text` read as a chat answer, or `None` where serde must read it (see
/// the module's note); with whether every choice had a `logprobs` key, as
/// [`ChatResponse::with_verbatim_read`] asks.
pub(crate) fn read_answer(text: &str) -> Option<(ChatResponse, bool)> {
    whole(text, Cursor::answer)
}

impl Cursor<'_> {
    fn answer(&mut self) -> Option<(ChatResponse, bool)> {
        let mut every_logprobs_key = true;
        let top = self.top(|c| {
            let (choice, logprobs_key) = c.choice()?;
            every_logprobs_key &= logprobs_key;
            Some(choice)
        })?;
        let answer = ChatResponse {
            id: top.id?,
            object: top.object.unwrap_or_default(),
            created: top.created.unwrap_or_default(),
            model: top.model.unwrap_or_default(),
            choices: top.choices?,
            usage: top.usage.flatten(),
            system_fingerprint: top.fingerprint.flatten(),
            timings: top.timings.flatten(),
            extra: top.extra,
            verbatim: None,
        };
        Some((answer, every_logprobs_key))
    }

    /// A choice, and whether it had a `logprobs` key (null or not).
    fn choice(&mut self) -> Option<(Choice, bool)> {
        let (mut index, mut message, mut finish, mut logprobs) = (None, None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "index" => once(&mut index, c.unsigned_32()),
            "message" => once(&mut message, c.message()),
            "finish_reason" => once(&mut finish, c.string_or_null()),
            "logprobs" => once(&mut logprobs, c.or_null(Self::by_serde)),
            _ => c.extra(&mut extra, key),
        })?;
        let logprobs_key = logprobs.is_some();
        let choice = Choice {
            index: index.unwrap_or_default(),
            message: message?,
            finish_reason: finish.flatten(),
            logprobs: logprobs.flatten(),
            extra,
        };
        Some((choice, logprobs_key))
    }

    pub(super) fn message(&mut self) -> Option<Message> {
        let (mut role, mut content, mut name, mut tool_calls, mut call_id) =
            (None, None, None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "role" => once(&mut role, c.role()),
            "content" => once(&mut content, c.content()),
            "name" => once(&mut name, c.string_or_null()),
            "tool_calls" => once(&mut tool_calls, c.by_serde()),
            "tool_call_id" => once(&mut call_id, c.string_or_null()),
            _ => c.extra(&mut extra, key),
        })?;
        Some(Message {
            role: role?,
            content: content.flatten(),
            name: name.flatten(),
            tool_calls: tool_calls.flatten(),
            tool_call_id: call_id.flatten(),
            extra,
        })
    }

    /// A message's content: text read here, parts by serde.
    fn content(&mut self) -> Option<Option<Content>> {
        match self.peek()? {
            b'"' => self.string().map(|text| Some(Content::Text(text))),
            _ => self.by_serde(),
        }
    }

    pub(super) fn usage(&mut self) -> Option<Usage> {
        let (mut prompt, mut completion, mut total, mut prompt_details, mut completion_details) =
            (None, None, None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "prompt_tokens" => once(&mut prompt, c.unsigned()),
            "completion_tokens" => once(&mut completion, c.unsigned()),
            "total_tokens" => once(&mut total, c.unsigned()),
            "prompt_tokens_details" => once(&mut prompt_details, c.or_null(Self::details)),
            "completion_tokens_details" => once(&mut completion_details, c.or_null(Self::details)),
            _ => c.extra(&mut extra, key),
        })?;
        Some(Usage {
            prompt_tokens: prompt.unwrap_or_default(),
            completion_tokens: completion.unwrap_or_default(),
            total_tokens: total.unwrap_or_default(),
            prompt_tokens_details: prompt_details.flatten(),
            completion_tokens_details: completion_details.flatten(),
            extra,
        })
    }

    fn details(&mut self) -> Option<UsageDetails> {
        let (mut cached, mut reasoning) = (None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "cached_tokens" => once(&mut cached, c.or_null(Self::unsigned)),
            "reasoning_tokens" => once(&mut reasoning, c.or_null(Self::unsigned)),
            _ => c.extra(&mut extra, key),
        })?;
        Some(UsageDetails {
            cached_tokens: cached.flatten(),
            reasoning_tokens: reasoning.flatten(),
            extra,
        })
    }
}

impl Cursor<'_> {
    /// llama.cpp's timings: numbers, each kept as the JSON value it is.
    pub(super) fn timings(&mut self) -> Option<Timings> {
        let mut t = Timings::default();
        // Which fields were read, `null` or not: serde refuses a second.
        let mut read = 0u16;
        self.members(|c, key| {
            let (bit, field) = match key {
                "cache_n" => (0, &mut t.cache_n),
                "prompt_n" => (1, &mut t.prompt_n),
                "prompt_ms" => (2, &mut t.prompt_ms),
                "prompt_per_token_ms" => (3, &mut t.prompt_per_token_ms),
                "prompt_per_second" => (4, &mut t.prompt_per_second),
                "predicted_n" => (5, &mut t.predicted_n),
                "predicted_ms" => (6, &mut t.predicted_ms),
                "predicted_per_token_ms" => (7, &mut t.predicted_per_token_ms),
                "predicted_per_second" => (8, &mut t.predicted_per_second),
                "draft_n" => (9, &mut t.draft_n),
                "draft_n_accepted" => (10, &mut t.draft_n_accepted),
                _ => return c.extra(&mut t.extra, key),
            };
            if read & (1 << bit) != 0 {
                return None;
            }
            read |= 1 << bit;
            *field = c.or_null(Self::value)?;
            Some(())
        })?;
        Some(t)
    }
}
