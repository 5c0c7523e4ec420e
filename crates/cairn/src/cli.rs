//! The command-line grammar (clap derive). Each subcommand's behaviour lives in `commands`.

use clap::{Args, Parser, Subcommand};

/// cairn: a self-hosted, always-on personal AI agent runtime.
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, long_about = None)]
pub struct Cli {
    /// Print machine-readable JSON instead of text (every list/show command honours it).
    #[arg(long, global = true)]
    pub json: bool,

    /// How logs are written to stderr: `human` (default) or `json` (one object a line).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the version of cairn.
    Version,
    /// Show the effective configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check that cairn can run here: config, home, database, time zone,
    /// and the LLM, contacted (`--offline`: not).
    Doctor(DoctorArgs),
    /// Chat with the agent (interactive), or ask one question with -m.
    Chat(ChatArgs),
    /// Inspect time expressions.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Manage background jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Today's LLM spend and limits.
    Cost,
    /// Notifications: send a test, list them, show one with its attempts.
    #[command(subcommand)]
    Notify(NotifyCommand),
    /// What could not be delivered elsewhere, and what went to the inbox channel.
    Inbox(InboxArgs),
    /// Routines: apply files, validate, create, list, show, enable, disable, pause, resume, fire, backfill, next, runs, delete.
    #[command(subcommand)]
    Routine(RoutineCommand),
    /// Run cairn's always-on half in the foreground: the routine engine,
    /// notification delivery and the gateway, until SIGINT or SIGTERM.
    Daemon(DaemonArgs),
    /// Print a fresh one-time pairing code for the gateway's POST /pair
    /// (valid 15 minutes; any daemon on this database accepts it).
    Pair,
    /// API tokens for the gateway: create, list, revoke.
    #[command(subcommand)]
    Token(TokenCommand),
    /// The vault: secrets config.toml refers to as ${secret:NAME} (set, list, rm, rotate-key), and the leaks found on their way out.
    #[command(subcommand)]
    Secret(crate::commands::secret::SecretCommand),
    /// Telegram bots that receive messages: allow a user, list the allowed.
    #[command(subcommand)]
    Telegram(TelegramCommand),
    /// Every channel (chat apps and notification outputs): list them with
    /// their health, send a test message, allow a person to talk.
    #[command(subcommand)]
    Channel(ChannelCommand),
    /// Whether the daemon runs, and its components' health (from
    /// daemon_state.json, so it answers even when the gateway does not).
    Status,
    /// Run the daemon as a systemd user service: install, uninstall, status.
    #[command(subcommand)]
    Service(ServiceCommand),
    /// The agent's tools and their health: list, enable a disabled one.
    #[command(subcommand)]
    Tool(ToolCommand),
    /// Memory: search, add, forget, list, stats, export, reindex, hygiene.
    Memory(MemoryArgs),
    /// Skills (folders with a SKILL.md): list them, show one.
    Skill(SkillArgs),
    /// First-run set-up: the LLM, time zone and a notification channel,
    /// tested, written to config.toml (0600); then `doctor`.
    Init(crate::commands::init::InitArgs),
    /// Print a shell completion script.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write a page per command into --dir.
    Man {
        /// Write cairn.1 and one page per subcommand here instead.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
    /// Write one archive: a snapshot of the database (taken online), the
    /// workspace and config.toml.
    Backup(crate::commands::backup::BackupArgs),
    /// Restore a `cairn backup` archive into an empty home.
    Restore(crate::commands::backup::RestoreArgs),
    /// The database: copy every table to another one.
    #[command(subcommand)]
    Db(crate::commands::db::DbCommand),
    /// Write the routines as YAML files and the memories as JSON lines into a directory.
    Export(crate::commands::export::ExportArgs),
    /// Read what `cairn export` wrote: apply the routines, add the memories.
    Import(crate::commands::export::ImportArgs),
    /// MCP: the configured servers (list, tools, test), or cairn as a server (serve).
    #[command(subcommand)]
    Mcp(McpCommand),
}

/// `cairn doctor` options.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Check without the network: the LLM's settings are checked but the
    /// LLM is not contacted.
    #[arg(long)]
    pub offline: bool,
}

/// `cairn mcp …`
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every configured server, connected to now: state, tool count, last error.
    List,
    /// A server's tools (cairn's names, risk, what the policy does), resources and prompts.
    Tools {
        /// The server's name, as configured.
        server: String,
    },
    /// Connect to a server, list what it offers, and print the timings.
    Test {
        /// The server's name, as configured.
        server: String,
    },
    /// Serve cairn's routines, notifications, memory and inbox over MCP on
    /// standard input and output (for other agents and editors).
    Serve,
}

