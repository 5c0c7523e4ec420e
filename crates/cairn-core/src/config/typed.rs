//! The typed view of resolved settings that the rest of cairn reads.

use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use super::resolve::{ConfigInput, Resolved, Settings, resolve};
use super::unavailable::{Environment, Secret, Unavailable, scan};
use super::{ConfigError, ConfigErrors, Section, Source, Value};

/// The effective configuration of one cairn process.
#[derive(Debug, Clone)]
pub struct Config {
    /// The resolved settings with their sources (for `config show` and doctor).
    pub settings: Settings,
    /// The agent's identity and limits.
    pub agent: AgentConfig,
    /// The person cairn works for.
    pub user: UserConfig,
    /// Directory of markdown files the agent reads and writes.
    pub workspace: PathBuf,
    /// `sqlite://…` or `postgres://…`; may hold a password, so it is a secret.
    pub database_url: SecretString,
    /// Routine engine settings.
    pub routines: RoutinesConfig,
    /// The HTTP/WebSocket gateway.
    pub gateway: GatewayConfig,
    /// Heartbeat settings.
    pub heartbeat: HeartbeatConfig,
    /// `cairn daemon`'s supervision and shutdown.
    pub daemon: DaemonConfig,
    /// LLM provider settings.
    pub llm: LlmConfig,
    /// Spending limits.
    pub cost: CostConfig,
    /// The `[tools]` table, passed whole to the agent's policy (line for errors).
    pub tools: Option<Section>,
    /// The `[routing]` table (rules and model routes), passed whole.
    pub routing: Option<Section>,
    /// Notification delivery.
    pub notify: NotifyConfig,
    /// Self-repair of stuck jobs and failing tools.
    pub repair: RepairConfig,
    /// Memory recall, embeddings and hygiene.
    pub memory: MemoryConfig,
    /// The `[[mcp.servers]]` array, passed whole to cairn-mcp (line for errors).
    pub mcp_servers: Option<Section>,
    /// Where skills are found.
    pub skills: SkillsConfig,
    /// The `[[hooks]]` array, passed whole to the agent's hook runner (line for errors).
    pub hooks: Option<Section>,
    /// The `[[agents]]` array, passed whole to cairn-agent's `agents` (line for errors).
    pub agents: Option<Section>,
}

/// Skills (`[skills]`): folders with a `SKILL.md` the agent may use.
#[derive(Debug, Clone, Default)]
pub struct SkillsConfig {
    /// Directories holding skill folders besides `workspace/skills`, absolute.
    pub paths: Vec<PathBuf>,
}

/// Self-repair: stuck jobs and failing tools (`[repair]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairConfig {
    /// A running job without progress for this long is restarted.
    pub stuck_after: Duration,
    /// Restarts of one job before it is marked as needing a person.
    pub max_attempts: u32,
    /// Consecutive failures that disable a tool (`None`: never).
    pub tool_failure_limit: Option<u64>,
}

impl Default for RepairConfig {
    fn default() -> Self {
        Self {
            stuck_after: Duration::from_secs(600),
            max_attempts: 3,
            tool_failure_limit: Some(5),
        }
    }
}

/// Memory settings (`[memory]`).
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// `openai`, `ollama` or `openai-compatible`; `None`: keyword-only recall.
    pub embeddings_provider: Option<String>,
    /// Base URL up to `/v1`; `None`: the provider's own.
    pub embeddings_base_url: Option<String>,
    /// Embedding model; `None`: the provider's usual one.
    pub embeddings_model: Option<String>,
    /// Vector size to ask for.
    pub embeddings_dimensions: Option<u32>,
    /// Key for the embeddings provider (falls back to `llm.openai_api_key` for openai).
    pub embeddings_api_key: Secret,
    /// Weight of vector similarity in hybrid recall, percent.
    pub vector_weight_pct: u32,
    /// Weight of keyword match in hybrid recall, percent.
    pub keyword_weight_pct: u32,
    /// Minimum score recalled, percent.
    pub min_relevance_pct: u32,
    /// Memories recalled before each turn.
    pub top_k: u32,
    /// Size bound of the `[Memory context]` section; 0 turns it off.
    pub context_chars: u32,
    /// Save the person's messages as conversation memories.
    pub auto_save: bool,
    /// Run hygiene at all.
    pub hygiene_enabled: bool,
    /// Daily memories are archived after this many days.
    pub archive_after_days: u32,
    /// Archived memories are deleted after this many days.
    pub purge_after_days: u32,
    /// Conversation memories are deleted after this many days.
    pub conversation_retention_days: u32,
    /// Hygiene writes `MEMORY_SNAPSHOT.md`.
    pub snapshot_on_hygiene: bool,
    /// Start-up loads `MEMORY_SNAPSHOT.md` into an empty store.
    pub auto_hydrate: bool,
}

