//! Discovery: the skills in `<dataDir>/skills/` (system), the folders of `skills.paths`
//! (path), `~/.claude/skills/` and `~/.agents/skills/` (user), and the workspace's
//! `.claude/skills/`, `.agents/skills/` and `skills/` (workspace), a skill of a later
//! folder winning over one of the same name in an earlier folder ([`sources`]). A
//! skill's name is its folder's name.
//!
//! Every file is read through the files group's kernel-confined helpers
//! ([`read_text_in`], [`dirs_beneath`], [`links_beneath`]): a skill's folder resolves
//! beneath its skills folder and its `SKILL.md` beneath that folder, so a
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

/// Where a skill was found, from the lowest precedence to the highest (see
/// [`sources`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToolSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Системный навык: папка skills/ в каталоге данных
    #[schema(description_en = "A system skill: the skills/ folder of the data dir")]
    System,
    /// Навык из папки, названной в skills.paths
    #[schema(description_en = "A skill of a folder named in skills.paths")]
    Path,
    /// Навык пользователя: ~/.claude/skills/ или ~/.agents/skills/
    #[schema(description_en = "A user's skill: ~/.claude/skills/ or ~/.agents/skills/")]
    User,
    /// Навык рабочей области: её папки skills/, .agents/skills/ или .claude/skills/
    #[schema(
        description_en = "A workspace skill: its skills/, .agents/skills/ or .claude/skills/ folder"
    )]
    Workspace,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::System => "system",
            Self::Path => "path",
            Self::User => "user",
            Self::Workspace => "workspace",
        })
    }
}

/// A folder of skills (each a folder with a `SKILL.md` in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// What its skills are.
    pub origin: Origin,
    /// The folder every read of its skills stays beneath (the kernel refuses a link
    /// that leads out of it).
    pub root: PathBuf,
    /// The skills folder relative to `root` (`skills`, `.agents/skills`), empty when it
    /// is `root` itself.
    pub dir: String,
}

impl Source {
    /// The skills folder.
    pub fn path(&self) -> PathBuf {
        if self.dir.is_empty() {
            self.root.clone()
        } else {
            self.root.join(&self.dir)
        }
    }

    /// The folder of the skill `name` relative to `root`.
    fn folder(&self, name: &str) -> String {
        if self.dir.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.dir)
        }
    }
}

/// The skills folders from the lowest precedence to the highest: a skill of a later
/// folder shadows one of the same name in an earlier folder.
///
/// 1. system: `<dataDir>/skills/`;
/// 2. path: each folder of `skills.paths`, in order;
/// 3. user: `~/.claude/skills/`, then `~/.agents/skills/`;
/// 4. workspace: `<workspace>/.claude/skills/`, then `<workspace>/.agents/skills/`,
///    then `<workspace>/skills/` (Klaw's own, the highest).
///
/// A workspace folder is read beneath the workspace, the system one beneath the data
/// dir; a user or `skills.paths` folder beneath itself (a link to it, as dotfiles
/// often are, is followed first). A folder that is the same as one later in the list
/// (a workspace that is the home, or the data dir) counts once, at its higher place.
pub fn sources(
    workspace: &Path,
    data_dir: &Path,
    home: Option<&Path>,
    paths: &[PathBuf],
) -> Vec<Source> {
    let at = |origin, root: &Path, dir: &str| Source {
        origin,
        root: root.to_path_buf(),
        dir: dir.to_owned(),
    };
    // Its own folder, with the user's links to it followed.
    let own = |origin, folder: PathBuf| Source {
        origin,
        root: std::fs::canonicalize(&folder).unwrap_or(folder),
        dir: String::new(),
    };
    let mut all = vec![at(Origin::System, data_dir, SKILLS_DIR)];
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    for p in paths {
        // A `skills.paths` folder inside the workspace holds workspace skills, read
        // beneath the workspace: a command may have made it (or a folder on its way)
        // a link to anywhere, which is not followed out. One that reaches the
        // workspace only through a link on its way is left out.
        let rel = p
            .strip_prefix(workspace)
            .or_else(|_| p.strip_prefix(&ws))
            .ok()
            .and_then(Path::to_str);
        match rel {
            Some(rel) => all.push(at(Origin::Workspace, workspace, rel)),
            None if in_workspace(p, workspace, &ws) => {}
            None => all.push(own(Origin::Path, p.clone())),
        }
    }
    if let Some(home) = home {
        for d in USER_DIRS {
            all.push(own(Origin::User, home.join(d)));
        }
    }
    for d in USER_DIRS {
        all.push(at(Origin::Workspace, workspace, d));
    }
    all.push(at(Origin::Workspace, workspace, SKILLS_DIR));
    // The same folder twice counts at its higher place.
    let real: Vec<PathBuf> = all
        .iter()
        .map(|s| std::fs::canonicalize(s.path()).unwrap_or_else(|_| s.path()))
        .collect();
    all.into_iter()
        .enumerate()
        .filter(|(i, _)| !real[i + 1..].contains(&real[*i]))
        .map(|(_, s)| s)
        .collect()
}

