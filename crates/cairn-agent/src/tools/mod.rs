//! Tools: the [`Tool`] trait (a [`ToolSpec`], a per-call [`CallPlan`] and
//! `execute`), what a call receives ([`ToolContext`]), what it returns, the
//! [`ToolRegistry`], and the built-in tools.
//!
//! Tools never check policy themselves: [`crate::runner::ToolRunner`] does that before
//! calling [`Tool::execute`], and only it can, because `execute` takes an
//! [`Authorized`] proof that only the runner makes. Tools do enforce their own
//! argument-level limits (command allowlist, workspace confinement, size caps),
//! because only they know them.
//!
//! # Writing a tool
//!
//! A tool says what it is once, in a [`ToolSpec`] (name, description,
//! argument [`schema`], general risk, family, aliases, whether an answer may be
//! reused), and implements [`Tool`]: `spec` returns it (a `static` for a tool
//! whose spec never changes, a field for one made at run time such as an MCP
//! server's), `execute` runs a call. `plan` is left to its default unless a
//! call's risk, need for a person, time limit or delegated call depends on
//! its arguments. Several tools over one shared state (`routine_*`,
//! `background_*`) are one [`Family`] impl and a table of their specs
//! ([`members`]) rather than a struct and an impl each. Arguments are read
//! with [`args`], so a mistake reads the same whatever the tool; a JSON
//! answer is [`ToolOutput::json`].

pub mod args;
pub mod browser;
pub mod family;
pub mod files;
pub mod http;
pub mod lines;
pub mod net;
pub mod offer;
pub mod paths;
pub mod readable;
pub mod registry;
pub mod shell;
pub mod shell_words;
pub mod spec;
pub mod time;
pub mod web_fetch;
pub mod web_search;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_core::clock::{Clock, SystemClock};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::runner::Authorized;

pub use crate::policy::RiskLevel;
pub use family::{Family, members};
pub use registry::{RegistryError, ToolRegistry, ToolSource};
pub use spec::{CallPlan, DelegatedCall, ToolSpec, schema};

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool ran and succeeded.
    Success,
    /// The tool ran and reported failure, or returned an error.
    Failed,
    /// The policy refused the call.
    Denied,
    /// The user declined the call.
    Declined,
    /// No tool has that name.
    UnknownTool,
    /// The arguments were not a JSON object or were rejected by the tool.
    InvalidArguments,
    /// The call hit its time limit.
    TimedOut,
    /// The call was cancelled.
    Cancelled,
}

impl ToolStatus {
    /// Snake-case name (as serialized), used in the frame's `status` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failed => "failed",
            Self::Denied => "denied",
            Self::Declined => "declined",
            Self::UnknownTool => "unknown_tool",
            Self::InvalidArguments => "invalid_arguments",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
        }
    }
}

/// What a tool produced when it ran to completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text for the model (scrubbed, capped and framed later by the runner).
    pub content: String,
    /// False when the tool ran but the operation failed (an upstream error, a
    /// missing record).
    pub success: bool,
    /// True when a failure is the tool's to answer for, so self-repair counts
    /// it; false for an outcome the tool only reports (a command's own
    /// non-zero exit).
    pub counts_against_tool: bool,
    /// Images for the model beside the text (a browser screenshot), stored
    /// in the workspace's media folder; a model without vision gets a note.
    pub images: Vec<cairn_core::image::ImagePart>,
}

