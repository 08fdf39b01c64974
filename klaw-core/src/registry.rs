//! [`ToolRegistry`]: every tool by name, validated at start-up, rendered per client
//! format, and the one place calls are validated and dispatched.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use futures_util::FutureExt;
use serde_json::Value;

use crate::events::{EventHook, ToolEvent};
use crate::render::{Format, definition};
use crate::similar::by_similarity;
use crate::tool::{StaticTool, ToolRegistration};
use crate::validate::{Validator, check_schema};
use crate::{Lang, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Why a tool cannot be registered. Names the tool, where it comes from and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}` ({origin}): {problem}")]
pub struct RegistryError {
    /// The tool's name.
    pub tool: String,
    /// Where it was defined.
    pub origin: String,
    /// What is wrong.
    pub problem: String,
}

/// All the problems found while building a registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} tool(s) failed validation:\n  {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
pub struct RegistryErrors(pub Vec<RegistryError>);

/// Arguments of a call: parsed JSON, or JSON text as a model sent it.
#[derive(Debug, Clone)]
pub enum Args {
    /// Already parsed.
    Json(Value),
    /// Raw text; an empty string means `{}`.
    Text(String),
}

impl From<Value> for Args {
    fn from(v: Value) -> Self {
        Args::Json(v)
    }
}
impl From<String> for Args {
    fn from(s: String) -> Self {
        Args::Text(s)
    }
}
impl From<&str> for Args {
    fn from(s: &str) -> Self {
        Args::Text(s.to_owned())
    }
}

/// A call ready to run: its tool found, its arguments parsed, aliases mapped to their
/// names and checked against the schema, once ([`ToolRegistry::prepare`]). A pre-call
/// hook (an approval policy) sees [`args`](Self::args) as the tool will get them;
/// [`ToolRegistry::execute_prepared`] runs it without checking them again.
#[derive(Clone)]
pub struct PreparedCall {
    tool: Arc<dyn Tool>,
    args: Value,
}

impl PreparedCall {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.tool.spec().name
    }

    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    /// The arguments, as the tool will get them.
    pub fn args(&self) -> &Value {
        &self.args
    }

    /// Lends the arguments out by value, without copying them: for a caller that shows
    /// them to its pre-call hooks in a struct of its own (the engine's `ToolCall`).
    /// [`ArgsLent::give_back`] makes the call again, to be run without a second check.
    pub fn lend_args(self) -> (Value, ArgsLent) {
        let lent = ArgsLent {
            #[cfg(debug_assertions)]
            checked: self.args.clone(),
            tool: self.tool,
        };
        (self.args, lent)
    }
}

/// A [`PreparedCall`] whose arguments are lent out ([`PreparedCall::lend_args`]).
pub struct ArgsLent {
    tool: Arc<dyn Tool>,
    /// The arguments as they were lent (debug builds only): [`ArgsLent::give_back`]
    /// asserts it gets the same back, so a caller that changes them is caught by its
    /// tests instead of running unchecked arguments.
    #[cfg(debug_assertions)]
    checked: Value,
}

impl ArgsLent {
    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    /// The prepared call again, with `args`: the arguments lent, given back unchanged
    /// (only looked at, through shared references). They are not checked again: a debug
    /// build asserts they are the ones lent.
    pub fn give_back(self, args: Value) -> PreparedCall {
        #[cfg(debug_assertions)]
        debug_assert_eq!(args, self.checked, "arguments changed while lent");
        PreparedCall {
            tool: self.tool,
            args,
        }
    }
}

impl std::fmt::Debug for ArgsLent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsLent")
            .field("tool", &self.tool.spec().name)
            .finish()
    }
}

impl std::fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedCall")
            .field("tool", &self.name())
            .field("args", &self.args)
            .finish()
    }
}

/// A tool and its argument validator, compiled at the tool's first call (a process
/// that calls one tool compiles one schema, not all of them).
#[derive(Clone)]
struct Entry {
    tool: Arc<dyn Tool>,
    validator: Arc<std::sync::OnceLock<Validator>>,
}

impl Entry {
    fn validator(&self) -> &Validator {
        self.validator
            .get_or_init(|| Validator::new(&self.tool.spec().input_schema))
    }
}

/// The tools of an engine, sorted by name.
///
/// ```
/// use klaw_core::{ToolContext, ToolError, ToolRegistry, tool};
///
/// /// Tells the time.
/// #[tool(name = "current_time", description_ru = "Сообщает время", read_only)]
/// async fn current_time() -> Result<String, ToolError> {
///     Ok("12:00".to_owned())
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let registry = ToolRegistry::collect().expect("the linked tools are valid");
/// let ctx = ToolContext::builder().build();
/// let err = registry.execute(&ctx, "curent_time", "{}").await.unwrap_err();
/// assert!(err.is_unknown_tool());
/// assert!(err.message().contains("current_time"));
/// # }
/// ```
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Entry>,
    hooks: Vec<Arc<dyn EventHook>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with every `#[tool]` linked into the program, validated.
    ///
    /// Fails with every problem found (invalid names, duplicates, bad schemas, empty
    /// descriptions), each naming the tool and where it is defined.
    pub fn collect() -> Result<Self, RegistryErrors> {
        let mut registry = Self::new();
        let mut errors = Vec::new();
        let mut regs: Vec<&'static ToolRegistration> =
            inventory::iter::<ToolRegistration>().collect();
        regs.sort_by_key(|r| (r.name, r.file, r.line));
        for reg in regs {
            if let Err(e) = registry.register(Arc::new(StaticTool::new(reg))) {
                errors.push(e);
            }
        }
        // Each failure was already logged by `register` (a `LoadFailed` event).
        if errors.is_empty() {
            Ok(registry)
        } else {
            Err(RegistryErrors(errors))
        }
    }

    /// Adds a tool made at run time, after the same checks as start-up.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let spec = tool.spec();
        let problems = check_spec(spec);
        let problem = if !problems.is_empty() {
            Some(problems.join("; "))
        } else {
            self.tools.get(&spec.name).map(|existing| {
                format!(
                    "the name is already taken by the tool defined at {}",
                    existing.tool.spec().origin
                )
            })
        };
        if let Some(problem) = problem {
            self.emit(&ToolEvent::LoadFailed {
                tool: spec.name.clone(),
                origin: spec.origin.clone(),
                problem: problem.clone(),
            });
            return Err(RegistryError {
                tool: spec.name.clone(),
                origin: spec.origin.clone(),
                problem,
            });
        }
        self.tools.insert(
            spec.name.clone(),
            Entry {
                tool,
                validator: Arc::default(),
            },
        );
        Ok(())
    }

    /// Removes a tool; returns it if it was there.
    pub fn unregister(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.remove(name).map(|e| e.tool)
    }

    /// Adds a subscriber to tool events (executed, failed, failed to load).
    pub fn subscribe(&mut self, hook: impl EventHook) {
        self.hooks.push(Arc::new(hook));
    }

    /// The tool called `name`.
    pub fn by_name(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|e| &e.tool)
    }

    /// Every tool, sorted by name.
    pub fn all(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values().map(|e| &e.tool)
    }

    /// Every tool's name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Every tool's definition for `format` in `lang`, sorted by name.
    pub fn definitions(&self, format: Format, lang: Lang) -> Vec<Value> {
        self.tools
            .values()
            .map(|e| definition(e.tool.spec(), format, lang))
            .collect()
    }

    /// Prepares a call of `name`: finds the tool, parses `args` from text, maps aliases
    /// to their names and checks them against the schema, once. What an approval policy
    /// should look at (not the raw arguments, which an alias could disguise), and what
    /// [`execute_prepared`](Self::execute_prepared) runs without checking again. Errors
    /// are those [`execute`](Self::execute) would give; no event is sent for them (see
    /// [`failed`](Self::failed)).
    pub fn prepare(&self, name: &str, args: impl Into<Args>) -> Result<PreparedCall, ToolError> {
        let Some(entry) = self.tools.get(name) else {
            return Err(self.unknown(name));
        };
        let args = prepare(entry.tool.spec(), entry.validator(), args.into())
            .map_err(|e| e.with_tool(name))?;
        Ok(PreparedCall {
            tool: Arc::clone(&entry.tool),
            args,
        })
    }

    /// Validates `args` against the tool's schema and calls it:
    /// [`prepare`](Self::prepare), then [`execute_prepared`](Self::execute_prepared).
    ///
    /// Never panics on what a caller sends: malformed JSON, wrong types, missing or
    /// unknown fields, an unknown tool, a timeout and a panic inside the tool all come
    /// back as a [`ToolError`] with a kind and a message for the model.
    pub async fn execute(
        &self,
        ctx: &ToolContext,
        name: &str,
        args: impl Into<Args>,
    ) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        let result = match self.prepare(name, args) {
            Ok(call) => self.run(ctx, call).await,
            Err(e) => Err(e),
        };
        self.report(ctx, name, started, result.as_ref().err());
        result
    }

    /// Runs a call [`prepare`](Self::prepare) made (its arguments are not checked
    /// again): the time limit, cancellation, a panic caught; the outcome's event sent as
    /// [`execute`](Self::execute) sends it.
    pub async fn execute_prepared(
        &self,
        ctx: &ToolContext,
        call: PreparedCall,
    ) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        let tool = Arc::clone(&call.tool);
        let result = self.run(ctx, call).await;
        self.report(ctx, &tool.spec().name, started, result.as_ref().err());
        result
    }

    /// A call that failed before it could run (what [`prepare`](Self::prepare)
    /// refused): sends its `Failed` event, as [`execute`](Self::execute) would, and gives
    /// the error back.
    pub fn failed(&self, ctx: &ToolContext, name: &str, error: ToolError) -> ToolError {
        self.report(ctx, name, Instant::now(), Some(&error));
        error
    }

    /// Sends a call's event: executed, or failed with `error`.
    fn report(&self, ctx: &ToolContext, name: &str, started: Instant, error: Option<&ToolError>) {
        let elapsed = started.elapsed();
        match error {
            None => {
                // Building the event costs an allocation: only when someone listens.
                if !self.hooks.is_empty()
                    || tracing::enabled!(target: "klaw::tools", tracing::Level::DEBUG)
                {
                    self.emit(&ToolEvent::Executed {
                        tool: name.to_owned(),
                        call_id: ctx.call_id().map(str::to_owned),
                        elapsed,
                    });
                }
            }
            Some(e) => self.emit(&ToolEvent::Failed {
                tool: name.to_owned(),
                call_id: ctx.call_id().map(str::to_owned),
                elapsed,
                error: e.clone(),
            }),
        }
    }

    async fn run(&self, ctx: &ToolContext, call: PreparedCall) -> Result<ToolOutput, ToolError> {
        let PreparedCall { tool, args } = call;
        let spec = tool.spec();
        let name = spec.name.as_str();
        let timeout = spec.timeout.unwrap_or(ctx.limits().tool_timeout);
        let cancel = ctx.cancellation();
        if cancel.is_cancelled() {
            return Err(ToolError::cancelled("the call was cancelled").with_tool(name));
        }
        let mut call =
            std::pin::pin!(AssertUnwindSafe(tool.call(ctx.clone(), args)).catch_unwind());
        // Most tools finish on their first poll: only arm the timer and the
        // cancellation watch for those that do not.
        let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        let outcome = match first {
            Poll::Ready(r) => Ok(r),
            Poll::Pending => tokio::select! {
                biased;
                r = tokio::time::timeout(timeout, call) => r,
                () = cancel.cancelled() => return Err(ToolError::cancelled("the call was cancelled").with_tool(name)),
            },
        };
        match outcome {
            Err(_) => Err(ToolError::timeout(format!(
                "`{name}` did not finish within {} and was stopped",
                human(timeout)
            ))
            .with_tool(name)),
            Ok(Err(panic)) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                Err(
                    ToolError::failed(format!("`{name}` failed with an internal error"))
                        .with_detail(format!("panic: {what}"))
                        .with_tool(name),
                )
            }
            Ok(Ok(Err(e))) => Err(e.with_tool(name)),
            Ok(Ok(Ok(out))) => Ok(out),
        }
    }

    fn unknown(&self, name: &str) -> ToolError {
        let close: Vec<(f64, &str)> = by_similarity(name, self.names())
            .into_iter()
            .filter(|(score, n)| {
                *score > 0.8 || n.contains(name) || (!n.is_empty() && name.contains(n))
            })
            .collect();
        let names: Vec<String> = close
            .iter()
            .take(3)
            .map(|(_, n)| format!("`{n}`"))
            .collect();
        let hint = if names.is_empty() {
            format!(
                "; available tools: {}",
                self.names().collect::<Vec<_>>().join(", ")
            )
        } else {
            format!("; did you mean {}?", names.join(" or "))
        };
        ToolError::unknown_tool(format!("unknown tool `{name}`{hint}"))
    }

    /// Logs `event` and gives it to every subscriber (the engine's run-time additions and
    /// removals, a loader's failures that never reached [`register`](Self::register)).
    pub fn emit(&self, event: &ToolEvent) {
        event.trace();
        for hook in &self.hooks {
            hook.on_event(event);
        }
    }
}

