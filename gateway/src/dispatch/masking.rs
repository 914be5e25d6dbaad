//! Masking on the way out: a call to a backend that is not local, for a
//! request whose sensitive-data policy masks, sends the request with each
//! value replaced by its placeholder, and the answer it gets back (whole,
//! or chunk by chunk as it streams) has the values restored before anything
//! else (cascade checks, shadow comparisons, the response cache, the
//! caller) reads it. Every backend call goes through [`call_whole`] or
//! [`call_stream`]: first tries, retries, fallbacks, hedges and shadow
//! copies alike.

use std::sync::Arc;

use futures_util::StreamExt;
use switchyard_adapters::types::{ChunkTexts, OutputTexts, PromptTexts, slot_choice};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::sensitive::{Masker, StreamRestorer};

use crate::dispatch::endpoint::{Call, Chunks};
use crate::settle::context::RequestContext;
use crate::state::app::App;

/// The masker a call to `backend` applies: the request's, unless the
/// backend is local.
pub fn for_backend(app: &App, context: &RequestContext, backend: usize) -> Option<Arc<Masker>> {
    context
        .sensitive
        .as_ref()
        .and_then(|s| s.masker.clone())
        .filter(|_| !app.backends[backend].local)
}

/// Calls for a whole answer, masked and restored when `masker` is set.
pub async fn call_whole<R: Call>(
    mut req: R,
    provider: &dyn Provider,
    masker: Option<Arc<Masker>>,
) -> Result<R::Response, AdapterError> {
    let Some(masker) = masker else {
        return req.call(provider).await;
    };
    req.mask_prompt(&masker);
    let mut answer = req.call(provider).await?;
    R::restore_answer(&mut answer, &masker);
    Ok(answer)
}

/// Calls for a stream, masked and restored chunk by chunk when `masker`
/// is set.
pub async fn call_stream<R: Call>(
    mut req: R,
    provider: &dyn Provider,
    masker: Option<Arc<Masker>>,
) -> Result<Chunks<R::Chunk>, AdapterError> {
    let Some(masker) = masker else {
        return req.call_stream(provider).await;
    };
    req.mask_prompt(&masker);
    let chunks = req.call_stream(provider).await?;
    let mut restorer = masker.stream();
    Ok(chunks
        .map(move |chunk| {
            chunk.map(|mut chunk| {
                R::restore_chunk(&mut chunk, &mut restorer);
                chunk
            })
        })
        .boxed())
}

/// Masks every prompt text of `req`.
pub fn mask_prompt<T: PromptTexts>(req: &mut T, masker: &Masker) {
    req.prompt_texts_mut(&mut |text| masker.mask(text));
}

/// Restores every generated text of a whole answer.
pub fn restore_answer<T: OutputTexts>(answer: &mut T, masker: &Masker) {
    answer.output_texts_mut(&mut |text| masker.restore(text));
}

/// Restores a chunk's text fields; a field's text that may start a
/// placeholder waits for the field's next piece, or is sent as it came
/// with the chunk that ends its choice. (A stream cut off before its
/// choices end loses what was held: at most a placeholder's length.)
pub fn restore_chunk<T: ChunkTexts>(chunk: &mut T, restorer: &mut StreamRestorer) {
    chunk.output_fields_mut(&mut |slot, text| *text = restorer.push(slot, text));
    for choice in chunk.ended_choices() {
        for slot in restorer.holding() {
            if slot_choice(slot) == choice
                && let Some(rest) = restorer.finish(slot)
            {
                chunk.append_output(slot, &rest);
            }
        }
    }
}

/// The masking methods of a [`Call`] whose request type walks its texts
/// (`PromptTexts`); `answers` adds restoring, for answers of text
/// (`OutputTexts`, `ChunkTexts`).
macro_rules! maskable {
    () => {
        const MASKABLE: bool = true;
        fn prompt_texts(&self) -> Vec<std::borrow::Cow<'_, str>> {
            switchyard_adapters::types::PromptTexts::prompt_texts(self)
                .into_iter()
                .map(std::borrow::Cow::Borrowed)
                .collect()
        }
        fn mask_prompt(&mut self, masker: &switchyard_router::sensitive::Masker) {
            $crate::dispatch::masking::mask_prompt(self, masker);
        }
    };
    (answers) => {
        $crate::dispatch::masking::maskable!();
        fn restore_answer(
            answer: &mut Self::Response,
            masker: &switchyard_router::sensitive::Masker,
        ) {
            $crate::dispatch::masking::restore_answer(answer, masker);
        }
        fn restore_chunk(
            chunk: &mut Self::Chunk,
            restorer: &mut switchyard_router::sensitive::StreamRestorer,
        ) {
            $crate::dispatch::masking::restore_chunk(chunk, restorer);
        }
    };
}
pub(crate) use maskable;
