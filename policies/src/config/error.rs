use std::fmt;

/// A configuration problem, located as precisely as the text allows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ConfigError {
    /// The file (or `<embedded default>`).
    pub source_name: String,
    /// Dotted field path such as `backends.small.sim.jitter`; empty when the
    /// problem is the document as a whole.
    pub path: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source_name)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.path.is_empty() {
            write!(f, ": `{}`", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}
