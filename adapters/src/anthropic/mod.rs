//! The Anthropic Messages dialect: its wire types and the translation to and
//! from the canonical (OpenAI-shaped) chat types, whole and streamed, so an
//! Anthropic client can be served by any backend.

mod client;
mod from_chat;
mod stream;
mod to_chat;
mod to_chat_response;
mod to_messages;
mod types;

#[cfg(test)]
mod tests;

pub use client::{AnthropicClient, DEFAULT_VERSION};
pub(crate) use from_chat::redacted_thinking;
pub use from_chat::{finish_to_stop_reason, message_from_chat, usage_from_chat};
pub use stream::MessageStream;
pub(crate) use to_chat::untranslatable;
pub use to_chat::{TranslateError, chat_from_messages};
pub use to_chat_response::{
    EventsToChunks, chat_from_message, stop_reason_to_finish, usage_to_chat,
};
pub use to_messages::messages_from_chat;
pub use types::{
    Block, CountTokensRequest, MessagesRequest, MessagesResponse, Usage as MessagesUsage,
};
