//! `completion/complete`: values for a resource template's variable (doc paths, skill
//! names, a skill's files) and for a prompt's argument (none: a skill's `task` is free
//! text). MCP completes only these; a tool's arguments are described by its schema
//! (enums included), which clients read from `tools/list`.

use rmcp::model::{CompleteRequestParams, CompletionInfo, Reference};

use crate::Engine;

/// The completion of `request`'s argument: at most 100 values that start with what was
/// typed (then those that contain it), with the total.
#[cfg_attr(not(feature = "skills"), allow(clippy::unused_async, unused_variables))]
pub(crate) async fn complete(engine: &Engine, request: &CompleteRequestParams) -> CompletionInfo {
    let typed = request.argument.value.as_str();
    let candidates: Vec<String> = match &request.r#ref {
        Reference::Resource(r) => match (r.uri.as_str(), request.argument.name.as_str()) {
            #[cfg(feature = "docs")]
            ("klaw://docs/{path}", "path") => klaw_tools::tools::docs::embedded()
                .iter()
                .map(|(p, _)| (*p).to_owned())
                .collect(),
            #[cfg(feature = "skills")]
            ("klaw://skills/{name}/{file}", "name") => {
                match klaw_tools::tools::skills::catalog(engine.context()).await {
                    Ok(c) => c.skills.iter().map(|s| s.name().to_owned()).collect(),
                    Err(_) => Vec::new(),
                }
            }
            #[cfg(feature = "skills")]
            ("klaw://skills/{name}/{file}", "file") => {
                let name = request
                    .context
                    .as_ref()
                    .and_then(|c| c.arguments.as_ref())
                    .and_then(|a| a.get("name"))
                    .cloned()
                    .unwrap_or_default();
                skill_files(engine, &name).await
            }
            _ => Vec::new(),
        },
        // A skill's `task` is free text; the fixtures' arguments too.
        _ => Vec::new(),
    };
    matching(candidates, typed)
}

#[cfg(feature = "skills")]
async fn skill_files(engine: &Engine, name: &str) -> Vec<String> {
    let Ok(catalog) = klaw_tools::tools::skills::catalog(engine.context()).await else {
        return Vec::new();
    };
    let Some(skill) = catalog.get(name).cloned() else {
        return Vec::new();
    };
    tokio::task::spawn_blocking(move || {
        let mut files = vec![klaw_tools::tools::skills::SKILL_MD.to_owned()];
        files.extend(klaw_tools::tools::skills::skill_files(&skill));
        files
    })
    .await
    .unwrap_or_default()
}

/// The candidates that start with `typed`, then those that only contain it, at most
/// [`CompletionInfo::MAX_VALUES`], with the total and whether there are more.
fn matching(candidates: Vec<String>, typed: &str) -> CompletionInfo {
    let (mut first, rest): (Vec<String>, Vec<String>) =
        candidates.into_iter().partition(|c| c.starts_with(typed));
    first.extend(rest.into_iter().filter(|c| c.contains(typed)));
    let total = first.len();
    first.truncate(CompletionInfo::MAX_VALUES);
    let mut info = CompletionInfo::default();
    info.total = u32::try_from(total).ok();
    info.has_more = Some(total > first.len());
    info.values = first;
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_matches_come_first_and_the_list_is_capped() {
        let c = matching(
            vec![
                "tools/docs.md".into(),
                "engine.md".into(),
                "doc-x.md".into(),
            ],
            "doc",
        );
        assert_eq!(c.values, ["doc-x.md", "tools/docs.md"]);
        assert_eq!((c.total, c.has_more), (Some(2), Some(false)));
        let many = (0..150).map(|i| format!("f{i}")).collect();
        let c = matching(many, "f");
        assert_eq!(c.values.len(), 100);
        assert_eq!((c.total, c.has_more), (Some(150), Some(true)));
    }
}
