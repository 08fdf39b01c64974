//! The `agent` section of `engine.json`: approval of tool calls, subagents, history.

use super::Approval;
use super::keys::{at_least, between, section};

section! {
    /// The `agent` section of `engine.json`: how the agent loop runs. Every key is
    /// optional.
    pub struct AgentSection {
        keys {
            /// Which tool calls of the agent need a person's approval: `never`,
            /// `destructive` (tools marked destructive, and `approvalTools`) or `always`.
            /// In a terminal the user answers y/n; where nobody can answer, the call is
            /// refused with a reason the model reads.
            approval: Approval = Approval::Destructive;
                key "approval", env "KLAW_APPROVAL",
                type "`\"never\"`, `\"destructive\"` or `\"always\"`";
            /// More tools that need approval (unless `approval` is `never`), by name.
            approval_tools: Vec<String> = Vec::new();
                key "approvalTools", env "KLAW_APPROVAL_TOOLS", type "array of tool names";
            /// Most subagents running at once (`subagent_spawn`); more are refused.
            max_subagents: usize = 4;
                key "maxSubagents", env "KLAW_MAX_SUBAGENTS", type "integer ≥ 1",
                check at_least(1);
            /// Time limit of one subagent, in seconds.
            subagent_timeout_seconds: u64 = 600;
                key "subagentTimeoutSeconds", env "KLAW_SUBAGENT_TIMEOUT_SECONDS",
                type "integer ≥ 1", check at_least(1);
            /// How deep subagents may start subagents: 1 lets the agent start them and
            /// them not; 0 turns `subagent_spawn` off.
            max_subagent_depth: u32 = 1;
                key "maxSubagentDepth", env "KLAW_MAX_SUBAGENT_DEPTH", type "integer, 0 to 5",
                check depth_range;
            /// How many of a chat's last messages the model is sent.
            history_messages: usize = 200;
                key "historyMessages", env "KLAW_HISTORY_MESSAGES", type "integer ≥ 2",
                check at_least(2);
            /// How many messages of its own earlier runs a scheduled job's run, or a
            /// subagent of a name used before, is given (its own history, apart from the
            /// user's chats); 0 starts each run empty. `schedule_add`'s
            /// `historyMessages` sets it per job.
            own_history_messages: usize = 5;
                key "ownHistoryMessages", env "KLAW_OWN_HISTORY_MESSAGES",
                type "integer, 0 to 1000", check between(0, 1000);
        }
    }
}

fn depth_range(n: &u32, _: &AgentSection) -> Result<(), String> {
    if *n > 5 {
        return Err(format!("{n} is more than 5"));
    }
    Ok(())
}
