//! `skill_load`: a skill's whole `SKILL.md` and the list of its supporting files, or one
//! of those files.

use serde::Serialize;

use super::{LoadedSkills, MAX_SKILL_MD_BYTES, Malformed, Origin, Skill, catalog};
use crate::tools::files::{dirs_in, files_in, read_bytes_in, read_text_in};
use crate::tools::run_blocking;
use crate::{Limits, ToolContext, ToolError, ToolSchema, by_similarity, tool};

/// Most supporting files listed, and how deep into a skill's folder.
const MAX_FILES: usize = 200;
const MAX_DEPTH: usize = 6;

/// The answer of `skill_load`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillLoaded {
    /// Имя навыка
    #[schema(description_en = "The skill's name")]
    pub name: String,
    /// Откуда навык: system, path, user или workspace
    #[schema(description_en = "Where it is from: system, path, user or workspace")]
    pub origin: Origin,
    /// Прочитанный файл: SKILL.md или запрошенный файл навыка
    #[schema(description_en = "The file read: SKILL.md or the skill's file asked for")]
    pub path: String,
    /// Содержимое файла целиком
    #[schema(description_en = "The file's whole content")]
    pub content: String,
    /// Вспомогательные файлы навыка (scripts/, references/, assets/ ...)
    #[schema(description_en = "The skill's supporting files (scripts/, references/, assets/ ...)")]
    pub files: Vec<String>,
    /// Если список файлов обрезан: что из него выпало
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(description_en = "When the list of files was cut: what it leaves out")]
    pub files_cut: Option<String>,
    /// Как прочитать эти файлы
    #[schema(description_en = "How to read those files")]
    pub how_to_read_files: String,
    /// Папка навыка как рабочий каталог для exec (относительно рабочей области), если команды её видят: скрипты навыка запускай оттуда, как их пишет SKILL.md (python3 scripts/x.py)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(
        description_en = "The skill's folder as exec's workingDir (relative to the workspace), when commands see it: run the skill's scripts from there as its SKILL.md writes them (python3 scripts/x.py)"
    )]
    pub exec_dir: Option<String>,
    /// Папка навыка, как её видят команды (exec): абсолютный путь, вне рабочей области только для чтения; запускай скрипты навыка по нему, например python3 <skillDir>/scripts/x.py
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(
        description_en = "The skill's folder as commands (exec) see it: an absolute path, read-only outside the workspace; run the skill's scripts by it, e.g. python3 <skillDir>/scripts/x.py"
    )]
    pub skill_dir: Option<String>,
    /// Инструменты, которые навык разрешает (allowed-tools), если он их называет
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(description_en = "The tools the skill allows (allowed-tools), when it names them")]
    pub allowed_tools: Option<Vec<String>>,
}

/// Loads a skill.
#[tool(
    name = "skill_load",
    title_ru = "Загрузка навыка",
    title_en = "Load a skill",
    description_ru = "Загружает навык (skill) по имени: весь его SKILL.md (инструкции — следуй им в текущей задаче) и список вспомогательных файлов с тем, как их читать. Вызывай, только когда задача подходит под описание навыка; не загружай навыки впрок. file — путь файла внутри папки навыка (например scripts/run.py): тогда возвращается этот файл.",
    description_en = "Loads a skill by name: its whole SKILL.md (instructions: follow them for the task at hand) and the list of its supporting files with how to read them. Call it only when the task matches the skill's description; do not preload skills. file is a path inside the skill's folder (e.g. scripts/run.py): then that file is returned.",
    read_only
)]
pub async fn skill_load(
    ctx: ToolContext,
    limits: Limits,
    /// Имя навыка из skill_list
    #[arg(description_en = "The skill's name, as skill_list gives it")]
    name: String,
    /// Файл внутри папки навыка, например references/guide.md; без него — SKILL.md
    #[arg(
        description_en = "A file inside the skill's folder, e.g. references/guide.md; without it, SKILL.md"
    )]
    file: Option<String>,
) -> Result<SkillLoaded, ToolError> {
    let catalog = catalog(&ctx).await?;
    let Some(skill) = catalog.get(&name).cloned() else {
        if let Some(skipped) = catalog.skipped(&name) {
            return Err(skipped_error(skipped));
        }
        return Err(unknown(&name, catalog.skills.iter().map(Skill::name)));
    };
    let max_read = limits.max_read_bytes;
    let caller = ctx.caller().clone();
    let loaded = run_blocking("skill_load", move || {
        load(&skill, file.as_deref(), max_read)
    })
    .await?;
    if loaded.0
        && let Some(tools) = &loaded.1.allowed_tools
    {
        ctx.shared_state::<LoadedSkills>()
            .record(&caller, &loaded.1.name, tools);
    }
    Ok(loaded.1)
}

