//! One `tool.yaml`: parsed with `yaml_serde`, checked (name = folder, a program that
//! exists where commands can run it), and made into the [`ToolSpec`] the registry checks
//! like any other.

use std::path::Path;
use std::time::Duration;

use klaw_tools::{Annotations, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

/// The largest `tool.yaml` read.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 256 * 1024;

/// The longest time limit a manifest may ask for, in seconds.
pub(crate) const MAX_TIMEOUT_SECONDS: u64 = 3600;

/// The time limit of a manifest that gives none, in seconds.
pub(crate) const DEFAULT_TIMEOUT_SECONDS: u64 = 60;

/// Where a manifest was found: the workspace (the agent can write there) or the data dir
/// (the operator's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Root {
    /// `<workspace>/tools/<name>/tool.yaml`.
    Workspace,
    /// `<dataDir>/tools/<name>/tool.yaml`.
    System,
}

impl Root {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Root::Workspace => "workspace",
            Root::System => "system",
        }
    }
}

/// `tool.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    description_ru: String,
    #[serde(default)]
    description_en: Option<String>,
    #[serde(default = "no_parameters")]
    parameters: Value,
    #[serde(default)]
    output_schema: Option<Value>,
    command: Vec<String>,
    #[serde(default)]
    timeout: Option<u64>,
    #[serde(default)]
    annotations: RawAnnotations,
}

fn no_parameters() -> Value {
    json!({"type": "object", "properties": {}})
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAnnotations {
    #[serde(default, alias = "readOnlyHint")]
    read_only: bool,
    #[serde(default, alias = "destructiveHint")]
    destructive: bool,
    #[serde(default, alias = "idempotentHint")]
    idempotent: bool,
    #[serde(default, alias = "openWorldHint")]
    open_world: bool,
}

/// The `tool.yaml` `tool_create` writes: the same keys [`parse`] reads.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Written<'a> {
    pub(crate) name: &'a str,
    pub(crate) description_ru: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description_en: Option<&'a str>,
    pub(crate) parameters: &'a Value,
    pub(crate) command: Vec<String>,
    pub(crate) timeout: u64,
}

impl Written<'_> {
    /// The manifest's text.
    pub(crate) fn render(&self) -> Result<String, String> {
        yaml_serde::to_string(self).map_err(|e| format!("cannot write the manifest: {e}"))
    }
}

/// A manifest that parsed and passed its own checks (the registry's come at
/// registration).
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub(crate) spec: ToolSpec,
    /// What runs: the arguments as JSON on its stdin.
    pub(crate) argv: Vec<String>,
    /// The working directory relative to the workspace (`tools/<name>` for a workspace
    /// tool; the workspace root for a system tool, whose folder commands cannot see).
    pub(crate) working_dir: Option<String>,
    pub(crate) timeout: Duration,
}

