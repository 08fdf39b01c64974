//! [`ToolContext`] and the extractors that inject parts of it into tool functions.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::ToolError;
use crate::lang::Lang;
use crate::listen::{CallListener, Log, Progress};

/// Limits every tool obeys, whatever its group. Filled from `engine.json` by the engine.
///
/// A group's own settings (the shell's time limits and sandbox, the file listing cap)
/// are that group's type, registered as a service and taken by its tools as an extractor
/// (the registered service, else its default: [`ToolContext::shared_state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest file a tool may write or save, in bytes (`maxFileSizeBytes`, default 1 MiB):
    /// the file tools, memory and anything else that stores what a model sends.
    pub max_file_size_bytes: u64,
    /// Time limit of a tool that declares none (`toolTimeoutSeconds`, default 120 s).
    pub tool_timeout: Duration,
    /// Most bytes one read returns (`maxReadBytes`, default 256 KiB): `file_read`,
    /// `docs_read` and any tool that hands a file's text to the model.
    pub max_read_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_size_bytes: 1_048_576,
            tool_timeout: Duration::from_secs(120),
            max_read_bytes: 262_144,
        }
    }
}

impl Limits {
    /// Sets the largest file size a tool may write.
    #[must_use]
    pub fn with_max_file_size_bytes(mut self, bytes: u64) -> Self {
        self.max_file_size_bytes = bytes;
        self
    }

    /// Sets the default tool timeout.
    #[must_use]
    pub fn with_tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }
}

/// Engine-wide settings a tool may read: time zone and language.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// IANA time zone name (`timezone` in engine.json), e.g. `Europe/Moscow`.
    pub timezone: String,
    /// Language of descriptions and messages (`ru` or `en`).
    pub language: Lang,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            timezone: "UTC".into(),
            language: Lang::Ru,
        }
    }
}

impl Settings {
    /// Settings with the given time zone and language.
    pub fn new(timezone: impl Into<String>, language: Lang) -> Self {
        Self {
            timezone: timezone.into(),
            language,
        }
    }
}

/// Who is calling: the channel and chat a request came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caller {
    /// Channel name (`console`, `telegram`, `mcp`, `cli`, ...).
    pub channel: String,
    /// Chat id within the channel, when there is one.
    pub chat_id: Option<String>,
}

impl Caller {
    /// A caller on `channel`, optionally in a chat.
    pub fn new(channel: impl Into<String>, chat_id: Option<String>) -> Self {
        Self {
            channel: channel.into(),
            chat_id,
        }
    }
}

#[derive(Default)]
struct Shared {
    workspace: PathBuf,
    data_dir: PathBuf,
    limits: Limits,
    settings: Settings,
    services: ByType,
    /// Engine-lifetime state created on first use (a process table, a cache).
    lazy: std::sync::Mutex<ByType>,
}

/// Values by their type. A call looks in it several times (each tool's services and
/// state), so its hasher is cheap: a `TypeId` is a hash already.
type ByType = HashMap<TypeId, Arc<dyn Any + Send + Sync>, BuildHasherDefault<TypeIdHasher>>;

/// Takes the bits a `TypeId` hashes as they are (SipHash, the default, was about 140
/// instructions a lookup). Any other input is folded in a word at a time.
#[derive(Default)]
struct TypeIdHasher(u64);

impl Hasher for TypeIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(5) ^ n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Everything a tool call may use besides its arguments.
///
/// Cheap to clone: the shared part sits behind an `Arc`; the caller and the
/// cancellation token are per call.
///
/// ```
/// use klaw_core::{Limits, ToolContext};
/// struct Db;
/// let ctx = ToolContext::builder()
///     .workspace("/tmp/ws")
///     .limits(Limits::default())
///     .service(Db)
///     .build();
/// assert!(ctx.service::<Db>().is_some());
/// ```
#[derive(Clone, Default)]
pub struct ToolContext {
    shared: Arc<Shared>,
    caller: Arc<Caller>,
    cancel: CancellationToken,
    call_id: Option<Arc<str>>,
    listener: Option<Arc<dyn CallListener>>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("workspace", &self.shared.workspace)
            .field("data_dir", &self.shared.data_dir)
            .field("limits", &self.shared.limits)
            .field("settings", &self.shared.settings)
            .field("services", &self.shared.services.len())
            .field("caller", &self.caller)
            .field("call_id", &self.call_id)
            .finish()
    }
}

