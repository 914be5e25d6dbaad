//! The MCP gateway: `/mcp` serves the tools, prompts and resources of the
//! configured MCP servers as one server, each name prefixed with its
//! server's, and records every tool call (its time, outcome and size) in
//! the ledger, in the caller's session.
//!
//! May import: admit (the caller and its key's access), state, ledger,
//! metrics, http, error, route's view (the session headers). Only ingress's `paths` imports it.

pub mod endpoint;
mod http;
mod jsonrpc;
mod pending;
mod progress;
pub mod servers;
pub mod session;
mod sse;
mod stdio;
mod tool_row;

pub use servers::McpServers;
