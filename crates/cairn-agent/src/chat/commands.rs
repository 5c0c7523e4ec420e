//! Thread controls (`/undo`, `/new`, `/threads`, …) and router commands
//! (`/help`, `/tools`, `/model`, `/models`, …), answered without the LLM
//! (`/models` asks the provider for its list, not the model).

use cairn_core::submission::{self, Command, Submission};
use cairn_llm::LlmError;

use super::{ChatService, Reply};
use crate::context::CompactionStrategy;
use crate::session::{Checkpoint, LiveSession, Thread, manager::age};

impl ChatService {
    /// Answers a control or command submission.
    pub(super) async fn control(
        &self,
        session: &mut LiveSession,
        external: Option<&str>,
        submission: Submission,
    ) -> Reply {
        match submission {
            Submission::Undo => self.step(session, external, Step::Undo).await,
            Submission::Redo => self.step(session, external, Step::Redo).await,
            Submission::Clear => self.clear(session, external).await,
            Submission::NewThread => match self.sessions.new_thread(session).await {
                Ok(id) => Reply::notice(format!(
                    "Started a new thread ({}).",
                    short(&id.to_string())
                )),
                Err(e) => e.into(),
            },
            Submission::SwitchThread { id } => {
                match self.sessions.switch_thread(session, &id).await {
                    Ok(t) => Reply::notice(format!(
                        "Switched to thread {} ({}).",
                        short(&t.id.to_string()),
                        t.title.as_deref().unwrap_or("untitled")
                    )),
                    Err(e) => e.into(),
                }
            }
            Submission::ListThreads => self.list_threads(session).await,
            Submission::Compact => self.compact(session, external).await,
            Submission::Command(command) => self.command(session, external, command).await,
            Submission::UnknownCommand { name, suggestion } => Reply::error(match suggestion {
                Some(s) => {
                    format!("Unknown command /{name}. Did you mean {s}? Type /help for the list.")
                }
                None => format!("Unknown command /{name}. Type /help for the list."),
            }),
            Submission::BadCommand { usage, .. } => Reply::error(format!("Usage: {usage}")),
            // Handled by `handle`; listed so a new submission kind is a compile error here.
            Submission::UserInput { .. }
            | Submission::Resume
            | Submission::Approval { .. }
            | Submission::Interrupt
            | Submission::Quit
            | Submission::Summarize
            | Submission::Suggest => Reply::error("internal: this submission is not a control"),
        }
    }

    async fn command(
        &self,
        session: &mut LiveSession,
        external: Option<&str>,
        command: Command,
    ) -> Reply {
        match command {
            Command::Help { topic } => Reply::notice(submission::help(topic.as_deref())),
            Command::Ping => Reply::notice("pong"),
            Command::Version => Reply::notice(format!("cairn {}", env!("CARGO_PKG_VERSION"))),
            Command::Tools => {
                let mut out = String::from("Tools:\n");
                for tool in self.agent.runner().definitions() {
                    let first = tool.description.lines().next().unwrap_or_default();
                    out.push_str(&format!("  {}: {first}\n", tool.name));
                }
                Reply::notice(out.trim_end().to_string())
            }
            Command::Model { name: None } => {
                Reply::notice(format!("Model: {}", self.model_of(session)))
            }
            Command::Model { name: Some(name) } => {
                if let Some(map) = session.row.metadata.as_object_mut() {
                    map.insert("model".into(), serde_json::Value::String(name.clone()));
                } else {
                    session.row.metadata = serde_json::json!({ "model": name });
                }
                match self.sessions.store().update_session(&session.row).await {
                    Ok(()) => Reply::notice(format!("Model set to {name} for this session.")),
                    Err(e) => Reply::error(e.to_string()),
                }
            }
            Command::Models => self.models(session).await,
            Command::Debug => self.debug(session, external).await,
            Command::CreateJob { description, plan } => {
                self.create_job(session, description, plan).await
            }
            Command::JobStatus { id: None } => {
                let answered = self.last_answer(session, external).await;
                match self.job_status(session, None).await {
                    Reply::Notice { text } => Reply::notice(format!("{answered}\n{text}")),
                    // Without a job scheduler, the route is the status.
                    Reply::Error { .. } => Reply::notice(answered),
                    other => other,
                }
            }
            Command::JobStatus { id } => self.job_status(session, id).await,
            Command::CancelJob { id } => self.cancel_job(session, id).await,
            Command::ListJobs => self.list_jobs(session).await,
        }
    }

