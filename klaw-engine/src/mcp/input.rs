//! The engine's side of what a call asks its MCP client (`klaw_mcp_ext::input`: the
//! rounds, [`ask`], [`state`], [`keep_state`]): the state a call keeps between rounds is
//! sealed into the result's `requestState` (HMAC-signed with a key of this process,
//! bound to the tool and its arguments, good for an hour) and opened when the client
//! calls again: a changed one is refused before the tool runs.

use std::sync::OnceLock;
use std::time::Duration;

use rmcp::model::{RequestStateCodec, SealOptions};
use serde_json::Value;

pub use klaw_mcp_ext::input::{Inputs, Round, ask, keep_state, offers, state};

/// How long a sealed `requestState` stays good: a client answers its user well within.
const STATE_TTL: Duration = Duration::from_secs(3600);

/// The key the server's `requestState` is sealed with (random, for this process).
fn codec() -> Option<&'static RequestStateCodec> {
    static CODEC: OnceLock<Option<RequestStateCodec>> = OnceLock::new();
    CODEC
        .get_or_init(|| {
            let mut key = [0u8; 32];
            let read = std::fs::File::open("/dev/urandom")
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key));
            match read {
                Ok(()) => RequestStateCodec::try_new(key.to_vec()).ok(),
                Err(e) => {
                    tracing::error!(target: "klaw::mcp", "no random key for requestState: {e}");
                    None
                }
            }
        })
        .as_ref()
}

/// What a sealed state is bound to: the tool and its arguments.
fn binding(tool: &str, args: &Value) -> Vec<u8> {
    format!("{tool}\n{args}").into_bytes()
}

/// `state` sealed for the next round of `tool` with `args`.
pub(crate) fn seal(tool: &str, args: &Value, state: &Option<Value>) -> Result<String, String> {
    let codec = codec().ok_or("the request state cannot be protected (no random key)")?;
    let binding = binding(tool, args);
    codec
        .seal_json_with(
            state,
            &SealOptions::new().associated_data(&binding).ttl(STATE_TTL),
        )
        .map_err(|e| e.to_string())
}

/// The state `sealed` carries, when its seal is good for `tool` with `args`.
pub(crate) fn open(tool: &str, args: &Value, sealed: &str) -> Result<Option<Value>, String> {
    let codec = codec().ok_or("the request state cannot be checked (no random key)")?;
    codec
        .open_json_with(sealed, &binding(tool, args))
        .map_err(|e| format!("requestState failed its integrity check: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sealed_state_opens_only_unchanged_for_its_tool_and_arguments() {
        let args = json!({"a": 1});
        let state = Some(json!({"round": 2, "name": "Alice"}));
        let sealed = seal("tool", &args, &state).unwrap();
        assert_eq!(open("tool", &args, &sealed).unwrap(), state);
        // Changed, sent back for another tool, or with other arguments: refused.
        assert!(open("tool", &args, &format!("{sealed}-TAMPERED")).is_err());
        let mut flipped = sealed.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        assert!(open("tool", &args, &String::from_utf8(flipped).unwrap()).is_err());
        assert!(open("other", &args, &sealed).is_err());
        assert!(open("tool", &json!({"a": 2}), &sealed).is_err());
        assert!(open("tool", &args, "not a state").is_err());
        // No state kept is a state too (sealed, so a forged one is refused).
        let empty = seal("tool", &args, &None).unwrap();
        assert_eq!(open("tool", &args, &empty).unwrap(), None);
    }
}
