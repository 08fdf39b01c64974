//! The approval policy (`agent.approval`): which calls need a person's yes, the question
//! they are shown (the whole arguments), and the pre-call hook that asks the approver of
//! the call's channel. Outside the turn loop: the engine runs the hook before every call,
//! whoever made it.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use klaw_tools::ToolSpec;

use crate::{Engine, HookFuture, PreCallHook, ToolCall};

pub use crate::config::Approval;

/// Refuses every call that needs approval: nobody can be asked (a channel without a
/// person, a subagent). The reason says where.
#[derive(Debug, Clone)]
pub struct RefuseApproval(pub &'static str);

impl Approver for RefuseApproval {
    fn approve<'a>(&'a self, _call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a> {
        let reason = format!(
            "`{}` needs a person's approval (agent.approval), and {}; tell the user what \
             you wanted to do instead",
            spec.name, self.0
        );
        Box::pin(std::future::ready(Err(reason.into())))
    }
}

/// Asks a person whether a call may run: `Ok(())` lets it, `Err(refusal)` refuses it
/// (the model reads its reason; a failure to ask is its source, for the log). A channel without a person refuses at once.
pub trait Approver: Send + Sync + 'static {
    /// Answers for `call` of the tool `spec`.
    fn approve<'a>(&'a self, call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a>;
}

/// The width [`approval_question`] wraps the arguments at.
pub const QUESTION_WIDTH: usize = 100;

/// What a person is shown before a call runs: the tool and its whole arguments (pretty
/// JSON), never a cut preview of what will run. Long lines are wrapped at
/// [`QUESTION_WIDTH`] characters (a line break inside a string value shows as `\n`, so
/// a break in the layout is only a wrap), and every character that could hide or
/// disguise what runs is written out as `\u{…}`: control characters (a carriage return
/// or ESC in a command), Unicode bidi controls (U+202E would show `exe.txt` for
/// `txt.exe`) and invisible ones. A channel with a length limit splits the question; it
/// does not cut it.
pub fn approval_question(call: &ToolCall, spec: &ToolSpec) -> String {
    let args = match &call.args {
        klaw_tools::Args::Json(v) => v.clone(),
        klaw_tools::Args::Text(t) if t.trim().is_empty() => serde_json::json!({}),
        klaw_tools::Args::Text(t) => {
            serde_json::from_str(t).unwrap_or_else(|_| serde_json::Value::String(t.clone()))
        }
    };
    let pretty = serde_json::to_string_pretty(&args).unwrap_or_else(|_| args.to_string());
    let shown = crate::terminal::escape_invisible(&pretty);
    format!(
        "The agent wants to call `{}` with these arguments (in full; a hidden character \
         shows as \\u{{…}}):\n{}\n",
        crate::terminal::escape_invisible(&spec.name),
        crate::terminal::wrap(&shown, QUESTION_WIDTH)
    )
}

/// Whether `spec`'s calls need approval under `policy` (with `extra` tools named).
pub fn needs_approval(policy: Approval, extra: &[String], spec: &ToolSpec) -> bool {
    match policy {
        Approval::Never => false,
        Approval::Always => true,
        Approval::Destructive => spec.annotations.destructive || extra.contains(&spec.name),
    }
}

/// Installs the approval policy of `engine`'s `agent` section for the calls made on
/// `channel`: those that need approval go to `approver` first. Calls on other channels
/// (MCP, the command line) are not affected. A hook of its own; an engine with several
/// channels keeps one [`Approvals`] and sets an approver per channel instead.
pub fn install_approval(engine: &Engine, channel: &str, approver: Arc<dyn Approver>) {
    Approvals::install(engine).set(channel, approver);
}

/// The approval policy of one engine: one pre-call hook, and an approver per channel
/// that can be replaced (a front end that can ask a person installs its own for its
/// channel in place of a refusal). Channels without an approver are not asked: calls
/// from MCP and the command line are the caller's own.
pub struct Approvals {
    policy: Approval,
    extra: Vec<String>,
    by_channel: RwLock<HashMap<String, Arc<dyn Approver>>>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let channels: Vec<String> = self.lock().keys().cloned().collect();
        f.debug_struct("Approvals")
            .field("policy", &self.policy)
            .field("channels", &channels)
            .finish_non_exhaustive()
    }
}

impl Approvals {
    /// Installs the policy of `engine`'s `agent` section as one hook, with no channel
    /// asked yet.
    pub fn install(engine: &Engine) -> Arc<Self> {
        let agent = &engine.config().raw.agent;
        let approvals = Arc::new(Self {
            policy: agent.approval,
            extra: agent.approval_tools.clone(),
            by_channel: RwLock::default(),
        });
        if approvals.policy != Approval::Never {
            warn_unknown(engine, &approvals.extra);
            engine.before_call(Arc::clone(&approvals));
        }
        approvals
    }

    /// Calls on `channel` that need approval go to `approver` (replacing the one
    /// before).
    pub fn set(&self, channel: &str, approver: Arc<dyn Approver>) {
        self.by_channel
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel.to_owned(), approver);
    }

    fn lock(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<dyn Approver>>> {
        self.by_channel
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl PreCallHook for Arc<Approvals> {
    fn before_call<'a>(&'a self, call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a> {
        let approver = self.lock().get(&call.caller.channel).cloned();
        match approver {
            Some(approver) if needs_approval(self.policy, &self.extra, spec) => {
                Box::pin(async move { approver.approve(call, spec).await })
            }
            _ => Box::pin(std::future::ready(Ok(()))),
        }
    }
}

fn warn_unknown(engine: &Engine, extra: &[String]) {
    let registry = engine.registry();
    for name in extra.iter().filter(|n| registry.by_name(n).is_none()) {
        tracing::warn!(target: "klaw::agent", "agent.approvalTools names `{name}`, which is not a tool (yet)");
    }
}