fn human(d: std::time::Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
thread_local! {
    /// How many times [`prepare`] ran on this thread (a test counts validations).
    static PREPARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Parses, de-aliases and validates a call's arguments.
fn prepare(spec: &ToolSpec, validator: &Validator, args: Args) -> Result<Value, ToolError> {
    #[cfg(test)]
    PREPARED.with(|n| n.set(n.get() + 1));
    let mut value = match args {
        Args::Json(v) => v,
        Args::Text(t) if t.trim().is_empty() => Value::Object(Default::default()),
        Args::Text(t) => serde_json::from_str(&t).map_err(|e| {
            ToolError::invalid_arguments("", format!("the arguments are not valid JSON: {e}"))
        })?,
    };
    let Value::Object(map) = &mut value else {
        return Err(ToolError::invalid_arguments(
            "",
            format!(
                "the arguments must be a JSON object, got {}",
                crate::validate::type_name(&value)
            ),
        ));
    };
    for (alias, canonical) in &spec.aliases {
        if let Some(v) = map.remove(alias) {
            if map.contains_key(canonical) {
                return Err(ToolError::invalid_arguments(
                    format!("/{alias}"),
                    format!(
                        "`{alias}` and `{canonical}` are the same argument; send only `{canonical}`"
                    ),
                ));
            }
            map.insert(canonical.clone(), v);
        }
    }
    let violations = validator.validate(&value);
    if let Some(first) = violations.first() {
        let message = violations
            .iter()
            .map(|v| {
                format!(
                    "{}: {}",
                    if v.pointer.is_empty() {
                        "/"
                    } else {
                        &v.pointer
                    },
                    v.message
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(ToolError::invalid_arguments(first.pointer.clone(), message));
    }
    Ok(value)
}

/// Every problem with a spec, as start-up reports them.
pub(crate) fn check_spec(spec: &ToolSpec) -> Vec<String> {
    let mut problems = Vec::new();
    if !valid_name(&spec.name) {
        problems.push(format!(
            "the name `{}` must match ^[a-zA-Z0-9_-]{{1,64}}$",
            spec.name
        ));
    }
    if spec.description.ru.trim().is_empty() {
        problems.push("the Russian description is empty".into());
    }
    if spec
        .description
        .en
        .as_deref()
        .is_some_and(|e| e.trim().is_empty())
    {
        problems.push("the English description is empty".into());
    }
    for p in check_schema(&spec.input_schema) {
        problems.push(format!("input schema: {p}"));
    }
    if let Some(out) = &spec.output_schema {
        for p in check_schema(out) {
            problems.push(format!("output schema: {p}"));
        }
    }
    if spec.timeout.is_some_and(|t| t.is_zero()) {
        problems.push("the timeout is zero".into());
    }
    problems
}

/// Tool names clients accept: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, FnTool};
    use serde_json::json;

    fn echo(name: &str) -> Arc<dyn Tool> {
        let schema = json!({
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": false,
        });
        Arc::new(FnTool::new(
            ToolSpec::new(name, "Повторяет", schema),
            |_, _| async { Ok(ToolOutput::plain("эхо")) },
        ))
    }

    #[tokio::test]
    async fn unregister_removes_a_tool_and_frees_its_name() {
        let mut registry = ToolRegistry::new();
        registry.register(echo("echo_a")).unwrap();
        registry.register(echo("echo_b")).unwrap();

        let removed = registry.unregister("echo_a").unwrap();
        assert_eq!(removed.spec().name, "echo_a");
        assert!(registry.unregister("echo_a").is_none());
        assert_eq!(registry.names().collect::<Vec<_>>(), ["echo_b"]);
        let ctx = ToolContext::builder().build();
        let e = registry
            .execute(&ctx, "echo_a", json!({}))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::UnknownTool, "{e}");

        // The name is free again: a run-time tool can take it.
        registry.register(echo("echo_a")).unwrap();
        let out = registry.execute(&ctx, "echo_a", json!({})).await.unwrap();
        assert_eq!(out.text(), "эхо");
    }

    /// A tool with an alias that answers with the arguments it got.
    fn show_args() -> Arc<dyn Tool> {
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": false,
        });
        let mut spec = ToolSpec::new("show_args", "Показывает аргументы", schema);
        spec.aliases = vec![("file".into(), "path".into())];
        Arc::new(FnTool::new(spec, |_, args| async move {
            Ok(ToolOutput::plain(args.to_string()))
        }))
    }

    fn validations() -> usize {
        PREPARED.with(std::cell::Cell::get)
    }

    #[tokio::test]
    async fn a_prepared_call_is_validated_once_and_runs_without_a_second_pass() {
        let mut registry = ToolRegistry::new();
        registry.register(show_args()).unwrap();
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        registry.subscribe(move |e: &ToolEvent| seen.lock().unwrap().push(format!("{e:?}")));
        let ctx = ToolContext::builder().build().with_call_id("c-1");

        let before = validations();
        let call = registry
            .prepare("show_args", r#"{"file": "a.txt"}"#)
            .unwrap();
        assert_eq!(validations(), before + 1);
        assert_eq!(call.name(), "show_args");
        // The alias is mapped: what a hook sees is what the tool gets.
        assert_eq!(call.args(), &json!({"path": "a.txt"}));
        let out = registry.execute_prepared(&ctx, call).await.unwrap();
        assert_eq!(out.text(), r#"{"path":"a.txt"}"#);
        assert_eq!(
            validations(),
            before + 1,
            "execute_prepared validated again"
        );
        // Lent out and given back (a hook looked at them): the same call, not copied
        // nor validated again.
        let call = registry
            .prepare("show_args", json!({"path": "c.txt"}))
            .unwrap();
        let (args, lent) = call.lend_args();
        let shown = args.as_object().unwrap()["path"].as_str().unwrap().as_ptr();
        assert_eq!(lent.spec().name, "show_args");
        let call = lent.give_back(args);
        assert_eq!(call.args()["path"].as_str().unwrap().as_ptr(), shown);
        let out = registry.execute_prepared(&ctx, call).await.unwrap();
        assert_eq!(out.text(), r#"{"path":"c.txt"}"#);
        assert_eq!(validations(), before + 2);
        // `execute` is the two steps: one validation.
        registry
            .execute(&ctx, "show_args", json!({"path": "b.txt"}))
            .await
            .unwrap();
        assert_eq!(validations(), before + 3);
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(
            events.iter().all(|e| e.starts_with("Executed")),
            "{events:?}"
        );
    }

    /// Arguments changed while lent are caught in a debug build (the tests'), not run
    /// unchecked.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "arguments changed while lent")]
    fn arguments_changed_while_lent_are_caught() {
        let mut registry = ToolRegistry::new();
        registry.register(show_args()).unwrap();
        let call = registry
            .prepare("show_args", json!({"path": "c.txt"}))
            .unwrap();
        let (_, lent) = call.lend_args();
        let _ = lent.give_back(json!({"path": "/etc/shadow"}));
    }

    #[tokio::test]
    async fn what_prepare_refuses_fails_with_the_event_execute_sends() {
        let mut registry = ToolRegistry::new();
        registry.register(show_args()).unwrap();
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&failures);
        registry.subscribe(move |e: &ToolEvent| {
            if let ToolEvent::Failed {
                tool,
                call_id,
                error,
                ..
            } = e
            {
                seen.lock()
                    .unwrap()
                    .push((tool.clone(), call_id.clone(), error.clone()));
            }
        });
        let ctx = ToolContext::builder().build().with_call_id("c-2");
        let by_execute = registry
            .execute(&ctx, "show_args", json!({"path": 1}))
            .await
            .unwrap_err();
        let refused = registry
            .prepare("show_args", json!({"path": 1}))
            .unwrap_err();
        let by_prepare = registry.failed(&ctx, "show_args", refused);
        assert_eq!(by_prepare, by_execute);
        assert!(by_prepare.is_invalid_arguments(), "{by_prepare}");
        let failures = failures.lock().unwrap();
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0], failures[1]);
        assert_eq!(failures[0].1.as_deref(), Some("c-2"));
    }
}
