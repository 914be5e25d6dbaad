//! Finds the line of a field path in YAML text, so validation errors (found
//! after parsing, when the parser's positions are gone) can still name a line.

/// Returns the 1-based line where the last segment of `path` is defined,
/// following the segments in order through nested block mappings. Flow style
/// (`{a: 1}`) is matched by key on the same line. Returns the deepest line
/// found when a later segment is absent (e.g. a missing field).
pub fn line_of(text: &str, path: &[&str]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut from = 0;
    let mut min_indent = 0;
    let mut found = None;
    for segment in path {
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(from) {
            let body = line.trim_start();
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            let indent = line.len() - body.len();
            let same_line_as_parent = found.is_some() && i == from;
            if same_line_as_parent {
                // Only a flow mapping can hold the child on its parent's line.
                if body.contains(&format!("{{{segment}:"))
                    || body.contains(&format!(", {segment}:"))
                {
                    hit = Some((i, indent + 1));
                    break;
                }
                continue;
            }
            if indent < min_indent {
                break; // left the enclosing block
            }
            let body = body.trim_start_matches("- ");
            let block_key = body.starts_with(&format!("{segment}:"))
                || body.starts_with(&format!("\"{segment}\":"));
            let flow_key =
                body.contains(&format!("{{{segment}:")) || body.contains(&format!(" {segment}:"));
            if block_key || flow_key {
                hit = Some((i, indent + 1));
                break;
            }
        }
        match hit {
            Some((i, indent)) => {
                found = Some(i + 1);
                from = i;
                min_indent = indent;
            }
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::line_of;

    const TEXT: &str = "server:\n  listen: x\nbackends:\n  small:\n    tier: small\n    sim: {jitter: 2}\n  big:\n    tier: cloud\n";

    #[test]
    fn follows_nested_keys() {
        assert_eq!(line_of(TEXT, &["backends", "big", "tier"]), Some(8));
        assert_eq!(line_of(TEXT, &["backends", "small", "tier"]), Some(5));
    }

    #[test]
    fn finds_flow_keys() {
        assert_eq!(
            line_of(TEXT, &["backends", "small", "sim", "jitter"]),
            Some(6)
        );
    }

    #[test]
    fn missing_segment_gives_deepest_found() {
        assert_eq!(line_of(TEXT, &["backends", "big", "openai"]), Some(7));
        assert_eq!(line_of(TEXT, &["routes"]), None);
    }
}
