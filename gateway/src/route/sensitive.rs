//! Sensitive data and the routing decision: the policies that apply to a
//! request (its route's, its key's team's, its key's `sensitive:`) are
//! checked against what the router's detectors find in its prompt, and the
//! strictest action whose kinds were found wins: refuse (a 400 naming the
//! kinds, never the values), local_only (only local tiers may serve; none
//! able, the same refusal), allow (served as routed). A request under no
//! policy is not scanned.

use http::HeaderValue;
use switchyard_policies::{SensitiveAction, SensitivePolicy};
use switchyard_router::sensitive::{Kind, scan};
use switchyard_router::{Decision, Reason};

use crate::admit::access::Caller;
use crate::error::GatewayError;
use crate::state::app::App;

/// The receipt naming the kinds found (`x-switchyard-sensitive`).
pub const SENSITIVE_HEADER: http::HeaderName =
    http::HeaderName::from_static("x-switchyard-sensitive");

/// Applies the request's policies to `decision`; `prompt` gives the text
/// to scan (only called when a policy applies). The kinds found that a
/// policy acts on, as the receipt's value, or `None`.
pub fn apply(
    app: &App,
    caller: Option<&Caller>,
    decision: &mut Decision,
    prompt: impl FnOnce() -> String,
) -> Result<Option<HeaderValue>, GatewayError> {
    let route = decision
        .route
        .map(|r| app.router.shared_route_name(r))
        .and_then(|name| app.config.routes.get(&*name))
        .and_then(|route| route.sensitive.as_ref());
    let key = caller.and_then(|c| c.key.sensitive.as_ref());
    let team = caller
        .and_then(|c| c.key.team.as_deref())
        .and_then(|team| app.config.auth.teams.iter().find(|t| t.name == team))
        .and_then(|team| team.sensitive.as_ref());
    let policies: Vec<&SensitivePolicy> = [route, team, key].into_iter().flatten().collect();
    if policies.is_empty() {
        return Ok(None);
    }
    let found: Vec<Kind> = {
        let mut kinds: Vec<Kind> = scan(&prompt()).into_iter().map(|f| f.kind).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    };
    let mut acted: Vec<Kind> = Vec::new();
    let mut action = None;
    for policy in &policies {
        let hits: Vec<Kind> = found
            .iter()
            .copied()
            .filter(|k| policy.detect.contains(&k.as_str()))
            .collect();
        if !hits.is_empty() {
            acted.extend(hits);
            action = action.max(Some(policy.action));
        }
    }
    let Some(action) = action else {
        return Ok(None);
    };
    acted.sort();
    acted.dedup();
    let kinds: Vec<&str> = acted.iter().map(|k| k.as_str()).collect();
    let kinds = kinds.join(",");
    let refused = |why: &str| GatewayError::SensitiveData {
        kinds: kinds.clone(),
        message: format!("this request holds sensitive data ({kinds}) {why}"),
    };
    match action {
        SensitiveAction::Refuse => return Err(refused("that its policy refuses")),
        SensitiveAction::LocalOnly => {
            let before = decision.targets.len();
            decision
                .targets
                .retain(|&t| app.backends[t].tier.is_local());
            if decision.targets.is_empty() {
                return Err(refused(
                    "that must stay on local backends, and none of this route's can serve it",
                ));
            }
            decision.local_only = true;
            if decision.targets.len() != before {
                decision.reason = Reason::Sensitive;
            }
        }
        SensitiveAction::Allow => {}
    }
    Ok(HeaderValue::from_str(&kinds).ok())
}
