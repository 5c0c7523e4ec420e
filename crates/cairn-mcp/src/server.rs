//! One configured MCP server, supervised: started lazily or at start-up,
//! its tools listed and re-listed on `tools/list_changed`, restarted with
//! backoff after a crash (its tools answer "unavailable" meanwhile), and its
//! state, last error and timings kept for `cairn mcp list`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_agent::tools::{RiskLevel, ToolError};
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::cache::ToolCache;
use crate::config::{ServerSpec, StartMode, Transport};
use crate::names;
use crate::process::{self, Launch};
use crate::remote::{Connection, Notice, RemoteError, RemoteTool};
use crate::rmcp_client::{self, Wiring};

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// `enabled = false`: never started.
    Disabled,
    /// Its table names an unset `${VAR}`: never started (its last error says which).
    Unavailable,
    /// Lazy and not needed yet.
    Idle,
    /// Being started (process, handshake, tool list).
    Starting,
    /// Connected; its tools answer.
    Ready,
    /// Crashed or failed to start; waiting to try again.
    Restarting,
    /// Stopped by cairn.
    Stopped,
}

impl State {
    /// Lower-case name, as shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Unavailable => "unavailable",
            Self::Idle => "idle",
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Restarting => "restarting",
            Self::Stopped => "stopped",
        }
    }
}

/// How servers are restarted.
#[derive(Debug, Clone, Copy)]
pub struct Supervision {
    /// The first wait after a failure; doubles each time.
    pub backoff_start: Duration,
    /// The longest wait.
    pub backoff_max: Duration,
    /// A connection that lasted this long starts the backoff over.
    pub healthy_after: Duration,
}

impl Default for Supervision {
    fn default() -> Self {
        Self {
            backoff_start: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            healthy_after: Duration::from_secs(60),
        }
    }
}

/// A tool of a server as cairn exposes it.
#[derive(Debug, Clone)]
pub struct Exposed {
    /// cairn's name for it (`mcp__server__tool`).
    pub name: String,
    /// The server's description of it.
    pub remote: Arc<RemoteTool>,
}

/// Where a server's tool list came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolsFrom {
    /// Not known yet.
    None,
    /// Remembered from an earlier connection.
    Remembered,
    /// Listed by the server in this process.
    Live,
}

/// What `cairn mcp list` shows of a server.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Its name.
    pub name: String,
    /// `stdio: COMMAND` or `http: URL`.
    pub endpoint: String,
    /// `lazy` or `startup`.
    pub start: StartMode,
    /// Where it is in its life.
    pub state: State,
    /// Tools exposed (denied ones left out).
    pub tools: usize,
    /// Where that list came from.
    pub tools_from: ToolsFrom,
    /// Restarts after failures in this process.
    pub restarts: u32,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// Milliseconds the last connection took (start and handshake).
    pub connect_ms: Option<u64>,
    /// Milliseconds the last tool listing took.
    pub list_ms: Option<u64>,
}

struct Inner {
    state: State,
    conn: Option<Arc<dyn Connection>>,
    tools: Arc<Vec<Exposed>>,
    tools_from: ToolsFrom,
    last_error: Option<String>,
    restarts: u32,
    retry_at: Option<Instant>,
    connect_ms: Option<u64>,
    list_ms: Option<u64>,
}

/// Where servers' processes run, and what they stay out of.
#[derive(Debug, Clone)]
pub struct Places {
    /// The agent's workspace: never a stdio server's directory nor on its `PATH`.
    pub workspace: PathBuf,
    /// The folder under which each stdio server gets a private one of its
    /// own, its working directory (`CAIRN_HOME/mcp`).
    pub servers: PathBuf,
}

/// One supervised server.
pub struct Server {
    spec: ServerSpec,
    places: Places,
    supervision: Supervision,
    cache: Option<ToolCache>,
    inner: Mutex<Inner>,
    /// Bumped on every change of state or tools.
    changed: watch::Sender<u64>,
    stop: CancellationToken,
}