/// Parses and checks the manifest of the folder `folder` found under `root`
/// (`tools_dir` is that root's `tools` folder; `workspace` is where commands run).
pub(crate) fn parse(
    text: &str,
    folder: &str,
    root: Root,
    tools_dir: &Path,
    workspace: &Path,
) -> Result<Manifest, String> {
    let raw: Raw = yaml_serde::from_str(text).map_err(|e| format!("not a valid tool.yaml: {e}"))?;
    if raw.name != folder {
        return Err(format!(
            "the name `{}` differs from its folder `{folder}`: name the folder after the tool",
            raw.name
        ));
    }
    let timeout = raw.timeout.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    if timeout == 0 || timeout > MAX_TIMEOUT_SECONDS {
        return Err(format!(
            "timeout {timeout} is out of range: 1 to {MAX_TIMEOUT_SECONDS} seconds"
        ));
    }
    if !raw.parameters.is_object() {
        return Err("parameters must be a JSON Schema object (`type: object`)".into());
    }
    check_program(&raw.command, folder, root, tools_dir)?;
    let a = raw.annotations;
    let annotations = match root {
        Root::System => Annotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        },
        // The agent can write this file (file_write): what it claims cannot lift the
        // approval policy. A workspace tool runs a command, as `exec` does, and is treated
        // as `exec` is.
        Root::Workspace => Annotations {
            read_only: false,
            destructive: true,
            idempotent: a.idempotent,
            open_world: a.open_world,
        },
    };
    let mut spec = ToolSpec::new(&raw.name, raw.description_ru, raw.parameters)
        .with_annotations(annotations)
        // The sandbox's own limit answers first, with what the command printed.
        .with_timeout(Duration::from_secs(timeout + 5))
        .with_origin(origin(tools_dir, folder));
    if let Some(en) = raw.description_en {
        spec = spec.with_description_en(en);
    }
    if let Some(out) = raw.output_schema {
        spec = spec.with_output_schema(out);
    }
    let working_dir = match root {
        Root::Workspace => tools_dir
            .strip_prefix(workspace)
            .ok()
            .map(|rel| rel.join(folder).display().to_string()),
        Root::System => None,
    };
    Ok(Manifest {
        spec,
        argv: raw.command,
        working_dir,
        timeout: Duration::from_secs(timeout),
    })
}

/// The origin of the tool of `folder` in `tools_dir`: `manifest:<its tool.yaml>`.
pub(crate) fn origin(tools_dir: &Path, folder: &str) -> String {
    format!(
        "manifest:{}",
        tools_dir.join(folder).join("tool.yaml").display()
    )
}

/// The program must be one the command can run: a name on `PATH` (an interpreter: it
/// must be installed), or, for a workspace tool, a file in the tool's own folder
/// (`./run.sh`, resolved beneath it by the kernel). An absolute path or one that leaves
/// the folder is refused, and a system tool's folder is hidden from commands (the data
/// dir is), so its program must be on `PATH`.
fn check_program(
    argv: &[String],
    folder: &str,
    root: Root,
    tools_dir: &Path,
) -> Result<(), String> {
    let Some(program) = argv.first().filter(|p| !p.trim().is_empty()) else {
        return Err(
            "command is empty: give the program and its arguments, e.g. [python3, run.py]".into(),
        );
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return Err("command contains a NUL byte".into());
    }
    if !program.contains('/') {
        return if on_path(program) {
            Ok(())
        } else {
            Err(format!(
                "the program `{program}` is not installed (not found on PATH)"
            ))
        };
    }
    let rel = Path::new(program);
    if rel.is_absolute() || root == Root::System {
        return Err(format!(
            "the program `{program}` is outside the workspace: name a program on PATH, or \
             put the script in the tool's folder of the workspace and run it as ./{}",
            rel.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
    }
    let dir =
        cap_std::fs::Dir::open_ambient_dir(tools_dir.join(folder), cap_std::ambient_authority())
            .map_err(|e| format!("the tool's folder cannot be opened: {e}"))?;
    // Resolved beneath the folder: `..` or a link out of it fails here.
    let meta = dir.metadata(rel).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("the program `{program}` does not exist in the tool's folder")
        }
        _ => format!("the program `{program}` is outside the tool's folder ({e})"),
    })?;
    use cap_std::fs::PermissionsExt;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!(
            "the program `{program}` is not an executable file (chmod +x it, or run it with its interpreter: [sh, {program}])"
        ));
    }
    Ok(())
}

