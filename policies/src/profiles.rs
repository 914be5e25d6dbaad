//! Use-case profiles: latency budgets for what waits on a request (the
//! table in docs/src/routing/profiles.md).

use std::time::Duration;

/// What is waiting on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// A person reading.
    Chat,
    /// A person coding.
    Code,
    /// A person, through many tool calls.
    Agentic,
    /// A person; prefill dominates.
    Rag,
    /// Nobody; cost and reliability matter.
    Unattended,
    /// Nobody; cost per token matters.
    Batch,
}

/// A profile's latency budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Lowest decode speed the waiting party accepts.
    pub min_tokens_per_s: f64,
    /// Longest acceptable wait for the first token; `None` when nobody waits.
    /// For `rag` this is the base, before prefill of uncached prompt tokens.
    pub ttft: Option<Duration>,
}

impl Profile {
    pub const ALL: [Profile; 6] = [
        Profile::Chat,
        Profile::Code,
        Profile::Agentic,
        Profile::Rag,
        Profile::Unattended,
        Profile::Batch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Chat => "chat",
            Profile::Code => "code",
            Profile::Agentic => "agentic",
            Profile::Rag => "rag",
            Profile::Unattended => "unattended",
            Profile::Batch => "batch",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The names, for error messages.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|p| p.name()).collect()
    }

    pub fn budget(self) -> Budget {
        let secs = |s: f64| Some(Duration::from_secs_f64(s));
        match self {
            Profile::Chat => Budget {
                min_tokens_per_s: 20.0,
                ttft: secs(1.0),
            },
            Profile::Code => Budget {
                min_tokens_per_s: 40.0,
                ttft: secs(1.5),
            },
            Profile::Agentic => Budget {
                min_tokens_per_s: 60.0,
                ttft: secs(2.0),
            },
            Profile::Rag => Budget {
                min_tokens_per_s: 10.0,
                ttft: secs(1.0),
            },
            Profile::Unattended => Budget {
                min_tokens_per_s: 1.0,
                ttft: None,
            },
            Profile::Batch => Budget {
                min_tokens_per_s: 0.0,
                ttft: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Profile::ALL {
            assert_eq!(Profile::from_name(p.name()), Some(p));
        }
        assert_eq!(Profile::from_name(" Code "), Some(Profile::Code));
        assert_eq!(Profile::from_name("fast"), None);
    }

    #[test]
    fn people_wait_machines_do_not() {
        assert!(Profile::Chat.budget().ttft.is_some());
        assert!(Profile::Batch.budget().ttft.is_none());
        assert!(
            Profile::Agentic.budget().min_tokens_per_s > Profile::Code.budget().min_tokens_per_s
        );
    }
}
