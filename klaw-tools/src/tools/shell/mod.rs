//! Shell tools: `exec` (run a command and wait), `code_execute` (run a piece of code the
//! same way) and `process` (background jobs).
//!
//! Every command runs in the workspace with a time limit that ends its whole process
//! tree, output kept in bounded tail buffers, empty stdin, a cleared environment, and an
//! OS sandbox chosen by [`ShellSettings::sandbox`]: bubblewrap where it works,
//! else Landlock + seccomp applied by a re-executed helper (the crate `klaw-sandbox`). A
//! deny-list of obviously destructive commands answers first; the sandbox is the
//! boundary. See `doc/tools/shell.md` and the "Shell" section of `doc/security.md`.

mod code;
mod deny;
mod exec;
mod output;
mod process;
mod run;
mod sandbox;
mod scratch;
mod served;
mod settings;

pub use code::{CodeResult, code_execute};
pub use exec::{ExecResult, exec};
pub use klaw_sandbox::{HELPER_ARG, run_helper_if_requested};
pub use process::{ProcessAction, ProcessInfo, ProcessReply, ProcessTable, process};
pub use run::{CommandLine, CommandOutput, SandboxedCommand, run_sandboxed};
pub use sandbox::SandboxHelper;
pub use settings::{SandboxMode, SandboxServer, ShellSettings};
