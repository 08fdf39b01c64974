//! Every tool's annotations beside what it does (issue 25, hole 7: `memory_core_update`
//! overwrote a fact of every later system prompt but was not destructive, so the
//! default approval policy never asked). The registry is assembled as `chat` assembles
//! it — the built-in groups, `send_message`, `subagent_spawn` (and the fixtures when
//! built) — and each tool must be in the table below with exactly its flags, in its
//! spec and in its MCP definition. A new tool fails here until someone states its flags
//! and why.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use crate::common;
use common::assembled;
use klaw_engine::agent::{Approval, needs_approval};
use klaw_tools::{Format, Lang};

/// Name, flags as `klaw-engine tools` prints them (r read-only, d destructive,
/// i idempotent, o open-world), whether it is built in, and why.
#[rustfmt::skip]
const TOOLS: &[(&str, &str, bool, &str)] = &[
    ("current_time", "r---", true, "reads the clock"),
    ("docs_list", "r-i-", cfg!(feature = "docs"), "lists the embedded docs"),
    ("docs_read", "r-i-", cfg!(feature = "docs"), "reads an embedded doc"),
    ("docs_search", "r-i-", cfg!(feature = "docs"), "searches the embedded docs (its index is a cache)"),
    ("exec", "-d-o", true, "runs any command: it may overwrite or delete workspace files, and reach the network when `network` allows"),
    ("code_execute", "-d-o", true, "runs code as exec runs a command: it may overwrite or delete workspace files, and reach the network when `network` allows"),
    ("file", "-d--", true, "legacy: its write and delete actions replace and remove files"),
    ("file_delete", "-d--", true, "removes a file"),
    ("file_edit", "-d--", true, "changes a file in place; the same edit again may change it again"),
    ("file_list", "r---", true, "lists a folder"),
    ("file_read", "r---", true, "reads a file"),
    ("file_write", "-d--", true, "overwrite replaces a file; append adds again on each call"),
    ("memory_core_delete", "-d--", cfg!(feature = "memory"), "removes a fact every later system prompt carried"),
    ("memory_core_get", "r-i-", cfg!(feature = "memory"), "reads core memory"),
    ("memory_core_update", "-di-", cfg!(feature = "memory"), "overwrites a fact every later system prompt carries; the same fact twice changes nothing more"),
    ("memory_get", "r-i-", cfg!(feature = "memory"), "reads memory: the same document for the same arguments"),
    ("memory_save", "--i-", cfg!(feature = "memory"), "adds to memory, never replaces; an exact repeat is not stored again"),
    ("memory_search", "r-i-", cfg!(feature = "memory"), "reads memory"),
    ("process", "-d-o", true, "starts any command as exec does, and kills processes"),
    ("skill_list", "r---", cfg!(feature = "skills"), "lists the skills; what it lists changes with the skills/ folders"),
    ("skill_load", "r---", cfg!(feature = "skills"), "reads a skill's files; the allowed-tools it records only narrows later calls"),
    ("schedule_add", "---o", true, "adds a job whose runs ask the model's provider and may answer in a chat; a name in use is an error, nothing is replaced"),
    ("schedule_list", "r---", true, "lists the jobs"),
    ("schedule_remove", "-d--", true, "removes a job and its record of runs"),
    ("tool_create", "-d--", true, "writes a script and its manifest into the workspace and offers it as a tool that runs a command, as exec does; replace overwrites"),
    ("tool_delete", "-d--", true, "removes a tool the agent made and its files"),
    ("send_message", "---o", true, "sends to a chat (Telegram): people outside read it; nothing is overwritten"),
    ("render_js", "r--o", false, "reads a public page in a headless browser (registered only when one is found); private addresses are refused"),
    ("web_fetch", "r--o", true, "reads a public web page; private addresses are refused"),
    ("http_request", "-d-o", true, "sends any method to a public API (POST, PUT, PATCH, DELETE change data there); annotations are static, so GET is approved too; private addresses are refused"),
    ("web_search", "r--o", true, "asks a search provider"),
    ("subagent_spawn", "---o", true, "asks the model's provider in the background and may answer in a chat; its own calls are approved like any other"),
    ("echo", "r---", cfg!(feature = "fixtures"), "benchmark fixture: returns its argument"),
    ("test_simple_text", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: canned text"),
    ("test_error_handling", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: a canned error"),
    ("test_tool_with_progress", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: reports progress"),
    ("test_image_content", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: a canned image"),
    ("test_audio_content", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: canned audio"),
    ("test_embedded_resource", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: a canned resource"),
    ("test_multiple_content_types", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: canned content"),
    ("test_tool_with_logging", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: logs"),
    ("test_elicitation", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's user, changes nothing"),
    ("test_elicitation_sep1034_defaults", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's user"),
    ("test_elicitation_sep1330_enums", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's user"),
    ("test_sampling", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's model, changes nothing"),
    ("test_input_required_result_elicitation", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's user through the result"),
    ("test_input_required_result_sampling", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's model through the result"),
    ("test_input_required_result_list_roots", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's roots through the result"),
    ("test_input_required_result_request_state", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks, keeps a sealed state"),
    ("test_input_required_result_multiple_inputs", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks three questions"),
    ("test_input_required_result_multi_round", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks in two rounds"),
    ("test_input_required_result_tampered_state", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks, keeps a sealed state"),
    ("test_input_required_result_capabilities", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks through a declared capability"),
    ("test_missing_capability", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: needs the client's sampling"),
    ("test_streaming_elicitation", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks the client's user"),
    ("test_logging_tool", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: logs"),
    ("test_trigger_tool_change", "----", cfg!(feature = "fixtures"), "MCP conformance fixture: adds or removes a test tool (undone by the next call), deletes nothing"),
    ("test_reconnection", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: closes its answer's stream, changes nothing"),
    ("test_tool_with_task", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture: asks a name, then runs as a task; changes nothing"),
    ("greet", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture (tasks): canned greeting"),
    ("slow_compute", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture (tasks): waits, then answers"),
    ("failing_job", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture (tasks): fails after a second"),
    ("protocol_error_job", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture (tasks): a protocol error after a second"),
    ("confirm_delete", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture (tasks): asks to confirm, deletes nothing"),
    ("multi_input", "r---", cfg!(feature = "fixtures"), "MCP conformance fixture (tasks): asks two questions"),
    ("test_trigger_prompt_change", "----", cfg!(feature = "fixtures"), "MCP conformance fixture: adds or removes a test prompt (undone by the next call), deletes nothing"),
];

#[tokio::test]
async fn every_tool_has_the_annotations_its_behaviour_calls_for() {
    let (_dir, engine) = assembled();
    let registry = engine.registry();
    let mut wrong = Vec::new();
    for tool in registry.all() {
        let spec = tool.spec();
        // A tool another test file of this binary defines (`engine.rs`) is no engine's.
        if spec.origin.starts_with("klaw-engine/tests/") {
            continue;
        }
        let a = spec.annotations;
        let flags = a.flags();
        let Some(&(_, expected, _, why)) = TOOLS.iter().find(|t| t.0 == spec.name) else {
            wrong.push(format!(
                "{}: not in the table; add it with its flags ({flags}) and why",
                spec.name
            ));
            continue;
        };
        if flags != expected {
            wrong.push(format!(
                "{}: flags {flags}, the table says {expected} ({why})",
                spec.name
            ));
        }
        // What MCP clients are told is the same.
        let def = klaw_tools::definition(spec, Format::Mcp, Lang::En);
        let hints = &def["annotations"];
        for (hint, on) in [
            ("readOnlyHint", a.read_only),
            ("destructiveHint", a.destructive),
            ("idempotentHint", a.idempotent),
            ("openWorldHint", a.open_world),
        ] {
            if hints[hint] != on {
                wrong.push(format!("{}: MCP {hint} is {}", spec.name, hints[hint]));
            }
        }
        // A tool that changes something is never read-only, and the default policy
        // asks before every destructive one.
        assert!(!(a.read_only && a.destructive), "{}", spec.name);
        assert_eq!(
            needs_approval(Approval::default(), &[], spec),
            a.destructive,
            "{}",
            spec.name
        );
    }
    for &(name, _, built, _) in TOOLS {
        if built && registry.by_name(name).is_none() {
            wrong.push(format!("{name}: in the table but not registered"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The hole itself: under the default policy, overwriting a core fact needs approval.
#[cfg(feature = "memory")]
#[tokio::test]
async fn overwriting_core_memory_needs_approval_by_default() {
    let (_dir, engine) = assembled();
    let registry = engine.registry();
    let spec = registry.by_name("memory_core_update").unwrap().spec();
    assert!(needs_approval(Approval::Destructive, &[], spec));
    let def = klaw_tools::definition(spec, Format::Mcp, Lang::En);
    assert_eq!(def["annotations"]["destructiveHint"], true);
}
