//! Attribute names of the spans, as string constants of our own: the
//! semantic-conventions crate marks the GenAI ones experimental and
//! deprecated, and they are still being renamed upstream (these are
//! semantic conventions v1.41's, with `cache_write` as the GenAI
//! repository now spells it).

pub const OPERATION_NAME: &str = "gen_ai.operation.name";
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
pub const REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
pub const REQUEST_TOP_P: &str = "gen_ai.request.top_p";
pub const REQUEST_STREAM: &str = "gen_ai.request.stream";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const RESPONSE_ID: &str = "gen_ai.response.id";
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
pub const USAGE_CACHE_WRITE_INPUT_TOKENS: &str = "gen_ai.usage.cache_write.input_tokens";
pub const USAGE_REASONING_OUTPUT_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
pub const NETWORK_TRANSPORT: &str = "network.transport";
pub const SERVER_ADDRESS: &str = "server.address";
pub const SERVER_PORT: &str = "server.port";
pub const ERROR_TYPE: &str = "error.type";

pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
pub const HTTP_ROUTE: &str = "http.route";
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";

pub const REQUEST_ID: &str = "switchyard.request_id";
pub const ROUTE: &str = "switchyard.route";
pub const STRATEGY: &str = "switchyard.strategy";
pub const BACKEND: &str = "switchyard.backend";
pub const TIER: &str = "switchyard.tier";
pub const REASON: &str = "switchyard.reason";
pub const ROLE: &str = "switchyard.role";
pub const CANDIDATES: &str = "switchyard.candidates";
pub const PROFILE: &str = "switchyard.profile";
pub const PREDICTED_TTFT_MS: &str = "switchyard.predicted_ttft_ms";
pub const EXPECTED_CACHED_TOKENS: &str = "switchyard.expected_cached_tokens";
pub const COST_USD: &str = "switchyard.cost_usd";
pub const COUNTERFACTUAL_USD: &str = "switchyard.counterfactual_usd";
pub const QUEUE_WAIT_MS: &str = "switchyard.queue_wait_ms";
pub const DRAFT_ACCEPTANCE: &str = "switchyard.draft_acceptance";
pub const ESTIMATED_USAGE: &str = "switchyard.usage_estimated";
pub const STATUS: &str = "switchyard.status";
pub const MCP_SERVER: &str = "switchyard.mcp.server";
pub const MCP_CALLER_SESSION_ID: &str = "switchyard.mcp.session_id";
pub const MCP_CALLER_PROTOCOL_VERSION: &str = "switchyard.mcp.protocol_version";
pub const MCP_CALLER_REQUEST_ID: &str = "switchyard.mcp.request_id";
pub const SESSION: &str = "switchyard.session";