/// Whether `name` is an executable file in a directory of the engine's `PATH` (commands
/// get that `PATH`; without one, the sandbox's default).
pub(crate) fn on_path(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_else(|| klaw_sandbox::DEFAULT_PATH.into());
    klaw_sandbox::find_program(name, &path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("tools");
        std::fs::create_dir_all(tools.join("wc")).unwrap();
        (dir, tools)
    }

    fn parse_ws(text: &str, tools: &Path) -> Result<Manifest, String> {
        parse(text, "wc", Root::Workspace, tools, tools.parent().unwrap())
    }

    const VALID: &str = "name: wc\ndescription_ru: Считает слова\ncommand: [sh, run.sh]\n\
        parameters:\n  type: object\n  properties:\n    text: {type: string}\n  required: [text]\n\
        annotations: {readOnly: true, idempotent: true}\n";

    #[test]
    fn a_valid_manifest_becomes_a_spec_that_runs_in_its_folder() {
        let (_d, tools) = ws();
        let m = parse_ws(VALID, &tools).unwrap();
        assert_eq!(m.spec.name, "wc");
        assert_eq!(m.spec.input_schema["required"][0], "text");
        assert_eq!(m.argv, ["sh", "run.sh"]);
        assert_eq!(m.working_dir.as_deref(), Some("tools/wc"));
        assert_eq!(m.timeout, Duration::from_secs(DEFAULT_TIMEOUT_SECONDS));
        // A workspace tool cannot claim to be harmless.
        assert!(m.spec.annotations.destructive && !m.spec.annotations.read_only);
        assert!(m.spec.annotations.idempotent);
        let sys = parse(VALID, "wc", Root::System, &tools, Path::new("/nowhere")).unwrap();
        assert!(sys.spec.annotations.read_only && !sys.spec.annotations.destructive);
        assert_eq!(sys.working_dir, None);
    }

    #[test]
    fn each_broken_manifest_says_what_is_wrong() {
        let (_d, tools) = ws();
        let cases = [
            (
                "name: wc\ndescription_ru: [unclosed\n",
                "not a valid tool.yaml",
            ),
            (
                "name: other\ndescription_ru: x\ncommand: [sh]\n",
                "differs from its folder",
            ),
            ("name: wc\ncommand: [sh]\n", "description_ru"),
            (
                "name: wc\ndescription_ru: x\ncommand: [sh]\nextra: 1\n",
                "unknown field",
            ),
            (
                "name: wc\ndescription_ru: x\ncommand: []\n",
                "command is empty",
            ),
            (
                "name: wc\ndescription_ru: x\ncommand: [no-such-interpreter-klaw]\n",
                "not installed",
            ),
            (
                "name: wc\ndescription_ru: x\ncommand: [/bin/sh]\n",
                "outside the workspace",
            ),
            (
                "name: wc\ndescription_ru: x\ncommand: [../../bin/sh]\n",
                "outside the tool's folder",
            ),
            (
                "name: wc\ndescription_ru: x\ncommand: [./missing.sh]\n",
                "does not exist",
            ),
            (
                "name: wc\ndescription_ru: x\ncommand: [sh]\ntimeout: 0\n",
                "out of range",
            ),
            (
                "name: wc\ndescription_ru: x\ncommand: [sh]\nparameters: 3\n",
                "JSON Schema object",
            ),
        ];
        for (text, want) in cases {
            let e = parse_ws(text, &tools).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_script_in_the_folder_must_be_executable_and_a_system_tool_cannot_use_one() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, tools) = ws();
        let script = tools.join("wc/run.sh");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        let text = "name: wc\ndescription_ru: x\ncommand: [./run.sh]\n";
        assert!(
            parse_ws(text, &tools)
                .unwrap_err()
                .contains("not an executable")
        );
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        parse_ws(text, &tools).unwrap();
        let e = parse(text, "wc", Root::System, &tools, Path::new("/nowhere")).unwrap_err();
        assert!(e.contains("outside the workspace"), "{e}");
        // A link out of the folder is refused by the kernel, not by its spelling.
        std::os::unix::fs::symlink("/bin/sh", tools.join("wc/sh")).unwrap();
        let e = parse_ws("name: wc\ndescription_ru: x\ncommand: [./sh]\n", &tools).unwrap_err();
        assert!(e.contains("outside the tool's folder"), "{e}");
    }
}
