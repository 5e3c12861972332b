//! Checks on the shape of the source tree that reviews kept finding by hand:
//!
//! - no circle of imports among modules, of any length (a circle means a
//!   type lives in the wrong place). Parent and child may refer to each
//!   other (a parent declares its children, a child uses what its parent
//!   shares); every other pair of modules is counted, and the circles are
//!   found as strongly connected components (Tarjan's algorithm), among the
//!   files and among the top-level modules alike;
//! - the layers: each top-level module has a place in `LAYERS`, lowest
//!   first, and imports only from its own layer or lower ones;
//! - the process (environment, working directory) is read in `process.rs`
//!   alone, once.
//!
//! An import is any `crate::…` or `super::…` path in a file's code outside
//! its `mod tests`, `use` trees included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;
type Refs = BTreeMap<Module, BTreeSet<Module>>;

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

/// A path's pieces: names, `::`, braces and commas; anything else ends it.
#[derive(Debug, PartialEq)]
enum Token {
    Name(String),
    Sep,
    Open,
    Close,
    Comma,
    Other,
}

fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while let Some(c) = rest.chars().next() {
        let (token, len) = if rest.starts_with("::") {
            (Token::Sep, 2)
        } else if c == '_' || c.is_alphanumeric() {
            let len = rest
                .find(|c: char| c != '_' && !c.is_alphanumeric())
                .unwrap_or(rest.len());
            (Token::Name(rest[..len].to_string()), len)
        } else {
            let t = match c {
                '{' => Token::Open,
                '}' => Token::Close,
                ',' => Token::Comma,
                _ => Token::Other,
            };
            (t, c.len_utf8())
        };
        let stop = token == Token::Other;
        out.push(token);
        if stop {
            break;
        }
        rest = rest[len..].trim_start();
    }
    out
}

/// Reads one path or `use` tree from `at` on, after `prefix`; every full
/// path goes to `out`. Returns where it ended.
fn use_tree(t: &[Token], mut at: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match t.get(at) {
            Some(Token::Name(n)) => {
                if n != "self" {
                    path.push(n.clone());
                }
                at += 1;
                if t.get(at) == Some(&Token::Sep) {
                    at += 1;
                    continue;
                }
                out.push(path);
                return at;
            }
            Some(Token::Open) => {
                at += 1;
                loop {
                    at = use_tree(t, at, &path, out);
                    // Past a rename (`a as b`) to the next `,` or the `}`.
                    while !matches!(t.get(at), None | Some(Token::Comma | Token::Close)) {
                        at += 1;
                    }
                    match t.get(at) {
                        Some(Token::Comma) => at += 1,
                        Some(Token::Close) => return at + 1,
                        _ => return at,
                    }
                    if t.get(at) == Some(&Token::Close) {
                        return at + 1;
                    }
                }
            }
            _ => {
                out.push(path);
                return at;
            }
        }
    }
}

/// Every module each module refers to, through `crate::…` and `super::…`
/// paths, `use` trees included.
fn references(src: &Path) -> Refs {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let start = regex_lite::Regex::new(r"\b(crate|(?:super::)*super)::").unwrap();
    let mut out = Refs::new();
    for file in &files {
        let module = module_of(src, file);
        let code = code_of(&std::fs::read_to_string(file).expect("source"));
        let mut found = BTreeSet::new();
        for m in start.captures_iter(&code) {
            // `super` in a.rs or a/mod.rs is the parent of `a`.
            let base: Vec<String> = match &m[1] {
                "crate" => Vec::new(),
                supers => {
                    let n = supers.matches("super").count();
                    module[..module.len().saturating_sub(n)].to_vec()
                }
            };
            let end = m.get(0).map_or(0, |g| g.end());
            // A tree ends within a few hundred characters; tokens past it are never read.
            let window: String = code[end..].chars().take(2000).collect();
            let mut paths = Vec::new();
            use_tree(&tokens(&window), 0, &base, &mut paths);
            found.extend(paths.iter().filter_map(|p| resolve(&modules, p)));
        }
        found.remove(&module);
        out.entry(module).or_default().extend(found);
    }
    out
}

/// The imports that count for circles: none between a module and its
/// ancestors or descendants.
fn without_nesting(refs: &Refs) -> Refs {
    refs.iter()
        .map(|(a, targets)| {
            let kept = targets
                .iter()
                .filter(|b| !a.starts_with(b) && !b.starts_with(a))
                .cloned()
                .collect();
            (a.clone(), kept)
        })
        .collect()
}

/// The same imports between top-level modules (the crate root left out).
fn top_level(refs: &Refs) -> Refs {
    let mut out = Refs::new();
    for (a, targets) in refs {
        let Some(from) = a.first() else { continue };
        let entry = out.entry(vec![from.clone()]).or_default();
        for b in targets {
            if let Some(to) = b.first().filter(|to| *to != from) {
                entry.insert(vec![to.clone()]);
            }
        }
    }
    out
}

