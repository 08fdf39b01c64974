//! Core memory: a few short, permanent facts about the user and the agent that belong
//! in every system prompt. `memory_core_get`, `memory_core_update`, `memory_core_delete`.
//!
//! Where it is kept is a [`CoreStore`]: the tools reach the one the engine put in their
//! context ([`CoreStoreService`]; the engine's PostgreSQL one when `storage.url` is set,
//! shared by every engine given the database), else [`FileCore`]: `core_memory.json` in
//! the data directory:
//!
//! ```json
//! {"user": {"name": "Anna", "tea": "green, no sugar"}, "agent": {"tone": "brief"}}
//! ```
//!
//! Keys are sorted. Every change is a read-modify-write that the store makes atomic
//! ([`CoreStore::modify`]), with the limits (a key's and a value's characters, the
//! whole's [`MAX_CORE_BYTES`]) checked inside it, on what is stored at that moment. The
//! file's is under an exclusive lock on `core_memory.json.lock` beside it, held across
//! the read and the atomic replace (temporary file in the same directory, fsync,
//! rename, fsync of the directory), so concurrent updates, from threads or from
//! processes, lose nothing and a crash leaves the old or the new file, never half of
//! one. A file that is not valid core memory is an error and is never overwritten.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use std::sync::Arc;

use klaw_core::{FromToolContext, Schema, ToolContext, ToolError, ToolSchema, tool};

/// The core memory file in the data directory.
pub(super) const CORE_MEMORY_FILE: &str = "core_memory.json";
/// The lock file beside it.
pub(super) const CORE_MEMORY_LOCK: &str = "core_memory.json.lock";
/// The longest key, in characters.
pub const MAX_KEY_CHARS: usize = 64;
/// The longest value, in characters.
pub const MAX_VALUE_CHARS: usize = 1000;
/// The largest core memory, in bytes of compact JSON: small enough for every system
/// prompt (about two thousand tokens).
pub const MAX_CORE_BYTES: usize = 8192;

/// Where core memory is kept. [`modify`](Self::modify) is atomic against every other
/// writer of the same store (threads, processes, engines): the change is made on what
/// is stored when it runs, and kept whole or not at all.
pub trait CoreStore: Send + Sync {
    /// Core memory as it is now (empty when nothing was ever stored).
    fn read(&self) -> Result<CoreMemory, ToolError>;

    /// Runs `change` on core memory as it is now and keeps the result, atomically;
    /// nothing is kept when `change` fails. `change` may be called again if the store
    /// had to retry (it must not depend on a first call).
    fn modify(
        &self,
        change: &mut dyn FnMut(&mut CoreMemory) -> Result<(), ToolError>,
    ) -> Result<(), ToolError>;

    /// Whether [`read`](Self::read) is quick enough for an async thread (a small local
    /// file); otherwise the tools call it on the blocking pool.
    fn reads_in_place(&self) -> bool {
        false
    }
}

/// The [`CoreStore`] the core memory tools use, as a service of their context
/// ([`ToolContextBuilder::service`](klaw_core::ToolContextBuilder::service)); without
/// one they use [`FileCore`] in the data directory.
#[derive(Clone)]
pub struct CoreStoreService(pub Arc<dyn CoreStore>);

impl std::fmt::Debug for CoreStoreService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CoreStoreService")
    }
}

/// The core memory of a tool's context: its [`CoreStoreService`], else
/// `core_memory.json` in the data directory (an extractor).
#[derive(Clone)]
pub struct Core(Arc<dyn CoreStore>);

impl FromToolContext for Core {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(Self(match ctx.service::<CoreStoreService>() {
            Some(s) => Arc::clone(&s.0),
            None => Arc::new(FileCore::new(ctx.data_dir())),
        }))
    }
}

impl Core {
    /// Runs `f` on the store: in place when its reads are, else on the blocking pool.
    async fn run<T: Send + 'static>(
        &self,
        in_place: bool,
        f: impl FnOnce(&dyn CoreStore) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        if in_place {
            return f(&*self.0);
        }
        let store = Arc::clone(&self.0);
        super::index::blocking(move || f(&*store)).await
    }
}

/// Core memory in `core_memory.json` of a directory (the data directory).
#[derive(Debug, Clone)]
pub struct FileCore {
    dir: PathBuf,
}

impl FileCore {
    /// Core memory in `dir`/`core_memory.json`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
}

