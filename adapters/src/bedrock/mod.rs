//! Amazon Bedrock's runtime API: Converse and ConverseStream, signed with
//! SigV4, for any model Bedrock serves (base ids, cross-region inference
//! profiles such as `us.anthropic.claude-...-v1:0`, ARNs), with tools,
//! images, system prompts, reasoning and prompt caching (`cachePoint`).

mod client;
mod credentials;
mod eventstream;
mod from_converse;
pub mod sigv4;
mod to_converse;

pub use client::{BedrockClient, endpoint_for};
pub use credentials::AwsCredentials;
pub use eventstream::{
    Message as EventMessage, Parser as EventStreamParser, encode as encode_event,
};
pub use from_converse::{chat_from_converse, error_of, finish_reason};
pub use to_converse::converse_request;