/// Tarjan's strongly connected components: every set of two or more
/// modules that reach each other through imports, each sorted, largest
/// first.
fn circles(refs: &Refs) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        refs: &'a Refs,
        next: usize,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.refs.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        refs,
        next: 0,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in refs.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found.sort_by_key(|c| std::cmp::Reverse(c.len()));
    walk.found
}

/// A circle as a line: its modules, then the imports that close it.
fn describe(circle: &[Module], refs: &Refs) -> String {
    let name = |m: &Module| m.join("::");
    let members: BTreeSet<&Module> = circle.iter().collect();
    let edges: Vec<String> = circle
        .iter()
        .flat_map(|a| {
            refs[a]
                .iter()
                .filter(|b| members.contains(b))
                .map(move |b| format!("{} -> {}", name(a), name(b)))
        })
        .collect();
    format!(
        "{{{}}}: {}",
        circle.iter().map(name).collect::<Vec<_>>().join(", "),
        edges.join(", ")
    )
}

/// The layers, lowest first, and the top-level modules in each (a root
/// file such as `text.rs` is a module too). A module imports only from its
/// own layer or a lower one; a new module must be given its place here.
const LAYERS: &[(&str, &[&str])] = &[
    // Wire types and the small helpers everyone uses; none of them knows
    // a model, a tool or an agent. `shell` reads command lines without
    // running them, `host` is where commands run, `telemetry` sends spans.
    (
        "wire",
        &[
            "wire",
            "text",
            "clock",
            "atomic_file",
            "localfile",
            "redact",
            "procenv",
            "process",
            "net",
            "http_guard",
            "telemetry",
            "frontmatter",
            "background",
            "shell",
            "host",
        ],
    ),
    // Talking to a model: the HTTP client and its protocols, the login
    // tokens it sends, and the settings that say where (config reads the
    // login issuer's shape from `auth`).
    ("provider", &["provider", "auth", "config"]),
    // Tools, built in and from MCP servers.
    ("tools", &["tools", "mcp"]),
    // The agent, its session journal (the agent's `HistorySink`) and the
    // one loop front ends drive it with.
    ("agent", &["agent", "session", "drive"]),
    // Front ends: each renders the agent's events.
    ("front end", &["ui", "serve", "acp", "mcp_server"]),
    // The composition root and the command line it reads.
    ("app", &["app", "cli"]),
];

/// Upward imports known and accepted for now, each as `from -> to` of top
/// level modules with the reason beside it. None today: an upward import is
/// fixed by moving the item down, and only one too large to move may wait
/// here, named.
const UPWARD_EXCEPTIONS: &[&str] = &[];

/// Every import of a higher layer, as `from -> to (layer < layer)`, and
/// every top-level module the table does not place.
fn layer_problems(refs: &Refs, layers: &[(&str, &[&str])], exceptions: &[&str]) -> Vec<String> {
    let place: BTreeMap<&str, (usize, &str)> = layers
        .iter()
        .enumerate()
        .flat_map(|(rank, (layer, modules))| modules.iter().map(move |m| (*m, (rank, *layer))))
        .collect();
    let mut problems = Vec::new();
    for (a, targets) in top_level(refs) {
        let from = a[0].as_str();
        let Some(&(rank, layer)) = place.get(from) else {
            problems.push(format!("{from} has no layer in LAYERS"));
            continue;
        };
        for b in targets {
            let to = b[0].as_str();
            match place.get(to) {
                Some(&(to_rank, to_layer)) if to_rank > rank => {
                    let edge = format!("{from} -> {to}");
                    if !exceptions.contains(&edge.as_str()) {
                        problems.push(format!("{edge} ({layer} imports {to_layer})"));
                    }
                }
                _ => {}
            }
        }
    }
    problems
}