impl ToolOutput {
    /// A successful output.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            success: true,
            counts_against_tool: false,
            images: Vec::new(),
        }
    }

    /// An output of an operation that ran but failed; the text says why.
    pub fn failed(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            success: false,
            counts_against_tool: true,
            images: Vec::new(),
        }
    }

    /// The output with `image` added for the model.
    pub fn with_image(mut self, image: cairn_core::image::ImagePart) -> Self {
        self.images.push(image);
        self
    }

    /// A successful output showing `value` as pretty-printed JSON.
    pub fn json(value: &impl Serialize) -> Result<Self, ToolError> {
        serde_json::to_string_pretty(value)
            .map(Self::ok)
            .map_err(|e| ToolError::Failed(e.to_string()))
    }

    /// A failed outcome that belongs to what the tool ran, not to the tool
    /// (a command exiting non-zero): shown as failed, never counted by
    /// self-repair.
    pub fn reported_failure(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            success: false,
            counts_against_tool: false,
            images: Vec::new(),
        }
    }
}

/// What running a call gives: the tool's output, or why it has none.
pub type CallOutcome = Result<ToolOutput, ToolError>;

/// Why a tool could not produce an output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments are missing, mistyped or out of range.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool's own rules refuse this call (allowlist, workspace bounds, ...).
    #[error("not permitted: {0}")]
    NotPermitted(String),
    /// The call ran longer than its time limit and was stopped.
    #[error("timed out after {}", limit_text(*.0))]
    Timeout(Duration),
    /// The call was cancelled (the turn was interrupted or the job stopped).
    #[error("cancelled")]
    Cancelled,
    /// A file-system operation failed.
    #[error("i/o error: {0}")]
    Io(String),
    /// An HTTP request failed.
    #[error("http error: {0}")]
    Http(String),
    /// What the tool depends on is down for now (an MCP server restarting);
    /// not the tool's own failure, so self-repair does not count it.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Anything else that stopped the tool.
    #[error("{0}")]
    Failed(String),
}

/// A time limit as messages show it: whole seconds as config writes them
/// (`120s`), shorter or fractional limits in milliseconds (`200ms`), never `0s`.
fn limit_text(limit: Duration) -> String {
    if limit.subsec_nanos() == 0 {
        cairn_core::duration::format(limit)
    } else {
        format!("{}ms", limit.as_millis())
    }
}

/// Per-call limits the runner applies to every tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolLimits {
    /// Wall-clock limit of one call (tools may have shorter limits of their own).
    #[serde(with = "cairn_core::duration::serde_compact")]
    pub timeout: Duration,
    /// Most characters of tool output the model sees; the rest is cut with a marker.
    pub max_output_chars: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            max_output_chars: 30_000,
        }
    }
}

/// Everything a tool call may need from its surroundings.
#[derive(Clone)]
pub struct ToolContext {
    /// The workspace directory: working directory and default bound of file tools.
    pub workspace: PathBuf,
    /// The session on whose behalf the call runs (keys the session allow-list).
    pub session_id: String,
    /// The conversation thread of the call, when it comes from a chat turn
    /// (background tasks record it with the session).
    pub thread_id: Option<String>,
    /// Cancelled when the turn, job or routine run is stopped.
    pub cancel: CancellationToken,
    /// Time and size limits of the call.
    pub limits: ToolLimits,
    /// The user's time zone.
    pub timezone: Tz,
    /// Source of the current time (a manual clock in tests).
    pub clock: Arc<dyn Clock>,
    /// The turn the call runs in, set by the agent loop for its calls:
    /// `agent_delegate` and `job_subtasks` start turns under it. `None`
    /// outside a turn (a routine's own tool action, say).
    pub parent: Option<Arc<crate::agent_loop::ParentTurn>>,
}