/// Notification delivery settings and the output channels.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyConfig {
    /// Channel of notifications whose producer names none.
    pub default_channel: String,
    /// Attempts before giving up (the notification stays in the inbox).
    pub max_attempts: u32,
    /// Age after which a notification is no longer retried.
    pub max_age: Duration,
    /// Wait before the first retry (it doubles).
    pub retry_base: Duration,
    /// Longest wait between attempts.
    pub retry_max: Duration,
    /// How long one process holds a delivery.
    pub lease: Duration,
    /// The `[channels]` table, passed whole to the notification layer.
    pub channels: Option<Section>,
}

/// The agent's identity and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// Name the agent uses for itself.
    pub name: String,
    /// LLM/tool rounds per turn.
    pub max_iterations: u32,
    /// Full jobs at once.
    pub max_parallel_jobs: u32,
    /// Sub-agents below a turn (`agent_delegate`); deeper delegations are refused.
    pub max_delegation_depth: u32,
    /// Sub-agents one turn runs at once.
    pub max_parallel_delegations: u32,
    /// Undo steps kept per thread.
    pub undo_depth: u32,
    /// Idle time after which a session leaves memory.
    pub session_idle: Duration,
    /// How long a tool call waits for an approval answered by a later message.
    pub approval_timeout: Duration,
    /// The inbound channel that asks the owner to approve the calls of
    /// turns nobody attends (`/v1`, webhooks, routines).
    pub approval_channel: Option<String>,
}

/// The person cairn works for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserConfig {
    /// Owner id of routines and sessions.
    pub id: String,
    /// The zone schedules and "tomorrow at 9" are read in.
    pub timezone: chrono_tz::Tz,
}

/// Routine engine settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutinesConfig {
    /// Whether routines run at all.
    pub enabled: bool,
    /// Routine runs at once across all routines; more wait in the queue.
    pub max_concurrent: u32,
    /// Runs that may wait in that queue; more are refused.
    pub max_waiting: u32,
    /// How long a running run's lease lasts (renewed every third of it).
    pub lease: Duration,
    /// Slots one backfill may run without being told `--yes`.
    pub max_backfill: u32,
}

/// The HTTP/WebSocket gateway's settings.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Whether `cairn daemon` serves it.
    pub enabled: bool,
    /// Address to bind.
    pub host: String,
    /// Port to listen on.
    pub port: u16,
    /// Whether a non-loopback address may be bound.
    pub allow_public_bind: bool,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Bytes of images (`data:` URLs) a chat request or WebSocket message
    /// may carry beyond `body_limit`.
    pub image_limit: usize,
    /// Time limit of ordinary requests (streams and agent turns are exempt).
    pub request_timeout: Duration,
    /// Whether `/metrics` is served without a token.
    pub metrics_public: bool,
    /// Whether `X-Forwarded-For` names the client.
    pub trust_forwarded_for: bool,
    /// Proxies skipped, from the right, to find the client in `X-Forwarded-For`.
    pub trusted_proxies: Vec<crate::ip_range::IpRange>,
    /// Lifetime of paired tokens; `None` means they never expire.
    pub token_ttl: Option<Duration>,
    /// Connections served at once (health checks have a little room past it).
    pub max_connections: usize,
    /// Time allowed for a request's headers.
    pub header_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Whether `/v1` answers only the model names it lists.
    pub openai_strict_models: bool,
    /// Browser origins allowed to call the API across origins.
    pub cors_origins: Vec<String>,
    /// Host names the dashboard and pairing answer for besides `host`,
    /// `localhost` and loopback (DNS rebinding gets 421).
    pub allowed_hosts: Vec<String>,
    /// Images one chat message or `/v1` request may carry.
    pub max_images: usize,
    /// The secret `/webhook` signatures are checked with (`"${VAR}"` in the
    /// file is already the variable's value); `None`: messages are unsigned.
    pub webhook_secret: Option<SecretString>,
}