impl CoreStore for FileCore {
    fn read(&self) -> Result<CoreMemory, ToolError> {
        read(&self.dir.join(CORE_MEMORY_FILE))
    }

    fn modify(
        &self,
        change: &mut dyn FnMut(&mut CoreMemory) -> Result<(), ToolError>,
    ) -> Result<(), ToolError> {
        modify_file(&self.dir, change)
    }

    fn reads_in_place(&self) -> bool {
        // Core memory is small (8 KiB at most through the tools) and written by rename,
        // so read in place: a hand-over to the blocking pool costs more than the read (a
        // thread woken on every turn's start, which reads it for the system prompt). A
        // file grown larger by hand goes through the pool.
        std::fs::metadata(self.dir.join(CORE_MEMORY_FILE))
            .map_or(true, |m| m.len() <= IN_PLACE_BYTES)
    }
}

/// A section of core memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToolSchema)]
#[serde(rename_all = "lowercase")]
pub enum CoreSection {
    /// О пользователе
    #[schema(description_en = "About the user")]
    User,
    /// Об агенте (о себе)
    #[schema(description_en = "About the agent (yourself)")]
    Agent,
}

impl CoreSection {
    fn name(self) -> &'static str {
        match self {
            CoreSection::User => "user",
            CoreSection::Agent => "agent",
        }
    }
}

/// The entries of one section, by key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Entries(pub BTreeMap<String, String>);

fn entries_schema() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

impl ToolSchema for Entries {
    const SCHEMA: Schema = Schema::External(entries_schema);
}

/// The whole core memory: the file's content.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreMemory {
    /// Facts about the user.
    #[serde(default)]
    pub user: Entries,
    /// Facts about the agent.
    #[serde(default)]
    pub agent: Entries,
}

impl CoreMemory {
    fn section(&self, s: CoreSection) -> &BTreeMap<String, String> {
        match s {
            CoreSection::User => &self.user.0,
            CoreSection::Agent => &self.agent.0,
        }
    }

    fn section_mut(&mut self, s: CoreSection) -> &mut BTreeMap<String, String> {
        match s {
            CoreSection::User => &mut self.user.0,
            CoreSection::Agent => &mut self.agent.0,
        }
    }

    /// Its size as compact JSON, the measure core memory's limit (8 KiB) applies to.
    pub fn size(&self) -> usize {
        serde_json::to_vec(self).map_or(0, |v| v.len())
    }
}

/// The answer of `memory_core_get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoreMemoryView {
    /// Факты о пользователе: ключ → значение
    #[schema(description_en = "Facts about the user: key → value")]
    pub user: Entries,
    /// Факты об агенте: ключ → значение
    #[schema(description_en = "Facts about the agent: key → value")]
    pub agent: Entries,
    /// Размер основной памяти в байтах
    #[schema(description_en = "Size of core memory in bytes")]
    pub bytes: u64,
    /// Наибольший допустимый размер в байтах
    #[schema(description_en = "The largest size allowed, in bytes")]
    pub max_bytes: u64,
}

impl From<CoreMemory> for CoreMemoryView {
    fn from(m: CoreMemory) -> Self {
        Self {
            bytes: m.size() as u64,
            max_bytes: MAX_CORE_BYTES as u64,
            user: m.user,
            agent: m.agent,
        }
    }
}

/// The answer of `memory_core_update`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoreUpdated {
    /// Раздел: user или agent
    #[schema(description_en = "The section: user or agent")]
    pub section: CoreSection,
    /// Ключ
    #[schema(description_en = "The key")]
    pub key: String,
    /// Новое значение
    #[schema(description_en = "The new value")]
    pub value: String,
    /// Прежнее значение; null, если ключ новый
    #[schema(description_en = "The previous value; null when the key is new")]
    pub previous: Option<String>,
    /// Размер основной памяти в байтах после изменения
    #[schema(description_en = "Size of core memory in bytes after the change")]
    pub bytes: u64,
}

/// The answer of `memory_core_delete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoreDeleted {
    /// Раздел: user или agent
    #[schema(description_en = "The section: user or agent")]
    pub section: CoreSection,
    /// Удалённый ключ
    #[schema(description_en = "The deleted key")]
    pub key: String,
    /// Значение, которое было у ключа
    #[schema(description_en = "The value the key had")]
    pub value: String,
    /// Размер основной памяти в байтах после удаления
    #[schema(description_en = "Size of core memory in bytes after the deletion")]
    pub bytes: u64,
}

