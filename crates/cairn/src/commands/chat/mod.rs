//! `cairn chat`: an interactive conversation with the agent, or one question with `-m`.
//! `--agent ID` talks to another agent (`[[agents]]`), in a conversation of
//! its own (channel `terminal:<id>`).

mod terminal;

use std::process::ExitCode;

use anyhow::Context;
use cairn_agent::agents::MAIN;
use cairn_agent::chat::{ChatService, Inbound, Reply};
use cairn_core::config::Config;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::cli::ChatArgs;
use crate::exit::BadInput;
use crate::{settings, wiring};
use terminal::{ApprovalMode, TerminalSink};
pub(crate) use terminal::{Line, LineReader};

/// The channel name of the terminal (main's; another agent's is
/// `terminal:<id>`).
const CHANNEL: &str = "terminal";

/// This terminal's conversation: the person, the agent's chat service and
/// the channel, so each agent's sessions are its own.
struct Terminal<'a> {
    config: &'a Config,
    service: &'a ChatService,
    channel: String,
}

impl Terminal<'_> {
    fn user(&self) -> &str {
        &self.config.user.id
    }

    fn inbound(&self, text: &str) -> Inbound {
        Inbound {
            user_id: self.user().to_string(),
            channel: self.channel.clone(),
            thread: None,
            text: text.to_string(),
            images: Vec::new(),
        }
    }
}

/// How often the REPL looks for finished background tasks while it waits
/// for a line (one cheap indexed read).
const NOTICE_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// How long a chat waits for MCP servers being started before its first turn.
const MCP_SETTLE: std::time::Duration = std::time::Duration::from_secs(15);

/// Runs the chat REPL, or answers one message with `-m`.
pub fn run(args: &ChatArgs, json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    // An agent not configured stops here, naming the configured ones.
    let agent = match args.agent.as_deref() {
        Some(id) => wiring::agent_named(&config, id)?.id,
        None => MAIN.to_string(),
    };
    // A chat is the LLM: without its settings (an unset key variable, say)
    // it stops here, naming them, before anything is opened.
    wiring::llm_settings(&config)?;
    // The shell's and sandboxed MCP servers' host, once for this process.
    wiring::install_host_sandbox(&config)?;
    super::runtime()?.block_on(async {
        let (store, _) = cairn_store::Store::open(config.database_url.expose_secret()).await?;
        let rt = wiring::runtime(&config, store.clone()).await?;
        // The first request names the MCP servers' tools: wait for those starting.
        rt.mcp.get().settle(MCP_SETTLE).await;
        let (service, channel) = if agent == MAIN {
            (wiring::chat_service(&config, &rt), CHANNEL.to_string())
        } else {
            let main = wiring::chat_service_unpruned(&config, &rt);
            let chats = wiring::chats(&config, &rt, main)?;
            let service = chats
                .get(&agent)
                .with_context(|| format!("agent {agent} has no chat service"))?;
            // As `chat_service` does for main's.
            drop(service.spawn_pruner(wiring::PRUNE_EVERY));
            (service, format!("{CHANNEL}:{agent}"))
        };
        let terminal = Terminal {
            config: &config,
            service: &service,
            channel,
        };
        // Chat messages fire event routines; their runs happen in this process.
        let routine_notifier = wiring::notifier(&config, &store)?;
        let engine =
            wiring::routine_engine(&config, &store, Some(routine_notifier.clone()), Some(&rt))?;
        // What tools and routines record for delivery is delivered before
        // the chat exits, or handed to a running daemon (and said so).
        let notifiers = [rt.notifier.clone(), routine_notifier];
        for n in &notifiers {
            n.keep_recorded();
        }
        let reader = LineReader::new(Some(config.home().join("history.txt")));
        if args.new {
            service
                .handle(
                    terminal.inbound("/new"),
                    &TerminalSink::new(reader.clone(), ApprovalMode::Decline, false, false),
                )
                .await;
        }
        if let Some(model) = &args.model {
            let quiet = TerminalSink::new(reader.clone(), ApprovalMode::Decline, false, false);
            service
                .handle(terminal.inbound(&format!("/model {model}")), &quiet)
                .await;
        }
        let result = match &args.message {
            Some(message) => one_shot(&terminal, reader, args, message, json).await,
            None if json => Err(BadInput(
                "--json needs -m: the interactive chat has no JSON form".into(),
            )
            .into()),
            None => repl(&terminal, &store, reader, args, &notifiers).await,
        };
        finish_jobs(&rt.jobs).await;
        rt.background.shutdown().await;
        engine.shutdown().await;
        rt.mcp.get().shutdown().await;
        if let Some(browsers) = &rt.browsers {
            browsers.shutdown().await;
        }
        // On stderr: `-m` prints only the answer on stdout.
        for line in settle(&config, &notifiers).await {
            eprintln!("{line}");
        }
        result
    })
}