/// `cairn daemon`'s supervision and shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfig {
    /// Longest wait before a failed component is restarted.
    pub restart_max_backoff: Duration,
    /// A run this long counts as healthy: the backoff starts over.
    pub healthy_after: Duration,
    /// Longest wait for components to stop at shutdown.
    pub shutdown_deadline: Duration,
}

/// Heartbeat settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatConfig {
    /// Whether the heartbeat runs.
    pub enabled: bool,
    /// Time between heartbeats.
    pub interval: Duration,
    /// Channel for alerts (empty: `notify.default_channel`).
    pub notify_channel: String,
    /// User told of alerts (empty: `user.id`).
    pub notify_user: String,
    /// When heartbeats run, in the user's zone (always when `None`).
    pub active_hours: Option<crate::active_hours::ActiveHours>,
    /// Failed beats in a row before the heartbeat backs off.
    pub max_failures: u32,
}

/// LLM provider settings (mapped onto the provider crate's settings by the binary).
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// `openai`, `anthropic` or a preset (`ollama`, `openrouter`, …; checked by
    /// the LLM layer); `None` when nothing is configured.
    pub provider: Option<String>,
    /// Base URL override.
    pub base_url: Option<String>,
    /// The effective API key: `llm.api_key`, else the provider's own variable.
    pub api_key: Secret,
    /// Model name.
    pub model: Option<String>,
    /// Cheaper model for light work.
    pub cheap_model: Option<String>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries of transient failures.
    pub max_retries: u32,
    /// Context window in tokens.
    pub context_limit: u32,
    /// Whether the model accepts images.
    pub vision: bool,
    /// `[llm.prices]`, passed whole.
    pub prices: Option<Section>,
    /// `[[llm.fallbacks]]`, passed whole.
    pub fallbacks: Option<Section>,
}

/// Spending limits; `None` means unlimited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostConfig {
    /// Cents per UTC day.
    pub daily_budget_cents: Option<u64>,
    /// LLM calls per sliding hour.
    pub hourly_action_limit: Option<u64>,
}

/// Shortest heartbeat interval accepted: a heartbeat is an LLM call, and peers
/// have burnt millions of tokens with tight loops.
const MIN_HEARTBEAT_SECS: u64 = 60;

impl Config {
    /// Resolves and type-checks the configuration in one step.
    pub fn load(input: &ConfigInput) -> Result<Config, ConfigErrors> {
        Config::from_settings(resolve(input)?)
    }

