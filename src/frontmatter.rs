//! The `---` block at the top of a Markdown prompt file (custom slash
//! commands, SKILL.md): `key: value` lines, values optionally quoted.
//! Nothing nested, no lists: that is all these files use, so no YAML
//! parser is needed. A file without the block is all body.

/// The fields of the block (keys lower-cased, in order) and the body after it.
pub fn split(text: &str) -> (Vec<(String, String)>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (Vec::new(), text);
    };
    let mut fields = Vec::new();
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim_end() == "---" {
            return (fields, &rest[at..]);
        }
        if let Some((k, v)) = line.split_once(':') {
            let k = k.trim();
            if !k.is_empty() && !k.starts_with('#') && !line.starts_with([' ', '\t']) {
                fields.push((k.to_ascii_lowercase(), unquote(v.trim()).to_string()));
            }
        }
    }
    // No closing line: not a frontmatter block after all.
    (Vec::new(), text)
}

/// The value of `key`, if the block has it.
pub fn get<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_body_are_split_and_a_file_without_a_block_is_all_body() {
        let (f, body) =
            split("---\nname: review\ndescription: \"Check a diff: carefully\"\n---\nBody $1\n");
        assert_eq!(get(&f, "name"), Some("review"));
        assert_eq!(get(&f, "description"), Some("Check a diff: carefully"));
        assert_eq!(body, "Body $1\n");
        let (f, body) = split("just text\n---\n");
        assert!(f.is_empty());
        assert_eq!(body, "just text\n---\n");
        let (f, body) = split("---\nname: x\nno end");
        assert!(f.is_empty());
        assert_eq!(body, "---\nname: x\nno end");
    }
}
