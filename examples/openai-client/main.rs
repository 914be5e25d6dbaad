//! A Rust client using async-openai against a running Switchyard gateway:
//! lists models, chats (whole and streamed, with usage) and embeds.
//!
//! ```text
//! cargo run -p switchyard -- serve &                       # embedded default on :8080
//! cargo run -p switchyard-examples --bin openai-client     # or: ... -- http://HOST:PORT/v1
//! ```
#![allow(clippy::print_stdout)] // printing is this example's job

use std::error::Error;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestUserMessageArgs, ChatCompletionStreamOptions,
    CreateChatCompletionRequestArgs,
};
use async_openai::types::embeddings::CreateEmbeddingRequestArgs;
use futures_util::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // The same TLS provider as the gateway's (ring), for https:// gateways.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let base = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:8080/v1".to_owned());
    // Auth is off in the embedded default; a gateway with keys wants one here.
    let key = std::env::var("SWITCHYARD_API_KEY").unwrap_or_else(|_| "unused".to_owned());
    let client = Client::with_config(OpenAIConfig::new().with_api_base(&base).with_api_key(key));

    let models = client.models().list().await?;
    let names: Vec<&str> = models.data.iter().map(|m| m.id.as_str()).collect();
    println!("models: {}", names.join(", "));
    if !names.contains(&"auto") {
        return Err(format!("the gateway at {base} does not serve `auto`").into());
    }

    let question = ChatCompletionRequestUserMessageArgs::default()
        .content("Which tier answers me?")
        .build()?;
    let request = CreateChatCompletionRequestArgs::default()
        .model("auto")
        .messages([question.clone().into()])
        .max_completion_tokens(24u32)
        .build()?;
    let reply = client.chat().create(request).await?;
    let text = reply
        .choices
        .first()
        .and_then(|c| c.message.content.clone())
        .unwrap_or_default();
    println!("chat ({}): {text}", reply.model);

    let request = CreateChatCompletionRequestArgs::default()
        .model("auto")
        .messages([question.into()])
        .stream_options(ChatCompletionStreamOptions {
            include_usage: Some(true),
            ..Default::default()
        })
        .build()?;
    let mut stream = client.chat().create_stream(request).await?;
    let (mut streamed, mut usage) = (String::new(), None);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if let Some(delta) = chunk
            .choices
            .first()
            .and_then(|c| c.delta.content.as_deref())
        {
            streamed.push_str(delta);
        }
        usage = chunk.usage.or(usage);
    }
    let usage = usage.ok_or("the stream carried no usage")?;
    println!("stream: {streamed}");
    println!(
        "stream usage: {} prompt + {} completion tokens",
        usage.prompt_tokens, usage.completion_tokens
    );

    let request = CreateEmbeddingRequestArgs::default()
        .model("small")
        .input("route me")
        .build()?;
    let embedding = client.embeddings().create(request).await?;
    let vector = &embedding.data.first().ok_or("no embedding")?.embedding;
    println!("embedding: {} dimensions", vector.len());
    if streamed.is_empty() || vector.is_empty() {
        return Err("empty answer".into());
    }
    Ok(())
}
