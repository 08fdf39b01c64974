//! Discovery: the skills in `<dataDir>/skills/` (system) and `<workspace>/skills/`
//! (workspace), a workspace skill winning over a system skill of the same name.
//!
//! Every file is read through the files group's kernel-confined helpers
//! ([`read_text_in`], [`dirs_beneath`], [`links_beneath`]): a skill's folder resolves
//! beneath its root's `skills/` folder and its `SKILL.md` beneath that folder, so a
//! symbolic link leading out of them is refused by the kernel, never by a string check. Only the
//! frontmatter is parsed; the body is read when a skill is loaded. Each scan lists the
//! folders again and compares each `SKILL.md`'s (inode, size, times) with the last scan:
//! only a file that changed is read and parsed again, so a skill added, changed or
//! removed while the engine runs is seen at the next scan, and a scan of unchanged skills
//! costs a directory listing and a `stat` per skill.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use super::frontmatter::{self, Frontmatter};
use crate::ToolSchema;
use crate::tools::files::{dirs_beneath, links_beneath, read_text_in};

/// The folder of skills under the data dir and under the workspace.
pub const SKILLS_DIR: &str = "skills";
/// A skill's file.
pub const SKILL_MD: &str = "SKILL.md";
/// The largest `SKILL.md` read; a bigger one is a malformed skill.
pub const MAX_SKILL_MD_BYTES: u64 = 1024 * 1024;

/// Where a skill was found.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToolSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Системный навык: папка skills/ в каталоге данных
    #[schema(description_en = "A system skill: the skills/ folder of the data dir")]
    System,
    /// Навык рабочей области: папка skills/ рабочей области
    #[schema(description_en = "A workspace skill: the skills/ folder of the workspace")]
    Workspace,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::System => "system",
            Self::Workspace => "workspace",
        })
    }
}

/// A discovered skill: its checked frontmatter and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// Where it was found.
    pub origin: Origin,
    /// The root it was found under: the data dir (system) or the workspace.
    pub root: PathBuf,
    /// Its folder relative to `root`: `skills/<name>`.
    pub folder: String,
    /// Its frontmatter.
    pub frontmatter: Arc<Frontmatter>,
    /// Warnings about it (unknown frontmatter keys).
    pub warnings: Arc<[String]>,
}

impl Skill {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.frontmatter.name
    }

    /// Its description.
    pub fn description(&self) -> &str {
        &self.frontmatter.description
    }

    /// Its `SKILL.md` relative to [`root`](Self::root).
    pub fn skill_md(&self) -> String {
        format!("{}/{SKILL_MD}", self.folder)
    }

    /// Its folder as a path.
    pub fn dir(&self) -> PathBuf {
        self.root.join(&self.folder)
    }
}

/// A skill that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// Where it was found.
    pub origin: Origin,
    /// The file (or folder) at fault.
    pub path: PathBuf,
    /// What is wrong with it, as a sentence.
    pub problem: String,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

/// The skills found by one scan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The skills in effect, by name: a workspace skill in place of a system skill of
    /// the same name.
    pub skills: Vec<Skill>,
    /// The system skills a workspace skill of the same name shadows, by name.
    pub shadowed: Vec<Skill>,
    /// The skills skipped, by path.
    pub malformed: Vec<Malformed>,
}

impl Catalog {
    /// The skill in effect called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills
            .binary_search_by(|s| s.name().cmp(name))
            .ok()
            .and_then(|i| self.skills.get(i))
    }

    /// The system skill that the skill `name` shadows, if any.
    pub fn shadowed(&self, name: &str) -> Option<&Skill> {
        self.shadowed.iter().find(|s| s.name() == name)
    }
}

/// What a `SKILL.md` was when it was last read: a change of any of these reads it again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Stamp {
    link: (u64, u64, i64, i64),
    file: (u64, u64, u64, i64, i64, i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let l = std::fs::symlink_metadata(path).ok()?;
    // One stat for a plain file; a link's target is looked at too.
    let f = if l.file_type().is_symlink() {
        std::fs::metadata(path).ok()?
    } else {
        l.clone()
    };
    Some(Stamp {
        link: (l.dev(), l.ino(), l.mtime(), l.mtime_nsec()),
        file: (
            f.dev(),
            f.ino(),
            f.size(),
            f.mtime(),
            f.mtime_nsec(),
            f.ctime(),
            f.ctime_nsec(),
        ),
    })
}

type ParseResult = Result<(Arc<Frontmatter>, Arc<[String]>), String>;

struct Cached {
    stamp: Stamp,
    /// Whether the file had not changed for a while when it was read. File times are
    /// coarse (a few milliseconds): a file changed again within that tick, at the same
    /// size, keeps its stamp, so a file read while fresh is read again at the next scan.
    settled: bool,
    result: ParseResult,
}

