//! What a call asks its MCP client (elicitation, sampling, roots), in both shapes the
//! protocol has: in a request of MCP 2026-07-28 the question goes back in the result
//! (an input-required result, SEP-2322) and the client calls again with its answers and
//! the state the call kept in between; in an older session the client is asked
//! directly, as a request on the session.
//!
//! A tool asks through [`ask`] (all its questions of a round at once) and keeps what it
//! needs for the next round with [`keep_state`] / [`state`]. The engine's MCP server
//! opens a [`Round`] before the call and reads it after: questions asked and not
//! answered make the call's result an input-required one; a question for a capability
//! the client did not declare makes it a `-32021` error. The engine seals the kept
//! state (`requestState`: signed, bound to the tool and its arguments).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use klaw_core::{ToolContext, ToolError};
use rmcp::model::{ClientCapabilities, InputRequest, InputRequests, ServerRequest};
use serde_json::Value;

use crate::SessionClients;

/// The open rounds of the calls through MCP, by call id (kept in the engine's context).
#[derive(Default)]
pub struct Inputs {
    calls: Mutex<HashMap<String, Round>>,
}

impl std::fmt::Debug for Inputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("open", &self.lock().len())
            .finish()
    }
}

/// One round of one call: what the request brought, and what the tool asked.
#[derive(Debug, Default)]
pub struct Round {
    /// The request may be answered with an input-required result (MCP 2026-07-28).
    pub in_result: bool,
    /// What the client declared in the request's `_meta` (2026-07-28).
    pub capabilities: Option<ClientCapabilities>,
    /// The client's answers (`inputResponses`), by the keys of the questions.
    pub responses: BTreeMap<String, Value>,
    /// The state the previous round kept, its seal checked.
    pub state: Option<Value>,
    /// The questions still to answer.
    pub asked: InputRequests,
    /// The state for the next round.
    pub next_state: Option<Value>,
    /// A capability a question needed and the client did not declare.
    pub missing: Option<ClientCapabilities>,
    /// The task the call became (MCP's tasks extension): its questions are the task's
    /// (`input_required` on `tasks/get`, answered by `tasks/update`), asked all at once.
    pub task: Option<InTask>,
}

/// The task a call runs as, for its questions.
#[derive(Clone)]
pub struct InTask(pub rmcp::task_manager::TaskContext);

impl std::fmt::Debug for InTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("InTask").field(&self.0.task_id()).finish()
    }
}

impl Inputs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Round>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the round of call `id` (before it runs).
    pub fn begin(&self, id: &str, round: Round) {
        self.lock().insert(id.to_owned(), round);
    }

    /// Makes the call `id` a task's: its questions from now on are the task's.
    pub fn into_task(&self, id: &str, task: InTask) {
        if let Some(round) = self.lock().get_mut(id) {
            round.in_result = false;
            round.task = Some(task);
        }
    }

    /// Closes the round of call `id` (after it ran), with what the tool asked.
    pub fn end(&self, id: &str) -> Option<Round> {
        self.lock().remove(id)
    }
}

/// The capability a question needs: `(name, declared by caps)`.
fn needs(request: &InputRequest, caps: &ClientCapabilities) -> (&'static str, bool) {
    match request {
        InputRequest::Elicitation(_) => ("elicitation", caps.elicitation.is_some()),
        InputRequest::CreateMessage(_) => ("sampling", caps.sampling.is_some()),
        InputRequest::ListRoots(_) => ("roots", caps.roots.is_some()),
        #[allow(unreachable_patterns)]
        _ => ("", false),
    }
}