/// The error for a skill that exists but was skipped: where it is and why.
pub(crate) fn skipped_error(m: &Malformed) -> ToolError {
    ToolError::not_found(format!(
        "the skill `{}` exists ({}) but was skipped, so it cannot be loaded: {}. Fix its SKILL.md (or tell the user); skill_list shows every skill",
        m.name,
        m.path.display(),
        m.problem
    ))
}

/// The not-found error for `name`, naming the closest skills.
fn unknown<'a>(name: &str, names: impl Iterator<Item = &'a str>) -> ToolError {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        return ToolError::not_found(format!(
            "no skill `{name}`: no skills are installed (a skill is a folder with SKILL.md in <workspace>/skills/ or <dataDir>/skills/)"
        ));
    }
    let closest: Vec<String> = by_similarity(name, names.iter().copied())
        .into_iter()
        .take(3)
        .map(|(_, n)| format!("`{n}`"))
        .collect();
    ToolError::not_found(format!(
        "no skill `{name}`; the closest: {}. skill_list shows every skill",
        closest.join(", ")
    ))
}

/// Reads `SKILL.md` (or `file`) of `skill`; true when it was the skill itself.
fn load(
    skill: &Skill,
    file: Option<&str>,
    max_read: u64,
) -> Result<(bool, SkillLoaded), ToolError> {
    let dir = skill.dir();
    let (whole, content, path) = match file.map(str::trim).filter(|f| !f.is_empty()) {
        None => (
            true,
            read_text_in(
                &skill.root,
                &skill.folder,
                super::SKILL_MD,
                MAX_SKILL_MD_BYTES,
            )?,
            shown(skill, super::SKILL_MD),
        ),
        Some(f) => {
            let f = inside(f)?;
            (
                false,
                read_text_in(&skill.root, &skill.folder, &f, max_read)?,
                shown(skill, &f),
            )
        }
    };
    // A leading byte order mark (editors on Windows write one) is no part of the text.
    let content = match content.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => content,
    };
    let (files, files_cut) = skill_files_listed(skill);
    let files = files.iter().map(|f| shown(skill, f)).collect();
    // The folder at its real path: where commands see it (the sandbox shows the
    // workspace and the skills folders at their own canonical paths).
    let skill_dir = std::fs::canonicalize(&dir)
        .ok()
        .map(|d| d.to_string_lossy().into_owned());
    let (how_to_read_files, exec_dir) = match skill.origin {
        Origin::Workspace => (
            format!(
                "The paths are relative to the workspace: read a file with file_read and its path, or with skill_load and file (the path inside the skill's folder). Commands see the skill's folder: run its scripts with exec and workingDir `{}` (e.g. `python3 scripts/x.py`, as SKILL.md writes them).",
                skill.folder
            ),
            Some(skill.folder.clone()),
        ),
        Origin::System | Origin::Path | Origin::User => (
            format!(
                "This is a {} skill in {}, outside the workspace: file_read cannot reach it. Read a file with skill_load, name `{}` and file = its path as listed. Commands (exec) see the skill's folder read-only at `{}`: run its scripts by that path from the workspace (e.g. `python3 {}/scripts/x.py` for SKILL.md's `python3 scripts/x.py`), so that what they write goes to the workspace; nothing can be written into the skill's folder.",
                skill.origin,
                dir.display(),
                skill.name(),
                skill_dir.as_deref().unwrap_or("?"),
                skill_dir.as_deref().unwrap_or("?"),
            ),
            None,
        ),
    };
    Ok((
        whole,
        SkillLoaded {
            name: skill.name().to_owned(),
            origin: skill.origin,
            path,
            content,
            files,
            files_cut,
            how_to_read_files,
            exec_dir,
            skill_dir,
            allowed_tools: skill.frontmatter.allowed_tools.clone(),
        },
    ))
}