/// Prints the inbox notifications not seen yet (then marks them read), so
/// what cairn could not deliver elsewhere reaches the person here.
async fn show_unread(store: &cairn_store::Store, user: &str) {
    let unread = match store.inbox(user, false, 20).await {
        Ok(unread) => unread,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the inbox");
            return;
        }
    };
    if unread.is_empty() {
        return;
    }
    println!("[inbox] {} unread notification(s):", unread.len());
    for n in &unread {
        let why = n
            .last_error
            .as_deref()
            .map(|e| format!(" (not delivered to {}: {e})", n.channel))
            .unwrap_or_default();
        println!("  • {}: {}{why}", n.headline(), n.body);
        if let Err(e) = store.mark_read(user, Some(n.id), chrono::Utc::now()).await {
            tracing::warn!(error = %e, "could not mark a notification read");
        }
    }
}

/// Handles a message; Ctrl-C while it runs interrupts the turn.
async fn handle(terminal: &Terminal<'_>, sink: &TerminalSink, text: &str) -> Reply {
    send(terminal, sink, terminal.inbound(text)).await
}

/// Reads `--image` files (bounded before reading) and stores them with the message.
async fn with_images(
    service: &ChatService,
    mut message: Inbound,
    files: &[std::path::PathBuf],
) -> anyhow::Result<Inbound> {
    for file in files {
        let size = tokio::fs::metadata(file)
            .await
            .map_err(|e| BadInput(format!("--image {}: {e}", file.display())))?
            .len();
        if size > cairn_core::image::MAX_IMAGE_BYTES as u64 {
            return Err(BadInput(format!(
                "--image {}: {size} bytes; at most {} are accepted",
                file.display(),
                cairn_core::image::MAX_IMAGE_BYTES
            ))
            .into());
        }
        let bytes = tokio::fs::read(file)
            .await
            .map_err(|e| BadInput(format!("--image {}: {e}", file.display())))?;
        service
            .attach_image(&mut message, bytes)
            .await
            .map_err(|e| BadInput(format!("--image {}: {e}", file.display())))?;
    }
    Ok(message)
}

/// Handles an inbound message; Ctrl-C while it runs interrupts the turn.
async fn send(terminal: &Terminal<'_>, sink: &TerminalSink, message: Inbound) -> Reply {
    let work = terminal.service.handle(message, sink);
    tokio::pin!(work);
    loop {
        tokio::select! {
            reply = &mut work => return reply,
            signal = tokio::signal::ctrl_c() => {
                if signal.is_ok() {
                    terminal.service.interrupt(terminal.user(), &terminal.channel);
                }
            }
        }
    }
}