/// The format of the logs on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    Human,
    /// One JSON object per line.
    Json,
}

/// `cairn tool …`
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Every tool: enabled or disabled, consecutive failures, last error.
    List,
    /// Re-enable a tool self-repair disabled (and clear its failures).
    Enable {
        /// The tool's name, as `cairn tool list` shows it.
        name: String,
    },
}

/// `cairn skill [--agent ID] …`
#[derive(Debug, Args)]
pub struct SkillArgs {
    /// The agent whose skills (an `[[agents]]` id: its workspace's
    /// skills/); main's without it.
    #[arg(long, global = true)]
    pub agent: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: SkillCommand,
}

/// `cairn skill …`
#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Every skill found: name, description, file; and the files skipped.
    List,
    /// One skill's SKILL.md, whole.
    Show {
        /// The skill's name, as `cairn skill list` shows it.
        name: String,
    },
}

/// `cairn service …`
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write ~/.config/systemd/user/cairn.service running `cairn daemon` with this CAIRN_HOME.
    Install {
        /// Replace an existing unit.
        #[arg(long)]
        force: bool,
    },
    /// Remove the unit file.
    Uninstall,
    /// Whether the unit is installed and (with systemctl) active.
    Status,
}

/// `cairn memory [--agent ID] …`
#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// The agent whose memory (an `[[agents]]` id: its own documents and
    /// those shared by any agent); main's without it.
    #[arg(long, global = true)]
    pub agent: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: MemoryCommand,
}

/// `cairn memory …`
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Recall memories for QUERY, with the mode used (hybrid or keyword-only) and scores.
    Search {
        /// What to look for.
        query: String,
        /// Most results.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Remember TEXT.
    Add {
        /// The memory's text.
        text: String,
        /// core, daily, conversation or custom.
        #[arg(long, default_value = "core")]
        category: String,
        /// A stable name; adding again under the same key replaces the text.
        #[arg(long)]
        key: Option<String>,
    },
    /// Forget a memory by id, or by --key.
    Forget {
        /// The memory's id, as `cairn memory list` shows it.
        id: Option<String>,
        /// The memory's key.
        #[arg(long, conflicts_with = "id")]
        key: Option<String>,
    },
    /// Memories, most recently updated first.
    List {
        /// Only this category: core, daily, conversation, custom or archived.
        #[arg(long)]
        category: Option<String>,
        /// Most memories shown.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Counts by category, embedded documents and the recall mode.
    Stats,
    /// Write the core memories to MEMORY_SNAPSHOT.md in the workspace.
    Export,
    /// Recompute every embedding (after changing the embedding model).
    Reindex,
    /// Archive and purge old memories now, as the daemon does daily.
    Hygiene,
}

/// `cairn telegram …`
#[derive(Debug, Subcommand)]
pub enum TelegramCommand {
    /// Let a Telegram user talk to the agent (their id is in the reply they got).
    Allow {
        /// The Telegram user id.
        user_id: String,
        /// The channel's name (`[channels.NAME]`); needed when several
        /// Telegram channels receive messages.
        #[arg(long)]
        channel: Option<String>,
    },
    /// The users allowed by `allow` or `/pair` (besides `allowed_users`).
    List,
}

/// `cairn channel …`
#[derive(Debug, Subcommand)]
pub enum ChannelCommand {
    /// Every configured channel, inbound or not, with its health.
    List,
    /// Check a channel's credentials and send it a test message, printing
    /// how long each step took.
    Test {
        /// The channel's name (`[channels.NAME]`).
        name: String,
        /// The chat to send to in a chat app (a Slack or Discord channel or
        /// user id, a Telegram chat id, a WhatsApp number); by default the
        /// channel's notification target, else its first allowed user.
        #[arg(long)]
        to: Option<String>,
        /// The message.
        #[arg(long, default_value = "cairn test message: this channel works")]
        message: String,
    },
    /// Let a person talk to the agent through a channel that receives
    /// messages (their id is in the reply they got).
    Allow {
        /// The channel's name (`[channels.NAME]`).
        name: String,
        /// Their user id on the channel's app.
        user_id: String,
    },
}

/// `cairn token …`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token and print it once, alone on stdout.
    Create {
        /// Its name (unique among live tokens; `cairn token revoke NAME`).
        #[arg(long)]
        name: String,
        /// How long it works (e.g. 30d, 12h); without it, until revoked.
        #[arg(long)]
        ttl: Option<String>,
    },
    /// Every token: name, origin, created, expires, last used, revoked.
    List,
    /// Stop a token from working.
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// `cairn daemon` options.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The gateway's port (overrides gateway.port and CAIRN_GATEWAY_PORT).
    #[arg(long)]
    pub port: Option<u16>,
}

