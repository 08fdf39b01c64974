//! MCP resources, derived from what the engine already has (no registry of their own):
//! the embedded docs (`klaw://docs/{path}`), each skill's files
//! (`klaw://skills/{name}/{file}`, read beneath the skill's folder by the kernel, as
//! `skill_load` reads them), core memory (`klaw://memory/core`, read through the engine
//! as `memory_core_get`), then those of the linked extensions (`klaw_mcp_ext`: the
//! conformance suite's `test://` resources in a build with the test fixtures).
//!
//! A URI is taken as listed (not percent-decoded). A path segment `..` or `.`, an empty
//! one or a backslash is refused before any lookup; docs are looked up in the embedded
//! list (nothing on disk), and a skill's file is opened beneath its folder by the kernel,
//! so neither a path nor a link can name a file outside.

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{Resource, ResourceContents, ResourceTemplate};

use crate::{Engine, ToolCall};

/// Core memory, the one resource that changes while clients watch it.
pub(crate) const CORE_URI: &str = "klaw://memory/core";
/// The tools whose successful calls change core memory.
pub(crate) const CORE_WRITERS: [&str; 2] = ["memory_core_update", "memory_core_delete"];
const DOCS: &str = "klaw://docs/";
const SKILLS: &str = "klaw://skills/";

/// Every resource in URI order within each kind: docs, skills' files, core memory,
/// then the linked extensions'.
pub(crate) async fn list(engine: &Engine) -> Vec<Resource> {
    let mut out = Vec::new();
    #[cfg(feature = "docs")]
    for (path, text) in klaw_tools::tools::docs::embedded() {
        let doc = klaw_tools::tools::docs::Doc::new(path, text);
        out.push(
            Resource::new(format!("{DOCS}{path}"), *path)
                .with_title(doc.title().to_owned())
                .with_description(format!("Klaw's documentation: doc/{path}"))
                .with_mime_type("text/markdown")
                .with_size(text.len() as u64),
        );
    }
    #[cfg(feature = "skills")]
    out.extend(skill_resources(engine).await);
    if engine.registry().by_name("memory_core_get").is_some() {
        out.push(
            Resource::new(CORE_URI, "core memory")
                .with_title("Core memory")
                .with_description(
                    "The agent's core memory: short permanent facts about the user and the \
                     agent (JSON). Subscribe to hear when it changes.",
                )
                .with_mime_type("application/json"),
        );
    }
    out.extend(klaw_mcp_ext::extensions().flat_map(|e| (e.resources)()));
    out
}

