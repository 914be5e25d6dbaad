//! The OpenAI Responses dialect, translated to and from canonical chat for
//! backends that speak only chat completions: requests, whole responses,
//! and the `response.*` event stream.

mod echo;
mod from_chat;
mod stream;
mod to_chat;

pub use echo::Echo;
pub use from_chat::response_from_chat;
pub use stream::ResponseStream;
pub use to_chat::chat_from_responses;