/// `cairn routine …`
#[derive(Debug, Subcommand)]
pub enum RoutineCommand {
    /// Create or update routines from a file or every *.yaml|*.yml|*.json in a directory.
    Apply(RoutineFileArgs),
    /// Check routine files without writing anything.
    Validate(RoutineFileArgs),
    /// Make a routine without writing YAML: a schedule and a message to
    /// send or a prompt to answer; prints it as `show` does.
    Create(RoutineCreateArgs),
    /// Every routine: name, enabled, trigger, next fire (local time), last status.
    List,
    /// One routine in full, with its next 5 fire times.
    Show {
        /// The routine's name.
        name: String,
    },
    /// Let a routine fire again.
    Enable {
        /// The routine's name.
        name: String,
    },
    /// Stop a routine from firing (it stays stored).
    Disable {
        /// The routine's name.
        name: String,
    },
    /// Pause a routine: it keeps its schedule and history and fires nothing
    /// until resumed (the slots it misses are then caught up by its catch_up).
    Pause {
        /// The routine's name.
        name: String,
        /// Why, for whoever looks at it later.
        #[arg(long)]
        note: Option<String>,
    },
    /// Resume a paused routine; says what becomes of the slots it missed.
    Resume {
        /// The routine's name.
        name: String,
    },
    /// Run a cron routine's past slots in a range, in order, as trigger `backfill`.
    Backfill(RoutineBackfillArgs),
    /// A routine's next fire times (jitter applied).
    Next {
        /// The routine's name.
        name: String,
        /// How many.
        #[arg(long, default_value_t = 5)]
        count: usize,
    },
    /// Fire a routine now, by hand; waits for the result unless --no-wait.
    Fire(RoutineFireArgs),
    /// A routine's latest runs, newest first.
    Runs {
        /// The routine's name.
        name: String,
        /// How many runs to show.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Delete a routine and its runs.
    Delete {
        /// The routine's name.
        name: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
}

/// Arguments of `cairn routine create`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["message", "prompt"])))]
pub struct RoutineCreateArgs {
    /// The routine's name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// When: `every weekday at 9am`, `0 9 * * 1-5`, `every 2h`, or once,
    /// `tomorrow at 9am` (in your time zone).
    #[arg(long)]
    pub schedule: String,
    /// Send this text as a notification (no LLM).
    #[arg(long)]
    pub message: Option<String>,
    /// Ask the agent this, and tell you what it found.
    #[arg(long)]
    pub prompt: Option<String>,
    /// The channel to tell (`[channels.NAME]`); notify.default_channel without it.
    #[arg(long)]
    pub channel: Option<String>,
}

/// Arguments of `cairn routine fire`.
#[derive(Debug, Args)]
pub struct RoutineFireArgs {
    /// The routine's name.
    pub name: String,
    /// JSON handed to the action as the trigger's payload.
    #[arg(long)]
    pub payload: Option<String>,
    /// Print the run id and return; the run goes on in the background.
    #[arg(long)]
    pub no_wait: bool,
    /// The id to give the run (used by --no-wait's background process).
    #[arg(long, hide = true)]
    pub run_id: Option<uuid::Uuid>,
}

/// Arguments of `cairn routine backfill`.
#[derive(Debug, Args)]
pub struct RoutineBackfillArgs {
    /// The routine's name.
    pub name: String,
    /// From (included): RFC 3339, `YYYY-MM-DDTHH:MM` or `YYYY-MM-DD` (its
    /// start) in your time zone.
    #[arg(long)]
    pub from: String,
    /// To (included, not in the future), written as --from (a date is its end).
    #[arg(long)]
    pub to: String,
    /// What the slots do while a run of the routine goes: skip, buffer_one,
    /// buffer_all (the default: they wait, in order), cancel_other, allow_all.
    #[arg(long)]
    pub overlap: Option<String>,
    /// Run more slots than routines.max_backfill allows without asking.
    #[arg(long)]
    pub yes: bool,
}

/// The file or directory `cairn routine apply|validate` reads.
#[derive(Debug, Args)]
pub struct RoutineFileArgs {
    /// A routine file (YAML or JSON, by extension) or a directory of them.
    #[arg(short = 'f', long = "file")]
    pub path: std::path::PathBuf,
    /// The agent (an id of `[[agents]]`) that runs the routines that name
    /// none; a routine's own `agent:` wins. Default: main.
    #[arg(long)]
    pub agent: Option<String>,
}

/// `cairn notify …`
#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// Send a test notification through a channel now and print the outcome.
    Test {
        /// The channel's name, as in `[channels.NAME]` (or `inbox`).
        channel: String,
        /// The text to send.
        #[arg(long, default_value = "This is a test notification from cairn.")]
        message: String,
    },
    /// Recent notifications, newest first, with their delivery status.
    List(NotifyListArgs),
    /// One notification with every delivery attempt.
    Show {
        /// Its id, or the start of it.
        id: String,
    },
    /// Deliver the notifications that are due now (retries included), then exit.
    Deliver,
}

/// Arguments of `cairn notify list`.
#[derive(Debug, Args)]
pub struct NotifyListArgs {
    /// Only this delivery status: pending, delivered or failed.
    #[arg(long, value_parser = parse_delivery_status)]
    pub status: Option<cairn_core::notification::DeliveryStatus>,
    /// How many to show.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}

fn parse_delivery_status(text: &str) -> Result<cairn_core::notification::DeliveryStatus, String> {
    cairn_core::notification::DeliveryStatus::parse(text)
        .ok_or_else(|| format!("\"{text}\" is not a status; expected pending, delivered or failed"))
}

/// Arguments of `cairn inbox`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InboxArgs {
    /// Also show notifications already read.
    #[arg(long)]
    pub all: bool,
    /// `show`: one in full; `read`: mark notifications read.
    #[command(subcommand)]
    pub command: Option<InboxCommand>,
}

/// `cairn inbox …`
#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// One notification in full: its text, where it came from, whether it
    /// was read, and every delivery attempt.
    Show {
        /// The notification's id as `cairn inbox` lists it (its start will do).
        id: String,
    },
    /// Mark one notification read (by id or its start), or all with --all.
    Read {
        /// The notification's id, or the start of it.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Mark every unread notification read.
        #[arg(long)]
        all: bool,
    },
}

