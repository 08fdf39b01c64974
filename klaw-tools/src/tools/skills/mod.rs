//! Skills: folders in the Agent Skills format (`SKILL.md` with a YAML frontmatter, then
//! instructions; optional `scripts/`, `references/`, `assets/`) in `<dataDir>/skills/`
//! (system), the folders of `skills.paths`, `~/.claude/skills/` and `~/.agents/skills/`
//! (user), and the workspace's `.claude/skills/`, `.agents/skills/` and `skills/`
//! (workspace), a later folder's skill winning over an earlier one's of the same name
//! ([`sources`]). `skill_list` lists them, `skill_load` gives one's `SKILL.md` and
//! files. See `doc/tools/skills.md`.
//!
//! Discovery ([`SkillCatalog`]) parses only the frontmatter and reads every file through
//! the files group's kernel-confined helpers; a malformed skill is skipped with a warning
//! naming the file and the problem ([`Catalog::malformed`], which `doctor` lists). Each
//! scan sees what changed since the last one, so skills added, changed or removed while
//! the engine runs are seen without a restart. The engine puts the skills in the agent's
//! system prompt ([`prompt_section_for`]: every name, descriptions shortened to the
//! budget, the most relevant first when even the names do not fit) and, when `skills.enforceAllowedTools` is on,
//! refuses calls a loaded skill's `allowed-tools` does not list ([`check_allowed`]).

mod allowed;
mod catalog;
pub mod frontmatter;
mod list;
mod load;
mod prompt;
mod settings;
mod tool_names;

use std::sync::Arc;

pub use allowed::{LoadedSkills, NotAllowed, allows, check_allowed};
pub use catalog::{
    Catalog, MAX_SKILL_MD_BYTES, Malformed, Origin, SKILL_MD, SKILLS_DIR, Skill, SkillCatalog,
    Source, USER_DIRS, sources,
};
pub use frontmatter::{Frontmatter, FrontmatterError};
pub use list::{SkillInfo, SkillList, SkippedSkill, skill_list};
pub use load::{SkillLoaded, read_skill_file, skill_files, skill_files_listed, skill_load};
pub use prompt::{prompt_section, prompt_section_for, relevance};
pub use settings::SkillsSettings;
pub use tool_names::{CLIENT_TOOLS, map_allowed};

use crate::{ToolContext, ToolError};

/// The skills of `ctx` now: its data dir's, `skills.paths`', the user's and the
/// workspace's ([`SkillsSettings::sources`]; the context's [`SkillCatalog`]: only what
/// changed since its last scan is read again).
pub async fn catalog(ctx: &ToolContext) -> Result<Arc<Catalog>, ToolError> {
    let skills = ctx.shared_state::<SkillCatalog>();
    let sources = ctx
        .shared_state::<SkillsSettings>()
        .sources(ctx.workspace(), ctx.data_dir());
    super::run_blocking("skills", move || {
        Ok(Arc::new(skills.scan_sources(&sources)))
    })
    .await
}

