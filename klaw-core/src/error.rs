//! [`ToolError`]: every way a tool call can fail, told to the model as a tool result.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// What kind of failure a [`ToolError`] is. Callers branch on it; clients see its
/// [`code`](ErrorKind::code).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The arguments do not match the tool's schema; `pointer` is the JSON pointer of the
    /// offending value (`""` for the whole arguments object).
    InvalidArguments {
        /// JSON pointer of the offending value, e.g. `/topK`.
        pointer: String,
    },
    /// No tool has the requested name.
    UnknownTool,
    /// The tool refused: the target is outside what it may touch.
    AccessDenied,
    /// What the tool was asked about does not exist.
    NotFound,
    /// The tool ran past its time limit and was stopped.
    Timeout,
    /// The tool, or something it needs, is not available right now.
    Unavailable,
    /// The call was cancelled by the caller.
    Cancelled,
    /// The engine's policy refused the call before it ran (an approval the user did
    /// not give, a tool not allowed on this channel); the message says why.
    Refused,
    /// Anything else: the tool ran and failed.
    Failed,
}

impl ErrorKind {
    /// A stable snake_case code for this kind (`invalid_arguments`, `timeout`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments { .. } => "invalid_arguments",
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::AccessDenied => "access_denied",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Refused => "refused",
            ErrorKind::Failed => "failed",
        }
    }
}

/// A failed tool call.
///
/// It carries a [`kind`](ToolError::kind), a `message` written for the model (what went
/// wrong and how to do better) and an optional `detail` for the operator's log (an OS
/// error, a backtrace-worthy cause) that the model never sees, and the error that
/// caused it when there is one ([`with_source`](ToolError::with_source),
/// [`std::error::Error::source`]), which the log shows with its own causes.
///
/// ```
/// use klaw_core::ToolError;
/// let e = ToolError::not_found("no such note: todo.md").with_detail("ENOENT");
/// assert!(e.is_not_found());
/// assert_eq!(e.to_string(), "no such note: todo.md");
/// ```
#[derive(Debug, Clone)]
pub struct ToolError {
    kind: ErrorKind,
    message: String,
    detail: Option<String>,
    tool: Option<String>,
    source: Option<Arc<dyn Error + Send + Sync>>,
}

/// Equal when the kind, message, detail and tool are; the source is not compared.
impl PartialEq for ToolError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.message == other.message
            && self.detail == other.detail
            && self.tool == other.tool
    }
}

impl Eq for ToolError {}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for ToolError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

impl ToolError {
    /// An error of any kind.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            detail: None,
            tool: None,
            source: None,
        }
    }

    /// The arguments are wrong at `pointer` (a JSON pointer such as `/path` or
    /// `/items/2/name`; `""` for the arguments as a whole).
    ///
    /// The message names the argument as the validator's messages do: it begins with
    /// `pointer: ` (added unless the message already begins so), so the model, a CLI
    /// and an MCP client all read which argument is wrong.
    ///
    /// ```
    /// use klaw_core::ToolError;
    /// let e = ToolError::invalid_arguments("/historyMessages", "2000 is more than 1000");
    /// assert_eq!(e.message(), "/historyMessages: 2000 is more than 1000");
    /// assert_eq!(e.pointer(), Some("/historyMessages"));
    /// let whole = ToolError::invalid_arguments("", "the arguments are not valid JSON");
    /// assert_eq!(whole.message(), "the arguments are not valid JSON");
    /// ```
    pub fn invalid_arguments(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        let (pointer, message) = (pointer.into(), message.into());
        let message = if pointer.is_empty()
            || message
                .strip_prefix(pointer.as_str())
                .is_some_and(|rest| rest.starts_with(": "))
        {
            message
        } else {
            format!("{pointer}: {message}")
        };
        Self::new(ErrorKind::InvalidArguments { pointer }, message)
    }

    /// No tool is called `name`.
    pub fn unknown_tool(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::UnknownTool, message)
    }

    /// The request reaches outside what the tool may touch.
    pub fn access_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AccessDenied, message)
    }

    /// The thing asked about does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// The call ran out of time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }

    /// A service the tool needs is missing or down.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// The call was cancelled.
    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Cancelled, message)
    }

    /// The engine's policy refused the call before it ran.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }

    /// The tool failed.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Failed, message)
    }

    /// Adds detail for the operator (logged, never shown to the model).
    #[must_use]
    pub fn with_detail(mut self, detail: impl fmt::Display) -> Self {
        self.detail = Some(detail.to_string());
        self
    }

    /// Keeps the error that caused this one: [`source`](Error::source) gives it back,
    /// and the engine's log shows it with its own causes (the model never sees it).
    #[must_use]
    pub fn with_source(mut self, source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        self.source = Some(Arc::from(source.into()));
        self
    }

    /// The causes of this error, outermost first, joined with `: ` (empty without a
    /// [`source`](Error::source)); for the log.
    pub fn causes(&self) -> String {
        let mut out = String::new();
        let mut next = self.source();
        while let Some(cause) = next {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&cause.to_string());
            next = cause.source();
        }
        out
    }

    /// Records which tool failed (the registry does this).
    #[must_use]
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// The kind of failure.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The message for the model.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Detail for the operator, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The tool that failed, when known.
    pub fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// The JSON pointer of the bad argument, for invalid arguments.
    pub fn pointer(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::InvalidArguments { pointer } => Some(pointer),
            _ => None,
        }
    }

    /// True for [`ErrorKind::InvalidArguments`].
    pub fn is_invalid_arguments(&self) -> bool {
        matches!(self.kind, ErrorKind::InvalidArguments { .. })
    }
    /// True for [`ErrorKind::UnknownTool`].
    pub fn is_unknown_tool(&self) -> bool {
        self.kind == ErrorKind::UnknownTool
    }
    /// True for [`ErrorKind::AccessDenied`].
    pub fn is_access_denied(&self) -> bool {
        self.kind == ErrorKind::AccessDenied
    }
    /// True for [`ErrorKind::NotFound`].
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }
    /// True for [`ErrorKind::Timeout`].
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// The text a model receives as the tool result: `Error [code]: message`.
    pub fn to_model_text(&self) -> String {
        format!("Error [{}]: {}", self.kind.code(), self.message)
    }

    /// A JSON form for clients and logs: `{"error": code, "message", "pointer"?}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"error": self.kind.code(), "message": self.message});
        if let Some(p) = self.pointer() {
            v["pointer"] = p.into();
        }
        v
    }
}