    /// Builds the typed view, checking ranges; every problem is reported.
    pub fn from_settings(settings: Settings) -> Result<Config, ConfigErrors> {
        let mut r = Reader {
            settings: &settings,
            errors: Vec::new(),
        };
        let provider = r.text_opt("llm.provider").map(|p| p.to_ascii_lowercase());
        let openai_key = r.secret("llm.openai_api_key");
        let anthropic_key = r.secret("llm.anthropic_api_key");
        let provider = provider.or_else(|| {
            match (openai_key.is_configured(), anthropic_key.is_configured()) {
                (true, _) => Some("openai".to_string()),
                (false, true) => Some("anthropic".to_string()),
                (false, false) => None,
            }
        });
        let api_key = r.secret("llm.api_key").or(match provider.as_deref() {
            Some("anthropic") => anthropic_key,
            _ => openai_key,
        });

        let embeddings_provider = r
            .text_opt("memory.embeddings_provider")
            .map(|p| p.to_ascii_lowercase());
        let config = Config {
            agent: AgentConfig {
                name: r.text("agent.name"),
                max_iterations: r.u32_at_least("agent.max_iterations", 1),
                max_parallel_jobs: r.u32_at_least("agent.max_parallel_jobs", 1),
                max_delegation_depth: r.u32_at_least("agent.max_delegation_depth", 0),
                max_parallel_delegations: r.u32_at_least("agent.max_parallel_delegations", 1),
                undo_depth: r.u32_at_least("agent.undo_depth", 1),
                session_idle: Duration::from_secs(r.uint_at_least("agent.session_idle_secs", 60)),
                approval_timeout: Duration::from_secs(
                    r.uint_at_least("agent.approval_timeout_secs", 1),
                ),
                approval_channel: r.text_opt("agent.approval_channel"),
            },
            user: UserConfig {
                id: r.text("user.id"),
                timezone: r.text("user.timezone").parse().unwrap_or(chrono_tz::UTC),
            },
            workspace: PathBuf::from(r.text("workspace.path")),
            database_url: SecretString::from(r.text("database.url")),
            routines: RoutinesConfig {
                enabled: r.bool("routines.enabled"),
                max_concurrent: r.u32_at_least("routines.max_concurrent", 1),
                max_waiting: r.u32_at_least("routines.max_waiting", 0),
                lease: Duration::from_secs(r.uint_at_least("routines.lease_secs", 3)),
                max_backfill: r.u32_at_least("routines.max_backfill", 1),
            },
            gateway: GatewayConfig {
                enabled: r.bool("gateway.enabled"),
                host: r.text("gateway.host"),
                port: {
                    let port = r.uint_at_least("gateway.port", 0);
                    u16::try_from(port).unwrap_or_else(|_| {
                        r.bad(
                            "gateway.port",
                            format!("{port} is not a port (0-65535; 0 picks a free one)"),
                        );
                        0
                    })
                },
                allow_public_bind: r.bool("gateway.allow_public_bind"),
                body_limit: usize::try_from(r.uint_at_least("gateway.body_limit_bytes", 1024))
                    .unwrap_or(usize::MAX),
                image_limit: usize::try_from(r.uint_at_least("gateway.image_limit_bytes", 0))
                    .unwrap_or(usize::MAX),
                request_timeout: Duration::from_secs(
                    r.uint_at_least("gateway.request_timeout_secs", 1),
                ),
                metrics_public: r.bool("gateway.metrics_public"),
                trust_forwarded_for: r.bool("gateway.trust_forwarded_for"),
                trusted_proxies: r.ip_ranges("gateway.trusted_proxies"),
                openai_strict_models: r.bool("gateway.openai_strict_models"),
                cors_origins: r.list("gateway.cors_origins"),
                allowed_hosts: r.list("gateway.allowed_hosts"),
                max_images: usize::try_from(r.uint_at_least("gateway.max_images", 0))
                    .unwrap_or(usize::MAX),
                webhook_secret: r
                    .text_opt("gateway.webhook_secret")
                    .filter(|s| !s.trim().is_empty())
                    .map(SecretString::from),
                token_ttl: match r.uint_at_least("gateway.token_ttl_secs", 0) {
                    0 => None,
                    secs => Some(Duration::from_secs(secs)),
                },
                max_connections: usize::try_from(r.uint_at_least("gateway.max_connections", 1))
                    .unwrap_or(usize::MAX),
                header_timeout: Duration::from_secs(
                    r.uint_at_least("gateway.header_timeout_secs", 1),
                ),
                idle_timeout: Duration::from_secs(r.uint_at_least("gateway.idle_timeout_secs", 1)),
            },
            heartbeat: HeartbeatConfig {
                enabled: r.bool("heartbeat.enabled"),
                interval: Duration::from_secs(
                    r.uint_at_least("heartbeat.interval_secs", MIN_HEARTBEAT_SECS),
                ),
                notify_channel: r.text("heartbeat.notify_channel"),
                notify_user: r.text("heartbeat.notify_user"),
                active_hours: r.text_opt("heartbeat.active_hours").and_then(|text| {
                    text.parse()
                        .map_err(|e: crate::active_hours::BadActiveHours| {
                            r.bad("heartbeat.active_hours", e.to_string())
                        })
                        .ok()
                }),
                max_failures: r.u32_at_least("heartbeat.max_failures", 1),
            },
            daemon: DaemonConfig {
                restart_max_backoff: Duration::from_secs(
                    r.uint_at_least("daemon.restart_max_backoff_secs", 1),
                ),
                healthy_after: Duration::from_secs(r.uint_at_least("daemon.healthy_after_secs", 1)),
                shutdown_deadline: Duration::from_secs(
                    r.uint_at_least("daemon.shutdown_deadline_secs", 1),
                ),
            },
            llm: LlmConfig {
                provider,
                base_url: r.text_opt("llm.base_url"),
                api_key,
                model: r.text_opt("llm.model"),
                cheap_model: r.text_opt("llm.cheap_model"),
                timeout: Duration::from_secs(r.uint_at_least("llm.timeout_secs", 1)),
                max_retries: r.u32_at_least("llm.max_retries", 0),
                context_limit: r.u32_at_least("llm.context_limit", 1000),
                vision: r.bool("llm.vision"),
                prices: settings.sections.get("llm.prices").cloned(),
                fallbacks: settings.sections.get("llm.fallbacks").cloned(),
            },
            cost: CostConfig {
                daily_budget_cents: r.uint_opt("cost.daily_budget_cents"),
                hourly_action_limit: r.uint_opt("cost.hourly_action_limit"),
            },
            tools: settings.sections.get("tools").cloned(),
            mcp_servers: settings.sections.get("mcp.servers").cloned(),
            routing: settings.sections.get("routing").cloned(),
            notify: NotifyConfig {
                default_channel: r.text("notify.default_channel"),
                max_attempts: r.u32_at_least("notify.max_attempts", 1),
                max_age: Duration::from_secs(r.uint_at_least("notify.max_age_secs", 60)),
                retry_base: Duration::from_secs(r.uint_at_least("notify.retry_base_secs", 0)),
                retry_max: Duration::from_secs(r.uint_at_least("notify.retry_max_secs", 1)),
                lease: Duration::from_secs(r.uint_at_least("notify.lease_secs", 1)),
                channels: settings.sections.get("channels").cloned(),
            },
            repair: RepairConfig {
                stuck_after: Duration::from_secs(r.uint_at_least("repair.stuck_after_secs", 1)),
                max_attempts: r.u32_at_least("repair.max_attempts", 0),
                tool_failure_limit: match r.uint_at_least("repair.tool_failure_limit", 0) {
                    0 => None,
                    n => Some(n),
                },
            },
            memory: MemoryConfig {
                embeddings_provider: embeddings_provider.clone(),
                embeddings_base_url: r.text_opt("memory.embeddings_base_url"),
                embeddings_model: r.text_opt("memory.embeddings_model"),
                embeddings_dimensions: r
                    .uint_opt("memory.embeddings_dimensions")
                    .and_then(|d| u32::try_from(d).ok()),
                // OpenAI's key is only ever sent to OpenAI.
                embeddings_api_key: r.secret("memory.embeddings_api_key").or(
                    if embeddings_provider.as_deref() == Some("openai") {
                        r.secret("llm.openai_api_key")
                    } else {
                        Secret::Unset
                    },
                ),
                vector_weight_pct: r.u32_at_least("memory.vector_weight_pct", 0),
                keyword_weight_pct: r.u32_at_least("memory.keyword_weight_pct", 0),
                min_relevance_pct: {
                    let pct = r.u32_at_least("memory.min_relevance_pct", 0);
                    if pct > 100 {
                        r.bad("memory.min_relevance_pct", format!("{pct} is above 100"));
                    }
                    pct.min(100)
                },
                top_k: r.u32_at_least("memory.top_k", 1),
                context_chars: r.u32_at_least("memory.context_chars", 0),
                auto_save: r.bool("memory.auto_save"),
                hygiene_enabled: r.bool("memory.hygiene_enabled"),
                archive_after_days: r.u32_at_least("memory.archive_after_days", 1),
                purge_after_days: r.u32_at_least("memory.purge_after_days", 1),
                conversation_retention_days: r
                    .u32_at_least("memory.conversation_retention_days", 1),
                snapshot_on_hygiene: r.bool("memory.snapshot_on_hygiene"),
                auto_hydrate: r.bool("memory.auto_hydrate"),
            },
            skills: SkillsConfig {
                paths: r
                    .list("skills.paths")
                    .into_iter()
                    .map(|p| settings.home.join(p))
                    .collect(),
            },
            hooks: settings.sections.get("hooks").cloned(),
            agents: settings.sections.get("agents").cloned(),
            settings: settings.clone(),
        };
        if r.errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(r.errors))
        }
    }

    /// `$CAIRN_HOME`.
    pub fn home(&self) -> &std::path::Path {
        &self.settings.home
    }

    /// The environment read at start-up, for the tables that expand
    /// `${VAR}` when they are used (channels, MCP servers, …).
    pub fn env(&self) -> &Environment {
        &self.settings.env
    }

    /// Every value written `${VAR}` whose variable is not set (for
    /// `doctor` and the daemon's start-up log; each part that reads one
    /// fails with its own).
    pub fn unavailable(&self) -> Vec<Unavailable> {
        scan(&self.settings)
    }
}

