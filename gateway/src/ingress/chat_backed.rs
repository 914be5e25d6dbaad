//! Endpoints that are chat completions in another dialect (Anthropic
//! Messages, OpenAI Responses): everything but decoding, encoding and the
//! dialect is the chat endpoint's.

/// The `Endpoint` methods a chat-backed endpoint takes from `Chat` as they are.
macro_rules! chat_backed {
    () => {
        fn view(req: &ChatRequest) -> RequestView<'_> {
            Chat::view(req)
        }
        fn hints(req: &ChatRequest) -> BodyHints<'_> {
            Chat::hints(req)
        }
        fn set_model(req: &mut ChatRequest, model: &str) {
            Chat::set_model(req, model);
        }
        fn body_extra(req: &mut ChatRequest) -> Option<&mut Extra> {
            Chat::body_extra(req)
        }
        fn prefix_chain(req: &ChatRequest) -> Option<switchyard_router::prefix::PrefixChain> {
            Chat::prefix_chain(req)
        }
        fn model_name(req: &ChatRequest) -> &str {
            Chat::model_name(req)
        }
        fn validate(req: &ChatRequest) -> Result<(), GatewayError> {
            Chat::validate(req)
        }
        fn is_stream(req: &ChatRequest) -> bool {
            Chat::is_stream(req)
        }
        fn request_stream_usage(req: &mut ChatRequest) -> bool {
            Chat::request_stream_usage(req)
        }
        fn response_usage(resp: &ChatResponse) -> Option<&Usage> {
            Chat::response_usage(resp)
        }
        fn chunk_usage(chunk: &ChatChunk) -> Option<&Usage> {
            Chat::chunk_usage(chunk)
        }
        fn chunk_is_usage_only(chunk: &ChatChunk) -> bool {
            Chat::chunk_is_usage_only(chunk)
        }
        fn chunk_has_output(chunk: &ChatChunk) -> bool {
            Chat::chunk_has_output(chunk)
        }
        fn prompt_for_count(req: &ChatRequest) -> (String, usize) {
            Chat::prompt_for_count(req)
        }
        fn output_text(resp: &ChatResponse) -> String {
            Chat::output_text(resp)
        }
        fn chunk_output(chunk: &ChatChunk, out: &mut String) {
            Chat::chunk_output(chunk, out);
        }
        fn response_timings(resp: &ChatResponse) -> Option<&Timings> {
            Chat::response_timings(resp)
        }
        fn chunk_timings(chunk: &ChatChunk) -> Option<&Timings> {
            Chat::chunk_timings(chunk)
        }
        fn answer_meta(resp: &ChatResponse, meta: &mut crate::telemetry::AnswerMeta) {
            Chat::answer_meta(resp, meta);
        }
        fn chunk_meta(chunk: &ChatChunk, meta: &mut crate::telemetry::AnswerMeta) {
            Chat::chunk_meta(chunk, meta);
        }
        fn sampling(req: &ChatRequest) -> (Option<f64>, Option<f64>) {
            Chat::sampling(req)
        }
        fn summarize(resp: &ChatResponse) -> AnswerSummary {
            Chat::summarize(resp)
        }
        fn summarize_chunks(chunks: &[ChatChunk]) -> AnswerSummary {
            Chat::summarize_chunks(chunks)
        }
        fn call(
            provider: &dyn Provider,
            req: ChatRequest,
        ) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
            Chat::call(provider, req)
        }
        fn call_stream(
            provider: &dyn Provider,
            req: ChatRequest,
        ) -> BoxFuture<'_, Result<Chunks<ChatChunk>, AdapterError>> {
            Chat::call_stream(provider, req)
        }
    };
}

pub(crate) use chat_backed;