impl From<std::io::Error> for ToolError {
    /// Maps an I/O error to the closest kind; the OS text goes to the detail, the error
    /// itself is the [`source`](Error::source).
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let (kind, msg) = match e.kind() {
            K::NotFound => (ErrorKind::NotFound, "not found"),
            K::PermissionDenied => (ErrorKind::AccessDenied, "permission denied"),
            K::TimedOut => (ErrorKind::Timeout, "timed out"),
            _ => (ErrorKind::Failed, "I/O error"),
        };
        ToolError::new(kind, format!("{msg}: {e}"))
            .with_detail(format!("{e:?}"))
            .with_source(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool's own argument error names the argument, like the validator's; a message
    /// that names it already (the validator's, the macro's) is not named twice.
    #[test]
    fn an_argument_error_names_its_argument_once() {
        let e = ToolError::invalid_arguments("/items/2/name", "the name is empty");
        assert_eq!(
            e.to_model_text(),
            "Error [invalid_arguments]: /items/2/name: the name is empty"
        );
        assert_eq!(e.pointer(), Some("/items/2/name"));
        let e = ToolError::invalid_arguments("/topK", "/topK: expected integer, got string");
        assert_eq!(e.message(), "/topK: expected integer, got string");
        // Another argument's name at the start is not this one's.
        let e = ToolError::invalid_arguments("/top", "/topK: 0 is too few");
        assert_eq!(e.message(), "/top: /topK: 0 is too few");
        assert_eq!(
            ToolError::invalid_arguments("", "not JSON").message(),
            "not JSON"
        );
    }

    #[test]
    fn model_text_names_the_kind() {
        let e = ToolError::invalid_arguments("/topK", "/topK: expected integer, got string");
        assert_eq!(
            e.to_model_text(),
            "Error [invalid_arguments]: /topK: expected integer, got string"
        );
        assert_eq!(e.pointer(), Some("/topK"));
        assert_eq!(e.to_json()["pointer"], "/topK");
    }

    #[test]
    fn io_errors_map_to_kinds() {
        let e: ToolError = std::io::Error::from(std::io::ErrorKind::NotFound).into();
        assert!(e.is_not_found());
        let e: ToolError = std::io::Error::from(std::io::ErrorKind::PermissionDenied).into();
        assert!(e.is_access_denied());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("the index is locked")]
    struct Locked(#[source] std::io::Error);

    #[test]
    fn the_source_is_kept_through_clones_and_conversions() {
        let io = std::io::Error::other("disk full");
        let e = ToolError::failed("could not save the note").with_source(Locked(io));
        let copy = e.clone().with_tool("note_save");
        for e in [&e, &copy] {
            let source = e.source().expect("the source is kept");
            assert_eq!(source.to_string(), "the index is locked");
            assert_eq!(source.source().unwrap().to_string(), "disk full");
            assert_eq!(e.causes(), "the index is locked: disk full");
        }
        // The model's text and the comparison are as before.
        assert_eq!(e.to_model_text(), "Error [failed]: could not save the note");
        assert_eq!(e, ToolError::failed("could not save the note"));
        let io: ToolError = std::io::Error::from(std::io::ErrorKind::NotFound).into();
        assert_eq!(
            io.source().unwrap().to_string(),
            std::io::Error::from(std::io::ErrorKind::NotFound).to_string()
        );
        assert_eq!(ToolError::failed("x").causes(), "");
    }
}