/// `file` as a path inside a skill's folder: relative, no `..` (refused early, with a
/// clear message). The kernel keeps every read beneath the skill's own folder whatever
/// the path or a link in it: a link to another skill, to the rest of the data dir or
/// the workspace, or an absolute one is refused; a link inside the folder is followed.
fn inside(file: &str) -> Result<String, ToolError> {
    let parts: Vec<&str> = file
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if file.starts_with('/') || parts.is_empty() || parts.contains(&"..") {
        return Err(ToolError::access_denied(format!(
            "`{file}` is not a path inside the skill's folder: give it relative to the folder, without `..` (as skill_load lists the files)"
        )));
    }
    Ok(parts.join("/"))
}

/// `rel` (inside the skill's folder) as the answer shows it: workspace-relative for a
/// workspace skill, so file_read takes it; relative to the skill's folder for a system one.
fn shown(skill: &Skill, rel: &str) -> String {
    match skill.origin {
        Origin::Workspace => format!("{}/{rel}", skill.folder),
        Origin::System | Origin::Path | Origin::User => rel.to_owned(),
    }
}

/// The supporting files of `skill`: paths inside its folder (`scripts/fill.py`), depth
/// first and sorted, `SKILL.md` and hidden entries left out, at most 200 files 6 levels
/// deep. Listed beneath the skill's folder by the kernel, as every read. Blocking.
pub fn skill_files(skill: &Skill) -> Vec<String> {
    skill_files_listed(skill).0
}

/// [`skill_files`], and when the list was cut (more than 200 files, or folders deeper
/// than 6 levels), a sentence saying so.
pub fn skill_files_listed(skill: &Skill) -> (Vec<String>, Option<String>) {
    let mut walk = Walk::default();
    walk.walk(skill, "", 0);
    let cut = match (walk.more_files, walk.deeper) {
        (false, false) => None,
        (more, deeper) => {
            let mut why = Vec::new();
            if more {
                why.push(format!("it stops at {MAX_FILES} files"));
            }
            if deeper {
                why.push(format!(
                    "folders deeper than {MAX_DEPTH} levels are not listed"
                ));
            }
            Some(format!(
                "The list of files is cut: {}. Read a file that is not listed with skill_load and its path.",
                why.join(", and ")
            ))
        }
    };
    (walk.files, cut)
}

/// Reads `file` (a path inside `skill`'s folder, `SKILL.md` included) whole, text or
/// not, when it is at most `max_bytes`. A path with `..` or an absolute one is refused
/// (`access_denied`), and the kernel keeps the read beneath the skill's folder whatever
/// a link in it says. Blocking.
pub fn read_skill_file(skill: &Skill, file: &str, max_bytes: u64) -> Result<Vec<u8>, ToolError> {
    let f = inside(file)?;
    read_bytes_in(&skill.root, &skill.folder, &f, max_bytes)
}

/// A walk of a skill's folder: the files found, and whether it was cut.
#[derive(Default)]
struct Walk {
    files: Vec<String>,
    /// There were more files than [`MAX_FILES`].
    more_files: bool,
    /// There were folders below [`MAX_DEPTH`].
    deeper: bool,
}

