//! The table of every scalar setting cairn knows: its key in config.toml, the
//! environment variables that override it, its type and its default.
//!
//! One table drives file validation, environment overrides, `cairn config show`
//! and the typed `Config`, so a new setting is one line here plus its field.

pub use super::setting_kind::{DefaultValue, Kind};

/// One known setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingDef {
    /// Dotted key as written in config.toml (`heartbeat.interval_secs`).
    pub key: &'static str,
    /// Environment variables that override the file, highest precedence first.
    pub env: &'static [&'static str],
    /// Value type.
    pub kind: Kind,
    /// Default when unset.
    pub default: DefaultValue,
    /// Secret values are redacted wherever they are shown.
    pub secret: bool,
    /// One line of help for `cairn config show`.
    pub help: &'static str,
}

const fn def(
    key: &'static str,
    env: &'static [&'static str],
    kind: Kind,
    default: DefaultValue,
    help: &'static str,
) -> SettingDef {
    SettingDef {
        key,
        env,
        kind,
        default,
        secret: false,
        help,
    }
}

const fn secret(key: &'static str, env: &'static [&'static str], help: &'static str) -> SettingDef {
    SettingDef {
        key,
        env,
        kind: Kind::Text,
        default: DefaultValue::Unset,
        secret: true,
        help,
    }
}

use DefaultValue as D;
use Kind as K;

/// Every scalar setting, in display order.
pub static SETTINGS: &[SettingDef] = &[
    def(
        "agent.name",
        &["CAIRN_AGENT_NAME", "AGENT_NAME"],
        K::Text,
        D::Text("cairn"),
        "name the agent uses for itself",
    ),
    def(
        "agent.max_iterations",
        &["CAIRN_MAX_ITERATIONS"],
        K::UInt,
        D::UInt(50),
        "LLM/tool rounds per turn before giving up",
    ),
    def(
        "agent.max_parallel_jobs",
        &["CAIRN_MAX_PARALLEL_JOBS", "MAX_PARALLEL_JOBS"],
        K::UInt,
        D::UInt(5),
        "full jobs running at once",
    ),
    def(
        "agent.max_delegation_depth",
        &["CAIRN_MAX_DELEGATION_DEPTH"],
        K::UInt,
        D::UInt(2),
        "levels of sub-agents below a turn (agent_delegate); a deeper delegation is refused, 0 turns delegation off",
    ),
    def(
        "agent.max_parallel_delegations",
        &["CAIRN_MAX_PARALLEL_DELEGATIONS"],
        K::UInt,
        D::UInt(4),
        "sub-agents one turn runs at once; further delegations of the same step wait",
    ),
    def(
        "agent.undo_depth",
        &["CAIRN_UNDO_DEPTH"],
        K::UInt,
        D::UInt(20),
        "turns /undo can go back, per thread",
    ),
    def(
        "agent.session_idle_secs",
        &["CAIRN_SESSION_IDLE_SECS"],
        K::UInt,
        D::UInt(3600),
        "seconds before an idle session leaves memory (it stays stored)",
    ),
    def(
        "agent.approval_timeout_secs",
        &["CAIRN_APPROVAL_TIMEOUT_SECS"],
        K::UInt,
        D::UInt(120),
        "seconds a tool call waits for approval from a channel that cannot prompt (or from agent.approval_channel); then it is declined",
    ),
    def(
        "agent.approval_channel",
        &["CAIRN_APPROVAL_CHANNEL"],
        K::Text,
        D::Unset,
        "the inbound channel (a [channels.NAME] with inbound = true; Telegram today) that asks the owner, with buttons, to approve the tool calls of turns nobody attends (/v1, webhooks, routines); unset: such calls are declined as needing a person",
    ),
    def(
        "notify.default_channel",
        &["CAIRN_NOTIFY_DEFAULT_CHANNEL"],
        K::Text,
        D::Text("inbox"),
        "the output channel of notifications whose producer names none",
    ),
    def(
        "notify.max_attempts",
        &["CAIRN_NOTIFY_MAX_ATTEMPTS"],
        K::UInt,
        D::UInt(8),
        "delivery attempts before a notification is kept in the inbox instead",
    ),
    def(
        "notify.max_age_secs",
        &["CAIRN_NOTIFY_MAX_AGE_SECS"],
        K::UInt,
        D::UInt(86_400),
        "seconds after which an undelivered notification stops being retried (it stays in the inbox)",
    ),
    def(
        "notify.retry_base_secs",
        &["CAIRN_NOTIFY_RETRY_BASE_SECS"],
        K::UInt,
        D::UInt(5),
        "seconds before the first retry of a failed delivery; doubles each time",
    ),
    def(
        "notify.retry_max_secs",
        &["CAIRN_NOTIFY_RETRY_MAX_SECS"],
        K::UInt,
        D::UInt(300),
        "longest wait between delivery attempts",
    ),
    def(
        "notify.lease_secs",
        &["CAIRN_NOTIFY_LEASE_SECS"],
        K::UInt,
        D::UInt(120),
        "seconds one process holds a delivery before another may take it over",
    ),
    def(
        "user.id",
        &["CAIRN_USER"],
        K::Text,
        D::Text("default"),
        "the owner of routines and sessions",
    ),
    def(
        "user.timezone",
        &["CAIRN_TIMEZONE"],
        K::Zone,
        D::SystemZone,
        "IANA zone schedules are read in",
    ),
    def(
        "workspace.path",
        &["CAIRN_WORKSPACE"],
        K::Text,
        D::UnderHome("workspace"),
        "markdown files the agent reads and writes",
    ),
    def(
        "database.url",
        &["CAIRN_DATABASE_URL", "DATABASE_URL"],
        K::Text,
        D::SqliteUnderHome("cairn.db"),
        "sqlite:///path/file.db or postgres://…",
    ),
    def(
        "routines.enabled",
        &["CAIRN_ROUTINES_ENABLED", "ROUTINES_ENABLED"],
        K::Bool,
        D::Bool(true),
        "run routines",
    ),
    def(
        "routines.max_concurrent",
        &["CAIRN_ROUTINES_MAX_CONCURRENT", "ROUTINES_MAX_CONCURRENT"],
        K::UInt,
        D::UInt(10),
        "routine runs at once, all routines together; more wait in a queue and start as places free",
    ),
    def(
        "routines.max_waiting",
        &["CAIRN_ROUTINES_MAX_WAITING"],
        K::UInt,
        D::UInt(10_000),
        "routine runs that may wait for a place under routines.max_concurrent; past it a run is refused (skipped, and you are told)",
    ),
    def(
        "routines.lease_secs",
        &["CAIRN_ROUTINES_LEASE_SECS"],
        K::UInt,
        D::UInt(60),
        "seconds a daemon holds a running run without renewing it; a killed daemon's runs are interrupted after it",
    ),
    def(
        "routines.max_backfill",
        &["CAIRN_ROUTINES_MAX_BACKFILL"],
        K::UInt,
        D::UInt(1000),
        "slots one `routine backfill` may run without --yes",
    ),
    def(
        "gateway.enabled",
        &["CAIRN_GATEWAY_ENABLED"],
        K::Bool,
        D::Bool(true),
        "serve the HTTP/WebSocket gateway inside `cairn daemon`",
    ),
    def(
        "gateway.host",
        &["CAIRN_GATEWAY_HOST"],
        K::Text,
        D::Text("127.0.0.1"),
        "address the gateway binds (non-loopback needs allow_public_bind)",
    ),
    def(
        "gateway.port",
        &["CAIRN_GATEWAY_PORT"],
        K::UInt,
        D::UInt(42700),
        "port the gateway listens on (0: any free port, printed at start)",
    ),
    def(
        "gateway.allow_public_bind",
        &["CAIRN_GATEWAY_ALLOW_PUBLIC_BIND"],
        K::Bool,
        D::Bool(false),
        "allow binding an address other than loopback",
    ),
    def(
        "gateway.body_limit_bytes",
        &["CAIRN_GATEWAY_BODY_LIMIT_BYTES"],
        K::UInt,
        D::UInt(65536),
        "largest request body accepted",
    ),
    def(
        "gateway.image_limit_bytes",
        &["CAIRN_GATEWAY_IMAGE_LIMIT_BYTES"],
        K::UInt,
        D::UInt(8 * 1024 * 1024),
        "bytes of images (data: URLs) a /v1 chat request or a WebSocket message may carry on top of gateway.body_limit_bytes",
    ),
    def(
        "gateway.request_timeout_secs",
        &["CAIRN_GATEWAY_REQUEST_TIMEOUT_SECS"],
        K::UInt,
        D::UInt(30),
        "time limit of a non-streaming request that does not run the agent",
    ),
    def(
        "gateway.metrics_public",
        &["CAIRN_GATEWAY_METRICS_PUBLIC"],
        K::Bool,
        D::Bool(false),
        "serve /metrics without a bearer token",
    ),
    def(
        "gateway.trust_forwarded_for",
        &["CAIRN_GATEWAY_TRUST_FORWARDED_FOR"],
        K::Bool,
        D::Bool(false),
        "identify clients by X-Forwarded-For (only behind a proxy you run)",
    ),
    def(
        "gateway.trusted_proxies",
        &["CAIRN_GATEWAY_TRUSTED_PROXIES"],
        K::List,
        D::List(&crate::ip_range::IpRange::LOOPBACK),
        "proxies (addresses or ranges) whose X-Forwarded-For entries are skipped to find the client",
    ),
    def(
        "gateway.openai_strict_models",
        &["CAIRN_GATEWAY_OPENAI_STRICT_MODELS"],
        K::Bool,
        D::Bool(false),
        "the /v1 API answers only the model names GET /v1/models lists (404 otherwise); when false any other name is served by the default agent",
    ),
    def(
        "gateway.cors_origins",
        &["CAIRN_GATEWAY_CORS_ORIGINS"],
        K::List,
        D::List(&[]),
        "browser origins (https://app.example) allowed to call the API across origins; empty: none",
    ),
    def(
        "gateway.allowed_hosts",
        &["CAIRN_GATEWAY_ALLOWED_HOSTS"],
        K::List,
        D::List(&[]),
        "host names (cairn.example.org, with or without a port) the dashboard and /pair answer for besides gateway.host, localhost and loopback; another Host gets 421",
    ),
    def(
        "gateway.max_images",
        &["CAIRN_GATEWAY_MAX_IMAGES"],
        K::UInt,
        D::UInt(crate::image::DEFAULT_MAX_IMAGES as u64),
        "images one chat message or /v1 request may carry (WebSocket, /v1, Telegram; 0: none); more is refused, naming this setting",
    ),
    secret(
        "gateway.webhook_secret",
        &["CAIRN_GATEWAY_WEBHOOK_SECRET"],
        "when set (may be ${VAR}), POST /webhook also needs X-Webhook-Signature: sha256=<HMAC-SHA256 of the body> (403 otherwise)",
    ),
    def(
        "gateway.max_connections",
        &["CAIRN_GATEWAY_MAX_CONNECTIONS"],
        K::UInt,
        D::UInt(256),
        "open connections served at once; past it a request gets 503 (health checks excepted)",
    ),
    def(
        "gateway.header_timeout_secs",
        &["CAIRN_GATEWAY_HEADER_TIMEOUT_SECS"],
        K::UInt,
        D::UInt(10),
        "time a client has to send a request's headers before its connection is closed",
    ),
    def(
        "gateway.idle_timeout_secs",
        &["CAIRN_GATEWAY_IDLE_TIMEOUT_SECS"],
        K::UInt,
        D::UInt(60),
        "a kept-alive connection with no request for this long is closed",
    ),
    def(
        "gateway.token_ttl_secs",
        &["CAIRN_GATEWAY_TOKEN_TTL_SECS"],
        K::UInt,
        D::UInt(2_592_000),
        "lifetime of a token obtained by pairing (0: never expires)",
    ),
    def(
        "daemon.restart_max_backoff_secs",
        &["CAIRN_DAEMON_RESTART_MAX_BACKOFF_SECS"],
        K::UInt,
        D::UInt(300),
        "longest wait before a failed daemon component is restarted (from 1 s, doubling)",
    ),
    def(
        "daemon.healthy_after_secs",
        &["CAIRN_DAEMON_HEALTHY_AFTER_SECS"],
        K::UInt,
        D::UInt(60),
        "a component running this long without failing restarts its backoff from 1 s",
    ),
    def(
        "daemon.shutdown_deadline_secs",
        &["CAIRN_DAEMON_SHUTDOWN_DEADLINE_SECS"],
        K::UInt,
        D::UInt(30),
        "longest wait for the daemon's components to stop on SIGINT/SIGTERM",
    ),
    def(
        "heartbeat.enabled",
        &["CAIRN_HEARTBEAT_ENABLED", "HEARTBEAT_ENABLED"],
        K::Bool,
        D::Bool(true),
        "run the periodic HEARTBEAT.md check",
    ),
    def(
        "heartbeat.interval_secs",
        &["CAIRN_HEARTBEAT_INTERVAL_SECS", "HEARTBEAT_INTERVAL_SECS"],
        K::UInt,
        D::UInt(1800),
        "seconds between heartbeats",
    ),
    def(
        "heartbeat.notify_channel",
        &["CAIRN_HEARTBEAT_NOTIFY_CHANNEL", "HEARTBEAT_NOTIFY_CHANNEL"],
        K::Text,
        D::Unset,
        "channel for heartbeat alerts (notify.default_channel when unset)",
    ),
    def(
        "heartbeat.notify_user",
        &["CAIRN_HEARTBEAT_NOTIFY_USER", "HEARTBEAT_NOTIFY_USER"],
        K::Text,
        D::Unset,
        "user told of heartbeat alerts (user.id when unset)",
    ),
    def(
        "heartbeat.active_hours",
        &["CAIRN_HEARTBEAT_ACTIVE_HOURS", "HEARTBEAT_ACTIVE_HOURS"],
        K::Text,
        D::Unset,
        "HH:MM-HH:MM in the user's zone when heartbeats run (always when unset)",
    ),
    def(
        "heartbeat.max_failures",
        &["CAIRN_HEARTBEAT_MAX_FAILURES", "HEARTBEAT_MAX_FAILURES"],
        K::UInt,
        D::UInt(3),
        "failed beats in a row before the heartbeat backs off (doubling its interval)",
    ),
    def(
        "llm.provider",
        &["CAIRN_LLM_PROVIDER"],
        K::Text,
        D::Unset,
        "openai (any OpenAI-compatible server) or anthropic",
    ),
    def(
        "llm.base_url",
        &["CAIRN_LLM_BASE_URL"],
        K::Text,
        D::Unset,
        "API base URL (default: the provider's own)",
    ),
    secret(
        "llm.api_key",
        &["CAIRN_LLM_API_KEY"],
        "API key for the configured provider",
    ),
    secret(
        "llm.openai_api_key",
        &["OPENAI_API_KEY"],
        "used when provider is openai and llm.api_key is unset",
    ),
    secret(
        "llm.anthropic_api_key",
        &["ANTHROPIC_API_KEY"],
        "used when provider is anthropic and llm.api_key is unset",
    ),
    def(
        "llm.model",
        &["CAIRN_LLM_MODEL"],
        K::Text,
        D::Unset,
        "model name",
    ),
    def(
        "llm.cheap_model",
        &["CAIRN_LLM_CHEAP_MODEL"],
        K::Text,
        D::Unset,
        "cheaper model for light work (default: llm.model)",
    ),
    def(
        "llm.timeout_secs",
        &["CAIRN_LLM_TIMEOUT_SECS"],
        K::UInt,
        D::UInt(120),
        "seconds before one LLM request times out",
    ),
    def(
        "llm.max_retries",
        &["CAIRN_LLM_MAX_RETRIES"],
        K::UInt,
        D::UInt(3),
        "retries of rate-limited or failed requests",
    ),
    def(
        "llm.vision",
        &["CAIRN_LLM_VISION"],
        K::Bool,
        D::Bool(true),
        "the model accepts images (false: messages with images are refused)",
    ),
    def(
        "llm.context_limit",
        &["CAIRN_LLM_CONTEXT_LIMIT"],
        K::UInt,
        D::UInt(100_000),
        "context window in tokens",
    ),
    def(
        "cost.daily_budget_cents",
        &["CAIRN_DAILY_BUDGET_CENTS"],
        K::UInt,
        D::Unset,
        "LLM spend allowed per UTC day, in cents",
    ),
    def(
        "cost.hourly_action_limit",
        &["CAIRN_HOURLY_ACTION_LIMIT"],
        K::UInt,
        D::Unset,
        "LLM calls allowed per sliding hour",
    ),
    // Self-repair (issue 13).
    def(
        "repair.stuck_after_secs",
        &["CAIRN_REPAIR_STUCK_AFTER_SECS"],
        K::UInt,
        D::UInt(600),
        "a running job without progress for this long is restarted",
    ),
    def(
        "repair.max_attempts",
        &["CAIRN_REPAIR_MAX_ATTEMPTS"],
        K::UInt,
        D::UInt(3),
        "restarts of a stuck job before it needs a person",
    ),
    def(
        "repair.tool_failure_limit",
        &["CAIRN_REPAIR_TOOL_FAILURE_LIMIT"],
        K::UInt,
        D::UInt(5),
        "consecutive failures that disable a tool (0: never)",
    ),
    def(
        "memory.embeddings_provider",
        &["CAIRN_MEMORY_EMBEDDINGS_PROVIDER"],
        K::Text,
        D::Unset,
        "openai, ollama or openai-compatible (unset: keyword-only recall)",
    ),
    def(
        "memory.embeddings_base_url",
        &["CAIRN_MEMORY_EMBEDDINGS_BASE_URL"],
        K::Text,
        D::Unset,
        "embeddings API base URL up to /v1 (default: the provider's own)",
    ),
    def(
        "memory.embeddings_model",
        &["CAIRN_MEMORY_EMBEDDINGS_MODEL"],
        K::Text,
        D::Unset,
        "embedding model (default: text-embedding-3-small, nomic-embed-text for ollama)",
    ),
    def(
        "memory.embeddings_dimensions",
        &["CAIRN_MEMORY_EMBEDDINGS_DIMENSIONS"],
        K::UInt,
        D::Unset,
        "vector size to ask for (default: the model's own)",
    ),
    secret(
        "memory.embeddings_api_key",
        &["CAIRN_MEMORY_EMBEDDINGS_API_KEY"],
        "API key for the embeddings provider (default: llm.openai_api_key for openai)",
    ),
    def(
        "memory.vector_weight_pct",
        &["CAIRN_MEMORY_VECTOR_WEIGHT_PCT"],
        K::UInt,
        D::UInt(70),
        "weight of vector similarity in hybrid recall, in percent",
    ),
    def(
        "memory.keyword_weight_pct",
        &["CAIRN_MEMORY_KEYWORD_WEIGHT_PCT"],
        K::UInt,
        D::UInt(30),
        "weight of keyword match in hybrid recall, in percent",
    ),
    def(
        "memory.min_relevance_pct",
        &["CAIRN_MEMORY_MIN_RELEVANCE_PCT"],
        K::UInt,
        D::UInt(40),
        "hits scoring below this (percent) are not recalled",
    ),
    def(
        "memory.top_k",
        &["CAIRN_MEMORY_TOP_K"],
        K::UInt,
        D::UInt(5),
        "memories recalled before each turn",
    ),
    def(
        "memory.context_chars",
        &["CAIRN_MEMORY_CONTEXT_CHARS"],
        K::UInt,
        D::UInt(2000),
        "size bound of the [Memory context] section (0 turns it off)",
    ),
    def(
        "memory.auto_save",
        &["CAIRN_MEMORY_AUTO_SAVE"],
        K::Bool,
        D::Bool(false),
        "save each of the person's messages as a conversation memory",
    ),
    def(
        "memory.hygiene_enabled",
        &["CAIRN_MEMORY_HYGIENE_ENABLED"],
        K::Bool,
        D::Bool(true),
        "archive and purge old memories",
    ),
    def(
        "memory.archive_after_days",
        &["CAIRN_MEMORY_ARCHIVE_AFTER_DAYS"],
        K::UInt,
        D::UInt(7),
        "daily memories are archived after this many days",
    ),
    def(
        "memory.purge_after_days",
        &["CAIRN_MEMORY_PURGE_AFTER_DAYS"],
        K::UInt,
        D::UInt(30),
        "archived memories are deleted after this many days",
    ),
    def(
        "memory.conversation_retention_days",
        &["CAIRN_MEMORY_CONVERSATION_RETENTION_DAYS"],
        K::UInt,
        D::UInt(30),
        "conversation memories are deleted after this many days",
    ),
    def(
        "memory.snapshot_on_hygiene",
        &["CAIRN_MEMORY_SNAPSHOT_ON_HYGIENE"],
        K::Bool,
        D::Bool(true),
        "hygiene writes core memories to MEMORY_SNAPSHOT.md in the workspace",
    ),
    def(
        "memory.auto_hydrate",
        &["CAIRN_MEMORY_AUTO_HYDRATE"],
        K::Bool,
        D::Bool(true),
        "load MEMORY_SNAPSHOT.md at start-up when the memory store is empty",
    ),
    def(
        "skills.paths",
        &["CAIRN_SKILLS_PATHS"],
        K::List,
        D::List(&[]),
        "more directories of skills (folders with a SKILL.md) besides $CAIRN_HOME/workspace/skills, relative to $CAIRN_HOME unless absolute; file_read may read them",
    ),
    def(
        "secrets.keyring",
        &["CAIRN_SECRETS_KEYRING"],
        K::Bool,
        D::Bool(false),
        "keep the vault's key in the OS keyring instead of install.key (see docs/secrets.md)",
    ),
];

/// Tables whose keys are free-form (model names, tool globs). They are passed
/// through whole to the crate that owns their shape, with the line they start on.
pub static SECTIONS: &[&str] = &[
    "llm.prices",
    "llm.fallbacks",
    "tools",
    "channels",
    "hooks",
    "mcp.servers",
    "routing",
    "agents",
];

/// Settings cairn no longer has, with what to do instead: a file that
/// still sets one is refused with that advice (not "unknown key").
pub const REMOVED: &[(&str, &str)] = &[(
    "routines.event_cache_refresh_secs",
    "routine changes reach the engine at once through the store's change signal; delete the line",
)];

/// Looks up a setting by its dotted key.
pub fn find(key: &str) -> Option<&'static SettingDef> {
    SETTINGS.iter().find(|d| d.key == key)
}

/// The known key closest to `key`, for "did you mean" hints.
pub fn closest(key: &str) -> Option<&'static str> {
    crate::text::closest(
        key,
        SETTINGS
            .iter()
            .map(|d| d.key)
            .chain(SECTIONS.iter().copied()),
    )
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