/// How long a file must have been unchanged for its stamp to be trusted.
const SETTLE_SECONDS: i64 = 2;

impl Stamp {
    /// Whether the file was last changed (contents or inode) `SETTLE_SECONDS` or more
    /// before `now` (seconds since the epoch).
    fn settled(&self, now: i64) -> bool {
        let changed = self.file.3.max(self.file.5).max(self.link.2);
        now.saturating_sub(changed) >= SETTLE_SECONDS
    }
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The skills of one engine, kept between scans so that only changed files are parsed
/// again. Shared by every call on a context (`ctx.shared_state::<SkillCatalog>()`).
#[derive(Default)]
pub struct SkillCatalog {
    cache: Mutex<HashMap<PathBuf, Cached>>,
}

impl fmt::Debug for SkillCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.cache.lock().map_or(0, |c| c.len());
        f.debug_struct("SkillCatalog").field("cached", &n).finish()
    }
}

impl SkillCatalog {
    /// Scans `<data_dir>/skills/` and `<workspace>/skills/` (blocking: call it off the
    /// async threads). A file that changed since the last scan is read again; a skill
    /// that cannot be used is in [`Catalog::malformed`] and logged once per change.
    pub fn scan(&self, workspace: &Path, data_dir: &Path) -> Catalog {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = HashSet::new();
        let mut by_name: BTreeMap<String, Skill> = BTreeMap::new();
        let mut out = Catalog::default();
        let mut roots = vec![(Origin::System, data_dir)];
        // One folder is not two origins (a workspace configured as the data dir).
        if workspace != data_dir {
            roots.push((Origin::Workspace, workspace));
        }
        for (origin, root) in roots {
            let mut names = match dirs_beneath(root, SKILLS_DIR) {
                Ok(names) => names,
                Err(e) if e.is_not_found() => continue,
                // A data dir or workspace not created yet has no skills either.
                Err(_) if !root.exists() => continue,
                Err(e) => {
                    out.malformed.push(Malformed {
                        origin,
                        path: root.join(SKILLS_DIR),
                        problem: refused(&e, &root.display().to_string()),
                    });
                    continue;
                }
            };
            // A link in skills/ is read through: the kernel refuses one that leads out.
            names.extend(links_beneath(root, SKILLS_DIR).unwrap_or_default());
            names.sort();
            for name in names.into_iter().filter(|n| !n.starts_with('.')) {
                let folder = format!("{SKILLS_DIR}/{name}");
                let rel = format!("{folder}/{SKILL_MD}");
                let path = root.join(&rel);
                seen.insert(path.clone());
                let stamp = stamp(&path);
                let result = match (stamp, cache.get(&path)) {
                    (Some(s), Some(c)) if c.settled && c.stamp == s => c.result.clone(),
                    _ => {
                        let now = now_seconds();
                        let result = read(root, &folder, &name);
                        let known = cache.get(&path).is_some_and(|c| c.result == result);
                        match &result {
                            _ if known => {}
                            Ok((_, warnings)) => {
                                for w in warnings.iter() {
                                    tracing::warn!(target: "klaw::skills", "{}: {w}", path.display());
                                }
                            }
                            Err(problem) => {
                                tracing::warn!(target: "klaw::skills", "skill skipped: {}: {problem}", path.display());
                            }
                        }
                        // Without a stamp (no file to stat) it is read again next
                        // time, and logged again only if the problem changed.
                        cache.insert(
                            path.clone(),
                            Cached {
                                stamp: stamp.unwrap_or_default(),
                                settled: stamp.is_some_and(|s| s.settled(now)),
                                result: result.clone(),
                            },
                        );
                        result
                    }
                };
                match result {
                    Ok((frontmatter, warnings)) => {
                        let skill = Skill {
                            origin,
                            root: root.to_path_buf(),
                            folder,
                            frontmatter,
                            warnings,
                        };
                        // System first, so a workspace skill replaces it.
                        if let Some(old) = by_name.insert(name, skill) {
                            out.shadowed.push(old);
                        }
                    }
                    Err(problem) => out.malformed.push(Malformed {
                        origin,
                        path,
                        problem,
                    }),
                }
            }
        }
        cache.retain(|p, _| seen.contains(p));
        out.skills = by_name.into_values().collect();
        out.shadowed.sort_by(|a, b| a.name().cmp(b.name()));
        out
    }
}

/// Reads and parses the `SKILL.md` of `folder` (`skills/<name>`) beneath `root`, the
/// folder resolved beneath `skills/` and the file beneath the folder: the frontmatter,
/// checked, or the problem.
fn read(root: &Path, folder: &str, name: &str) -> ParseResult {
    let text = read_text_in(root, folder, SKILL_MD, MAX_SKILL_MD_BYTES).map_err(|e| {
        if e.is_not_found() {
            format!("no {SKILL_MD} in this skill's folder")
        } else {
            let skills = root.join(SKILLS_DIR);
            refused(&e, &format!("its folder or {}", skills.display()))
        }
    })?;
    let parsed = frontmatter::parse(&text, name).map_err(|e| e.to_string())?;
    Ok((Arc::new(parsed.frontmatter), parsed.warnings.into()))
}

