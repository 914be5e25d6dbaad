//! The Anthropic Messages dialect: its wire types and the translation to and
//! from the canonical (OpenAI-shaped) chat types, whole and streamed, so an
//! Anthropic client can be served by any backend.

mod from_chat;
mod stream;
mod to_chat;
mod types;

pub use from_chat::{finish_to_stop_reason, message_from_chat, usage_from_chat};
pub use stream::MessageStream;
pub use to_chat::{TranslateError, chat_from_messages};
pub use types::{
    Block, CountTokensRequest, MessagesRequest, MessagesResponse, Usage as MessagesUsage,
};