impl Walk {
    /// The skill's files below `at` (inside its folder), depth first, sorted;
    /// `SKILL.md` itself and hidden entries left out; stops at `MAX_FILES`. Confined
    /// like every read.
    fn walk(&mut self, skill: &Skill, at: &str, depth: usize) {
        // Listed beneath the skill's folder, as the files are read.
        let under = |name: &str| {
            if at.is_empty() {
                name.to_owned()
            } else {
                format!("{at}/{name}")
            }
        };
        for name in files_in(&skill.root, &skill.folder, at).unwrap_or_default() {
            if name.starts_with('.') || (at.is_empty() && name == super::SKILL_MD) {
                continue;
            }
            if self.files.len() >= MAX_FILES {
                self.more_files = true;
                return;
            }
            self.files.push(under(&name));
        }
        let dirs: Vec<String> = dirs_in(&skill.root, &skill.folder, at)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| !n.starts_with('.'))
            .collect();
        if depth >= MAX_DEPTH {
            self.deeper |= !dirs.is_empty();
            return;
        }
        for name in dirs {
            if self.more_files {
                return;
            }
            self.walk(skill, &under(&name), depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::skills::SkillCatalog;

    #[test]
    fn skill_files_are_listed_and_read_only_inside_the_skill() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, data) = (dir.path().join("ws"), dir.path().join("data"));
        let skill = ws.join("skills/pdf");
        std::fs::create_dir_all(skill.join("assets")).unwrap();
        std::fs::create_dir_all(ws.join("skills/other")).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: pdf\ndescription: d\n---\nx\n",
        )
        .unwrap();
        std::fs::write(skill.join("assets/pixel.png"), [0x89, b'P', 0, 0xff]).unwrap();
        std::fs::write(skill.join(".hidden"), "h").unwrap();
        std::fs::write(ws.join("skills/other/notes.md"), "other").unwrap();
        std::fs::write(dir.path().join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), skill.join("leak")).unwrap();
        // Beneath the workspace but out of the skill: another skill's file, the root's.
        std::fs::write(ws.join("memory.sqlite"), "db").unwrap();
        std::os::unix::fs::symlink("../../memory.sqlite", skill.join("db")).unwrap();
        std::os::unix::fs::symlink("../other/notes.md", skill.join("sibling")).unwrap();
        // Inside the skill: followed.
        std::os::unix::fs::symlink("assets/pixel.png", skill.join("pixel")).unwrap();
        let catalog = SkillCatalog::default().scan(&ws, &data);
        let pdf = catalog.get("pdf").unwrap();
        assert_eq!(skill_files(pdf), ["assets/pixel.png"]);
        assert_eq!(
            read_skill_file(pdf, "assets/pixel.png", 100).unwrap(),
            [0x89, b'P', 0, 0xff]
        );
        assert!(read_skill_file(pdf, "SKILL.md", 100).is_ok());
        assert_eq!(
            read_skill_file(pdf, "pixel", 100).unwrap(),
            [0x89, b'P', 0, 0xff]
        );
        assert!(
            read_skill_file(pdf, "assets/pixel.png", 2).is_err(),
            "the cap"
        );
        for outside in [
            "../other/notes.md",
            "../../../secret",
            "/etc/passwd",
            "leak",
            "db",
            "sibling",
        ] {
            let e = read_skill_file(pdf, outside, 100).unwrap_err();
            assert!(e.is_access_denied(), "{outside}: {e:?}");
        }
    }

    #[test]
    fn a_leading_byte_order_mark_is_not_part_of_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("ws/skills/bom");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "\u{feff}---\nname: bom\ndescription: d\n---\nBody.\n",
        )
        .unwrap();
        std::fs::write(skill.join("guide.md"), "\u{feff}Guide.\n").unwrap();
        let catalog = SkillCatalog::default().scan(&dir.path().join("ws"), dir.path());
        let bom = catalog.get("bom").unwrap();
        let (_, loaded) = load(bom, None, 1000).unwrap();
        assert!(loaded.content.starts_with("---\nname: bom"), "{loaded:?}");
        let (_, guide) = load(bom, Some("guide.md"), 1000).unwrap();
        assert_eq!(guide.content, "Guide.\n");
    }

    #[test]
    fn a_cut_list_of_files_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("ws/skills/big");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: big\ndescription: d\n---\n",
        )
        .unwrap();
        let catalog = SkillCatalog::default().scan(&dir.path().join("ws"), dir.path());
        let (files, cut) = skill_files_listed(catalog.get("big").unwrap());
        assert!(files.is_empty() && cut.is_none());
        for i in 0..=MAX_FILES {
            std::fs::write(skill.join(format!("f{i:03}")), "x").unwrap();
        }
        let deep = skill.join("a/b/c/d/e/f/g");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("deep.txt"), "x").unwrap();
        let (files, cut) = skill_files_listed(catalog.get("big").unwrap());
        assert_eq!(files.len(), MAX_FILES);
        let cut = cut.unwrap();
        assert!(cut.contains("it stops at 200 files"), "{cut}");
        std::fs::remove_file(skill.join("f000")).unwrap();
        std::fs::remove_file(skill.join("f001")).unwrap();
        let (files, cut) = skill_files_listed(catalog.get("big").unwrap());
        assert_eq!(files.len(), MAX_FILES - 1);
        assert!(!files.iter().any(|f| f.ends_with("deep.txt")));
        let cut = cut.unwrap();
        assert!(
            cut.contains("deeper than 6 levels") && !cut.contains("200"),
            "{cut}"
        );
    }

    #[test]
    fn an_unknown_name_names_the_closest() {
        let e = unknown("pdf-tool", ["csv-tools", "pdf-tools", "notes"].into_iter());
        assert!(e.is_not_found());
        assert!(
            e.message()
                .starts_with("no skill `pdf-tool`; the closest: `pdf-tools`"),
            "{}",
            e.message()
        );
        let e = unknown("x", std::iter::empty());
        assert!(
            e.message().contains("no skills are installed"),
            "{}",
            e.message()
        );
    }
}
