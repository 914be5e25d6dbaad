//! Model name -> backend, with the reason. The selection itself is the
//! router crate's; this module feeds it the request's inputs.

use http::HeaderMap;
use switchyard_router::{Reason, unit_from_key};

use crate::app::{App, ModelTarget};
use crate::error::GatewayError;

/// Where one request goes and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The route that decided; `None` when the caller named a backend.
    pub route: Option<String>,
    pub backend: usize,
    pub reason: Reason,
}

/// Headers that carry a session id, most specific first (Claude Code sends
/// its own).
const SESSION_HEADERS: [&str; 2] = ["x-session-id", "x-claude-code-session-id"];

/// The caller's session: a session header, else the body's `user` or
/// `metadata.user_id`.
pub fn session_key(headers: &HeaderMap, body_user: Option<&str>) -> Option<String> {
    SESSION_HEADERS
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
        .or(body_user)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl App {
    pub fn decide(&self, model: &str, session: Option<&str>) -> Result<Decision, GatewayError> {
        match self.models.get(model) {
            Some(ModelTarget::Backend(index)) => Ok(Decision {
                route: None,
                backend: *index,
                reason: Reason::Direct,
            }),
            Some(ModelTarget::Route { name, split }) => {
                let (unit, reason) = match session {
                    Some(key) => (unit_from_key(key), Reason::SplitSticky),
                    None => (rand::random::<f64>(), Reason::Split),
                };
                Ok(Decision {
                    route: Some(name.clone()),
                    backend: split.pick(unit),
                    reason,
                })
            }
            None => Err(GatewayError::UnknownModel {
                model: model.to_owned(),
                available: self.model_names.clone(),
            }),
        }
    }
}