/// The problem a file error is, for the skill's warning; `out_of` is where a read
/// must stay.
fn refused(e: &crate::ToolError, out_of: &str) -> String {
    if e.is_access_denied() {
        format!(
            "refused: it leads out of {out_of} (through a symbolic link that leaves it, or an absolute one)"
        )
    } else {
        e.message().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn skill(root: &Path, folder: &str, text: &str) {
        let dir = root.join(SKILLS_DIR).join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SKILL_MD), text).unwrap();
    }

    fn md(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n")
    }

    struct Dirs {
        _tmp: tempfile::TempDir,
        outside: PathBuf,
        data: PathBuf,
        ws: PathBuf,
    }

    fn dirs() -> Dirs {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        for d in [&data, &ws, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        Dirs {
            _tmp: tmp,
            outside,
            data,
            ws,
        }
    }

    fn names(skills: &[Skill]) -> Vec<(String, Origin)> {
        skills
            .iter()
            .map(|s| (s.name().to_owned(), s.origin))
            .collect()
    }

    #[test]
    fn both_roots_are_scanned_and_the_workspace_wins() {
        let d = dirs();
        skill(&d.data, "pdf", &md("pdf", "system pdf"));
        skill(&d.data, "csv", &md("csv", "system csv"));
        skill(&d.ws, "pdf", &md("pdf", "workspace pdf"));
        skill(&d.ws, "notes", &md("notes", "workspace notes"));
        let c = SkillCatalog::default().scan(&d.ws, &d.data);
        assert_eq!(
            names(&c.skills),
            [
                ("csv".into(), Origin::System),
                ("notes".into(), Origin::Workspace),
                ("pdf".into(), Origin::Workspace),
            ]
        );
        assert_eq!(c.get("pdf").unwrap().description(), "workspace pdf");
        assert_eq!(names(&c.shadowed), [("pdf".into(), Origin::System)]);
        assert_eq!(c.shadowed("pdf").unwrap().description(), "system pdf");
        assert!(c.shadowed("csv").is_none());
        assert!(c.malformed.is_empty(), "{:?}", c.malformed);
        assert_eq!(c.get("pdf").unwrap().skill_md(), "skills/pdf/SKILL.md");
    }

    #[test]
    fn roots_that_do_not_exist_yet_have_no_skills() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = SkillCatalog::default()
            .scan(&dir.path().join("data/workspace"), &dir.path().join("data"));
        assert!(catalog.skills.is_empty() && catalog.malformed.is_empty());
    }

    #[test]
    fn no_skills_folder_is_no_skills() {
        let d = dirs();
        assert_eq!(
            SkillCatalog::default().scan(&d.ws, &d.data),
            Catalog::default()
        );
    }

    #[test]
    fn every_malformed_kind_is_skipped_with_its_problem_and_hides_nothing() {
        let d = dirs();
        skill(&d.ws, "good", &md("good", "fine"));
        skill(&d.ws, "broken-yaml", "---\nname: [broken\n---\n");
        skill(&d.ws, "no-frontmatter", "# just text\n");
        skill(&d.ws, "no-name", "---\ndescription: d\n---\n");
        skill(&d.ws, "no-description", "---\nname: no-description\n---\n");
        skill(&d.ws, "Bad_Name", &md("Bad_Name", "d"));
        skill(&d.ws, "other-folder", &md("another", "d"));
        let bin = d.ws.join("skills/not-utf8");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(
            bin.join(SKILL_MD),
            b"---\nname: not-utf8\ndescription: \xff\xfe\n---\n",
        )
        .unwrap();
        let mut big = md("too-big", "d");
        big.push_str(&"x".repeat(MAX_SKILL_MD_BYTES as usize));
        skill(&d.ws, "too-big", &big);
        // SKILL.md a link out of the workspace; a skill folder a link out of it.
        std::fs::write(d.outside.join(SKILL_MD), md("escape", "secret")).unwrap();
        let esc = d.ws.join("skills/escape");
        std::fs::create_dir_all(&esc).unwrap();
        std::os::unix::fs::symlink(d.outside.join(SKILL_MD), esc.join(SKILL_MD)).unwrap();
        std::fs::create_dir_all(d.outside.join("away")).unwrap();
        std::fs::write(d.outside.join("away").join(SKILL_MD), md("away", "secret")).unwrap();
        std::os::unix::fs::symlink(d.outside.join("away"), d.ws.join("skills/away")).unwrap();
        std::fs::create_dir_all(d.ws.join("skills/empty")).unwrap();

        let c = SkillCatalog::default().scan(&d.ws, &d.data);
        assert_eq!(names(&c.skills), [("good".into(), Origin::Workspace)]);
        let problems: BTreeMap<String, String> = c
            .malformed
            .iter()
            .map(|m| {
                let folder = m.path.parent().unwrap().file_name().unwrap();
                (folder.to_string_lossy().into_owned(), m.problem.clone())
            })
            .collect();
        for (folder, why) in [
            ("broken-yaml", "not valid YAML"),
            ("no-frontmatter", "no frontmatter"),
            ("no-name", "`name` is missing"),
            ("no-description", "`description` is missing"),
            ("Bad_Name", "only lowercase letters"),
            ("other-folder", "differs from its folder"),
            ("not-utf8", "not text"),
            ("too-big", "more than the 1048576"),
            ("escape", "refused: it leads out of"),
            ("away", "refused: it leads out of"),
            ("empty", "no SKILL.md"),
        ] {
            let p = problems
                .get(folder)
                .unwrap_or_else(|| panic!("{folder} not reported: {problems:?}"));
            assert!(p.contains(why), "{folder}: {p}");
        }
        assert_eq!(problems.len(), 11, "{problems:?}");
        assert!(
            c.malformed
                .iter()
                .all(|m| m.to_string().starts_with(&*d.ws.to_string_lossy()))
        );
    }

    #[test]
    fn a_skill_md_or_folder_that_leads_out_of_its_skill_is_refused() {
        let d = dirs();
        // SKILL.md a link to another file of the data dir; a folder that is the data
        // dir itself (its SKILL.md then any file of it).
        std::fs::write(d.data.join("notes.md"), md("leak", "the data dir's")).unwrap();
        let leak = d.data.join("skills/leak");
        std::fs::create_dir_all(&leak).unwrap();
        std::os::unix::fs::symlink("../../notes.md", leak.join(SKILL_MD)).unwrap();
        std::fs::write(d.data.join(SKILL_MD), md("up", "the data dir")).unwrap();
        std::os::unix::fs::symlink("..", d.data.join("skills/up")).unwrap();
        let c = SkillCatalog::default().scan(&d.ws, &d.data);
        assert!(c.skills.is_empty(), "{:?}", c.skills);
        assert_eq!(c.malformed.len(), 2, "{:?}", c.malformed);
        for m in &c.malformed {
            assert!(m.problem.contains("refused: it leads out of"), "{m}");
        }
    }

    #[test]
    fn a_link_inside_the_root_is_read_through() {
        let d = dirs();
        skill(&d.ws, "real", &md("real", "d"));
        std::os::unix::fs::symlink("real", d.ws.join("skills/alias")).unwrap();
        let c = SkillCatalog::default().scan(&d.ws, &d.data);
        assert_eq!(names(&c.skills), [("real".into(), Origin::Workspace)]);
        // The alias is read, and its name is not its folder's.
        assert_eq!(c.malformed.len(), 1);
        assert!(c.malformed[0].problem.contains("differs from its folder"));
    }

    #[test]
    fn changes_are_seen_at_the_next_scan() {
        let d = dirs();
        let catalog = SkillCatalog::default();
        skill(&d.ws, "a", &md("a", "first"));
        assert_eq!(catalog.scan(&d.ws, &d.data).skills.len(), 1);
        skill(&d.ws, "b", &md("b", "added"));
        // Same length, different text: the inode or times differ.
        skill(&d.ws, "a", &md("a", "secnd"));
        let c = catalog.scan(&d.ws, &d.data);
        assert_eq!(c.skills.len(), 2);
        assert_eq!(c.get("a").unwrap().description(), "secnd");
        skill(&d.ws, "a", "broken");
        let c = catalog.scan(&d.ws, &d.data);
        assert_eq!(names(&c.skills), [("b".into(), Origin::Workspace)]);
        assert_eq!(c.malformed.len(), 1);
        std::fs::remove_dir_all(d.ws.join("skills/a")).unwrap();
        let c = catalog.scan(&d.ws, &d.data);
        assert_eq!(names(&c.skills), [("b".into(), Origin::Workspace)]);
        assert!(c.malformed.is_empty());
        assert_eq!(catalog.cache.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_skills_folder_that_leads_out_is_reported() {
        let d = dirs();
        skill(&d.outside, "x", &md("x", "d"));
        std::os::unix::fs::symlink(d.outside.join(SKILLS_DIR), d.ws.join(SKILLS_DIR)).unwrap();
        let c = SkillCatalog::default().scan(&d.ws, &d.data);
        assert!(c.skills.is_empty());
        assert_eq!(c.malformed.len(), 1);
        assert!(
            c.malformed[0].problem.contains("leads out"),
            "{:?}",
            c.malformed
        );
    }
}
