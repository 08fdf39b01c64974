//! The tools the engine owns: they need what only a running engine has (the gateway,
//! the agent), so they are registered at run time rather than collected. One file
//! each, with typed arguments and a derived schema, like every other tool.

pub(crate) mod schedule;
pub(crate) mod send_message;
pub(crate) mod subagent_spawn;
pub(crate) mod tool_create;