impl ToolContext {
    /// Starts building a context.
    pub fn builder() -> ToolContextBuilder {
        ToolContextBuilder::default()
    }

    /// The workspace directory (the agent's files).
    pub fn workspace(&self) -> &Path {
        &self.shared.workspace
    }

    /// The data directory (databases, core memory, models).
    pub fn data_dir(&self) -> &Path {
        &self.shared.data_dir
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// The engine settings.
    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    /// The caller of this call.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The id of this call, when whoever started it gave one (the engine always does):
    /// it is in the call's events and logs, and in its progress reports.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// The same context for the call `id`.
    #[must_use]
    pub fn with_call_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.call_id = Some(id.into());
        self
    }

    /// The same context with `listener` receiving the call's progress reports and log
    /// messages.
    #[must_use]
    pub fn with_listener(mut self, listener: Arc<dyn CallListener>) -> Self {
        self.listener = Some(listener);
        self
    }

    /// This call's progress reporter (it reports to nobody when no listener was given).
    pub fn progress(&self) -> Progress {
        Progress::new(self.listener.clone(), self.call_id.clone())
    }

    /// This call's log (the engine's log, and the listener when one was given).
    pub fn log(&self) -> Log {
        Log::new(self.listener.clone(), self.call_id.clone())
    }

    /// Drops the state created on first use ([`shared_state`](Self::shared_state)):
    /// what only this context held ends now (a process table kills its jobs, an open
    /// index closes its database). The engine does this when it shuts down.
    pub fn clear_shared_state(&self) {
        let state = std::mem::take(
            &mut *self
                .shared
                .lazy
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        drop(state);
    }

    /// The cancellation token of this call.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// A registered service of type `T`.
    pub fn service<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.shared
            .services
            .get(&TypeId::of::<T>())
            .and_then(|s| Arc::clone(s).downcast::<T>().ok())
    }

    /// State shared by every call on this context, created with `T::default()` on first
    /// use and dropped with the context (so a process table can end its jobs then).
    ///
    /// A service registered with [`ToolContextBuilder::service`] of the same type wins.
    pub fn shared_state<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        if let Some(s) = self.service::<T>() {
            return s;
        }
        let mut lazy = self
            .shared
            .lazy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = lazy
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Arc<dyn Any + Send + Sync>);
        match Arc::clone(entry).downcast::<T>() {
            Ok(s) => s,
            // Unreachable: the map is keyed by the type. Recover with a fresh value.
            Err(_) => Arc::new(T::default()),
        }
    }

    /// The same context for another caller.
    #[must_use]
    pub fn with_caller(mut self, caller: Caller) -> Self {
        self.caller = Arc::new(caller);
        self
    }

    /// The same context with another cancellation token.
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }
}

impl ToolContext {
    /// A builder holding everything this context has (directories, limits, settings,
    /// services and caller), to add or replace parts of it. State created on first use
    /// ([`shared_state`](Self::shared_state)) is not carried over.
    pub fn to_builder(&self) -> ToolContextBuilder {
        ToolContextBuilder {
            shared: Shared {
                workspace: self.shared.workspace.clone(),
                data_dir: self.shared.data_dir.clone(),
                limits: self.shared.limits.clone(),
                settings: self.shared.settings.clone(),
                services: self.shared.services.clone(),
                lazy: Default::default(),
            },
            caller: self.caller.as_ref().clone(),
        }
    }
}

/// Builds a [`ToolContext`].
#[derive(Default)]
pub struct ToolContextBuilder {
    shared: Shared,
    caller: Caller,
}