/// Arguments of `cairn chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Ask one question, print the answer and exit.
    #[arg(short, long)]
    pub message: Option<String>,
    /// Approve tool calls the policy would ask about (denials stay denials).
    #[arg(long)]
    pub yes: bool,
    /// Start a new thread instead of continuing the last one.
    #[arg(long)]
    pub new: bool,
    /// Use this model for the session.
    #[arg(long)]
    pub model: Option<String>,
    /// Chat with this agent (an `[[agents]]` id), in a conversation of its
    /// own; main without it.
    #[arg(long)]
    pub agent: Option<String>,
    /// Attach an image to the `-m` message (PNG, JPEG, WebP or GIF, at most
    /// 5 MiB; repeat for several).
    #[arg(long, value_name = "FILE", requires = "message")]
    pub image: Vec<std::path::PathBuf>,
}

/// `cairn config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Every setting's effective value and where it came from (default, file or env).
    Show,
    /// Print the reference of every setting as Markdown (docs/configuration.md).
    Reference,
}

/// `cairn schedule …`
#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Explain a cron, human or one-shot expression and list its next fire times.
    Explain(ExplainArgs),
}

/// Arguments of `cairn schedule explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The expression: `0 9 * * 1-5`, `every weekday at 9am`, `in 20m`, `2026-03-09T09:00:00`…
    pub expr: String,
    /// IANA time zone the expression is read in (default: the configured user time zone).
    #[arg(long)]
    pub tz: Option<String>,
    /// The instant taken as "now", RFC 3339 (default: the current time).
    #[arg(long)]
    pub from: Option<String>,
    /// How many fire times to list.
    #[arg(long, default_value_t = 5)]
    pub count: usize,
}

/// `cairn job …`
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Recent jobs, newest first: id, state, age and title.
    List(JobListArgs),
    /// Everything about one job, with its result or error.
    Show {
        /// The job's id as shown anywhere: whole, its start, or the short form chat prints.
        id: String,
    },
    /// Stop a job: a pending one at once, a running one by asking its process.
    Cancel {
        /// The job's id as shown anywhere: whole, its start, or the short form chat prints.
        id: String,
    },
}

/// Arguments of `cairn job list`.
#[derive(Debug, Args)]
pub struct JobListArgs {
    /// Only jobs in this state: pending, in_progress, completed, failed, stuck or cancelled.
    #[arg(long)]
    pub state: Option<cairn_core::job::JobState>,
    /// How many jobs to show.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}
