//! `tool_create` and `tool_delete`: the agent writes (and removes) its own tools as
//! manifests in `<workspace>/tools/<name>/` — a script and its `tool.yaml` — checked the
//! way every manifest is before anything is saved, then loaded at once
//! (`crate::manifests`). Both are destructive: the approval policy asks.

use std::sync::Arc;

use klaw_tools::tools::files::{WriteMode, file_delete, file_write, files_beneath};
use klaw_tools::{
    Annotations, FnTool, FromToolContext, Limits, Tool, ToolContext, ToolError, ToolOutput,
    ToolRegistry, ToolSchema, ToolSpec, Workspace,
};
use serde_json::{Value, json};

use crate::Engine;
use crate::manifests::manifest::{self, MAX_TIMEOUT_SECONDS, Root, Written};
use crate::manifests::{Manifests, TOOLS_DIR, syntax};

/// The arguments of `tool_create`.
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateArgs {
    /// Имя инструмента: латинские буквы, цифры, _ и -, до 64 символов
    #[schema(
        description_en = "The tool's name: Latin letters, digits, _ and -, up to 64 characters"
    )]
    name: String,
    /// Что делает инструмент и когда его звать — это описание прочтёт модель
    #[schema(description_en = "What the tool does and when to call it: the model reads this")]
    #[serde(alias = "description_ru", alias = "descriptionRu")]
    description: String,
    /// То же по-английски (необязательно)
    #[schema(description_en = "The same in English (optional)")]
    #[serde(alias = "description_en")]
    description_en: Option<String>,
    /// JSON Schema аргументов (type: object, properties, required); без неё — без аргументов
    #[schema(
        description_en = "The JSON Schema of the arguments (type: object, properties, required); without it the tool takes none"
    )]
    #[serde(alias = "schema", alias = "inputSchema")]
    parameters: Option<Value>,
    /// Текст скрипта: аргументы приходят JSON-объектом на stdin, stdout — результат (JSON-объект станет структурированным результатом), ненулевой код выхода — ошибка
    #[schema(
        description_en = "The script: the arguments arrive as a JSON object on stdin, stdout is the result (a JSON object becomes structured content), a non-zero exit code is an error"
    )]
    #[serde(alias = "code", alias = "source")]
    script: String,
    /// Интерпретатор скрипта из PATH: python3, sh, bash, node, perl...
    #[schema(
        description_en = "The script's interpreter on PATH: python3, sh, bash, node, perl..."
    )]
    #[serde(alias = "language", alias = "runtime")]
    interpreter: String,
    /// Лимит времени вызова в секундах (по умолчанию 60, не больше 3600)
    #[schema(description_en = "The call's time limit in seconds (default 60, at most 3600)")]
    timeout: Option<u64>,
    /// true — заменить свой инструмент с этим именем, если он уже есть
    #[schema(description_en = "true replaces a tool of yours by this name if there is one")]
    #[serde(default)]
    replace: bool,
}

/// The arguments of `tool_delete`.
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteArgs {
    /// Имя инструмента, созданного tool_create (или манифестом в рабочей области)
    #[schema(
        description_en = "The name of a tool made by tool_create (or a manifest in the workspace)"
    )]
    name: String,
}

/// Registers `tool_create` and `tool_delete` for `manifests`.
pub(crate) fn register(
    engine: &Engine,
    manifests: &Arc<Manifests>,
) -> Result<(), klaw_tools::RegistryError> {
    engine.register(create(engine.clone(), Arc::clone(manifests)))?;
    engine.register(delete(engine.clone(), Arc::clone(manifests)))?;
    Ok(())
}

fn destructive() -> Annotations {
    Annotations {
        destructive: true,
        ..Default::default()
    }
}

fn create(engine: Engine, manifests: Arc<Manifests>) -> Arc<dyn Tool> {
    let spec = ToolSpec::new(
        "tool_create",
        "Создаёт новый инструмент из скрипта: он сразу появляется в списке инструментов и \
         вызывается как любой другой (в песочнице exec). Аргументы вызова скрипт получает \
         JSON-объектом на stdin, результат печатает в stdout. Сохраняется в \
         tools/<name>/ рабочей области и переживает перезапуск.",
        Value::Null,
    )
    .with_description_en(
        "Create a new tool from a script: it appears in the tool list at once and is called \
         like any other (in exec's sandbox). The script gets the call's arguments as a JSON \
         object on stdin and prints the result to stdout. Saved in tools/<name>/ of the \
         workspace; survives restarts.",
    )
    .with_title("Создать инструмент", Some("Create a tool".into()))
    .with_annotations(destructive())
    .with_origin("klaw-engine:manifests");
    Arc::new(FnTool::typed(spec, move |ctx, args: CreateArgs| {
        let (engine, manifests) = (engine.clone(), Arc::clone(&manifests));
        async move { create_tool(&ctx, &engine, &manifests, args).await }
    }))
}

