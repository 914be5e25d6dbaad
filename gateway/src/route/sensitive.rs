//! Sensitive data and the routing decision: the policies that apply to a
//! request (its route's, its key's team's, its key's `sensitive:`) are
//! checked against what the router's detectors find in its texts, before
//! anything is routed (so a routing encoder never reads what a policy keeps
//! in), and the strictest action whose kinds were found wins: refuse (a 400
//! naming the kinds, never the values), local_only (only local backends may
//! serve; none able, the same refusal), mask (values replaced by
//! placeholders for any backend that is not local, restored in the
//! answer: `dispatch::masking`), allow (served as routed, the kinds
//! recorded). A request under no policy is not scanned.

use std::sync::Arc;

use http::HeaderValue;
use switchyard_policies::{SensitiveAction, SensitivePolicy};
use switchyard_router::sensitive::{Handling, Kind, MAX_SCAN_BYTES, Masker, scan_parts};
use switchyard_router::{Decision, Reason};

use crate::admit::access::Caller;
use crate::dispatch::endpoint::Call;
use crate::error::GatewayError;
use crate::state::app::App;

/// The receipt naming the kinds found (`x-switchyard-sensitive`).
pub const SENSITIVE_HEADER: http::HeaderName =
    http::HeaderName::from_static("x-switchyard-sensitive");

/// What a request's policies make of it.
pub struct Assessment {
    pub handling: Arc<Handling>,
    /// The receipt's value: the kinds acted on.
    pub receipt: Option<HeaderValue>,
}

impl Assessment {
    /// The same finding, kept on local backends: for a request whose
    /// body goes on untranslated and so cannot be masked.
    pub fn kept_local(self) -> Assessment {
        if self.handling.action != SensitiveAction::Mask {
            return self;
        }
        Assessment {
            handling: Arc::new(Handling {
                kinds: self.handling.kinds.clone(),
                action: SensitiveAction::LocalOnly,
                masker: self.handling.masker.clone(),
            }),
            receipt: self.receipt,
        }
    }
}

/// The policies that apply to a request on `route` (its name, from
/// [`App::route_of`]) from `caller`.
fn policies<'a>(
    app: &'a App,
    caller: Option<&'a Caller>,
    route: Option<&str>,
) -> Vec<&'a SensitivePolicy> {
    let route = route
        .and_then(|name| app.config.routes.get(name))
        .and_then(|route| route.sensitive.as_ref());
    let key = caller.and_then(|c| c.key.sensitive.as_ref());
    let team = caller
        .and_then(|c| c.key.team.as_deref())
        .and_then(|team| app.config.auth.teams.iter().find(|t| t.name == team))
        .and_then(|team| team.sensitive.as_ref());
    [route, team, key].into_iter().flatten().collect()
}

/// [`assess`] for a request about to be served: what was acted on is
/// counted (`switchyard_sensitive_requests_total`), refusals included.
pub fn assess_request<R: Call>(
    app: &App,
    caller: Option<&Caller>,
    route: Option<&str>,
    request: &R,
) -> Result<Option<Assessment>, GatewayError> {
    let assessed = assess(app, caller, route, request);
    let counted = match &assessed {
        Ok(Some(a)) => Some((a.handling.kinds.as_str(), a.handling.action)),
        Err(GatewayError::SensitiveData { kinds, action, .. }) => Some((kinds.as_str(), *action)),
        _ => None,
    };
    if let Some((kinds, action)) = counted {
        let kinds: Vec<Kind> = kinds.split(',').filter_map(Kind::from_name).collect();
        app.metrics.sensitive_found(&kinds, action.as_str());
    }
    assessed
}

