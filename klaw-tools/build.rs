//! Embeds the project's documentation (`../doc/**/*.md`) for the `docs_*` tools.
//!
//! With the `docs` feature on, writes `$OUT_DIR/docs.rs`: a static slice of
//! `(path relative to doc/, include_str!(absolute path))`, sorted by path, and asks cargo
//! to run again when anything under `doc/` changes. Without the feature it does nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_DOCS").is_none() {
        return;
    }
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo:warning=OUT_DIR is not set; the docs are not embedded");
        return;
    };
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_default();
    let doc_dir = manifest.join("..").join("doc");
    let doc_dir = doc_dir.canonicalize().unwrap_or(doc_dir);
    let mut files = Vec::new();
    if doc_dir.is_dir() {
        // Cargo scans a directory given here recursively: a new, changed or removed file
        // re-runs this script.
        println!("cargo:rerun-if-changed={}", doc_dir.display());
        walk(&doc_dir, &doc_dir, &mut files);
    } else {
        println!(
            "cargo:warning=no documentation at {}: the docs tools will have no documents",
            doc_dir.display()
        );
    }
    files.sort();
    let mut code = String::from(
        "/// The embedded documentation: `(path relative to doc/, text)`, sorted by path.\n\
         pub(super) static DOCS: &[(&str, &str)] = &[\n",
    );
    for (rel, abs) in &files {
        let _ = writeln!(code, "    ({rel:?}, include_str!({abs:?})),");
    }
    code.push_str("];\n");
    if let Err(e) = std::fs::write(out_dir.join("docs.rs"), code) {
        println!("cargo:warning=cannot write docs.rs: {e}");
    }
}

/// Collects `(relative path with '/', absolute path)` of every `*.md` file under `dir`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        println!("cargo:warning=cannot read {}", dir.display());
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(root, &path, out);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "md") {
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let (Some(rel), Some(abs)) = (rel.to_str(), path.to_str()) else {
                println!(
                    "cargo:warning=skipping a doc with a non-UTF-8 path: {}",
                    path.display()
                );
                continue;
            };
            let rel = rel.replace(std::path::MAIN_SEPARATOR, "/");
            out.push((rel, abs.to_owned()));
        }
    }
}
