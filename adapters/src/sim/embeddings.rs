//! Simulated embeddings endpoint.

use std::time::Duration;

use super::embed::{embed, encode};
use super::engine::SimBackend;
use crate::error::AdapterError;
use crate::tokens;
use crate::types::{Embedding, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage};

impl SimBackend {
    pub(super) async fn embedding_response(
        &self,
        req: EmbeddingRequest,
    ) -> Result<EmbeddingResponse, AdapterError> {
        let _slot = self.admit().await?;
        let luck = self.luck()?;
        let texts = req.texts();
        let prompt_tokens: usize = texts.iter().map(|t| tokens::count(t)).sum();
        // Encoders only prefill: no first token, no decode.
        let prefill =
            Duration::from_secs_f64(prompt_tokens as f64 / self.params.prefill_tokens_per_s);
        tokio::time::sleep(SimBackend::scaled(prefill, luck) + luck.stall).await;
        let dimensions = req.dimensions.unwrap_or(self.params.embedding_dimensions);
        let base64 = req.encoding_format.as_deref() == Some("base64");
        let data = texts
            .iter()
            .zip(0..)
            .map(|(text, index)| Embedding {
                object: "embedding".into(),
                index,
                embedding: encode(&embed(text, dimensions), base64),
                extra: Default::default(),
            })
            .collect();
        Ok(EmbeddingResponse {
            object: "list".into(),
            data,
            model: req.model,
            usage: Some(EmbeddingUsage {
                prompt_tokens: prompt_tokens as u64,
                total_tokens: prompt_tokens as u64,
                extra: Default::default(),
            }),
            extra: Default::default(),
        })
    }
}
