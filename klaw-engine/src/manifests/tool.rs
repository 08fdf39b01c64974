//! A manifest's tool: its command run through the shell tools' one runner
//! (`run_sandboxed`: the sandbox, the output cap, the time limit and the tree kill of
//! `exec`), the arguments as JSON on stdin, stdout as the result.

use futures_util::future::BoxFuture;
use klaw_tools::tools::shell::{SandboxedCommand, run_sandboxed};
use klaw_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::Value;

use super::manifest::Manifest;

/// A tool defined by a `tool.yaml`.
#[derive(Debug)]
pub(crate) struct ManifestTool {
    pub(crate) manifest: Manifest,
    /// The manifest's text, to tell a change from a rescan.
    pub(crate) text: String,
}

impl Tool for ManifestTool {
    fn spec(&self) -> &ToolSpec {
        &self.manifest.spec
    }

    fn call(
        &self,
        ctx: ToolContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let m = self.manifest.clone();
        Box::pin(async move {
            let stdin = serde_json::to_vec(&args)
                .map_err(|e| ToolError::failed("cannot encode the arguments").with_source(e))?;
            let out = run_sandboxed(
                &ctx,
                SandboxedCommand {
                    argv: m.argv.clone(),
                    working_dir: m.working_dir.clone(),
                    stdin: Some(stdin),
                    timeout: m.timeout,
                },
            )
            .await?;
            if out.exit_code != 0 {
                let said = last_lines(if out.stderr.trim().is_empty() {
                    &out.stdout
                } else {
                    &out.stderr
                });
                return Err(ToolError::failed(format!(
                    "`{}` failed (exit code {}){}",
                    m.spec.name,
                    out.exit_code,
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(": {said}")
                    }
                )));
            }
            let text = out.stdout.trim_end();
            Ok(match serde_json::from_str::<Value>(text) {
                // A JSON object is structured content (checked against an output schema
                // by the clients that have one); anything else is text.
                Ok(value @ Value::Object(_)) if !out.truncated => ToolOutput::json(value),
                _ if out.truncated => ToolOutput::plain(format!(
                    "{text}\n[output cut to its last part: it was over execMaxOutputBytes]"
                )),
                _ => ToolOutput::plain(text),
            })
        })
    }
}

/// The last lines of what a failed command printed (at most 2000 characters).
fn last_lines(text: &str) -> String {
    let text = text.trim();
    let n = text.chars().count();
    if n <= 2000 {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(n - 2000).collect();
    format!("…{tail}")
}