fn tree() -> Refs {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let refs = references(&src);
    assert!(
        refs.len() > 50,
        "the walk found only {} modules",
        refs.len()
    );
    refs
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let refs = without_nesting(&tree());
    let found: Vec<String> = circles(&refs).iter().map(|c| describe(c, &refs)).collect();
    assert!(
        found.is_empty(),
        "modules that import each other in a circle (move the shared item to where it belongs):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_top_level_modules_import_each_other_in_a_circle() {
    let refs = top_level(&tree());
    let found: Vec<String> = circles(&refs).iter().map(|c| describe(c, &refs)).collect();
    assert!(
        found.is_empty(),
        "top-level modules that import each other in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn each_module_imports_only_its_own_layer_or_lower() {
    let problems = layer_problems(&tree(), LAYERS, UPWARD_EXCEPTIONS);
    assert!(
        problems.is_empty(),
        "imports against the layer order (move the item down, or place the module in LAYERS):\n{}",
        problems.join("\n")
    );
}

/// Writes a small tree for the checks to read.
fn made_tree(label: &str, files: &[(&str, &str)]) -> (PathBuf, Refs) {
    let dir = std::env::temp_dir().join(format!("buddy-arch-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let src = dir.join("src");
    for (path, text) in files {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let refs = references(&src);
    (dir, refs)
}

fn m(path: &str) -> Module {
    path.split("::").map(String::from).collect()
}

#[test]
fn the_checks_see_a_circle_of_three_through_every_kind_of_path() {
    // x::a -> x::b (a `super` group with a rename), x::b -> y::c (a nested
    // `crate` group), y::c -> x::a (a plain path in an expression), and
    // x::a -> x (its parent: not a circle).
    let (dir, refs) = made_tree(
        "circle",
        &[
            ("lib.rs", "pub mod x;\npub mod y;\n"),
            ("x/mod.rs", "pub mod a;\npub mod b;\npub struct X;\n"),
            ("x/a.rs", "use super::{b::B as Bee, X};\npub struct A;\n"),
            (
                "x/b.rs",
                "use crate::{y::{c::{self, C}}, x};\npub struct B;\n",
            ),
            (
                "y/c.rs",
                "pub struct C;\npub fn f() { let _ = crate::x::a::A; }\n",
            ),
            ("y/mod.rs", "pub mod c;\n"),
        ],
    );
    assert!(refs[&m("x::a")].contains(&m("x::b")), "{refs:?}");
    assert!(refs[&m("x::b")].contains(&m("y::c")), "{refs:?}");
    assert!(refs[&m("y::c")].contains(&m("x::a")), "{refs:?}");
    let flat = without_nesting(&refs);
    assert_eq!(circles(&flat), vec![vec![m("x::a"), m("x::b"), m("y::c")]]);
    // Between the top-level modules it is x <-> y.
    assert_eq!(circles(&top_level(&refs)), vec![vec![m("x"), m("y")]]);
    // A parent and its child alone are no circle.
    assert!(circles(&without_nesting(&BTreeMap::from([
        (m("x"), BTreeSet::from([m("x::a")])),
        (m("x::a"), BTreeSet::from([m("x")])),
    ])))
    .is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_layer_check_sees_an_upward_import_and_an_unplaced_module() {
    let (dir, refs) = made_tree(
        "layers",
        &[
            ("lib.rs", "pub mod low;\npub mod high;\npub mod stray;\n"),
            ("low.rs", "pub fn f() { crate::high::g() }\n"),
            ("high.rs", "pub fn g() { crate::low::f() }\n"),
            ("stray.rs", "pub fn h() {}\n"),
        ],
    );
    let layers: &[(&str, &[&str])] = &[("bottom", &["low"]), ("top", &["high"])];
    assert_eq!(
        layer_problems(&refs, layers, &[]),
        vec![
            "low -> high (bottom imports top)".to_string(),
            "stray has no layer in LAYERS".to_string()
        ]
    );
    // A named exception is accepted.
    assert_eq!(
        layer_problems(&refs, layers, &["low -> high"]),
        vec!["stray has no layer in LAYERS".to_string()]
    );
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

/// Every place outside `process.rs` that reads the environment or the
/// working directory from the process itself, as `file: line`.
fn process_reads(src: &Path) -> Vec<String> {
    const READS: [&str; 5] = [
        "env::var(",
        "env::var_os(",
        "env::vars(",
        "env::vars_os(",
        "current_dir()",
    ];
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        // process.rs takes the one reading; procenv.rs scrubs the block.
        if rel == Path::new("process.rs") || rel == Path::new("procenv.rs") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).expect("read source"));
        for (n, line) in code.lines().enumerate() {
            if READS.iter().any(|r| line.contains(r)) {
                found.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_process_is_read_in_one_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = process_reads(&src);
    assert!(
        found.is_empty(),
        "read the process through crate::process (read once at start), not here:\n{}",
        found.join("\n")
    );
    // The check itself sees a read.
    let dir = crate::support::TempDir::new("process-reads");
    std::fs::write(
        dir.join("a.rs"),
        "fn f() { let _ = std::env::var(\"HOME\"); }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("process.rs"),
        "fn g() { std::env::current_dir(); }\n",
    )
    .unwrap();
    assert_eq!(process_reads(dir.path()).len(), 1);
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

/// Cargo builds only the test binaries Cargo.toml names (`autotests =
/// false`): a file in tests/ that tests/suite.rs does not declare would never
/// run, and nothing would say so.
#[test]
fn every_test_file_is_a_module_of_the_suite() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let suite = std::fs::read_to_string(tests.join("suite.rs")).expect("tests/suite.rs");
    let declared: BTreeSet<&str> = suite
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&tests).expect("tests/").flatten() {
        let path = entry.path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let module = path.is_file() && path.extension().is_some_and(|e| e == "rs");
        if module && name != "suite" && !declared.contains(name) {
            missing.push(name.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/suite.rs does not declare {missing:?}: add `mod NAME;` lines"
    );
}