/// Returns core memory.
#[tool(
    name = "memory_core_get",
    title_ru = "Основная память",
    title_en = "Read core memory",
    description_ru = "Возвращает основную память: короткие постоянные факты о пользователе (user) и об агенте (agent) в виде «ключ → значение». Это то, что нужно помнить всегда (имя, язык, предпочтения, договорённости о стиле); остальное ищи через memory_search.",
    description_en = "Returns core memory: short permanent facts about the user (user) and the agent (agent) as key → value. This is what must always be remembered (name, language, preferences, agreed style); search everything else with memory_search.",
    read_only,
    idempotent
)]
pub async fn memory_core_get(#[ctx] core: Core) -> Result<CoreMemoryView, ToolError> {
    core.run(core.0.reads_in_place(), |s| Ok(s.read()?.into()))
        .await
}

/// The largest core memory file [`memory_core_get`] reads on the calling thread.
const IN_PLACE_BYTES: u64 = 64 * 1024;

/// Sets one fact of core memory.
#[tool(
    name = "memory_core_update",
    title_ru = "Изменение основной памяти",
    title_en = "Update core memory",
    description_ru = "Записывает один факт в основную память: section = user (о пользователе) или agent (об агенте), key — короткое имя факта (name, timezone, tone), value — его значение. Существующий ключ перезаписывается (в ответе previous — прежнее значение). Основная память мала (8 КиБ на всё): храни здесь только то, что нужно всегда, остальное сохраняй через memory_save.",
    description_en = "Writes one fact to core memory: section = user (about the user) or agent (about the agent), key is the fact's short name (name, timezone, tone), value its value. An existing key is overwritten (previous in the answer holds the old value). Core memory is small (8 KiB in all): keep here only what is always needed and save the rest with memory_save.",
    // It overwrites a fact every later system prompt carries: approval asks first.
    destructive,
    idempotent
)]
pub async fn memory_core_update(
    #[ctx] core: Core,
    /// Раздел: user (о пользователе) или agent (об агенте)
    #[arg(description_en = "The section: user (about the user) or agent (about the agent)")]
    section: CoreSection,
    /// Имя факта, до 64 символов, например name или timezone
    #[arg(description_en = "The fact's name, up to 64 characters, e.g. name or timezone")]
    key: String,
    /// Значение, до 1000 символов
    #[arg(description_en = "The value, up to 1000 characters")]
    value: String,
) -> Result<CoreUpdated, ToolError> {
    let key = valid_key(&key)?;
    let value = valid_value(&value)?;
    core.run(false, move |s| update(s, section, &key, &value))
        .await
}

fn valid_value(value: &str) -> Result<String, ToolError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ToolError::invalid_arguments(
            "/value",
            "empty; to remove a fact use memory_core_delete",
        ));
    }
    if value.chars().count() > MAX_VALUE_CHARS {
        return Err(ToolError::invalid_arguments(
            "/value",
            format!(
                "longer than {MAX_VALUE_CHARS} characters: shorten it, or save it with memory_save"
            ),
        ));
    }
    Ok(value.to_owned())
}

/// Removes one fact from core memory.
#[tool(
    name = "memory_core_delete",
    title_ru = "Удаление из основной памяти",
    title_en = "Delete from core memory",
    description_ru = "Удаляет один факт из основной памяти по разделу (user или agent) и ключу. Если такого ключа нет, это ошибка со списком существующих ключей.",
    description_en = "Deletes one fact from core memory by section (user or agent) and key. A key that does not exist is an error that lists the existing keys.",
    destructive
)]
pub async fn memory_core_delete(
    #[ctx] core: Core,
    /// Раздел: user или agent
    #[arg(description_en = "The section: user or agent")]
    section: CoreSection,
    /// Ключ удаляемого факта
    #[arg(description_en = "The key of the fact to delete")]
    key: String,
) -> Result<CoreDeleted, ToolError> {
    let key = valid_key(&key)?;
    core.run(false, move |s| delete(s, section, &key)).await
}