/// Whether `path` lies inside the workspace (`workspace` as given, `ws` canonical): on
/// paper, or because one of its ancestors resolves into it (a link a command may have
/// made).
pub(super) fn in_workspace(path: &Path, workspace: &Path, ws: &Path) -> bool {
    path.starts_with(workspace)
        || path.starts_with(ws)
        || path
            .ancestors()
            .any(|a| std::fs::canonicalize(a).is_ok_and(|c| c.starts_with(ws)))
}

/// The other clients' skills folders, beneath the home and the workspace, in
/// precedence order (`.agents`, the format's shared one, over Claude Code's).
pub const USER_DIRS: [&str; 2] = [".claude/skills", ".agents/skills"];

/// A discovered skill: its checked frontmatter and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// Where it was found.
    pub origin: Origin,
    /// The root it was found under (its [`Source::root`]): the data dir (system), the
    /// workspace, or the skills folder itself (user, path).
    pub root: PathBuf,
    /// Its folder relative to `root`: `skills/<name>`, `.agents/skills/<name>`, `<name>`.
    pub folder: String,
    /// Its frontmatter.
    pub frontmatter: Arc<Frontmatter>,
    /// Warnings about it: what breaks the format's rules without stopping it (a name
    /// other than the folder's, a long description, mistyped or unknown keys).
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
    /// The skill's name (its folder's), empty when a whole skills folder is at fault.
    pub name: String,
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
    /// The skills in effect, by name: of two skills of the same name, the one of the
    /// higher folder ([`sources`]).
    pub skills: Vec<Skill>,
    /// The skills a skill of the same name in a higher folder shadows, by name.
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

    /// The skipped skill called `name` (its folder's name), if one is: why a skill
    /// cannot be loaded.
    pub fn skipped(&self, name: &str) -> Option<&Malformed> {
        self.malformed.iter().find(|m| m.name == name)
    }

    /// The skill that the skill `name` shadows, if any (the nearest below it).
    pub fn shadowed(&self, name: &str) -> Option<&Skill> {
        self.shadowed.iter().rev().find(|s| s.name() == name)
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
    /// Scans `<data_dir>/skills/` and `<workspace>/skills/` and the other clients'
    /// folders in the workspace ([`sources`] without a home or `skills.paths`).
    pub fn scan(&self, workspace: &Path, data_dir: &Path) -> Catalog {
        self.scan_sources(&sources(workspace, data_dir, None, &[]))
    }

    /// Scans `sources`, lowest precedence first (blocking: call it off the async
    /// threads). A file that changed since the last scan is read again; a skill that
    /// cannot be used is in [`Catalog::malformed`] and logged once per change.
    pub fn scan_sources(&self, sources: &[Source]) -> Catalog {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = HashSet::new();
        let mut by_name: BTreeMap<String, Skill> = BTreeMap::new();
        let mut out = Catalog::default();
        for source in sources {
            let (origin, root) = (source.origin, source.root.as_path());
            let sub = if source.dir.is_empty() {
                "."
            } else {
                source.dir.as_str()
            };
            let mut names = match dirs_beneath(root, sub) {
                Ok(names) => names,
                Err(e) if e.is_not_found() => continue,
                // A data dir or workspace not created yet has no skills either.
                Err(_) if !source.path().exists() => continue,
                Err(e) => {
                    out.malformed.push(Malformed {
                        name: String::new(),
                        origin,
                        path: source.path(),
                        problem: refused(&e, &root.display().to_string()),
                    });
                    continue;
                }
            };
            // A link in skills/ is read through: the kernel refuses one that leads out.
            names.extend(links_beneath(root, sub).unwrap_or_default());
            names.sort();
            for name in names.into_iter().filter(|n| !n.starts_with('.')) {
                let folder = source.folder(&name);
                let rel = format!("{folder}/{SKILL_MD}");
                let path = root.join(&rel);
                seen.insert(path.clone());
                let stamp = stamp(&path);
                let result = match (stamp, cache.get(&path)) {
                    (Some(s), Some(c)) if c.settled && c.stamp == s => c.result.clone(),
                    _ => {
                        let now = now_seconds();
                        let result = read(source, &folder, &name);
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
                        // Lowest first, so a higher folder's skill replaces it.
                        if let Some(old) = by_name.insert(name, skill) {
                            out.shadowed.push(old);
                        }
                    }
                    Err(problem) => out.malformed.push(Malformed {
                        name: name.clone(),
                        origin,
                        path,
                        problem,
                    }),
                }
            }
        }
        cache.retain(|p, _| seen.contains(p));
        out.skills = by_name.into_values().collect();
        // By name, each name's lowest first (a stable sort keeps the scan's order).
        out.shadowed.sort_by(|a, b| a.name().cmp(b.name()));
        out
    }
}