async fn one_shot(
    terminal: &Terminal<'_>,
    reader: LineReader,
    args: &ChatArgs,
    message: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let approvals = if args.yes {
        ApprovalMode::Yes
    } else if reader.interactive() {
        ApprovalMode::Ask
    } else {
        ApprovalMode::Decline
    };
    let sink = TerminalSink::new(reader, approvals, false, false);
    let message = with_images(terminal.service, terminal.inbound(message), &args.image).await?;
    match send(terminal, &sink, message).await {
        Reply::Answer(report) if json => {
            let out = json!({
                "response": report.response,
                "tool_calls": report.tool_calls,
                "usage": report.usage,
                "thread_id": report.thread_id,
                "model": report.model,
                "route": report.route,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(ExitCode::SUCCESS)
        }
        Reply::Answer(report) => {
            println!("{}", report.response);
            Ok(ExitCode::SUCCESS)
        }
        Reply::Notice { text } => {
            println!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Reply::Quit => Ok(ExitCode::SUCCESS),
        Reply::Error { text } => Err(anyhow::anyhow!(text)),
        Reply::Dropped { reason } => Err(anyhow::anyhow!("the message was dropped: {reason}")),
    }
}

/// Settles what the notifiers recorded (see [`super::delivery::settle`]): one line each.
async fn settle(config: &Config, notifiers: &[cairn_automation::notify::Notifier]) -> Vec<String> {
    let mut lines = Vec::new();
    for n in notifiers {
        lines.extend(
            super::delivery::settle(n, config)
                .await
                .into_iter()
                .map(|s| s.line),
        );
    }
    lines
}

async fn repl(
    terminal: &Terminal<'_>,
    store: &cairn_store::Store,
    reader: LineReader,
    args: &ChatArgs,
    notifiers: &[cairn_automation::notify::Notifier],
) -> anyhow::Result<ExitCode> {
    let (config, service, channel) = (terminal.config, terminal.service, &terminal.channel);
    let interactive = reader.interactive();
    let approvals = if args.yes {
        ApprovalMode::Yes
    } else {
        ApprovalMode::Ask
    };
    let sink = TerminalSink::new(reader.clone(), approvals, true, true);
    if interactive {
        println!(
            "cairn {} — chatting as {} with {}. /help for commands, /quit to leave, Ctrl-C stops a turn.",
            env!("CARGO_PKG_VERSION"),
            service.settings().agent_name,
            service.agent().model()
        );
    }
    if let Some(interrupted) = service.interrupted_turn(&config.user.id, channel).await {
        println!(
            "The last turn of this thread was interrupted (\"{interrupted}\"). /resume continues it, /undo drops it."
        );
    }
    // Turns started by a finished background task: no one is at the prompt
    // to answer an approval (the line reader is busy waiting), so they decline.
    let notice_sink = TerminalSink::new(reader.clone(), ApprovalMode::Decline, true, true);
    loop {
        show_unread(store, &config.user.id).await;
        // The read is kept across polls: its blocking thread keeps waiting
        // for the line while finished tasks get turns of their own.
        let read = reader.read("you> ");
        tokio::pin!(read);
        let line = loop {
            tokio::select! {
                line = &mut read => break line,
                () = tokio::time::sleep(NOTICE_POLL) => {
                    if service.notices_waiting(&config.user.id, channel).await
                        && let Some(reply) = service.deliver_notices(&config.user.id, channel, &notice_sink).await
                    {
                        show(reply, &notice_sink);
                    }
                }
            }
        };
        let text = match line {
            Line::Text(text) => text,
            Line::Cancelled => continue,
            Line::End => {
                await_background(terminal, &notice_sink).await;
                break;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let quit = show(handle(terminal, &sink, &text).await, &sink);
        for line in settle(config, notifiers).await {
            println!("{line}");
        }
        if quit {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a reply; `true` when the chat should end.
fn show(reply: Reply, sink: &TerminalSink) -> bool {
    match reply {
        Reply::Answer(report) => {
            if sink.take_streamed() {
                println!();
            } else {
                println!("{}", report.response);
            }
        }
        Reply::Notice { text } => {
            sink.take_streamed();
            println!("{text}");
        }
        Reply::Error { text } => {
            if sink.take_streamed() {
                println!();
            }
            eprintln!("error: {text}");
        }
        Reply::Dropped { reason } => eprintln!("(message dropped: {reason})"),
        Reply::Quit => return true,
    }
    false
}

/// At the end of input, waits for this conversation's background tasks and
/// lets the agent react to each, so piped input does not lose them; Ctrl-C
/// stops waiting (they are then reported as interrupted next time).
async fn await_background(terminal: &Terminal<'_>, sink: &TerminalSink) {
    let (user, service, channel) = (terminal.user(), terminal.service, &terminal.channel);
    let wait = async {
        loop {
            if let Some(reply) = service.deliver_notices(user, channel, sink).await {
                show(reply, sink);
                continue;
            }
            if service.background_running(user, channel).await == 0
                && !service.notices_waiting(user, channel).await
            {
                return;
            }
            tokio::time::sleep(NOTICE_POLL).await;
        }
    };
    tokio::select! {
        () = wait => {}
        _ = tokio::signal::ctrl_c() => eprintln!("stopped waiting for background tasks"),
    }
}

/// Lets jobs started from this chat finish before the process ends (they
/// would otherwise fail as interrupted); Ctrl-C stops them instead.
async fn finish_jobs(jobs: &cairn_agent::JobScheduler) {
    let active: Vec<_> = jobs.running().into_iter().chain(jobs.queued()).collect();
    if !active.is_empty() {
        eprintln!(
            "waiting for {} background job(s) to finish; Ctrl-C stops them",
            active.len()
        );
        let all = futures::future::join_all(active.into_iter().map(|id| jobs.wait(id)));
        tokio::select! {
            _ = all => {}
            _ = tokio::signal::ctrl_c() => eprintln!("stopping the jobs"),
        }
    }
    jobs.shutdown().await;
}