    fn model_of(&self, session: &LiveSession) -> String {
        session
            .row
            .metadata
            .get("model")
            .and_then(|m| m.as_str())
            .map_or_else(|| self.agent.model().to_string(), str::to_string)
    }

    /// Which model, by which route, answered the thread's last turn (`/status`).
    async fn last_answer(&self, session: &mut LiveSession, external: Option<&str>) -> String {
        let model = self.model_of(session);
        let Ok(id) = self.sessions.resolve_thread(session, external).await else {
            return format!("Model: {model}");
        };
        let last = session.split(id).and_then(|(_, thread)| {
            thread
                .turns
                .iter()
                .rev()
                .find(|t| t.model.is_some())
                .cloned()
        });
        match last {
            Some(turn) => format!(
                "Last answer: {} ({})",
                turn.model.unwrap_or_default(),
                match &turn.route {
                    Some(hint) => format!("route `{hint}`"),
                    None => "default route".to_string(),
                }
            ),
            None => format!("Model: {model} (no answer in this thread yet)"),
        }
    }

    /// `/models`: the provider's models, sorted, `*` before this session's.
    async fn models(&self, session: &LiveSession) -> Reply {
        let current = self.model_of(session);
        let provider = self.agent.provider();
        let mut models = match provider.list_models().await {
            Ok(models) => models,
            Err(error @ LlmError::Unsupported { .. }) => {
                return Reply::notice(format!("Model: {current} ({error})."));
            }
            Err(error) => {
                return Reply::error(format!(
                    "Could not list the models: {error}. This session's model: {current}."
                ));
            }
        };
        if models.is_empty() {
            return Reply::notice(format!(
                "{} lists no models. This session's model: {current}.",
                provider.name()
            ));
        }
        models.sort_by(|a, b| a.id.cmp(&b.id));
        let mut out = format!(
            "Models of {} (* this session's; /model NAME switches):\n",
            provider.name()
        );
        for model in &models {
            let marker = if model.id == current { "*" } else { " " };
            out.push_str(&format!("{marker} {}", model.id));
            if let Some(name) = model.display_name.as_ref().filter(|n| **n != model.id) {
                out.push_str(&format!("  ({name})"));
            }
            out.push('\n');
        }
        if !models.iter().any(|m| m.id == current) {
            out.push_str(&format!(
                "* {current}  (this session's, not in the provider's list)\n"
            ));
        }
        Reply::notice(out.trim_end().to_string())
    }

    async fn list_threads(&self, session: &LiveSession) -> Reply {
        let threads = match self.sessions.list_threads(session).await {
            Ok(t) => t,
            Err(e) => return e.into(),
        };
        if threads.is_empty() {
            return Reply::notice("No threads yet.");
        }
        let now = self.sessions.clock().now();
        let mut out = String::from("Threads (newest first; /thread <id> switches):\n");
        for t in threads {
            let marker = if session.row.active_thread_id == Some(t.id) {
                "*"
            } else {
                " "
            };
            out.push_str(&format!(
                "{marker} {}  {:<11} {:>8}  {}\n",
                short(&t.id.to_string()),
                t.state,
                age(now, t.updated_at),
                t.title.as_deref().unwrap_or("untitled")
            ));
        }
        Reply::notice(out.trim_end().to_string())
    }

    async fn debug(&self, session: &mut LiveSession, external: Option<&str>) -> Reply {
        let id = match self.sessions.resolve_thread(session, external).await {
            Ok(id) => id,
            Err(e) => return e.into(),
        };
        let model = self.model_of(session);
        let Some((row, thread)) = session.split(id) else {
            return Reply::error("the thread could not be loaded");
        };
        let chars: usize = thread.history().iter().map(|m| m.content.len()).sum();
        Reply::notice(format!(
            "session {} ({} on {})\nthread {} state {}\nturns {}, undo {}, redo {}\nhistory ~{} characters\nmodel {}",
            row.id,
            row.user_id,
            row.channel,
            thread.id,
            thread.state.as_str(),
            thread.turns.len(),
            thread.undo.undo_len(),
            thread.undo.redo_len(),
            chars,
            model
        ))
    }