impl ToolContext {
    /// A context with default limits, UTC, the system clock and a fresh cancellation token.
    pub fn new(workspace: impl Into<PathBuf>, session_id: impl Into<String>) -> Self {
        Self {
            workspace: workspace.into(),
            session_id: session_id.into(),
            thread_id: None,
            cancel: CancellationToken::new(),
            limits: ToolLimits::default(),
            timezone: Tz::UTC,
            clock: Arc::new(SystemClock),
            parent: None,
        }
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: ToolLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Replaces the time zone.
    pub fn with_timezone(mut self, timezone: Tz) -> Self {
        self.timezone = timezone;
        self
    }

    /// Sets the conversation thread.
    pub fn with_thread(mut self, thread_id: impl Into<String>) -> Self {
        self.thread_id = Some(thread_id.into());
        self
    }

    /// Replaces the clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the cancellation token (e.g. with a child of the turn's token).
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// The current instant, read through the context's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Runs `work` until it ends or the call is cancelled, whichever comes first.
    pub async fn until_cancelled<T>(
        &self,
        work: impl Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(ToolError::Cancelled),
            r = work => r,
        }
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("workspace", &self.workspace)
            .field("session_id", &self.session_id)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("limits", &self.limits)
            .field("timezone", &self.timezone)
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

/// A capability the model can call: what it is ([`Tool::spec`]), what one
/// call of it means for the gate ([`Tool::plan`]), and running a call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The facts every call shares: name, description, argument schema,
    /// general risk, family, aliases, whether answers may be reused.
    fn spec(&self) -> &ToolSpec;

    /// What one call with these arguments means for the gate and the runner:
    /// the risk it is judged by, whether only a person may approve it, its
    /// time limit, a call it makes later. Defaults to [`ToolSpec::plan`]; a
    /// tool whose calls differ by their arguments answers per call.
    fn plan(&self, args: &serde_json::Value) -> CallPlan {
        let _ = args;
        self.spec().plan()
    }

    /// Runs the tool. Arguments are a JSON object (the runner guarantees that).
    ///
    /// Only [`crate::runner::ToolRunner`] can call this: `authorized` cannot be
    /// made anywhere else, so every call has passed the policy gate.
    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
        authorized: &Authorized,
    ) -> CallOutcome;
}

/// Configuration of all built-in tools, as the binary maps it from config.toml.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// The policy gate (autonomy and rules); used by [`crate::policy::PolicyGate::new`].
    pub policy: crate::policy::ToolPolicyConfig,
    /// Default per-call limits, copied into each [`ToolContext`].
    pub limits: ToolLimits,
    /// The `shell` tool.
    pub shell: shell::ShellConfig,
    /// The file tools (`file_read`, `file_write`, `list_dir`).
    pub files: files::FilesConfig,
    /// The network rules of `http_request` and `web_fetch`.
    pub http: http::HttpConfig,
    /// The `web_search` tool's provider; without it the tool is not offered.
    pub web_search: Option<web_search::WebSearchConfig>,
    /// The `browser_*` tools (offered when a browser is found; the binary
    /// registers them, one browser per agent).
    pub browser: browser::BrowserConfig,
}

/// A registry holding every built-in tool, configured from `config`.
pub fn builtin_registry(config: &ToolsConfig) -> Result<ToolRegistry, RegistryError> {
    let mut registry = ToolRegistry::new();
    registry.register_core(Arc::new(shell::ShellTool::new(config.shell.clone())))?;
    registry.register_core(Arc::new(files::FileReadTool::new(config.files.clone())))?;
    registry.register_core(Arc::new(files::FileWriteTool::new(config.files.clone())))?;
    registry.register_core(Arc::new(files::ListDirTool::new(config.files.clone())))?;
    let net = Arc::new(
        net::NetClient::new(config.http.clone())
            .map_err(|e| RegistryError::Init(format!("tools.http: {e}")))?,
    );
    registry.register_core(Arc::new(http::HttpRequestTool::over(Arc::clone(&net))))?;
    registry.register(Arc::new(web_fetch::WebFetchTool::new(net)))?;
    if let Some(search) = &config.web_search {
        let tool = web_search::WebSearchTool::new(search.clone())
            .map_err(|e| RegistryError::Init(format!("web_search: {e}")))?;
        registry.register(Arc::new(tool))?;
    }
    // Not core: the system prompt already carries the date and time.
    registry.register(Arc::new(time::TimeNowTool))?;
    Ok(registry)
}
