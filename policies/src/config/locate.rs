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
    // A list item's line, whose first key (`- name: a`) is on it.
    let mut item_line = None;
    for segment in path {
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            let Ok(index) = segment.parse::<usize>() else {
                break;
            };
            match nth_item(
                &lines,
                from + usize::from(found.is_some()),
                min_indent,
                index,
            ) {
                Some((i, indent)) => {
                    found = Some(i + 1);
                    from = i;
                    min_indent = indent + 1;
                    item_line = Some(i);
                    continue;
                }
                None => break,
            }
        }
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(from) {
            let body = line.trim_start();
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            let indent = line.len() - body.len();
            if item_line == Some(i) {
                let first = body.trim_start_matches("- ");
                if first.starts_with(&format!("{segment}:")) {
                    hit = Some((i, indent + 1));
                    break;
                }
                continue;
            }
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
        item_line = None;
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

/// The line and indent of the `index`th `- ` item of the block list that
/// starts at or after line `from`, indented at least `min_indent`.
fn nth_item(
    lines: &[&str],
    from: usize,
    min_indent: usize,
    index: usize,
) -> Option<(usize, usize)> {
    let mut item_indent = None;
    let mut seen = 0;
    for (i, line) in lines.iter().enumerate().skip(from) {
        let body = line.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indent = line.len() - body.len();
        if indent < min_indent {
            break;
        }
        if !body.starts_with("- ") && body != "-" {
            continue;
        }
        match item_indent {
            None => item_indent = Some(indent),
            Some(at) if at != indent => continue,
            Some(_) => {}
        }
        if seen == index {
            return Some((i, indent));
        }
        seen += 1;
    }
    None
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
    fn follows_list_items() {
        let text = "auth:\n  keys:\n    - name: a\n      hash: x\n    - name: b\n      hash: y\n      budget: {daily_usd: -1}\n";
        assert_eq!(line_of(text, &["auth", "keys", "0", "name"]), Some(3));
        assert_eq!(line_of(text, &["auth", "keys", "0", "hash"]), Some(4));
        assert_eq!(line_of(text, &["auth", "keys", "1", "hash"]), Some(6));
        assert_eq!(
            line_of(text, &["auth", "keys", "1", "budget", "daily_usd"]),
            Some(7)
        );
        assert_eq!(line_of(text, &["auth", "keys", "1"]), Some(5));
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