    async fn step(&self, session: &mut LiveSession, external: Option<&str>, step: Step) -> Reply {
        let id = match self.sessions.resolve_thread(session, external).await {
            Ok(id) => id,
            Err(e) => return e.into(),
        };
        let Some((row, thread)) = session.split(id) else {
            return Reply::error("the thread could not be loaded");
        };
        let current = Checkpoint::new(thread.next_turn_number(), "current", thread.view());
        let target = match step {
            Step::Undo => thread.undo.undo(current),
            Step::Redo => thread.undo.redo(current),
        };
        let Some(target) = target else {
            return Reply::notice(match step {
                Step::Undo => "Nothing to undo.",
                Step::Redo => "Nothing to redo.",
            });
        };
        let before = thread.turns.len();
        thread.turns = match self.sessions.turns_in(thread.id, &target.view).await {
            Ok(turns) => turns,
            Err(e) => return e.into(),
        };
        thread.updated_at = self.sessions.clock().now();
        if let Err(e) = save_all(self, row, thread).await {
            return e;
        }
        Reply::notice(match step {
            Step::Undo => format!(
                "Undone: back to {} turn(s) (was {before}). /redo re-applies.",
                thread.turns.len()
            ),
            Step::Redo => format!("Redone: {} turn(s).", thread.turns.len()),
        })
    }

    /// `/compact`: what the monitor suggests, or at least a summary of all but the last 5 turns.
    async fn compact(&self, session: &mut LiveSession, external: Option<&str>) -> Reply {
        let Some(compactor) = self.compactor.clone() else {
            return Reply::error("Compaction is not available in this session.");
        };
        let id = match self.sessions.resolve_thread(session, external).await {
            Ok(id) => id,
            Err(e) => return e.into(),
        };
        let Some((row, thread)) = session.split(id) else {
            return Reply::error("the thread could not be loaded");
        };
        let monitor = compactor.monitor();
        let breakdown = monitor.measure(&thread.history());
        let strategy = monitor
            .suggest(&breakdown)
            .filter(|s| s.severity() >= CompactionStrategy::Summarize { keep_recent: 5 }.severity())
            .unwrap_or(CompactionStrategy::Summarize { keep_recent: 5 });
        let checkpoint =
            Checkpoint::new(thread.next_turn_number(), "before /compact", thread.view());
        let now = self.sessions.clock().now();
        match compactor.compact(&mut thread.turns, strategy, now).await {
            Ok(result) if result.turns_removed == 0 => Reply::notice(
                "Nothing to compact: the thread has no turns older than the recent ones kept.",
            ),
            Ok(result) => {
                thread.undo.checkpoint(checkpoint.clone());
                if let Err(e) = self.sessions.save_checkpoint(thread, &checkpoint).await {
                    return e.into();
                }
                thread.updated_at = now;
                if let Err(e) = self.sessions.save(row, thread).await {
                    return e.into();
                }
                Reply::notice(format!(
                    "Compacted ({}): {} turn(s) folded away, about {} → {} tokens{}. /undo restores them.",
                    result.strategy.name(),
                    result.turns_removed,
                    result.tokens_before,
                    result.tokens_after,
                    result
                        .fallback
                        .map(|f| format!(" ({f})"))
                        .unwrap_or_default()
                ))
            }
            Err(e) => Reply::error(format!("compaction failed: {e}")),
        }
    }

    async fn clear(&self, session: &mut LiveSession, external: Option<&str>) -> Reply {
        let id = match self.sessions.resolve_thread(session, external).await {
            Ok(id) => id,
            Err(e) => return e.into(),
        };
        let Some((row, thread)) = session.split(id) else {
            return Reply::error("the thread could not be loaded");
        };
        if thread.turns.is_empty() {
            return Reply::notice("The thread is already empty.");
        }
        let checkpoint = Checkpoint::new(thread.next_turn_number(), "before /clear", thread.view());
        thread.undo.checkpoint(checkpoint.clone());
        if let Err(e) = self.sessions.save_checkpoint(thread, &checkpoint).await {
            return e.into();
        }
        thread.turns.clear();
        thread.updated_at = self.sessions.clock().now();
        if let Err(e) = self.sessions.save(row, thread).await {
            return e.into();
        }
        Reply::notice("Cleared this thread. /undo brings it back.")
    }
}

#[derive(Clone, Copy)]
enum Step {
    Undo,
    Redo,
}

async fn save_all(
    service: &ChatService,
    row: &mut cairn_store::SessionRow,
    thread: &mut Thread,
) -> Result<(), Reply> {
    service
        .sessions
        .save_undo_stacks(thread)
        .await
        .map_err(Reply::from)?;
    service
        .sessions
        .save(row, thread)
        .await
        .map_err(Reply::from)
}

/// The first 8 characters of an id, enough to tell threads apart.
fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}
