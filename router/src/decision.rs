//! A routing decision and the vocabulary of its reasons.

use crate::features::Features;

/// Why a request went where it went. Short and stable: it is sent to
/// callers in `x-switchyard-reason` and used as a metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The caller named a backend, not a route.
    Direct,
    /// A weighted split, drawn at random.
    Split,
    /// A weighted split, drawn from the caller's session so a session stays
    /// on one backend and its prefix cache stays warm.
    SplitSticky,
    /// A session's backend was predicted to break the latency budget (its
    /// queue, mostly): another backend of the split that meets it served,
    /// since a warm prefix is worth less than a missed budget.
    StickyMoved,
    /// A session's backend already had more than its weight of the
    /// caller's recent requests on this route: the backend furthest below
    /// its weight served, so a chosen session id never picks a tier.
    StickyShare,
    /// Among the hardest share of recent requests.
    TargetShareHard,
    /// Below the target-share threshold.
    TargetShareEasy,
    /// A rule with conditions matched.
    Rule,
    /// No rule with conditions matched; the route's last rule applied.
    RuleDefault,
    /// The first backend of a cascade answered acceptably.
    Cascade,
    /// A cascade escalated past a backend whose answer failed a check.
    CascadeEscalated,
    /// The chosen backend failed before answering; a fallback answered.
    Fallback,
    /// The caller's cloud budget is spent; a local backend served instead.
    BudgetDowngrade,
    /// The cheapest backend predicted to meet the latency budget.
    WithinBudget,
    /// No backend is predicted to meet the latency budget: the fastest.
    BudgetUnmeetable,
    /// The backend predicted to finish first.
    Fastest,
    /// A hedge (a second backend started because the first was slow to
    /// start) answered first.
    Hedge,
    /// Drafting is off for this prompt class, so the route's backend
    /// without a draft model served it.
    DraftingOff,
    /// The route's choice could not hold the prompt and the requested
    /// output in its context window: another of its backends that can.
    ContextFit,
    /// The learned predictor expects the easy backend to fail: straight to
    /// the hard one.
    LearnedHard,
    /// The learned predictor expects the easy backend to do.
    LearnedEasy,
    /// Expected to fail, but tried on the easy backend anyway (the route's
    /// `explore` share), so the predictor keeps learning what it sends up.
    LearnedExplore,
    /// Not a model call of the caller's: an encoder embedding the request
    /// for a semantic rule, billed to the caller as routing overhead.
    RoutingEncoder,
    /// Not the caller's answer: a sampled copy of the request sent to the
    /// route's shadow candidate, to compare with what served.
    Shadow,
    /// The request holds sensitive data its policy keeps on local tiers:
    /// the cloud backends the strategy chose were passed over.
    Sensitive,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Direct => "direct",
            Reason::Split => "split",
            Reason::SplitSticky => "split-sticky",
            Reason::StickyMoved => "sticky-moved",
            Reason::StickyShare => "sticky-share",
            Reason::TargetShareHard => "target-share-hard",
            Reason::TargetShareEasy => "target-share-easy",
            Reason::Rule => "rule",
            Reason::RuleDefault => "rule-default",
            Reason::Cascade => "cascade",
            Reason::CascadeEscalated => "cascade-escalated",
            Reason::Fallback => "fallback",
            Reason::BudgetDowngrade => "budget-downgrade",
            Reason::WithinBudget => "within-budget",
            Reason::BudgetUnmeetable => "budget-unmeetable",
            Reason::Fastest => "fastest",
            Reason::Hedge => "hedge",
            Reason::DraftingOff => "drafting-off",
            Reason::ContextFit => "context-fit",
            Reason::RoutingEncoder => "routing-encoder",
            Reason::LearnedHard => "learned-hard",
            Reason::LearnedEasy => "learned-easy",
            Reason::LearnedExplore => "learned-explore",
            Reason::Shadow => "shadow",
            Reason::Sensitive => "sensitive",
        }
    }
}

/// Where one request goes and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The route that decided (an index into the router's routes); `None`
    /// when the caller named a backend.
    pub route: Option<usize>,
    /// Backends to try in order (indices into the router's backends): the
    /// choice, then the route's fallbacks. A cascade lists its order here.
    pub targets: Vec<usize>,
    pub reason: Reason,
    /// The rule that matched, for rule routes.
    pub rule: Option<usize>,
    pub features: Features,
    /// The first backend's predicted time to first token (p50), ms.
    pub predicted_ttft_ms: f64,
    /// Prompt tokens that prediction took the first backend to hold
    /// cached, so the call's own bookkeeping need not look them up again.
    pub expected_cached_tokens: u32,
    /// On routes with speculative settings: whether this request drafts.
    pub drafting: Option<bool>,
    /// When the first backend's answer will be checked and the outcome
    /// trains predictors: which, and on what.
    pub learning: Option<Learning>,
    /// The model name the backends are sent, when a wildcard route's `*`
    /// stood for it (else each backend's own `model`).
    pub upstream_model: Option<String>,
    /// The request holds sensitive data its policy keeps on local tiers:
    /// nothing of it may go to any other (a shadow copy included).
    pub local_only: bool,
    /// What the request's sensitive-data policies found and did, for
    /// every call (masking) and record (the kinds) it makes.
    pub sensitive: Option<std::sync::Arc<crate::sensitive::Handling>>,
}

/// What an outcome teaches: the predictors (indices into the router's), the
/// backend whose answer is the label, and the request as they saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Learning {
    pub predictors: Vec<usize>,
    /// An answer of another backend (a context fit or a draft-less
    /// backend moved first) teaches nothing of this one.
    pub backend: usize,
    pub sample: std::sync::Arc<crate::learned::Sample>,
}

impl Decision {
    /// The backend to try first.
    pub fn primary(&self) -> usize {
        self.targets[0]
    }

    /// What `backend`'s answer to this request teaches, when it is the
    /// answer the decision's predictors learn from.
    pub fn lesson(&self, backend: usize) -> Option<&Learning> {
        self.learning.as_ref().filter(|l| l.backend == backend)
    }
}
