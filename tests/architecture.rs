//! Checks on the shape of the source tree that reviews kept finding by hand:
//! no two modules import each other (a circle means a type lives in the
//! wrong place). Parent and child may refer to each other (a parent declares
//! its children); siblings and cousins may not both point at the other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; lib.rs and main.rs the root.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The code of a file without its comments and its `mod tests { … }` (a
/// test module may import anything).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The longest prefix of `path` that is a module of the tree.
fn resolve(modules: &BTreeSet<Module>, path: &[String]) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|p| modules.contains(p))
}

/// Every module each module refers to, through `crate::…` and `super::…`
/// paths, `use` groups included.
fn references(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let crate_path = regex_lite::Regex::new(r"crate((?:::\w+)+)").unwrap();
    let super_path = regex_lite::Regex::new(r"((?:super::)+)((?:\w+::)*\w+)").unwrap();
    let super_group = regex_lite::Regex::new(r"use ((?:super::)+)\{([^}]*)\}").unwrap();
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let code = code_of(&std::fs::read_to_string(file).expect("source"));
        // `super` in a.rs or a/mod.rs is the parent of `a`.
        let up = |n: usize| module[..module.len().saturating_sub(n)].to_vec();
        let mut found = BTreeSet::new();
        for c in crate_path.captures_iter(&code) {
            let path: Vec<String> = c[1].split("::").skip(1).map(String::from).collect();
            found.extend(resolve(&modules, &path));
        }
        for c in super_path.captures_iter(&code) {
            let mut path = up(c[1].matches("super::").count());
            path.extend(c[2].split("::").map(String::from));
            found.extend(resolve(&modules, &path));
        }
        for c in super_group.captures_iter(&code) {
            let base = up(c[1].matches("super::").count());
            for item in c[2].split(',') {
                let item = item.split_whitespace().next().unwrap_or_default();
                if item.is_empty() || item == "self" {
                    continue;
                }
                let mut path = base.clone();
                path.extend(item.split("::").map(String::from));
                found.extend(resolve(&modules, &path));
            }
        }
        found.remove(&module);
        out.entry(module).or_default().extend(found);
    }
    out
}

#[test]
fn no_two_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let refs = references(&src);
    assert!(
        refs.len() > 50,
        "the walk found only {} modules",
        refs.len()
    );
    let mut circles = Vec::new();
    for (a, targets) in &refs {
        for b in targets {
            let nested = a.starts_with(b) || b.starts_with(a);
            if a < b && !nested && refs.get(b).is_some_and(|t| t.contains(a)) {
                circles.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "modules that import each other (move the shared item to where it belongs):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_check_sees_a_circle() {
    // The walk itself, on a tree made for it: a <-> b is a circle.
    let dir = std::env::temp_dir().join(format!("buddy-arch-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("x")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod x;\n").unwrap();
    std::fs::write(src.join("x/mod.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(src.join("x/a.rs"), "use super::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("x/b.rs"), "use crate::x::a::A;\npub struct B;\n").unwrap();
    let refs = references(&src);
    let a = vec!["x".to_string(), "a".to_string()];
    let b = vec!["x".to_string(), "b".to_string()];
    assert!(refs[&a].contains(&b) && refs[&b].contains(&a), "{refs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The variants of `pub enum NAME` in `src`, as serde's snake_case names.
fn variants(src: &str, name: &str) -> Vec<String> {
    let start = src
        .find(&format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("no enum {name}"));
    let mut out = Vec::new();
    let mut depth = 0usize;
    for line in src[start..].lines().skip(1) {
        let code = line.split("//").next().unwrap_or_default();
        let trimmed = code.trim();
        if depth == 0 && trimmed == "}" {
            break;
        }
        if depth == 0 && trimmed.starts_with(|c: char| c.is_ascii_uppercase()) {
            let ident: String = trimmed
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let mut snake = String::new();
            for (i, c) in ident.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            out.push(snake);
        }
        depth += code.matches(['{', '(']).count();
        depth = depth.saturating_sub(code.matches(['}', ')']).count());
    }
    out
}

#[test]
fn events_md_lists_every_op_and_event_kind() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let protocol = std::fs::read_to_string(root.join("src/agent/protocol.rs")).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/EVENTS.md")).unwrap();
    let ops = variants(&protocol, "Op");
    let kinds = variants(&protocol, "EventKind");
    assert!(
        ops.len() >= 10 && ops.contains(&"follow_up".to_string()),
        "{ops:?}"
    );
    assert!(
        kinds.len() >= 20 && kinds.contains(&"run_started".to_string()),
        "{kinds:?}"
    );
    let missing: Vec<String> = ops
        .iter()
        .chain(&kinds)
        .filter(|n| !doc.contains(&format!("`{n}`")))
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "docs/EVENTS.md does not name these ops or event kinds: {missing:?}"
    );
}