/// Whether `answer` has the shape of an answer to `request` (a client's answer is
/// untrusted: one that is not is asked again).
#[allow(deprecated)] // sampling and roots (SEP-2577 deprecates them; clients still offer them)
fn fits(request: &InputRequest, answer: &Value) -> bool {
    use rmcp::model::{CreateMessageResult, ElicitResult, ListRootsResult};
    let v = answer.clone();
    match request {
        InputRequest::Elicitation(_) => serde_json::from_value::<ElicitResult>(v).is_ok(),
        InputRequest::CreateMessage(_) => serde_json::from_value::<CreateMessageResult>(v).is_ok(),
        InputRequest::ListRoots(_) => serde_json::from_value::<ListRootsResult>(v).is_ok(),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// Whether the client of the call declared `capability` (`elicitation`, `sampling`,
/// `roots`): in the request's `_meta` (2026-07-28), else at its session's start. `false`
/// outside MCP.
pub fn offers(ctx: &ToolContext, capability: &str) -> bool {
    let declared = |caps: &ClientCapabilities| match capability {
        "elicitation" => caps.elicitation.is_some(),
        "sampling" => caps.sampling.is_some(),
        "roots" => caps.roots.is_some(),
        _ => false,
    };
    let inputs = ctx.shared_state::<Inputs>();
    let from_round = ctx.call_id().and_then(|id| {
        inputs
            .lock()
            .get(id)
            .and_then(|r| r.capabilities.as_ref().map(declared))
    });
    from_round.unwrap_or_else(|| {
        ctx.shared_state::<SessionClients>()
            .client_of(ctx.caller())
            .and_then(|p| p.peer_info().map(|i| declared(&i.capabilities)))
            .unwrap_or(false)
    })
}

/// The state the previous round of this call kept ([`keep_state`]), its seal checked;
/// `None` in the first round.
pub fn state(ctx: &ToolContext) -> Option<Value> {
    let inputs = ctx.shared_state::<Inputs>();
    let id = ctx.call_id()?;
    inputs.lock().get(id).and_then(|r| r.state.clone())
}

/// Keeps `state` for the next round of this call (sealed into the result's
/// `requestState`; the client cannot change it unnoticed).
pub fn keep_state(ctx: &ToolContext, state: Value) {
    let inputs = ctx.shared_state::<Inputs>();
    if let Some(id) = ctx.call_id()
        && let Some(round) = inputs.lock().get_mut(id)
    {
        round.next_state = Some(state);
    }
}

/// Asks the calling client `questions` (key → request: `elicitation/create`,
/// `sampling/createMessage`, `roots/list`) and gives its answers by key.
///
/// In a request of MCP 2026-07-28: the answers the request brought; the questions
/// without one end the call (the tool returns the error this gives) and go back in an
/// input-required result, and the client calls again with them answered. In an older
/// session: each question is a request to the client, answered now. A question for a
/// capability the client did not declare fails the request with `-32021`. In a call
/// that became a task: the task's questions (`input_required`), answered by
/// `tasks/update`.
pub async fn ask(
    ctx: &ToolContext,
    questions: Vec<(String, InputRequest)>,
) -> Result<BTreeMap<String, Value>, ToolError> {
    let inputs = ctx.shared_state::<Inputs>();
    let id = ctx.call_id().unwrap_or_default().to_owned();
    // A task's questions wait for the client's `tasks/update`, all pending at once.
    let task = inputs.lock().get(&id).and_then(|r| r.task.clone());
    if let Some(InTask(task)) = task {
        let asked = questions.into_iter().map(|(key, request)| {
            let task = task.clone();
            async move {
                let answer = task
                    .request_input(key.clone(), request)
                    .await
                    .map_err(|_| {
                        ToolError::failed("the task was cancelled while it waited for an answer")
                    })?;
                Ok::<_, ToolError>((key, answer))
            }
        });
        return futures_util::future::try_join_all(asked)
            .await
            .map(BTreeMap::from_iter);
    }
    {
        let mut all = inputs.lock();
        if let Some(round) = all.get_mut(&id).filter(|r| r.in_result) {
            let caps = round.capabilities.clone().unwrap_or_default();
            let mut answers = BTreeMap::new();
            for (key, request) in questions {
                let (capability, declared) = needs(&request, &caps);
                if !declared {
                    let missing = serde_json::json!({ capability: {} });
                    round.missing = serde_json::from_value(missing).ok();
                    return Err(ToolError::failed(format!(
                        "the client did not declare {capability}: it cannot be asked"
                    )));
                }
                match round.responses.get(&key) {
                    Some(answer) if fits(&request, answer) => {
                        answers.insert(key, answer.clone());
                    }
                    _ => {
                        round.asked.insert(key, request);
                    }
                }
            }
            if round.asked.is_empty() {
                return Ok(answers);
            }
            return Err(ToolError::failed(
                "waiting for the client's answers (an input-required result)",
            ));
        }
    }
    // An older session: ask the client directly.
    let peer = ctx
        .shared_state::<SessionClients>()
        .client_of(ctx.caller())
        .ok_or_else(|| ToolError::failed("no MCP client to ask: the call did not come from one"))?;
    let caps = peer
        .peer_info()
        .map(|i| i.capabilities.clone())
        .unwrap_or_default();
    let mut answers = BTreeMap::new();
    for (key, request) in questions {
        let (capability, declared) = needs(&request, &caps);
        if !declared {
            return Err(ToolError::failed(format!(
                "the client does not offer {capability}: nothing to ask"
            )));
        }
        let request = match request {
            InputRequest::Elicitation(r) => ServerRequest::ElicitRequest(r),
            InputRequest::CreateMessage(r) => ServerRequest::CreateMessageRequest(r),
            InputRequest::ListRoots(r) => ServerRequest::ListRootsRequest(r),
            #[allow(unreachable_patterns)]
            _ => return Err(ToolError::failed("a question MCP cannot ask")),
        };
        let answer = peer
            .send_request(request)
            .await
            .map_err(|e| ToolError::failed(format!("asking the client failed: {e}")))?;
        let answer = serde_json::to_value(answer)
            .map_err(|e| ToolError::failed(format!("the client's answer: {e}")))?;
        answers.insert(key, answer);
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_of_the_wrong_shape_does_not_fit() {
        let elicit: InputRequest = serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}}
        }))
        .unwrap();
        assert!(fits(
            &elicit,
            &json!({"action": "accept", "content": {"name": "A"}})
        ));
        assert!(!fits(&elicit, &json!(12345)));
        assert!(!fits(&elicit, &Value::Null));
        let roots: InputRequest =
            serde_json::from_value(json!({"method": "roots/list", "params": {}})).unwrap();
        assert!(fits(&roots, &json!({"roots": [{"uri": "file:///w"}]})));
        assert!(!fits(&roots, &json!({"action": "accept"})));
        assert_eq!(
            needs(&roots, &ClientCapabilities::default()),
            ("roots", false)
        );
    }
}