impl ToolContextBuilder {
    /// Sets the workspace directory.
    #[must_use]
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.shared.workspace = dir.into();
        self
    }

    /// Sets the data directory.
    #[must_use]
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.shared.data_dir = dir.into();
        self
    }

    /// Sets the limits.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.shared.limits = limits;
        self
    }

    /// Sets the engine settings.
    #[must_use]
    pub fn settings(mut self, settings: Settings) -> Self {
        self.shared.settings = settings;
        self
    }

    /// Sets the default caller.
    #[must_use]
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// Adds a typed service that tools reach with [`State<T>`].
    #[must_use]
    pub fn service<T: Send + Sync + 'static>(self, service: T) -> Self {
        self.service_arc(Arc::new(service))
    }

    /// Adds a typed service already in an `Arc`.
    #[must_use]
    pub fn service_arc<T: Send + Sync + 'static>(mut self, service: Arc<T>) -> Self {
        self.shared.services.insert(TypeId::of::<T>(), service);
        self
    }

    /// Finishes the context.
    pub fn build(self) -> ToolContext {
        ToolContext {
            shared: Arc::new(self.shared),
            caller: Arc::new(self.caller),
            cancel: CancellationToken::new(),
            call_id: None,
            listener: None,
        }
    }
}

/// A value a tool function can take from the [`ToolContext`] instead of from its
/// arguments, like an axum extractor. Such parameters do not appear in the schema.
///
/// Built in: [`ToolContext`], [`Workspace`], [`DataDir`], [`Limits`], [`Settings`],
/// [`Caller`], [`Cancel`], [`Progress`](crate::Progress) and [`State<T>`]. Implement it for your own types and mark
/// the parameter `#[ctx]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be taken from the tool context",
    label = "not a context extractor",
    note = "extractors are ToolContext, Workspace, DataDir, Limits, Settings, Caller, Cancel, Progress and State<T>; implement FromToolContext for your own",
    note = "if this is meant to be an argument from the model, remove #[ctx] (a type named like a built-in extractor, such as your own `Settings`, needs #[arg])"
)]
pub trait FromToolContext: Sized {
    /// Takes the value out of the context, or says why it cannot.
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError>;
}

impl FromToolContext for ToolContext {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.clone())
    }
}

impl FromToolContext for Limits {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.limits().clone())
    }
}

impl FromToolContext for Settings {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.settings().clone())
    }
}

impl FromToolContext for Caller {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.caller().clone())
    }
}

impl FromToolContext for Progress {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.progress())
    }
}

impl FromToolContext for Log {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(ctx.log())
    }
}

/// The workspace directory, injected into a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace(PathBuf);

impl Workspace {
    /// A workspace rooted at `root` (for paths confined beneath a root that is not the
    /// context's workspace, such as the data dir's).
    pub(crate) fn at(root: &Path) -> Self {
        Self(root.to_path_buf())
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.0
    }
}

impl FromToolContext for Workspace {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        if ctx.workspace().as_os_str().is_empty() {
            return Err(ToolError::unavailable("no workspace is configured"));
        }
        Ok(Workspace(ctx.workspace().to_path_buf()))
    }
}

/// The engine's data directory, injected into a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir(PathBuf);

impl DataDir {
    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl FromToolContext for DataDir {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        if ctx.data_dir().as_os_str().is_empty() {
            return Err(ToolError::unavailable("no data directory is configured"));
        }
        Ok(DataDir(ctx.data_dir().to_path_buf()))
    }
}

/// The cancellation token of the current call, injected into a tool.
#[derive(Debug, Clone)]
pub struct Cancel(pub CancellationToken);

impl FromToolContext for Cancel {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        Ok(Cancel(ctx.cancellation().clone()))
    }
}

/// A typed service registered with [`ToolContextBuilder::service`].
///
/// A tool that takes `State<MyDb>` fails with "unavailable" when no `MyDb` was
/// registered, instead of panicking.
#[derive(Debug)]
pub struct State<T>(pub Arc<T>);

impl<T> Clone for State<T> {
    fn clone(&self) -> Self {
        State(Arc::clone(&self.0))
    }
}