fn valid_key(key: &str) -> Result<String, ToolError> {
    let key = key.trim();
    if key.is_empty() {
        return Err(ToolError::invalid_arguments("/key", "empty"));
    }
    if key.chars().count() > MAX_KEY_CHARS {
        return Err(ToolError::invalid_arguments(
            "/key",
            format!("longer than {MAX_KEY_CHARS} characters"),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(ToolError::invalid_arguments(
            "/key",
            "contains a control character (a line break, a tab)",
        ));
    }
    Ok(key.to_owned())
}

/// Reads core memory from `path`; a missing file is empty core memory.
pub(super) fn read(path: &Path) -> Result<CoreMemory, ToolError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(CoreMemory::default()),
        Err(e) => return Err(io_error("cannot read", path, &e)),
    };
    if text.trim().is_empty() {
        return Ok(CoreMemory::default());
    }
    serde_json::from_str(&text).map_err(|e| {
        ToolError::failed(format!(
            "core memory is corrupt: {} is not valid core memory ({e}); it was left untouched: fix or remove the file",
            path.display()
        ))
    })
}

fn io_error(what: &str, path: &Path, e: &std::io::Error) -> ToolError {
    ToolError::failed(format!("{what} {}: {e}", path.display()))
}

/// Runs `change` on core memory in `store` and keeps the result atomically, refused
/// (nothing kept) when `change` fails or the result is larger than [`MAX_CORE_BYTES`]:
/// the limit is checked in the store's transaction, on what it holds then.
fn modify<T>(
    store: &dyn CoreStore,
    mut change: impl FnMut(&mut CoreMemory) -> Result<T, ToolError>,
) -> Result<T, ToolError> {
    let mut out = None;
    store.modify(&mut |memory| {
        let done = change(memory)?;
        let size = memory.size();
        if size > MAX_CORE_BYTES {
            return Err(ToolError::failed(format!(
                "core memory would be {size} bytes, more than {MAX_CORE_BYTES}: delete or shorten other facts first (memory_core_delete), or save long text with memory_save"
            )));
        }
        out = Some(done);
        Ok(())
    })?;
    out.ok_or_else(|| ToolError::failed("core memory's store did not make the change"))
}

/// Runs `change` on core memory in `dir` under the lock and writes the result
/// atomically; nothing is written when `change` fails.
fn modify_file(
    dir: &Path,
    change: &mut dyn FnMut(&mut CoreMemory) -> Result<(), ToolError>,
) -> Result<(), ToolError> {
    std::fs::create_dir_all(dir).map_err(|e| io_error("cannot create", dir, &e))?;
    let lock_path = dir.join(CORE_MEMORY_LOCK);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| io_error("cannot open", &lock_path, &e))?;
    lock.lock()
        .map_err(|e| io_error("cannot lock", &lock_path, &e))?;
    let path = dir.join(CORE_MEMORY_FILE);
    let mut memory = read(&path)?;
    change(&mut memory)?;
    let mut text = serde_json::to_string_pretty(&memory)
        .map_err(|e| ToolError::failed(format!("cannot encode core memory: {e}")))?;
    text.push('\n');
    replace(dir, &path, text.as_bytes())?;
    // The lock is released when `lock` is dropped, after the rename.
    drop(lock);
    Ok(())
}