#[cfg(feature = "skills")]
async fn skill_resources(engine: &Engine) -> Vec<Resource> {
    let Ok(catalog) = klaw_tools::tools::skills::catalog(engine.context()).await else {
        return Vec::new();
    };
    let listed = tokio::task::spawn_blocking(move || {
        catalog
            .skills
            .iter()
            .map(|s| {
                let mut files = vec![klaw_tools::tools::skills::SKILL_MD.to_owned()];
                files.extend(klaw_tools::tools::skills::skill_files(s));
                (s.name().to_owned(), s.description().to_owned(), files)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    listed
        .into_iter()
        .flat_map(|(name, description, files)| {
            files.into_iter().map(move |f| {
                let r = Resource::new(format!("{SKILLS}{name}/{f}"), format!("{name}/{f}"))
                    .with_description(format!("A file of the skill `{name}`: {description}"));
                // Unknown by its name alone: no type claimed (reading looks at the bytes).
                match mime_by_name(&f) {
                    Some(m) => r.with_mime_type(m),
                    None => r,
                }
            })
        })
        .collect()
}

/// The URI templates: a doc by path, a skill's file by skill and path; the linked
/// extensions'.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    let mut out = Vec::new();
    #[cfg(feature = "docs")]
    out.push(
        ResourceTemplate::new(format!("{DOCS}{{path}}"), "docs")
            .with_title("Klaw's documentation")
            .with_description(
                "A file of Klaw's documentation by its path under doc/ (e.g. engine.md)",
            )
            .with_mime_type("text/markdown"),
    );
    #[cfg(feature = "skills")]
    out.push(
        ResourceTemplate::new(format!("{SKILLS}{{name}}/{{file}}"), "skill files")
            .with_title("A skill's file")
            .with_description(
                "A file of a skill by the skill's name and the path inside its folder \
                 (SKILL.md, scripts/run.py)",
            ),
    );
    out.extend(klaw_mcp_ext::extensions().flat_map(|e| (e.resource_templates)()));
    out
}

/// The contents of `uri` for a caller of session `session`.
pub(crate) async fn read(
    engine: &Engine,
    uri: &str,
    session: u64,
) -> Result<ResourceContents, ErrorData> {
    if let Some(path) = uri.strip_prefix(DOCS) {
        return read_doc(uri, path);
    }
    if let Some(rest) = uri.strip_prefix(SKILLS) {
        return read_skill(engine, uri, rest).await;
    }
    if uri == CORE_URI {
        return read_core(engine, session).await;
    }
    if let Some(c) = klaw_mcp_ext::extensions().find_map(|e| (e.read_resource)(uri)) {
        return Ok(c);
    }
    Err(not_found(uri))
}

fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!(
            "no resource {uri:?}: resources/list and resources/templates/list show what there is"
        ),
        Some(serde_json::json!({"uri": uri})),
    )
}

/// `path` as segments, or a refusal when one could step out (`..`, `.`), is empty, or
/// holds a backslash or NUL.
fn segments(uri: &str, path: &str) -> Result<(), ErrorData> {
    let bad = path.is_empty()
        || path.contains(['\\', '\0'])
        || path
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..");
    if bad {
        return Err(ErrorData::invalid_params(
            format!(
                "{uri:?} is not a resource path: give the path as listed, without `..`, `.` or empty segments"
            ),
            Some(serde_json::json!({"uri": uri})),
        ));
    }
    Ok(())
}

#[cfg_attr(not(feature = "docs"), allow(unused_variables))]
fn read_doc(uri: &str, path: &str) -> Result<ResourceContents, ErrorData> {
    segments(uri, path)?;
    #[cfg(feature = "docs")]
    if let Some((_, text)) = klaw_tools::tools::docs::embedded()
        .iter()
        .find(|(p, _)| *p == path)
    {
        return Ok(ResourceContents::text(*text, uri).with_mime_type("text/markdown"));
    }
    Err(not_found(uri))
}

#[cfg_attr(not(feature = "skills"), allow(unused_variables))]
async fn read_skill(engine: &Engine, uri: &str, rest: &str) -> Result<ResourceContents, ErrorData> {
    segments(uri, rest)?;
    let Some((name, file)) = rest.split_once('/') else {
        return Err(not_found(uri));
    };
    #[cfg(feature = "skills")]
    {
        let catalog = klaw_tools::tools::skills::catalog(engine.context())
            .await
            .map_err(|e| ErrorData::internal_error(e.message().to_owned(), None))?;
        let Some(skill) = catalog.get(name).cloned() else {
            return Err(not_found(uri));
        };
        let max = engine.context().limits().max_read_bytes;
        let file_owned = file.to_owned();
        let bytes = tokio::task::spawn_blocking(move || {
            klaw_tools::tools::skills::read_skill_file(&skill, &file_owned, max)
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("the read failed: {e}"), None))?
        .map_err(|e| {
            if e.is_not_found() {
                not_found(uri)
            } else {
                ErrorData::invalid_params(
                    e.message().to_owned(),
                    Some(serde_json::json!({"uri": uri})),
                )
            }
        })?;
        return Ok(contents(uri, file, bytes));
    }
    #[allow(unreachable_code)]
    Err(not_found(uri))
}

/// Core memory as `memory_core_get` gives it, through the engine (its hooks and limits).
async fn read_core(engine: &Engine, session: u64) -> Result<ResourceContents, ErrorData> {
    let call = ToolCall::new("memory_core_get", serde_json::json!({}))
        .with_caller(super::peers::caller(session));
    let out = engine.execute(call, None).await.map_err(|e| {
        if e.kind() == &klaw_tools::ErrorKind::UnknownTool {
            not_found(CORE_URI)
        } else {
            ErrorData::internal_error(e.message().to_owned(), None)
        }
    })?;
    let text = match out.structured() {
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
        None => out.text().to_owned(),
    };
    Ok(ResourceContents::text(text, CORE_URI).with_mime_type("application/json"))
}

/// A file's bytes as contents: text when it is UTF-8 without NUL bytes, else base64.
#[cfg_attr(not(feature = "skills"), allow(dead_code))]
pub(crate) fn contents(uri: &str, file: &str, bytes: Vec<u8>) -> ResourceContents {
    let mime = mime_of(file, &bytes);
    match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => ResourceContents::text(text, uri).with_mime_type(mime),
        Ok(text) => blob(uri, text.as_bytes(), mime),
        Err(e) => blob(uri, e.as_bytes(), mime),
    }
}