impl<T> std::ops::Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Send + Sync + 'static> FromToolContext for State<T> {
    fn from_ctx(ctx: &ToolContext) -> Result<Self, ToolError> {
        ctx.service::<T>().map(State).ok_or_else(|| {
            ToolError::unavailable(format!(
                "service `{}` is not available in this engine",
                type_name::<T>()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listen::{LogLevel, LogMessage, ProgressUpdate};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl CallListener for Recorder {
        fn progress(&self, u: &ProgressUpdate) {
            self.0.lock().unwrap().push(format!(
                "{:?} progress {}/{:?} {}",
                u.call_id, u.done, u.total, u.message
            ));
        }
        fn log(&self, m: &LogMessage) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{:?} {:?} {}", m.call_id, m.level, m.message));
        }
    }

    #[test]
    fn progress_and_log_reach_the_listener_with_the_call_id() {
        let recorder = Arc::new(Recorder::default());
        let ctx = ToolContext::default()
            .with_call_id("c-1")
            .with_listener(recorder.clone());
        ctx.progress().report(1, Some(2), "half");
        ctx.log().info("started");
        ctx.log().log(LogLevel::Critical, "on fire");
        assert_eq!(
            *recorder.0.lock().unwrap(),
            [
                "Some(\"c-1\") progress 1/Some(2) half",
                "Some(\"c-1\") Info started",
                "Some(\"c-1\") Critical on fire",
            ]
        );
    }

    #[test]
    fn nobody_listens_by_default() {
        let ctx = ToolContext::default();
        assert!(!ctx.progress().is_listened());
        ctx.log().error("nobody hears this, and nothing breaks");
    }

    #[test]
    fn missing_service_is_unavailable_not_a_panic() {
        let ctx = ToolContext::builder().build();
        let err = State::<String>::from_ctx(&ctx).unwrap_err();
        assert_eq!(err.kind(), &crate::ErrorKind::Unavailable);
        assert!(Workspace::from_ctx(&ctx).is_err());
    }

    #[test]
    fn the_type_map_tells_types_apart() {
        use std::hash::BuildHasher;
        let hash = |t: TypeId| BuildHasherDefault::<TypeIdHasher>::default().hash_one(t);
        let ids = [
            TypeId::of::<u8>(),
            TypeId::of::<u16>(),
            TypeId::of::<String>(),
            TypeId::of::<std::sync::Mutex<u8>>(),
        ];
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                assert_ne!(hash(*a), hash(*b));
            }
        }
        // Bytes (not what a `TypeId` writes) are folded in, not dropped.
        let mut h = TypeIdHasher::default();
        h.write(b"0123456789");
        assert_ne!(h.finish(), 0);
        let ctx = ToolContext::builder().service(1_u8).service(2_u16).build();
        assert_eq!(
            (
                *ctx.service::<u8>().unwrap(),
                *ctx.service::<u16>().unwrap()
            ),
            (1, 2)
        );
    }

    #[test]
    fn shared_state_is_created_once_per_context() {
        let ctx = ToolContext::builder().build();
        let a = ctx.shared_state::<std::sync::Mutex<u32>>();
        *a.lock().unwrap() += 1;
        let b = ctx.clone().shared_state::<std::sync::Mutex<u32>>();
        assert_eq!(*b.lock().unwrap(), 1);
        let other = ToolContext::builder().build();
        assert_eq!(
            *other
                .shared_state::<std::sync::Mutex<u32>>()
                .lock()
                .unwrap(),
            0
        );
    }

    #[test]
    fn to_builder_keeps_everything_but_lazy_state() {
        let ctx = ToolContext::builder()
            .workspace("/w")
            .service(42_u32)
            .caller(Caller::new("telegram", Some("1".into())))
            .build();
        *ctx.shared_state::<std::sync::Mutex<u8>>().lock().unwrap() = 7;
        let again = ctx.to_builder().service("more").build();
        assert_eq!(again.workspace(), Path::new("/w"));
        assert_eq!(*State::<u32>::from_ctx(&again).unwrap(), 42);
        assert_eq!(*State::<&str>::from_ctx(&again).unwrap(), "more");
        assert_eq!(again.caller().channel, "telegram");
        assert_eq!(
            *again.shared_state::<std::sync::Mutex<u8>>().lock().unwrap(),
            0
        );
    }

    #[test]
    fn services_are_found_by_type() {
        let ctx = ToolContext::builder().service(42_u32).build();
        assert_eq!(*State::<u32>::from_ctx(&ctx).unwrap(), 42);
    }
}
