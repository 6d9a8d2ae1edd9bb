//! The runtime's modules form layers: no top-level module of `src/` reaches, through its
//! `crate::` paths, back to itself. The pure rules (`decide`, `classify`, the handler types)
//! stay testable and readable without the runtime that runs them, and a change to `app` can
//! never make a decision table depend on the loop.
//!
//! The graph is read from the source text: every `crate::` path in code (comments, doc links
//! and string literals are skipped) is an edge from the file's top-level module to the first
//! segment of the path, or, for an item the crate root re-exports (`crate::Context`), to the
//! module it is re-exported from. `super::` paths are not followed: in `src/` each stays inside
//! its own top-level module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_top_level_module_imports_itself_in_a_circle() {
    let graph = graph();
    assert!(
        graph.len() > 10,
        "the modules were found: {:?}",
        graph.keys()
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "the modules of babelqueue-core import each other in a circle: {}\n(the graph: {graph:#?})",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_decision_tables_and_the_handler_types_do_not_reach_the_runtime() {
    let graph = graph();
    for low in [
        "failure", "decide", "classify", "handler", "policy", "attempts",
    ] {
        let reached = reachable(&graph, low);
        assert!(
            !reached.contains("app"),
            "{low} reaches app: {reached:?} (the graph: {graph:#?})"
        );
    }
    assert_eq!(
        graph.get("failure").map(BTreeSet::len),
        Some(0),
        "the handler failure types are a leaf: {graph:#?}"
    );
}

#[test]
fn the_scanner_sees_imports_and_skips_comments_and_strings() {
    let text = r##"
        //! See [`decide`](crate::decide) and crate::app.
        use crate::{handler::Context, policy};
        use crate::Error;
        /* crate::schema */
        const A: &str = "crate::memory";
        const B: &str = r#"crate::redrive " crate::gate"#;
        fn f<'a>(x: &'a str) -> char { let _ = crate::classify::classify; '{' }
    "##;
    let roots: BTreeMap<String, String> = [("Error".to_owned(), "error".to_owned())].into();
    let mut found = BTreeSet::new();
    for path in crate_paths(&code_only(text)) {
        found.insert(resolve(&path, &roots));
    }
    let expected: BTreeSet<String> = ["handler", "policy", "error", "classify"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(found, expected);
    assert!(find_cycle(&graph_of(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])])).is_some());
    assert!(find_cycle(&graph_of(&[("a", &["b"]), ("b", &["c"]), ("c", &[])])).is_none());
}

fn graph_of(edges: &[(&str, &[&str])]) -> Graph {
    edges
        .iter()
        .map(|(from, to)| {
            (
                (*from).to_owned(),
                to.iter().map(|t| (*t).to_owned()).collect(),
            )
        })
        .collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules and the modules each one's `crate::` paths name.
fn graph() -> Graph {
    let lib = code_only(&std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs"));
    let modules = declared_modules(&lib);
    let roots = root_reexports(&lib, &modules);
    let mut graph = Graph::new();
    for module in &modules {
        let mut uses = BTreeSet::new();
        for file in files_of(module) {
            let text = code_only(&std::fs::read_to_string(&file).expect("a source file"));
            for path in crate_paths(&text) {
                let target = resolve(&path, &roots);
                if target != *module && modules.contains(&target) {
                    uses.insert(target);
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// `mod x;` and `pub mod x;` in the crate root.
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))?;
            Some(rest.strip_suffix(';')?.trim().to_owned())
        })
        .collect()
}

/// The items the crate root re-exports (`pub use handler::{Action, Context};`), by the module
/// they come from.
fn root_reexports(lib: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut roots = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        if !modules.contains(module.trim()) {
            continue;
        }
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            if !name.is_empty() {
                roots.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    roots
}

/// `src/x.rs` and everything under `src/x/`.
fn files_of(module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = src().join(format!("{module}.rs"));
    if file.is_file() {
        files.push(file);
    }
    let mut dirs = vec![src().join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The first segment of every `crate::` path in `code`; a group (`crate::{a::X, b}`) yields
/// each of its members' first segments.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        let start = from + at;
        from = start + "crate::".len();
        // `$crate::` and an identifier ending in `crate` are not the crate root.
        if start > 0 && (bytes[start - 1] == b'$' || is_ident(bytes[start - 1])) {
            continue;
        }
        if code[from..].starts_with('{') {
            let mut depth = 0usize;
            let mut segment_start = true;
            for (i, c) in code[from..].char_indices() {
                match c {
                    '{' => {
                        depth += 1;
                        segment_start = depth == 1;
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => segment_start = true,
                    c if segment_start && (c.is_alphanumeric() || c == '_') => {
                        found.push(ident_at(&code[from + i..]));
                        segment_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let ident = ident_at(&code[from..]);
            if !ident.is_empty() {
                found.push(ident);
            }
        }
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn ident_at(text: &str) -> String {
    text.bytes()
        .take_while(|b| is_ident(*b))
        .map(char::from)
        .collect()
}

/// The module a path's first segment names: itself, or the module the root re-exports it from.
fn resolve(segment: &str, roots: &BTreeMap<String, String>) -> String {
    roots
        .get(segment)
        .cloned()
        .unwrap_or_else(|| segment.to_owned())
}

/// `text` with comments, string literals and character literals blanked out (lengths kept), so
/// that a doc link or a message naming a path is not an import.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && raw_string_at(&chars, i) {
            // r"..." or r#"..."#: ends at the quote followed by as many hashes.
            let mut hashes = 0;
            i += 1;
            while chars.get(i) == Some(&'#') {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < chars.len() {
                if chars[i] == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && char_literal_len(&chars, i).is_some() {
            i += char_literal_len(&chars, i).unwrap_or(1);
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether the `r` at `i` starts a raw string (not the end of an identifier such as `for`).
fn raw_string_at(chars: &[char], i: usize) -> bool {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i + 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}

/// The length of the character literal starting at `i` (`'x'`, `'\n'`, `'\u{7f}'`), or `None`
/// for a lifetime (`'a`).
fn char_literal_len(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i + 1) == Some(&'\\') {
        let end = (i + 2..chars.len().min(i + 12)).find(|&j| chars[j] == '\'')?;
        return Some(end - i + 1);
    }
    (chars.get(i + 2) == Some(&'\'')).then_some(3)
}

/// A circle in `graph`, as the modules along it (the first repeated at the end).
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_owned(), Mark::Open);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let from = path.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(cycle) = visit(next, graph, marks, path) {
                        return Some(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New
            && let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

/// Every module `from` reaches through its imports.
fn reachable(graph: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_owned()];
    while let Some(node) = todo.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if seen.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    seen
}