/// Reads and parses the `SKILL.md` of `folder` (`skills/<name>`) beneath the source's
/// root, the folder resolved beneath the skills folder and the file beneath the
/// folder: the frontmatter, or why the skill cannot be used.
fn read(source: &Source, folder: &str, name: &str) -> ParseResult {
    let text = read_text_in(&source.root, folder, SKILL_MD, MAX_SKILL_MD_BYTES).map_err(|e| {
        if e.is_not_found() {
            format!("no {SKILL_MD} in this skill's folder")
        } else {
            refused(&e, &format!("its folder or {}", source.path().display()))
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

    /// Every folder other clients use, in its place: a skill of a later folder shadows
    /// one of an earlier; a dotfiles link to the user's folder is followed.
    #[test]
    fn the_other_clients_folders_in_their_order() {
        let d = dirs();
        let home = d.outside.join("home");
        let team = d.outside.join("team");
        let dotfiles = d.outside.join("dotfiles/skills");
        let put = |dir: &Path, name: &str, what: &str| {
            std::fs::create_dir_all(dir.join(name)).unwrap();
            std::fs::write(dir.join(name).join(SKILL_MD), md(name, what)).unwrap();
        };
        put(&d.data.join("skills"), "a", "system");
        put(&team, "a", "path");
        put(&team, "b", "path");
        put(&home.join(".claude/skills"), "b", "user claude");
        put(&dotfiles, "b", "user agents");
        put(&dotfiles, "c", "user agents");
        std::fs::create_dir_all(home.join(".agents")).unwrap();
        std::os::unix::fs::symlink(&dotfiles, home.join(".agents/skills")).unwrap();
        put(&d.ws.join(".claude/skills"), "c", "ws claude");
        put(&d.ws.join(".claude/skills"), "d", "ws claude");
        put(&d.ws.join(".agents/skills"), "d", "ws agents");
        put(&d.ws.join(".agents/skills"), "e", "ws agents");
        put(&d.ws.join("skills"), "e", "ws klaw");
        let found = sources(&d.ws, &d.data, Some(&home), std::slice::from_ref(&team));
        let order: Vec<Origin> = found.iter().map(|s| s.origin).collect();
        assert_eq!(
            order,
            [
                Origin::System,
                Origin::Path,
                Origin::User,
                Origin::User,
                Origin::Workspace,
                Origin::Workspace,
                Origin::Workspace
            ]
        );
        let c = SkillCatalog::default().scan_sources(&found);
        let got: Vec<(&str, &str, Origin)> = c
            .skills
            .iter()
            .map(|s| (s.name(), s.description(), s.origin))
            .collect();
        assert_eq!(
            got,
            [
                ("a", "path", Origin::Path),
                ("b", "user agents", Origin::User),
                ("c", "ws claude", Origin::Workspace),
                ("d", "ws agents", Origin::Workspace),
                ("e", "ws klaw", Origin::Workspace),
            ]
        );
        assert_eq!(c.shadowed("a").unwrap().origin, Origin::System);
        assert_eq!(c.shadowed("b").unwrap().description(), "user claude");
        assert_eq!(c.shadowed.len(), 6, "{:?}", c.shadowed);
        assert_eq!(c.get("e").unwrap().skill_md(), "skills/e/SKILL.md");
        assert_eq!(c.get("d").unwrap().skill_md(), ".agents/skills/d/SKILL.md");
        assert_eq!(c.get("a").unwrap().skill_md(), "a/SKILL.md");
        assert!(c.malformed.is_empty(), "{:?}", c.malformed);

        // A workspace that is the home: its folders count once, as the workspace's.
        let same = sources(&home, &d.data, Some(&home), &[]);
        assert_eq!(same.len(), 4, "{same:?}");
        assert!(same[1..].iter().all(|s| s.origin == Origin::Workspace));
    }

    /// A `skills.paths` folder inside the workspace holds workspace skills, read beneath
    /// the workspace: a command that makes it (or a folder on its way) a link to a
    /// skills folder elsewhere does not make that folder's skills, or their files,
    /// readable.
    #[test]
    fn a_skills_path_in_the_workspace_is_not_followed_out() {
        let d = dirs();
        let elsewhere = d.outside.join("private");
        std::fs::create_dir_all(elsewhere.join("secret")).unwrap();
        std::fs::write(
            elsewhere.join("secret/SKILL.md"),
            md("secret", "a skill outside"),
        )
        .unwrap();
        let own = d.ws.join("team");
        std::fs::create_dir_all(own.join("mine")).unwrap();
        std::fs::write(own.join("mine/SKILL.md"), md("mine", "team skill")).unwrap();
        let found = sources(&d.ws, &d.data, None, std::slice::from_ref(&own));
        let c = SkillCatalog::default().scan_sources(&found);
        assert_eq!(
            names(&c.skills),
            [("mine".into(), Origin::Workspace)],
            "the folder's own skill, as the workspace's"
        );
        assert_eq!(c.get("mine").unwrap().skill_md(), "team/mine/SKILL.md");
        // The folder replaced by a link out, and a folder on its way.
        std::fs::remove_dir_all(&own).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &own).unwrap();
        let c = SkillCatalog::default().scan_sources(&sources(
            &d.ws,
            &d.data,
            None,
            std::slice::from_ref(&own),
        ));
        assert!(c.get("secret").is_none(), "{:?}", names(&c.skills));
        std::fs::remove_file(&own).unwrap();
        std::os::unix::fs::symlink(&d.outside, d.ws.join("a")).unwrap();
        let deep = d.ws.join("a/private");
        let c = SkillCatalog::default().scan_sources(&sources(
            &d.ws,
            &d.data,
            None,
            std::slice::from_ref(&deep),
        ));
        assert!(c.get("secret").is_none(), "{:?}", names(&c.skills));
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
        skill(&d.ws, "bad name", &md("bad-name", "d"));
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
        // Lenient: a name the format forbids, a name other than the folder's, none.
        assert_eq!(
            names(&c.skills),
            [
                ("Bad_Name".into(), Origin::Workspace),
                ("good".into(), Origin::Workspace),
                ("no-name".into(), Origin::Workspace),
                ("other-folder".into(), Origin::Workspace),
            ]
        );
        assert!(c.get("Bad_Name").unwrap().warnings[0].contains("only lowercase letters"));
        assert!(
            c.get("other-folder").unwrap().warnings[0]
                .contains("name `another` differs from its folder's name `other-folder`")
        );
        assert!(c.get("no-name").unwrap().warnings[0].contains("`name` is missing"));
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
            ("no-description", "`description` is missing"),
            ("not-utf8", "not text"),
            ("too-big", "more than the 1048576"),
            ("escape", "refused: it leads out of"),
            ("away", "refused: it leads out of"),
            ("empty", "no SKILL.md"),
            ("bad name", "rename the folder"),
        ] {
            let p = problems
                .get(folder)
                .unwrap_or_else(|| panic!("{folder} not reported: {problems:?}"));
            assert!(p.contains(why), "{folder}: {p}");
            assert!(c.skipped(folder).is_some(), "{folder}");
        }
        assert_eq!(problems.len(), 9, "{problems:?}");
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
        // The alias is read, called by its folder's name, with a warning.
        assert_eq!(
            names(&c.skills),
            [
                ("alias".into(), Origin::Workspace),
                ("real".into(), Origin::Workspace)
            ]
        );
        assert!(c.malformed.is_empty());
        assert!(c.get("alias").unwrap().warnings[0].contains("differs from its folder"));
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