fn delete(engine: Engine, manifests: Arc<Manifests>) -> Arc<dyn Tool> {
    let spec = ToolSpec::new(
        "tool_delete",
        "Удаляет инструмент, созданный tool_create (папку tools/<name>/ рабочей области); \
         встроенные инструменты и инструменты системной папки не удаляются.",
        Value::Null,
    )
    .with_description_en(
        "Delete a tool made by tool_create (the workspace's tools/<name>/ folder); built-in \
         tools and those of the system folder cannot be deleted.",
    )
    .with_title("Удалить инструмент", Some("Delete a tool".into()))
    .with_annotations(destructive())
    .with_origin("klaw-engine:manifests");
    Arc::new(FnTool::typed(spec, move |ctx, args: DeleteArgs| {
        let (engine, manifests) = (engine.clone(), Arc::clone(&manifests));
        async move { delete_tool(&ctx, &engine, &manifests, &args.name).await }
    }))
}

/// The file name of the script for `interpreter`.
fn script_name(interpreter: &str) -> String {
    let ext = match interpreter {
        "python" | "python3" => "py",
        "sh" | "bash" | "dash" | "zsh" => "sh",
        "node" | "nodejs" => "js",
        "perl" => "pl",
        "ruby" => "rb",
        "php" => "php",
        "lua" => "lua",
        _ => return "script".into(),
    };
    format!("script.{ext}")
}

/// Whether the registered tool `name` is a manifest of the workspace (one the agent may
/// replace or delete).
fn is_workspace_manifest(engine: &Engine, manifests: &Manifests, name: &str) -> Option<bool> {
    let registry = engine.registry();
    let tool = registry.by_name(name)?;
    Some(tool.spec().origin == manifests.workspace_origin(name))
}