fn ms(d: Duration) -> Option<u64> {
    Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Server {
    /// A server not yet started; `remembered` is its tool list from the cache.
    pub fn new(
        spec: ServerSpec,
        places: Places,
        supervision: Supervision,
        cache: Option<ToolCache>,
        remembered: Option<Vec<RemoteTool>>,
    ) -> Arc<Self> {
        let state = match (&spec.unavailable, spec.enabled) {
            (_, false) => State::Disabled,
            (Some(_), true) => State::Unavailable,
            (None, true) => State::Idle,
        };
        let last_error = spec.unavailable.clone().filter(|_| spec.enabled);
        let tools_from = if remembered.is_some() {
            ToolsFrom::Remembered
        } else {
            ToolsFrom::None
        };
        let tools = Arc::new(expose(&spec, remembered.unwrap_or_default()));
        Arc::new(Self {
            spec,
            places,
            supervision,
            cache,
            inner: Mutex::new(Inner {
                state,
                conn: None,
                tools,
                tools_from,
                last_error,
                restarts: 0,
                retry_at: None,
                connect_ms: None,
                list_ms: None,
            }),
            changed: watch::channel(0).0,
            stop: CancellationToken::new(),
        })
    }

    /// Its configuration.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut Inner)) {
        f(&mut self.lock());
        self.changed.send_modify(|n| *n += 1);
    }

    /// Where it is in its life.
    pub fn state(&self) -> State {
        self.lock().state
    }

    /// Its tools as exposed now (live, or remembered while it is not connected).
    pub fn tools(&self) -> Arc<Vec<Exposed>> {
        Arc::clone(&self.lock().tools)
    }

    /// Whether its tool list is known, and from where.
    pub fn tools_from(&self) -> ToolsFrom {
        self.lock().tools_from
    }

    /// What `cairn mcp list` shows.
    pub fn status(&self) -> Status {
        let inner = self.lock();
        Status {
            name: self.spec.name.clone(),
            endpoint: self.spec.endpoint(),
            start: self.spec.start,
            state: inner.state,
            tools: inner.tools.len(),
            tools_from: inner.tools_from,
            restarts: inner.restarts,
            last_error: inner.last_error.clone(),
            connect_ms: inner.connect_ms,
            list_ms: inner.list_ms,
        }
    }

    /// The risk of one of its tools: the configured risk (default `write`),
    /// raised to `dangerous` by `destructiveHint`; a hint never lowers it.
    pub fn risk_of(&self, tool: &RemoteTool) -> RiskLevel {
        let configured = self.spec.risk.unwrap_or(RiskLevel::Write);
        if tool.destructive == Some(true) && tool.read_only != Some(true) {
            RiskLevel::Dangerous
        } else {
            configured
        }
    }

    /// Starts the supervising task unless it runs (or the server is disabled).
    pub fn ensure_started(self: &Arc<Self>) {
        {
            let mut inner = self.lock();
            if inner.state != State::Idle {
                return;
            }
            inner.state = State::Starting;
        }
        self.changed.send_modify(|n| *n += 1);
        let this = Arc::clone(self);
        tokio::spawn(async move { this.supervise().await });
    }

    /// Waits until it is neither idle-but-wanted nor starting, at most `limit`.
    pub async fn settle(&self, limit: Duration) -> State {
        let mut changed = self.changed.subscribe();
        let wait = changed.wait_for(|_| self.state() != State::Starting);
        let _ = tokio::time::timeout(limit, wait).await;
        self.state()
    }

    /// Waits until it is ready, at most `limit`; false when it did not get there.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        self.wait_until(limit, |s| s.state == State::Ready).await
    }

    /// Waits until its status satisfies `done`, at most `limit`; false when it did not.
    pub async fn wait_until(&self, limit: Duration, done: impl Fn(&Status) -> bool) -> bool {
        let mut changed = self.changed.subscribe();
        let wait = changed.wait_for(|_| done(&self.status()));
        tokio::time::timeout(limit, wait).await.is_ok()
    }

    /// The live connection, starting the server when it is lazy and waiting
    /// for a start in progress; "unavailable" while it is restarting.
    pub async fn connection(self: &Arc<Self>) -> Result<Arc<dyn Connection>, ToolError> {
        self.ensure_started();
        self.settle(self.spec.connect_timeout).await;
        let inner = self.lock();
        match (&inner.conn, inner.state) {
            (Some(conn), State::Ready) => Ok(Arc::clone(conn)),
            (_, state) => Err(ToolError::Unavailable(self.unavailable(state, &inner))),
        }
    }

    fn unavailable(&self, state: State, inner: &Inner) -> String {
        let name = &self.spec.name;
        let why = inner
            .last_error
            .as_deref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default();
        match state {
            State::Restarting => {
                let retry = inner
                    .retry_at
                    .map(|at| at.saturating_duration_since(Instant::now()).as_secs() + 1)
                    .unwrap_or(1);
                format!(
                    "MCP server \"{name}\" is restarting{why}; its tools come back when it does (next try in about {retry}s)"
                )
            }
            State::Starting => format!("MCP server \"{name}\" is still starting{why}"),
            State::Disabled => format!("MCP server \"{name}\" is disabled in the configuration"),
            _ => format!("MCP server \"{name}\" is {}{why}", state.as_str()),
        }
    }

    /// Closes its connection and stops supervising it.
    pub async fn stop(&self) {
        self.stop.cancel();
        let conn = self.lock().conn.take();
        if let Some(conn) = conn {
            conn.close().await;
        }
        self.update(|inner| inner.state = State::Stopped);
    }

    /// The supervising loop: connect, serve until the connection ends, wait, again.
    async fn supervise(self: Arc<Self>) {
        let mut backoff = self.supervision.backoff_start;
        loop {
            let started = Instant::now();
            match self.connect_and_serve().await {
                Ok(None) => return,
                Ok(Some(why)) => {
                    tracing::warn!(server = %self.spec.name, %why, "MCP server connection ended; restarting");
                    if started.elapsed() >= self.supervision.healthy_after {
                        backoff = self.supervision.backoff_start;
                    }
                    self.update(|inner| inner.last_error = Some(why));
                }
                Err(e) => {
                    tracing::warn!(server = %self.spec.name, error = %e, "MCP server could not be started");
                    self.update(|inner| inner.last_error = Some(e.to_string()));
                }
            }
            self.update(|inner| {
                inner.conn = None;
                inner.state = State::Restarting;
                inner.retry_at = Some(Instant::now() + backoff);
            });
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(self.supervision.backoff_max);
            self.update(|inner| {
                inner.restarts += 1;
                inner.state = State::Starting;
                inner.retry_at = None;
            });
        }
    }

    /// One connection's life: `Ok(None)` when cairn stopped it, `Ok(Some(why))`
    /// when it ended by itself, `Err` when it could not be made.
    async fn connect_and_serve(&self) -> Result<Option<String>, RemoteError> {
        let (tx, mut notices) = mpsc::unbounded_channel();
        let limit = self.spec.connect_timeout;
        let started = Instant::now();
        let conn = tokio::select! {
            made = tokio::time::timeout(limit, self.connect(tx)) => match made {
                Ok(conn) => conn?,
                Err(_) => return Err(RemoteError::Connect(format!(
                    "no answer within {} (connect_timeout_secs)", cairn_core::duration::format(limit)
                ))),
            },
            () = self.stop.cancelled() => return Ok(None),
        };
        let connect_ms = ms(started.elapsed());
        if let Err(e) = self.relist(conn.as_ref(), limit).await {
            conn.close().await;
            return Err(e);
        }
        self.update(|inner| {
            inner.conn = Some(Arc::clone(&conn));
            inner.state = State::Ready;
            inner.connect_ms = connect_ms;
        });
        tracing::info!(server = %self.spec.name, tools = self.tools().len(), "MCP server ready");
        loop {
            tokio::select! {
                why = conn.closed() => return Ok(Some(why)),
                notice = notices.recv() => {
                    if notice == Some(Notice::ToolsChanged)
                        && let Err(error) = self.relist(conn.as_ref(), limit).await
                    {
                        tracing::warn!(server = %self.spec.name, %error, "cannot list the changed tools");
                    }
                }
                () = self.stop.cancelled() => {
                    conn.close().await;
                    return Ok(None);
                }
            }
        }
    }

    async fn connect(
        &self,
        notices: mpsc::UnboundedSender<Notice>,
    ) -> Result<Arc<dyn Connection>, RemoteError> {
        let wiring = Wiring {
            server: self.spec.name.clone(),
            notices,
            max_message_bytes: self.spec.max_message_bytes,
        };
        Ok(match &self.spec.transport {
            Transport::Stdio {
                command,
                args,
                env,
                inherited,
                cwd,
                sandbox,
            } => {
                let own;
                let cwd = match cwd {
                    Some(cwd) => cwd.as_path(),
                    None => {
                        own = process::own_dir(&self.places.servers, &self.spec.name).await?;
                        own.as_path()
                    }
                };
                let launch = Launch {
                    command,
                    args,
                    env,
                    inherited,
                    cwd,
                    workspace: &self.places.workspace,
                    sandbox: *sandbox,
                };
                Arc::new(rmcp_client::connect_stdio(&launch, wiring).await?)
            }
            Transport::Http { url, headers } => {
                Arc::new(rmcp_client::connect_http(url, headers, wiring).await?)
            }
        })
    }

    /// Lists the tools again and exposes them (and remembers them).
    async fn relist(&self, conn: &dyn Connection, limit: Duration) -> Result<(), RemoteError> {
        let started = Instant::now();
        let tools = tokio::time::timeout(limit, conn.list_tools())
            .await
            .map_err(|_| RemoteError::Timeout(limit))??;
        let list_ms = ms(started.elapsed());
        if let Some(cache) = &self.cache {
            cache.save(&self.spec, &tools).await;
        }
        let exposed = Arc::new(expose(&self.spec, tools));
        self.update(|inner| {
            inner.tools = exposed;
            inner.tools_from = ToolsFrom::Live;
            inner.list_ms = list_ms;
        });
        Ok(())
    }
}

/// The tools of `spec` cairn exposes: denied ones left out, each named
/// `mcp__server__tool` (a `_2`, `_3`… when two fold to one name).
fn expose(spec: &ServerSpec, tools: Vec<RemoteTool>) -> Vec<Exposed> {
    let mut out: Vec<Exposed> = Vec::new();
    for tool in tools {
        if tool.name.is_empty() || spec.denies(&tool.name) {
            continue;
        }
        let base = names::tool_name(&spec.name, &tool.name);
        let mut name = base.clone();
        let mut n = 2;
        while out.iter().any(|e| e.name == name) {
            name = names::tool_name(&spec.name, &format!("{}_{n}", tool.name));
            n += 1;
        }
        out.push(Exposed {
            name,
            remote: Arc::new(tool),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}