/// The agent's system prompt section on the skills of `ctx` within its
/// [`SkillsSettings::prompt_budget_chars`], for a conversation whose user's message is
/// `query` (when not every name fits, the most relevant come first); `None` when there
/// are none.
pub async fn system_prompt_section(ctx: &ToolContext, query: Option<&str>) -> Option<String> {
    let budget = ctx.shared_state::<SkillsSettings>().prompt_budget_chars;
    match catalog(ctx).await {
        Ok(c) => prompt_section_for(&c, budget, query),
        Err(e) => {
            tracing::warn!(target: "klaw::skills", "skills not scanned: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Caller, ToolRegistry};

    fn write(path: &std::path::Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn md(name: &str, description: &str, extra: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\nDo it.\n")
    }

    #[tokio::test]
    async fn list_and_load_through_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, data) = (dir.path().join("ws"), dir.path().join("data"));
        write(
            &data.join("skills/pdf/SKILL.md"),
            &md("pdf", "system pdf", ""),
        );
        write(
            &data.join("skills/sys/SKILL.md"),
            &md("sys", "system only", ""),
        );
        write(&data.join("skills/sys/references/guide.md"), "guide");
        write(
            &ws.join("skills/pdf/SKILL.md"),
            &md("pdf", "workspace pdf", "allowed-tools: file_read\n"),
        );
        write(&ws.join("skills/pdf/scripts/fill.py"), "print(1)\n");
        write(&ws.join("skills/pdf/assets/a/b.txt"), "b");
        write(&ws.join("skills/broken/SKILL.md"), "no frontmatter");
        write(&dir.path().join("secret"), "secret");
        let registry = ToolRegistry::collect().unwrap();
        let ctx = ToolContext::builder()
            .workspace(&ws)
            .data_dir(&data)
            .caller(Caller::new("telegram", Some("7".into())))
            .build();

        let list = registry
            .execute(&ctx, "skill_list", json!({}))
            .await
            .unwrap();
        let v = list.structured().unwrap();
        assert_eq!(v["skills"][0]["name"], "pdf");
        assert_eq!(v["skills"][0]["origin"], "workspace");
        assert!(
            v["skills"][0]["shadows"]
                .as_str()
                .unwrap()
                .starts_with("system skill at "),
            "{v}"
        );
        assert_eq!(v["skills"][0]["allowedTools"], json!(["file_read"]));
        assert_eq!(v["skills"][1]["origin"], "system");
        assert!(v["skills"][1].get("shadows").is_none());
        assert_eq!(
            v["skipped"][0]["problem"].as_str().unwrap().get(..14),
            Some("no frontmatter")
        );

        let pdf = registry
            .execute(&ctx, "skill_load", json!({"name": "pdf"}))
            .await
            .unwrap();
        let v = pdf.structured().unwrap();
        assert_eq!(v["path"], "skills/pdf/SKILL.md");
        assert!(v["content"].as_str().unwrap().contains("workspace pdf"));
        assert_eq!(
            v["files"],
            json!(["skills/pdf/assets/a/b.txt", "skills/pdf/scripts/fill.py"])
        );
        assert!(v["howToReadFiles"].as_str().unwrap().contains("file_read"));
        assert_eq!(
            ctx.shared_state::<LoadedSkills>().of(ctx.caller())["pdf"],
            ["file_read"]
        );
        // The paths are what file_read takes.
        let read = registry
            .execute(
                &ctx,
                "file_read",
                json!({"path": "skills/pdf/scripts/fill.py"}),
            )
            .await
            .unwrap();
        assert!(read.text().contains("print(1)"));

        let sys = registry
            .execute(&ctx, "skill_load", json!({"name": "sys"}))
            .await
            .unwrap();
        let v = sys.structured().unwrap();
        assert_eq!(v["origin"], "system");
        assert_eq!(v["files"], json!(["references/guide.md"]));
        assert!(v["howToReadFiles"].as_str().unwrap().contains("skill_load"));
        let guide = registry
            .execute(
                &ctx,
                "skill_load",
                json!({"name": "sys", "file": "references/guide.md"}),
            )
            .await
            .unwrap();
        assert_eq!(guide.structured().unwrap()["content"], "guide");
        for outside in ["../pdf/SKILL.md", "../../../secret", "/etc/passwd"] {
            let e = registry
                .execute(&ctx, "skill_load", json!({"name": "sys", "file": outside}))
                .await
                .unwrap_err();
            assert!(e.is_access_denied(), "{outside}: {e:?}");
        }

        // A link in a skill's folder that leads out of the workspace: the kernel refuses.
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("skills/pdf/leak")).unwrap();
        let e = registry
            .execute(&ctx, "skill_load", json!({"name": "pdf", "file": "leak"}))
            .await
            .unwrap_err();
        assert!(e.is_access_denied(), "{e:?}");
        let e = registry
            .execute(&ctx, "skill_load", json!({"name": "pfd"}))
            .await
            .unwrap_err();
        assert!(e.is_not_found());
        assert!(e.message().contains("`pdf`"), "{}", e.message());
        let e = registry
            .execute(&ctx, "skill_load", json!({"name": "broken"}))
            .await
            .unwrap_err();
        assert!(
            e.is_not_found(),
            "a malformed skill cannot be loaded: {e:?}"
        );
        // It says the skill exists and why it was skipped.
        assert!(
            e.message().starts_with("the skill `broken` exists (")
                && e.message()
                    .contains("but was skipped, so it cannot be loaded: no frontmatter"),
            "{}",
            e.message()
        );
    }
}
