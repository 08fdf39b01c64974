//! The approval policy over MCP: a call through MCP that needs approval (a
//! `destructive` tool under `agent.approval: destructive`) is put to the client's user
//! with `elicitation/create` when the client declared the elicitation capability: the
//! whole question `approval_question` writes, and a form with no fields. Accept runs the
//! call; decline, cancel, no answer within [`ASK_TIMEOUT`] or a failed request refuse
//! it, with the reason as the tool's error. A client without elicitation is not asked:
//! its calls are its own, as before (such clients confirm tool calls themselves).

use std::sync::Arc;
use std::time::Duration;

use klaw_tools::ToolSpec;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};

use crate::agent::{Approver, approval_question};
use crate::{Engine, HookFuture, ToolCall};

use super::peers::{Peers, offers_elicitation};

/// How long a person has to answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// The approver of the `mcp` channel: asks the calling session's client (see the
/// module's documentation).
#[derive(Debug, Clone)]
pub struct ElicitApproval {
    peers: Arc<Peers>,
}

impl ElicitApproval {
    /// The approver for `engine`'s MCP sessions.
    pub fn new(engine: &Engine) -> Self {
        Self {
            peers: engine.context().shared_state::<Peers>(),
        }
    }
}

impl Approver for ElicitApproval {
    fn approve<'a>(&'a self, call: &'a ToolCall, spec: &'a ToolSpec) -> HookFuture<'a> {
        Box::pin(async move {
            let Some(peer) = self.peers.peer_of(&call.caller).filter(offers_elicitation) else {
                return Ok(());
            };
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: format!(
                    "{}Accept to run it, decline to refuse it.",
                    approval_question(call, spec)
                ),
                requested_schema: ElicitationSchema::new(Default::default()),
            };
            let name = &spec.name;
            match peer
                .create_elicitation_with_timeout(params, Some(ASK_TIMEOUT))
                .await
            {
                Ok(r) if r.action == ElicitationAction::Accept => Ok(()),
                Ok(r) => Err(crate::Refusal::new(format!(
                    "the user {} `{name}` (agent.approval asked through the MCP client): it did \
                     not run",
                    if r.action == ElicitationAction::Decline {
                        "declined"
                    } else {
                        "cancelled"
                    }
                ))),
                Err(e) => Err(crate::Refusal::new(format!(
                    "`{name}` needs the user's approval (agent.approval), and asking through \
                     the MCP client failed ({e}): it did not run"
                ))
                .with_source(e)),
            }
        })
    }
}
