//! MCP prompts: each skill in effect is a prompt (its name and description, and an
//! optional `task` argument). Getting one loads it through the engine as `skill_load`
//! (so a loaded skill's allowed-tools count for the session), and returns its SKILL.md,
//! then its files as embedded resources (`klaw://skills/{name}/{file}`; past
//! `limits.maxReadBytes` in all, as resource links the client can read), then the task.
//! Then the linked extensions' (`klaw_mcp_ext`: the conformance suite's in a build with
//! the test fixtures).

use rmcp::ErrorData;
use rmcp::model::{GetPromptResult, Prompt};
use serde_json::{Map, Value};

use crate::Engine;

/// Whether this build serves prompts at all.
pub(crate) fn served() -> bool {
    cfg!(feature = "skills") || klaw_mcp_ext::serves_prompts()
}

/// What clients see of the skills: each one's name, description and files. A change
/// between two looks is announced (`notifications/prompts/list_changed` and
/// `notifications/resources/list_changed`).
#[cfg(feature = "skills")]
pub(crate) async fn skills_seen(engine: &Engine) -> Vec<(String, String, Vec<String>)> {
    let Ok(catalog) = klaw_tools::tools::skills::catalog(engine.context()).await else {
        return Vec::new();
    };
    tokio::task::spawn_blocking(move || {
        catalog
            .skills
            .iter()
            .map(|s| {
                (
                    s.name().to_owned(),
                    s.description().to_owned(),
                    klaw_tools::tools::skills::skill_files(s),
                )
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// The name of a skill prompt's one argument.
#[cfg(feature = "skills")]
pub(crate) const TASK: &str = "task";

/// Every prompt: the skills in name order, then the linked extensions'.
#[cfg_attr(not(feature = "skills"), allow(clippy::unused_async, unused_variables))]
pub(crate) async fn list(engine: &Engine) -> Result<Vec<Prompt>, ErrorData> {
    #[allow(unused_mut)]
    let mut out = Vec::new();
    #[cfg(feature = "skills")]
    {
        let catalog = klaw_tools::tools::skills::catalog(engine.context())
            .await
            .map_err(|e| ErrorData::internal_error(e.message().to_owned(), None))?;
        out.extend(catalog.skills.iter().map(|s| {
            Prompt::new(
                s.name(),
                Some(s.description()),
                Some(vec![
                    rmcp::model::PromptArgument::new(TASK)
                        .with_description("What to use the skill for (optional)")
                        .with_required(false),
                ]),
            )
        }));
    }
    out.extend(klaw_mcp_ext::extensions().flat_map(|e| (e.prompts)()));
    Ok(out)
}

/// The prompt `name` with `args`, for session `session`.
#[cfg_attr(not(feature = "skills"), allow(clippy::unused_async, unused_variables))]
pub(crate) async fn get(
    engine: &Engine,
    name: &str,
    args: &Map<String, Value>,
    session: u64,
) -> Result<GetPromptResult, ErrorData> {
    if let Some(p) = klaw_mcp_ext::extensions().find_map(|e| (e.get_prompt)(name, args)) {
        return Ok(p);
    }
    #[cfg(feature = "skills")]
    return skill(engine, name, args, session).await;
    #[allow(unreachable_code)]
    Err(ErrorData::invalid_params(
        format!("no prompt `{name}`"),
        None,
    ))
}

#[cfg(feature = "skills")]
async fn skill(
    engine: &Engine,
    name: &str,
    args: &Map<String, Value>,
    session: u64,
) -> Result<GetPromptResult, ErrorData> {
    use rmcp::model::{ContentBlock, PromptMessage, Resource, Role};

    let call = crate::ToolCall::new("skill_load", serde_json::json!({"name": name}))
        .with_caller(super::peers::caller(session));
    let out = engine
        .execute(call, None)
        .await
        .map_err(|e| ErrorData::invalid_params(e.message().to_owned(), None))?;
    let structured = out.structured();
    let text = structured
        .and_then(|v| v.get("content"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| out.text());
    let mut messages = vec![PromptMessage::new_text(Role::User, text)];
    // The files, read as the resources are, within one budget.
    let catalog = klaw_tools::tools::skills::catalog(engine.context())
        .await
        .map_err(|e| ErrorData::internal_error(e.message().to_owned(), None))?;
    if let Some(skill) = catalog.get(name).cloned() {
        let budget = engine.context().limits().max_read_bytes;
        let skill_name = skill.name().to_owned();
        let files = tokio::task::spawn_blocking(move || {
            let mut left = budget;
            klaw_tools::tools::skills::skill_files(&skill)
                .into_iter()
                .map(|f| {
                    let read = klaw_tools::tools::skills::read_skill_file(&skill, &f, left).ok();
                    if let Some(b) = &read {
                        left = left.saturating_sub(b.len() as u64);
                    }
                    (f, read)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (f, bytes) in files {
            let uri = format!("klaw://skills/{skill_name}/{f}");
            messages.push(match bytes {
                Some(b) => PromptMessage::new(
                    Role::User,
                    ContentBlock::resource(super::resources::contents(&uri, &f, b)),
                ),
                None => PromptMessage::new_resource_link(Role::User, Resource::new(uri, f)),
            });
        }
    }
    if let Some(task) = args.get(TASK).and_then(Value::as_str).map(str::trim)
        && !task.is_empty()
    {
        messages.push(PromptMessage::new_text(
            Role::User,
            format!("The task: {task}"),
        ));
    }
    let mut result = GetPromptResult::new(messages);
    result.description = structured
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .map(|n| format!("The skill `{n}`"));
    Ok(result)
}