/// Replaces `path` (in `dir`) with `bytes` atomically.
fn replace(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tmp: PathBuf = dir.join(format!(
        ".{CORE_MEMORY_FILE}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error("cannot write", path, &e));
    }
    // Make the rename itself durable.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn update(
    store: &dyn CoreStore,
    section: CoreSection,
    key: &str,
    value: &str,
) -> Result<CoreUpdated, ToolError> {
    // Checked again where the change is made (a caller past the tool's checks).
    let (key, value) = (valid_key(key)?, valid_value(value)?);
    let (key, value) = (key.as_str(), value.as_str());
    let (previous, memory) = modify(store, |m| {
        let previous = m
            .section_mut(section)
            .insert(key.to_owned(), value.to_owned());
        Ok((previous, m.clone()))
    })?;
    Ok(CoreUpdated {
        section,
        key: key.to_owned(),
        value: value.to_owned(),
        previous,
        bytes: memory.size() as u64,
    })
}

fn delete(
    store: &dyn CoreStore,
    section: CoreSection,
    key: &str,
) -> Result<CoreDeleted, ToolError> {
    let (value, memory) = modify(store, |m| match m.section_mut(section).remove(key) {
        Some(v) => Ok((v, m.clone())),
        None => Err(missing_key(m, section, key)),
    })?;
    Ok(CoreDeleted {
        section,
        key: key.to_owned(),
        value,
        bytes: memory.size() as u64,
    })
}

fn missing_key(m: &CoreMemory, section: CoreSection, key: &str) -> ToolError {
    let keys: Vec<&str> = m.section(section).keys().map(String::as_str).collect();
    let name = section.name();
    if keys.is_empty() {
        ToolError::not_found(format!(
            "no key `{key}` in core memory section `{name}`: the section is empty"
        ))
    } else {
        ToolError::not_found(format!(
            "no key `{key}` in core memory section `{name}`; its keys are: {}",
            keys.join(", ")
        ))
    }
}

/// The behaviour every [`CoreStore`] must have, as checks that panic when it does not:
/// run by this crate on [`FileCore`] and by the engine on its PostgreSQL store, each
/// given a maker of empty stores of its backend (every call a new, empty core memory;
/// [`concurrent_updates`](suite::concurrent_updates) is given a maker of handles on
/// one store, as other engines would open it). Not an API.
#[doc(hidden)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // checks: a panic is a failed test
pub mod suite {
    use super::*;

    /// Updates then deletes: previous values, both sections, what is read back.
    pub fn round_trip(store: &dyn CoreStore) {
        let r = update(store, CoreSection::User, "name", "Anna").unwrap();
        assert_eq!(r.previous, None);
        let r = update(store, CoreSection::User, "name", "Anna K.").unwrap();
        assert_eq!(r.previous.as_deref(), Some("Anna"));
        update(store, CoreSection::Agent, "tone", "brief").unwrap();
        let m = store.read().unwrap();
        assert_eq!(m.user.0.get("name").map(String::as_str), Some("Anna K."));
        assert_eq!(m.agent.0.get("tone").map(String::as_str), Some("brief"));
        let d = delete(store, CoreSection::User, "name").unwrap();
        assert_eq!(d.value, "Anna K.");
        assert_eq!(d.bytes as usize, store.read().unwrap().size());
        assert_eq!(
            serde_json::to_value(store.read().unwrap()).unwrap(),
            json!({"user": {}, "agent": {"tone": "brief"}})
        );
    }

    /// A missing key is not found, and the error lists the section's keys.
    pub fn missing_key(store: &dyn CoreStore) {
        let e = delete(store, CoreSection::Agent, "tone").unwrap_err();
        assert!(e.is_not_found());
        assert!(
            e.message().contains("the section is empty"),
            "{}",
            e.message()
        );
        update(store, CoreSection::Agent, "b", "2").unwrap();
        update(store, CoreSection::Agent, "a", "1").unwrap();
        let e = delete(store, CoreSection::Agent, "tone").unwrap_err();
        assert!(e.message().contains("`tone`"), "{}", e.message());
        assert!(
            e.message().ends_with("its keys are: a, b"),
            "{}",
            e.message()
        );
    }

    /// [`MAX_CORE_BYTES`] is never passed: the update that would is refused whole; a
    /// key or a value over its limit is refused too.
    pub fn bounded(store: &dyn CoreStore) {
        let value = "x".repeat(MAX_VALUE_CHARS);
        let mut stored = 0;
        let e = loop {
            match update(store, CoreSection::User, &format!("k{stored}"), &value) {
                Ok(_) => stored += 1,
                Err(e) => break e,
            }
        };
        assert!(e.message().contains("more than 8192"), "{}", e.message());
        assert_eq!(stored, 8);
        let m = store.read().unwrap();
        assert_eq!(m.user.0.len(), 8);
        assert!(m.size() <= MAX_CORE_BYTES);
        let long_key = "k".repeat(MAX_KEY_CHARS + 1);
        assert!(update(store, CoreSection::Agent, &long_key, "v").is_err());
        assert!(update(store, CoreSection::Agent, "k", &format!("{value}x")).is_err());
        assert_eq!(store.read().unwrap(), m);
    }

    /// Updates from many threads, each on its own handle (`open`) of one store, as
    /// engines would open it, lose nothing. Then, with room left for one more fact and
    /// not two, eight writers add one each at once: exactly one is kept, whole; and
    /// eight writers set that one key at once: one value wins, whole. The size limit
    /// holds throughout.
    pub fn concurrent_updates(open: &(dyn Fn() -> Arc<dyn CoreStore> + Sync)) {
        std::thread::scope(|s| {
            for t in 0..8 {
                let store = open();
                s.spawn(move || {
                    for i in 0..10 {
                        update(&*store, CoreSection::Agent, &format!("t{t}-{i}"), "v").unwrap();
                    }
                });
            }
        });
        let store = open();
        assert_eq!(store.read().unwrap().agent.0.len(), 80);
        let filler = "f".repeat(MAX_VALUE_CHARS);
        let mut n = 0;
        while update(&*store, CoreSection::User, &format!("fill{n}"), &filler).is_ok() {
            n += 1;
        }
        // The longest value of which one fits and two do not.
        let m = store.read().unwrap();
        let with = |keys: &[&str], len: usize| {
            let mut m = m.clone();
            for k in keys {
                m.user.0.insert((*k).to_owned(), "x".repeat(len));
            }
            m.size()
        };
        let len = (1..=MAX_VALUE_CHARS)
            .rev()
            .find(|&l| with(&["s0"], l) <= MAX_CORE_BYTES)
            .unwrap();
        assert!(with(&["s0", "s1"], len) > MAX_CORE_BYTES, "{len}");
        let value = |t: u8, round: u8| char::from(b'a' + t + round * 8).to_string().repeat(len);
        let race = |key: &dyn Fn(u8) -> String, round: u8| -> Vec<bool> {
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..8u8)
                    .map(|t| {
                        let store = open();
                        let key = key(t);
                        s.spawn(move || {
                            update(&*store, CoreSection::User, &key, &value(t, round)).is_ok()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            })
        };
        let added = race(&|t| format!("s{t}"), 0);
        assert_eq!(added.iter().filter(|ok| **ok).count(), 1, "{added:?}");
        let winner = added.iter().position(|ok| *ok).unwrap() as u8;
        let m = store.read().unwrap();
        assert!(m.size() <= MAX_CORE_BYTES, "{}", m.size());
        let kept: Vec<_> = m
            .user
            .0
            .iter()
            .filter(|(k, _)| k.starts_with('s'))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0], (&format!("s{winner}"), &value(winner, 0)));
        let set = race(&|_| format!("s{winner}"), 1);
        assert!(set.iter().all(|ok| *ok), "{set:?}");
        let m = store.read().unwrap();
        assert!(m.size() <= MAX_CORE_BYTES, "{}", m.size());
        let v = &m.user.0[&format!("s{winner}")];
        assert!((0..8).any(|t| *v == value(t, 1)), "torn: {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_then_delete_round_trips_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        suite::round_trip(&FileCore::new(dir.path()));
        let text = std::fs::read_to_string(dir.path().join(CORE_MEMORY_FILE)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, json!({"user": {}, "agent": {"tone": "brief"}}));
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn a_missing_key_is_not_found_and_lists_the_keys() {
        let dir = tempfile::tempdir().unwrap();
        suite::missing_key(&FileCore::new(dir.path()));
    }

    #[test]
    fn a_corrupt_file_is_an_error_and_is_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CORE_MEMORY_FILE);
        for bad in ["{\"user\": {\"name\": ", "[1, 2]", "{\"user\": {\"n\": 5}}"] {
            std::fs::write(&path, bad).unwrap();
            let e = update(
                &FileCore::new(dir.path()),
                CoreSection::User,
                "name",
                "Anna",
            )
            .unwrap_err();
            assert!(e.message().contains("corrupt"), "{}", e.message());
            assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
        }
    }

    #[test]
    fn core_memory_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        suite::bounded(&FileCore::new(dir.path()));
        let m = read(&dir.path().join(CORE_MEMORY_FILE)).unwrap();
        assert_eq!(m.user.0.len(), 8);
    }

    #[test]
    fn keys_are_trimmed_and_checked() {
        assert_eq!(valid_key("  name ").unwrap(), "name");
        assert!(valid_key("   ").is_err());
        assert!(valid_key("a\nb").is_err());
        assert!(valid_key(&"k".repeat(MAX_KEY_CHARS + 1)).is_err());
        assert!(valid_key(&"к".repeat(MAX_KEY_CHARS)).is_ok());
    }

    #[test]
    fn concurrent_updates_from_many_threads_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        suite::concurrent_updates(&move || Arc::new(FileCore::new(&path)) as Arc<dyn CoreStore>);
    }
}
