//! No import circle inside a crate (`ARCHITECTURE.md`: "Inside a crate, no two modules
//! import each other"; issue 43), kept true the way the config docs and the schema lock
//! are: a test that fails naming what broke it.
//!
//! The test reads every workspace crate's library sources (`src/**/*.rs` of the root and
//! of each member folder; `main.rs` and `src/bin/` are crates of their own and are left
//! out) and draws an edge from a file to the file of every module its code names: a
//! `use` tree or a path anywhere in the code (macro bodies included) that starts with
//! `crate::`, `super::`, `self::` or a child module's name. A path is followed through the
//! module tree and through the `use` items it meets (`pub use engine::Engine` in `lib.rs`
//! makes `crate::Engine` point at `engine.rs`); it ends at the last module it reaches, and
//! that module's file is the edge's end (an inline `mod tests { ... }` is part of its file).
//!
//! The rule for parents and children: a module may use its ancestors (its `super::`, the
//! crate root) without that counting as an edge: a submodule is a part of its parent. A
//! parent's use of its own submodule does count. So `llm.rs` using `llm/openai.rs` while
//! `openai.rs` uses `super::LlmClient` is no circle, but `llm.rs` → `llm/mcp_sampling.rs`
//! → `mcp.rs` → ... → `llm.rs` is one. Every strongly connected component of more than one
//! file is a circle; the test fails listing each, with a ring through it and the path
//! that makes each step of the ring. None is tolerated.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// A module path inside its crate (`["agent", "approval"]`); the crate root is empty.
type ModPath = Vec<String>;

/// What one crate's sources say, before paths are resolved.
#[derive(Default)]
struct Crate {
    /// Every module (file or inline) → the file that holds it.
    modules: BTreeMap<ModPath, PathBuf>,
    /// Per module: a name brought in by a `use` → the absolute path it stands for.
    imports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    /// Every path the code names: (the module it is written in, its segments).
    references: Vec<(ModPath, Vec<String>)>,
}

/// The workspace's root (this test runs in the root crate's folder).
fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `src` folders of the workspace's crates.
fn crate_sources() -> Vec<PathBuf> {
    let root = workspace();
    let mut folders = vec![root.clone()];
    for parent in [root.clone(), root.join("examples")] {
        for entry in std::fs::read_dir(&parent).unwrap() {
            let path = entry.unwrap().path();
            if path.join("Cargo.toml").is_file() && path != root {
                folders.push(path);
            }
        }
    }
    let mut sources: Vec<PathBuf> = folders
        .into_iter()
        .map(|folder| folder.join("src"))
        .filter(|src| src.join("lib.rs").is_file())
        .collect();
    sources.sort();
    sources
}

/// The library's files under `src`, each with its module path.
fn library_files(src: &Path) -> Vec<(PathBuf, ModPath)> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                into.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let mut parts: Vec<String> = relative
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if parts[0] == "bin" || relative == Path::new("main.rs") {
            continue;
        }
        let last = parts.pop().unwrap();
        match last.as_str() {
            "lib.rs" if parts.is_empty() => {}
            "mod.rs" => {}
            _ => parts.push(last.trim_end_matches(".rs").to_string()),
        }
        out.push((file, parts));
    }
    out
}

/// A `use` tree or a path, read from tokens: its leaves, each with the name it binds.
struct Leaf {
    segments: Vec<String>,
    /// The name a `use` binds (its last segment or its `as` alias); `None` for a glob.
    name: Option<String>,
}

fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    matches!((tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
}

fn ident(tokens: &[TokenTree], i: usize) -> Option<String> {
    match tokens.get(i) {
        Some(TokenTree::Ident(id)) => Some(id.to_string().trim_start_matches("r#").to_string()),
        _ => None,
    }
}

/// Reads a path or `use` tree starting at `tokens[i]` (an identifier); returns its leaves
/// and the index after it.
fn read_tree(tokens: &[TokenTree], mut i: usize, prefix: &[String], out: &mut Vec<Leaf>) -> usize {
    let mut segments = prefix.to_vec();
    loop {
        match tokens.get(i) {
            Some(TokenTree::Ident(_)) => {
                segments.push(ident(tokens, i).unwrap());
                i += 1;
            }
            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                let mut j = 0;
                while j < inner.len() {
                    if ident(&inner, j).as_deref() == Some("self") && !is_path_sep(&inner, j + 1) {
                        // `a::{self, ...}`: the module `a` itself.
                        out.push(Leaf {
                            name: segments.last().cloned(),
                            segments: segments.clone(),
                        });
                        j += 1;
                    } else if matches!(
                        inner.get(j),
                        Some(TokenTree::Ident(_) | TokenTree::Group(_))
                    ) || matches!(inner.get(j), Some(TokenTree::Punct(p)) if p.as_char() == '*')
                    {
                        j = read_tree(&inner, j, &segments, out);
                    } else {
                        j += 1;
                    }
                }
                return i + 1;
            }
            Some(TokenTree::Punct(p)) if p.as_char() == '*' => {
                out.push(Leaf {
                    segments,
                    name: None,
                });
                return i + 1;
            }
            _ => {
                out.push(Leaf {
                    segments,
                    name: None,
                });
                return i;
            }
        }
        if is_path_sep(tokens, i) {
            i += 2;
            continue;
        }
        let name = if ident(tokens, i).as_deref() == Some("as") {
            let alias = ident(tokens, i + 1);
            i += 2;
            alias
        } else {
            segments.last().cloned()
        };
        out.push(Leaf { segments, name });
        return i;
    }
}

/// Collects the module's `use` items, its inline modules and every path it names.
fn scan(stream: TokenStream, module: &ModPath, file: &Path, krate: &mut Crate) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        let word = ident(&tokens, i);
        let after_sep = i >= 2 && is_path_sep(&tokens, i - 2);
        let after_dot =
            i >= 1 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '.');
        match (&tokens[i], word.as_deref()) {
            (_, Some("mod")) => {
                if let (Some(name), Some(TokenTree::Group(body))) =
                    (ident(&tokens, i + 1), tokens.get(i + 2))
                    && body.delimiter() == Delimiter::Brace
                {
                    let mut inner = module.clone();
                    inner.push(name);
                    // `#[cfg(..)] mod tree;` beside `#[cfg(not(..))] mod tree { .. }`: the file wins.
                    krate
                        .modules
                        .entry(inner.clone())
                        .or_insert_with(|| file.to_path_buf());
                    scan(body.stream(), &inner, file, krate);
                    i += 3;
                    continue;
                }
                i += 1;
            }
            (_, Some("use")) if !after_sep => {
                let mut start = i + 1;
                if is_path_sep(&tokens, start) {
                    start += 2; // `use ::name`: another crate
                }
                let mut leaves = Vec::new();
                i = read_tree(&tokens, start, &[], &mut leaves);
                for leaf in leaves {
                    if let Some(name) = leaf.name.clone() {
                        krate
                            .imports
                            .entry(module.clone())
                            .or_default()
                            .insert(name, leaf.segments.clone());
                    }
                    krate.references.push((module.clone(), leaf.segments));
                }
            }
            (TokenTree::Ident(_), Some(_))
                if !after_sep && !after_dot && is_path_sep(&tokens, i + 1) =>
            {
                let mut leaves = Vec::new();
                i = read_tree(&tokens, i, &[], &mut leaves);
                for leaf in leaves {
                    krate.references.push((module.clone(), leaf.segments));
                }
            }
            (TokenTree::Group(g), _) => {
                scan(g.stream(), module, file, krate);
                i += 1;
            }
            _ => i += 1,
        }
    }
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut krate = Crate::default();
        let files = library_files(src);
        for (file, module) in &files {
            krate.modules.insert(module.clone(), file.clone());
        }
        for (file, module) in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let stream: TokenStream = text
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e:?}", file.display()));
            scan(stream, module, file, &mut krate);
        }
        krate
    }

    /// Where a path written in `module` starts: its absolute prefix and the rest; `None`
    /// for another crate's path.
    fn start(
        &self,
        module: &ModPath,
        segments: &[String],
        depth: usize,
    ) -> Option<(ModPath, usize)> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some((Vec::new(), 1)),
            "self" => Some((module.clone(), 1)),
            "super" => {
                let mut base = module.clone();
                let mut used = 0;
                while segments.get(used).map(String::as_str) == Some("super") {
                    base.pop();
                    used += 1;
                }
                Some((base, used))
            }
            _ => {
                let mut child = module.clone();
                child.push(first.clone());
                if self.modules.contains_key(&child) {
                    return Some((module.clone(), 0));
                }
                // A name the module imported (`use crate::agent; agent::Approver`).
                let target = self.imports.get(module)?.get(first)?;
                if depth > 8 || target.first() == Some(first) {
                    return None;
                }
                let (base, used) = self.start(module, target, depth + 1)?;
                let mut absolute = base;
                absolute.extend(target[used..].iter().cloned());
                Some((absolute, 1))
            }
        }
    }

    /// The module a path written in `module` ends at.
    fn resolve(&self, module: &ModPath, segments: &[String], depth: usize) -> Option<ModPath> {
        let (mut current, used) = self.start(module, segments, depth)?;
        for segment in &segments[used..] {
            let mut child = current.clone();
            child.push(segment.clone());
            if self.modules.contains_key(&child) {
                current = child;
                continue;
            }
            if depth < 8
                && let Some(target) = self.imports.get(&current).and_then(|m| m.get(segment))
                && target.first().map(String::as_str) != Some(segment.as_str())
            {
                // A name `current` re-exports: where it comes from.
                if let Some(found) = self.resolve(&current, target, depth + 1) {
                    return Some(found);
                }
            }
            break;
        }
        Some(current)
    }

    /// The edges between files: (from, to) → an example path that makes it.
    fn edges(&self) -> BTreeMap<(PathBuf, PathBuf), String> {
        let mut edges = BTreeMap::new();
        for (module, segments) in &self.references {
            let Some(mut target) = self.resolve(module, segments, 0) else {
                continue;
            };
            let from = &self.modules[module];
            // The file of the module reached: inline modules belong to their file.
            let to = loop {
                if let Some(file) = self.modules.get(&target) {
                    break file.clone();
                }
                target.pop();
            };
            let from_path = file_module(&self.modules, module);
            let to_path = file_module(&self.modules, &target);
            let ancestor = to_path.len() < from_path.len() && from_path.starts_with(&to_path);
            if &to == from || ancestor {
                continue;
            }
            edges
                .entry((from.clone(), to))
                .or_insert_with(|| segments.join("::"));
        }
        edges
    }
}