/// Reads typed values out of resolved settings, collecting range errors.
struct Reader<'a> {
    settings: &'a Settings,
    errors: Vec<ConfigError>,
}

impl Reader<'_> {
    fn get(&self, key: &str) -> Option<&Resolved> {
        self.settings.get(key)
    }

    fn text_opt(&self, key: &str) -> Option<String> {
        match self.get(key).and_then(|r| r.value.as_ref()) {
            Some(Value::Text(s)) => Some(s.clone()),
            _ => None,
        }
    }

    /// A secret setting: set, unset, or unavailable (a `${VAR}` not set).
    fn secret(&self, key: &str) -> Secret {
        match self.get(key) {
            Some(Resolved {
                unavailable: Some(why),
                ..
            }) => Secret::Unavailable(why.clone()),
            _ => self
                .text_opt(key)
                .map_or(Secret::Unset, |s| Secret::Set(SecretString::from(s))),
        }
    }

    fn text(&self, key: &str) -> String {
        self.text_opt(key).unwrap_or_default()
    }

    fn bool(&self, key: &str) -> bool {
        matches!(
            self.get(key).and_then(|r| r.value.as_ref()),
            Some(Value::Bool(true))
        )
    }

    fn list(&self, key: &str) -> Vec<String> {
        match self.get(key).and_then(|r| r.value.as_ref()) {
            Some(Value::List(items)) => items.clone(),
            _ => Vec::new(),
        }
    }

    /// Address ranges, each one that does not parse reported.
    fn ip_ranges(&mut self, key: &str) -> Vec<crate::ip_range::IpRange> {
        let mut ranges = Vec::new();
        for item in self.list(key) {
            match item.parse() {
                Ok(range) => ranges.push(range),
                Err(e) => self.bad(key, format!("{e}")),
            }
        }
        ranges
    }

    fn uint_opt(&self, key: &str) -> Option<u64> {
        match self.get(key).and_then(|r| r.value.as_ref()) {
            Some(Value::UInt(n)) => Some(*n),
            _ => None,
        }
    }

    fn uint_at_least(&mut self, key: &str, min: u64) -> u64 {
        let n = self.uint_opt(key).unwrap_or(min);
        if n < min {
            self.bad(key, format!("must be at least {min}, found {n}"));
            return min;
        }
        n
    }

    fn u32_at_least(&mut self, key: &str, min: u32) -> u32 {
        let n = self.uint_at_least(key, u64::from(min));
        u32::try_from(n).unwrap_or_else(|_| {
            self.bad(key, format!("{n} is too large"));
            min
        })
    }

    fn bad(&mut self, key: &str, message: String) {
        let origin = match self.get(key).map(|r| &r.source) {
            Some(Source::File { line }) => format!(
                "{}:{line}",
                self.settings
                    .file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
            Some(Source::Env { var }) => format!("environment variable {var}"),
            _ => "default".to_string(),
        };
        self.errors.push(ConfigError::BadValue {
            origin,
            key: key.to_string(),
            message,
        });
    }
}

#[cfg(test)]
#[path = "typed_tests.rs"]
mod tests;