async fn create_tool(
    ctx: &ToolContext,
    engine: &Engine,
    manifests: &Arc<Manifests>,
    args: CreateArgs,
) -> Result<ToolOutput, ToolError> {
    let name = args.name.trim().to_owned();
    let interpreter = args.interpreter.trim();
    if interpreter.is_empty() || interpreter.contains(['/', ' ', '\0']) {
        return Err(ToolError::invalid_arguments(
            "/interpreter",
            "give a program's name on PATH (python3, sh, node...), not a path or a command line",
        ));
    }
    let timeout = args.timeout.unwrap_or(manifest::DEFAULT_TIMEOUT_SECONDS);
    if timeout == 0 || timeout > MAX_TIMEOUT_SECONDS {
        return Err(ToolError::invalid_arguments(
            "/timeout",
            format!("must be 1 to {MAX_TIMEOUT_SECONDS} seconds"),
        ));
    }
    if args.script.trim().is_empty() {
        return Err(ToolError::invalid_arguments("/script", "empty"));
    }
    if let Some(server) = manifests.owner(&name) {
        return Err(ToolError::invalid_arguments(
            "/name",
            format!(
                "`{name}` is a name of the imported MCP server `{server}`'s tools (`{server}__...`); choose another name"
            ),
        ));
    }
    let existed = is_workspace_manifest(engine, manifests, &name);
    match existed {
        Some(false) => {
            return Err(ToolError::invalid_arguments(
                "/name",
                format!(
                    "`{name}` is the name of a tool that is not yours to replace; choose another name"
                ),
            ));
        }
        Some(true) if !args.replace => {
            return Err(ToolError::invalid_arguments(
                "/name",
                format!(
                    "your tool `{name}` exists; pass replace: true to replace it, or choose another name"
                ),
            ));
        }
        _ => {}
    }
    let script = script_name(interpreter);
    let parameters = args
        .parameters
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let text = Written {
        name: &name,
        description_ru: args.description.trim(),
        description_en: args.description_en.as_deref().map(str::trim),
        parameters: &parameters,
        command: vec![interpreter.to_owned(), script.clone()],
        timeout,
    }
    .render()
    .map_err(ToolError::failed)?;
    // The checks of every manifest and of the registry, before anything is saved.
    let tools_dir = manifests.workspace_dir();
    let checked = manifest::parse(&text, &name, Root::Workspace, &tools_dir, ctx.workspace())
        .map_err(|problem| ToolError::invalid_arguments("", problem))?;
    let probe = FnTool::new(checked.spec, |_ctx, _args| async {
        Ok(ToolOutput::plain(""))
    });
    ToolRegistry::new()
        .register(Arc::new(probe))
        .map_err(|e| ToolError::invalid_arguments("", e.problem))?;
    // The script's syntax, by its interpreter's own parser, before anything is written.
    let (program, file, code) = (interpreter.to_owned(), script.clone(), args.script.clone());
    tokio::task::spawn_blocking(move || syntax::check_text(&program, &file, code.as_bytes()))
        .await
        .map_err(|e| ToolError::failed("the script could not be checked").with_source(e))?
        .map_err(|problem| ToolError::invalid_arguments("/script", problem))?;
    let (ws, limits) = (Workspace::from_ctx(ctx)?, Limits::from_ctx(ctx)?);
    let dir = format!("{TOOLS_DIR}/{name}");
    file_write(
        ws.clone(),
        limits.clone(),
        format!("{dir}/{script}"),
        args.script,
        WriteMode::Overwrite,
    )
    .await?;
    file_write(
        ws,
        limits,
        format!("{dir}/tool.yaml"),
        text,
        WriteMode::Overwrite,
    )
    .await?;
    // Loaded now (the watcher may have been first: the report then says nothing new).
    let (m, e) = (Arc::clone(manifests), engine.clone());
    let report = tokio::task::spawn_blocking(move || m.sync(&e))
        .await
        .map_err(|e| ToolError::failed("the tools could not be reloaded").with_source(e))?;
    if let Some(f) = report.failed.iter().find(|f| f.name == name) {
        return Err(ToolError::failed(format!(
            "the tool was saved in {dir}/ but does not load: {}",
            f.problem
        )));
    }
    Ok(ToolOutput::json(json!({
        "created": existed.is_none(),
        "replaced": existed.is_some(),
        "name": name,
        "manifest": format!("{dir}/tool.yaml"),
        "script": format!("{dir}/{script}"),
    })))
}

async fn delete_tool(
    ctx: &ToolContext,
    engine: &Engine,
    manifests: &Arc<Manifests>,
    name: &str,
) -> Result<ToolOutput, ToolError> {
    let name = name.trim();
    match is_workspace_manifest(engine, manifests, name) {
        Some(true) => {}
        Some(false) => {
            return Err(ToolError::access_denied(format!(
                "`{name}` is not a tool of the workspace's tools/ folder: built-in tools, imported \
                 ones and the system folder's cannot be deleted"
            )));
        }
        // A manifest that does not load is still the agent's to delete.
        None if engine
            .failed()
            .iter()
            .any(|f| f.name == name && f.origin == manifests.workspace_origin(name)) => {}
        None => {
            return Err(ToolError::not_found(format!(
                "there is no tool `{name}` to delete"
            )));
        }
    }
    let ws = Workspace::from_ctx(ctx)?;
    let dir = format!("{TOOLS_DIR}/{name}");
    // The manifest first: the tool is gone even if a script stays behind.
    file_delete(ws.clone(), format!("{dir}/tool.yaml")).await?;
    let mut left = Vec::new();
    for file in files_beneath(ctx.workspace(), &dir).unwrap_or_default() {
        if file_delete(ws.clone(), format!("{dir}/{file}"))
            .await
            .is_err()
        {
            left.push(file);
        }
    }
    // Removed beneath the workspace by the kernel; a folder with more in it stays.
    let root = ctx.workspace().to_owned();
    let folder = dir.clone();
    let removed = tokio::task::spawn_blocking(move || {
        cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority())
            .and_then(|d| d.remove_dir(&folder))
            .is_ok()
    })
    .await
    .unwrap_or(false);
    let (m, e) = (Arc::clone(manifests), engine.clone());
    let _ = tokio::task::spawn_blocking(move || m.sync(&e)).await;
    Ok(ToolOutput::json(json!({
        "deleted": true,
        "name": name,
        "folderRemoved": removed,
        "left": left,
    })))
}