#[cfg_attr(not(feature = "skills"), allow(dead_code))]
fn blob(uri: &str, bytes: &[u8], mime: &str) -> ResourceContents {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    ResourceContents::blob(b64, uri).with_mime_type(mime)
}

/// The MIME type of `file` by its extension; by its bytes when the extension says
/// nothing (text when they are UTF-8 without NUL, else `application/octet-stream`).
#[cfg_attr(not(feature = "skills"), allow(dead_code))]
fn mime_of(file: &str, bytes: &[u8]) -> &'static str {
    mime_by_name(file).unwrap_or_else(|| {
        if std::str::from_utf8(bytes).is_ok_and(|t| !t.contains('\0')) {
            "text/plain"
        } else {
            "application/octet-stream"
        }
    })
}

/// The MIME type of `file` by its extension alone, when the extension says it; the
/// list of resources and their reading agree on every name this knows.
#[cfg_attr(not(feature = "skills"), allow(dead_code))]
fn mime_by_name(file: &str) -> Option<&'static str> {
    let lower = file.to_ascii_lowercase();
    if lower.ends_with(".tar.gz") || lower.ends_with(".tgz") {
        return Some("application/gzip");
    }
    let ext = lower.rsplit_once('.').map(|(_, e)| e).unwrap_or_default();
    Some(match ext {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "py" => "text/x-python",
        "sh" | "bash" => "text/x-shellscript",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/typescript",
        "rs" => "text/x-rust",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "xml" => "application/xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "ttf" => "font/ttf",
        "otf" => "font/otf",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "bz2" => "application/x-bzip2",
        "xz" => "application/x-xz",
        "7z" => "application/x-7z-compressed",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "wasm" => "application/wasm",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_could_step_out_are_refused() {
        for bad in [
            "",
            "..",
            "../x",
            "a/../../etc/passwd",
            "a//b",
            "./a",
            "a\\..\\b",
            "a/\0",
        ] {
            assert!(segments("u", bad).is_err(), "{bad:?}");
        }
        for good in ["engine.md", "tools/files.md", "pdf/scripts/fill.py", "a..b"] {
            assert!(segments("u", good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn text_and_binary_contents() {
        let t = serde_json::to_value(contents("u", "a.md", b"# hi".to_vec())).unwrap();
        assert_eq!(t["text"], "# hi");
        assert_eq!(t["mimeType"], "text/markdown");
        let b = serde_json::to_value(contents("u", "a.png", vec![0x89, b'P', 0, 0xff])).unwrap();
        assert_eq!(b["blob"], "iVAA/w==");
        assert_eq!(b["mimeType"], "image/png");
        let n = serde_json::to_value(contents("u", "data", vec![0, 1, 2])).unwrap();
        assert_eq!(n["mimeType"], "application/octet-stream");
    }

    /// Fonts and archives: the list's type is the reading's (issue 46); a name that
    /// says nothing claims no type in the list.
    #[test]
    fn the_list_and_the_reading_agree_on_binary_files() {
        for (file, mime) in [
            ("assets/Inter.ttf", "font/ttf"),
            ("assets/a.woff2", "font/woff2"),
            ("assets/a.otf", "font/otf"),
            ("templates/x.zip", "application/zip"),
            ("data/x.tar.gz", "application/gzip"),
            ("data/x.TGZ", "application/gzip"),
        ] {
            assert_eq!(mime_by_name(file), Some(mime), "{file}");
            let read = serde_json::to_value(contents("u", file, vec![0, 0xff, 1])).unwrap();
            assert_eq!(read["mimeType"], mime, "{file}");
        }
        assert_eq!(mime_by_name("LICENSE"), None);
    }
}