/// Scans `request` (on `route`) when a policy applies: `None` when none
/// applies or none found a kind it detects; a refusal when the strictest
/// says so.
pub fn assess<R: Call>(
    app: &App,
    caller: Option<&Caller>,
    route: Option<&str>,
    request: &R,
) -> Result<Option<Assessment>, GatewayError> {
    let policies = policies(app, caller, route);
    if policies.is_empty() {
        return Ok(None);
    }
    let texts = request.prompt_texts();
    let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    // Past the scan's limit a text's tail would go out unread: a request
    // that large is refused under a policy (the body limit keeps this
    // from happening unless it was raised past 16 MiB).
    if texts.iter().map(|t| t.len()).sum::<usize>() > MAX_SCAN_BYTES {
        return Err(GatewayError::BodyTooLarge {
            limit: MAX_SCAN_BYTES,
        });
    }
    let found = scan_parts(&texts);
    let mut acted: Vec<Kind> = Vec::new();
    let mut action = None;
    for policy in &policies {
        let hits = found
            .iter()
            .map(|f| f.kind)
            .filter(|k| policy.detect.contains(&k.as_str()));
        let before = acted.len();
        acted.extend(hits);
        if acted.len() > before {
            action = action.max(Some(policy.action));
        }
    }
    let Some(mut action) = action else {
        return Ok(None);
    };
    acted.sort();
    acted.dedup();
    let kinds: Vec<&str> = acted.iter().map(|k| k.as_str()).collect();
    let kinds = kinds.join(",");
    if action == SensitiveAction::Refuse {
        return Err(refused(&kinds, action, "that its policy refuses"));
    }
    // A request whose texts cannot all be masked (a passthrough's body)
    // stays local instead.
    if action == SensitiveAction::Mask && !R::MASKABLE {
        action = SensitiveAction::LocalOnly;
    }
    // Kept local, values are not masked for the calls (none leaves), but
    // still in what the gateway writes of the request (a backend's error
    // in the ledger, a span's content).
    let masker = matches!(action, SensitiveAction::Mask | SensitiveAction::LocalOnly)
        .then(|| Arc::new(Masker::new(&texts, &found, &acted)));
    Ok(Some(Assessment {
        receipt: HeaderValue::from_str(&kinds).ok(),
        handling: Arc::new(Handling {
            kinds,
            action,
            masker,
        }),
    }))
}

fn refused(kinds: &str, action: SensitiveAction, why: &str) -> GatewayError {
    GatewayError::SensitiveData {
        kinds: kinds.to_owned(),
        action,
        message: format!("this request holds sensitive data ({kinds}) {why}"),
    }
}

/// Holds `decision` to the assessment: local_only keeps only local
/// backends among its targets (refused when none is left); every action
/// rides on the decision to the calls and rows it makes.
pub fn enforce(
    app: &App,
    assessment: &Assessment,
    decision: &mut Decision,
) -> Result<(), GatewayError> {
    let handling = &assessment.handling;
    if handling.action == SensitiveAction::LocalOnly {
        let before = decision.targets.len();
        decision.targets.retain(|&t| app.backends[t].local);
        if decision.targets.is_empty() {
            return Err(refused(
                &handling.kinds,
                handling.action,
                "that must stay on local backends, and none of this route's can serve it",
            ));
        }
        decision.local_only = true;
        if decision.targets.len() != before {
            decision.reason = Reason::Sensitive;
        }
    }
    decision.sensitive = Some(handling.clone());
    Ok(())
}

/// Whether a routing encoder may read the request's text, and as what:
/// `None` to skip it (its rules do not match), the text masked when the
/// policy masks, as it is otherwise.
pub fn for_encoder(
    app: &App,
    handling: Option<&Handling>,
    encoder: usize,
    text: &str,
) -> Option<String> {
    let mut text = text.to_owned();
    if let Some(handling) = handling.filter(|_| !app.backends[encoder].local) {
        match handling.action {
            SensitiveAction::LocalOnly | SensitiveAction::Refuse => return None,
            SensitiveAction::Mask => {
                if let Some(masker) = &handling.masker {
                    masker.mask(&mut text);
                }
            }
            SensitiveAction::Allow => {}
        }
    }
    Some(text)
}