/// The module path of the file that holds `module` (an inline module's file's module).
fn file_module(modules: &BTreeMap<ModPath, PathBuf>, module: &ModPath) -> ModPath {
    let file = &modules[module];
    let mut path = module.clone();
    while path.len() > 1 {
        let mut parent = path.clone();
        parent.pop();
        if modules.get(&parent) == Some(file) {
            path = parent;
        } else {
            break;
        }
    }
    path
}

/// Strongly connected components (Tarjan), each sorted.
fn components(
    nodes: &BTreeSet<PathBuf>,
    next: &BTreeMap<PathBuf, Vec<PathBuf>>,
) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        next: &'a BTreeMap<PathBuf, Vec<PathBuf>>,
        index: BTreeMap<PathBuf, usize>,
        low: BTreeMap<PathBuf, usize>,
        stack: Vec<PathBuf>,
        on_stack: BTreeSet<PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit(s: &mut State<'_>, node: &PathBuf) {
        let n = s.index.len();
        s.index.insert(node.clone(), n);
        s.low.insert(node.clone(), n);
        s.stack.push(node.clone());
        s.on_stack.insert(node.clone());
        for to in s.next.get(node).cloned().unwrap_or_default() {
            if !s.index.contains_key(&to) {
                visit(s, &to);
                let low = s.low[node].min(s.low[&to]);
                s.low.insert(node.clone(), low);
            } else if s.on_stack.contains(&to) {
                let low = s.low[node].min(s.index[&to]);
                s.low.insert(node.clone(), low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            loop {
                let top = s.stack.pop().unwrap();
                s.on_stack.remove(&top);
                let done = &top == node;
                component.push(top);
                if done {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in nodes {
        if !s.index.contains_key(node) {
            visit(&mut s, node);
        }
    }
    s.out
}

/// A shortest ring from the component's first file back to it.
fn ring(component: &[PathBuf], next: &BTreeMap<PathBuf, Vec<PathBuf>>) -> Vec<PathBuf> {
    let inside: BTreeSet<&PathBuf> = component.iter().collect();
    let start = &component[0];
    let mut came_from: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    while let Some(node) = queue.pop_front() {
        for to in next.get(&node).into_iter().flatten() {
            if !inside.contains(to) || came_from.contains_key(to) {
                continue;
            }
            came_from.insert(to.clone(), node.clone());
            if to == start {
                let mut ring = vec![start.clone()];
                let mut at = node.clone();
                while &at != start {
                    ring.push(at.clone());
                    at = came_from[&at].clone();
                }
                ring.push(start.clone());
                ring.reverse();
                return ring;
            }
            queue.push_back(to.clone());
        }
    }
    component.to_vec()
}

/// The circles of every crate, in words; empty when there is none.
fn circles() -> Vec<String> {
    let root = workspace();
    let show = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    let mut report = Vec::new();
    for src in crate_sources() {
        let krate = Crate::read(&src);
        let edges = krate.edges();
        let nodes: BTreeSet<PathBuf> = krate.modules.values().cloned().collect();
        let mut next: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
        for (from, to) in edges.keys() {
            next.entry(from.clone()).or_default().push(to.clone());
        }
        for component in components(&nodes, &next) {
            if component.len() < 2 {
                continue;
            }
            let files: Vec<String> = component.iter().map(|f| show(f)).collect();
            let ring = ring(&component, &next);
            let steps: Vec<String> = ring
                .windows(2)
                .map(|w| {
                    let why = &edges[&(w[0].clone(), w[1].clone())];
                    format!("    {} → {} (`{why}`)", show(&w[0]), show(&w[1]))
                })
                .collect();
            let inside: BTreeSet<&PathBuf> = component.iter().collect();
            let all: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| inside.contains(a) && inside.contains(b))
                .map(|((a, b), why)| format!("    {} → {} (`{why}`)", show(a), show(b)))
                .collect();
            report.push(format!(
                "{} files import each other: {}\n  a ring:\n{}\n  every import between them:\n{}",
                component.len(),
                files.join(", "),
                steps.join("\n"),
                all.join("\n")
            ));
        }
    }
    report
}

#[test]
fn no_module_imports_itself_through_others() {
    let circles = circles();
    assert!(
        circles.is_empty(),
        "import circles (move the shared part to a module of its own; see ARCHITECTURE.md):\n{}",
        circles.join("\n")
    );
}

/// The scanner itself: a ring through a parent's child is found, a child using its
/// parent is not one.
#[test]
fn the_rule_on_a_small_crate() {
    let dir = tempfile_dir();
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("llm")).unwrap();
    std::fs::create_dir_all(src.join("mcp")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write(
        "lib.rs",
        "mod agent; mod llm; mod mcp; pub use agent::Approver;",
    );
    write("agent.rs", "use crate::llm::Client; pub struct Approver;");
    write(
        "llm.rs",
        "pub mod openai; pub mod sampling; pub trait Client {} fn f() { sampling::S::new(); }",
    );
    write(
        "llm/openai.rs",
        "use super::Client; use crate::llm::sampling::S;",
    );
    write("llm/sampling.rs", "use crate::mcp::{self, Peers};");
    write("mcp.rs", "mod approve; pub struct Peers;");
    write("mcp/approve.rs", "fn f() -> crate::Approver { todo!() }");
    let krate = Crate::read(&src);
    let edges = krate.edges();
    let names: BTreeSet<(String, String)> = edges
        .keys()
        .map(|(a, b)| {
            let a = a.strip_prefix(&src).unwrap().display().to_string();
            let b = b.strip_prefix(&src).unwrap().display().to_string();
            (a, b)
        })
        .collect();
    let expect = [
        ("agent.rs", "llm.rs"),
        ("lib.rs", "agent.rs"),
        ("llm.rs", "llm/sampling.rs"),
        ("llm/openai.rs", "llm/sampling.rs"),
        ("llm/sampling.rs", "mcp.rs"),
        ("mcp/approve.rs", "agent.rs"),
    ];
    let expect: BTreeSet<(String, String)> = expect
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(names, expect);
    // mcp.rs does not use approve.rs: no ring yet; with it, one of five files.
    let nodes: BTreeSet<PathBuf> = krate.modules.values().cloned().collect();
    let mut next: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from.clone()).or_default().push(to.clone());
    }
    assert!(components(&nodes, &next).iter().all(|c| c.len() == 1));
    next.entry(src.join("mcp.rs"))
        .or_default()
        .push(src.join("mcp/approve.rs"));
    let sizes: Vec<usize> = components(&nodes, &next)
        .iter()
        .map(Vec::len)
        .filter(|&n| n > 1)
        .collect();
    assert_eq!(sizes, [5]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh folder under the target dir's temp space.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("klaw-architecture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
