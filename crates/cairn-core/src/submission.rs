//! Turning what a person typed into a typed submission: a message for the
//! agent, an answer to a pending approval, a thread control (`/undo`), or a
//! command (`/job`, `/status`). Deterministic and free of I/O.
//!
//! Commands are `/word` at the very start of the text, followed by the end or
//! whitespace; anything else (`/etc/hosts is broken`) is ordinary input, and
//! `//text` sends `/text` literally. Approval words count as approvals only
//! while an approval is pending, so "ok" is just "ok" the rest of the time.

use serde::{Deserialize, Serialize};

use crate::text::edit_distance;

/// One parsed submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Submission {
    /// A message for the agent.
    UserInput {
        /// The text as it goes to the agent.
        text: String,
    },
    /// An answer to a pending tool approval.
    Approval {
        /// Run the tool?
        approved: bool,
        /// Also allow this tool for the rest of the session.
        always: bool,
        /// Which request it answers, when the client said so.
        request_id: Option<String>,
    },
    /// Stop the turn in progress.
    Interrupt,
    /// Continue an interrupted turn.
    Resume,
    /// Shrink the conversation's context now.
    Compact,
    /// Go back one turn.
    Undo,
    /// Re-apply an undone turn.
    Redo,
    /// Forget the current thread's messages.
    Clear,
    /// Start a new thread.
    NewThread,
    /// Switch to another thread.
    SwitchThread {
        /// The thread's id.
        id: String,
    },
    /// List this session's threads.
    ListThreads,
    /// Summarize the thread so far.
    Summarize,
    /// Suggest next steps.
    Suggest,
    /// End the session.
    Quit,
    /// A router command.
    Command(Command),
    /// A `/word` cairn does not know.
    UnknownCommand {
        /// The word typed, without the slash.
        name: String,
        /// The nearest known command, if one is close.
        suggestion: Option<String>,
    },
    /// A known command used wrongly (a missing argument).
    BadCommand {
        /// The command, without the slash.
        name: String,
        /// What it needs.
        usage: String,
    },
}

/// Commands answered without the LLM (the router's intents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// `/job [--plan] <description>`: start a background job.
    CreateJob {
        /// What the job should do.
        description: String,
        /// `--plan`: the job asks the model for a plan of steps before it starts.
        #[serde(default)]
        plan: bool,
    },
    /// `/status [id]`: one job, or all active jobs.
    JobStatus {
        /// The job's id.
        id: Option<String>,
    },
    /// `/cancel <id>`: stop a job.
    CancelJob {
        /// The job's id.
        id: String,
    },
    /// `/list` or `/jobs`: recent jobs.
    ListJobs,
    /// `/help [topic]`.
    Help {
        /// A command or topic.
        topic: Option<String>,
    },
    /// `/ping`: is anyone there?
    Ping,
    /// `/version`.
    Version,
    /// `/tools`: what the agent can use.
    Tools,
    /// `/debug`: internal state of the session.
    Debug,
    /// `/model [name]`: show or switch the model.
    Model {
        /// The model to switch to.
        name: Option<String>,
    },
    /// `/models`: the provider's models, the current one marked.
    Models,
}

/// What the parser needs to know about the thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseContext {
    /// A tool call is waiting for the person's yes or no.
    pub awaiting_approval: bool,
}

/// Every command word, for help and suggestions.
pub const COMMANDS: &[(&str, &str)] = &[
    ("help", "/help [command]: what you can type"),
    ("new", "/new: start a new thread"),
    ("threads", "/threads: list this session's threads"),
    ("thread", "/thread <id>: switch to a thread"),
    ("undo", "/undo: go back one turn"),
    ("redo", "/redo: re-apply an undone turn"),
    ("clear", "/clear: forget this thread's messages"),
    ("compact", "/compact: shrink the conversation's context now"),
    ("interrupt", "/interrupt: stop the turn in progress"),
    ("resume", "/resume: continue an interrupted turn"),
    ("summarize", "/summarize: summarize the thread so far"),
    ("suggest", "/suggest: suggest next steps"),
    (
        "job",
        "/job [--plan] <description>: start a background job (--plan: it plans its steps first)",
    ),
    ("status", "/status [id]: job status"),
    ("cancel", "/cancel <id>: cancel a job"),
    ("jobs", "/jobs: list recent jobs"),
    ("list", "/list: list recent jobs"),
    ("tools", "/tools: list the agent's tools"),
    ("model", "/model [name]: show or switch the model"),
    (
        "models",
        "/models: list the provider's models (* marks the current one)",
    ),
    ("ping", "/ping: check cairn is listening"),
    ("version", "/version: cairn's version"),
    ("debug", "/debug: the session's internal state"),
    ("quit", "/quit: leave"),
    ("exit", "/exit: leave"),
];

/// Parses one submission.
pub fn parse(text: &str, ctx: ParseContext) -> Submission {
    let trimmed = text.trim();
    if ctx.awaiting_approval
        && let Some(answer) = approval_word(trimmed)
    {
        return answer;
    }
    if let Some(answer) = approval_object(trimmed) {
        return answer;
    }
    if let Some(literal) = trimmed.strip_prefix("//") {
        return Submission::UserInput {
            text: format!("/{literal}"),
        };
    }
    match split_command(trimmed) {
        Some((name, arg)) => command(&name, arg),
        None => Submission::UserInput {
            text: text.to_string(),
        },
    }
}

fn approval_word(text: &str) -> Option<Submission> {
    let (approved, always) = match text.to_ascii_lowercase().as_str() {
        "yes" | "y" | "approve" | "ok" => (true, false),
        "always" | "a" => (true, true),
        "no" | "n" | "deny" => (false, false),
        _ => return None,
    };
    Some(Submission::Approval {
        approved,
        always,
        request_id: None,
    })
}

/// `{"approved": true, "always": false, "request_id": "…"}` from API clients
/// (`approve` is accepted for `approved`, `id` for `request_id`).
fn approval_object(text: &str) -> Option<Submission> {
    if !text.starts_with('{') {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let obj = value.as_object()?;
    let approved = obj
        .get("approved")
        .or_else(|| obj.get("approve"))?
        .as_bool()?;
    let always = obj
        .get("always")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let request_id = obj
        .get("request_id")
        .or_else(|| obj.get("id"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_string);
    Some(Submission::Approval {
        approved,
        always: approved && always,
        request_id,
    })
}

/// `/word rest` → (lowercased word, trimmed rest); `None` when the text is not a command.
fn split_command(text: &str) -> Option<(String, Option<String>)> {
    let rest = text.strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let word = &rest[..end];
    if word.is_empty()
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    let arg = rest[end..].trim();
    Some((
        word.to_ascii_lowercase(),
        (!arg.is_empty()).then(|| arg.to_string()),
    ))
}

fn command(name: &str, arg: Option<String>) -> Submission {
    let needs = |usage: &str| Submission::BadCommand {
        name: name.to_string(),
        usage: usage.to_string(),
    };
    let cmd = |c: Command| Submission::Command(c);
    match (name, arg) {
        ("undo", _) => Submission::Undo,
        ("redo", _) => Submission::Redo,
        ("compact", _) => Submission::Compact,
        ("clear", _) => Submission::Clear,
        ("new", _) => Submission::NewThread,
        ("threads", _) => Submission::ListThreads,
        ("thread", Some(id)) => Submission::SwitchThread { id },
        ("thread", None) => needs("/thread <id> (see /threads for ids)"),
        ("interrupt" | "stop", _) => Submission::Interrupt,
        ("resume", _) => Submission::Resume,
        ("summarize" | "summarise", _) => Submission::Summarize,
        ("suggest", _) => Submission::Suggest,
        ("quit" | "exit", _) => Submission::Quit,
        ("job", Some(text)) => match text.strip_prefix("--plan") {
            Some("") => needs("/job --plan <what the job should do>"),
            Some(rest) if rest.starts_with(char::is_whitespace) => cmd(Command::CreateJob {
                description: rest.trim().to_string(),
                plan: true,
            }),
            _ => cmd(Command::CreateJob {
                description: text,
                plan: false,
            }),
        },
        ("job", None) => needs("/job <what the job should do>"),
        ("status", id) => cmd(Command::JobStatus { id }),
        ("cancel", Some(id)) => cmd(Command::CancelJob { id }),
        ("cancel", None) => needs("/cancel <job id> (see /jobs for ids)"),
        ("list" | "jobs", _) => cmd(Command::ListJobs),
        ("help", topic) => cmd(Command::Help {
            topic: topic.map(|t| t.trim_start_matches('/').to_ascii_lowercase()),
        }),
        ("ping", _) => cmd(Command::Ping),
        ("version", _) => cmd(Command::Version),
        ("tools", _) => cmd(Command::Tools),
        ("debug", _) => cmd(Command::Debug),
        ("model", name) => cmd(Command::Model { name }),
        ("models", _) => cmd(Command::Models),
        (other, _) => Submission::UnknownCommand {
            name: other.to_string(),
            suggestion: suggest(other),
        },
    }
}

/// The known command closest to `word` (by edit distance, or a shared prefix).
fn suggest(word: &str) -> Option<String> {
    COMMANDS
        .iter()
        .map(|(name, _)| (edit_distance(word, name), *name))
        .filter(|(d, name)| *d <= 2 || name.starts_with(word))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| format!("/{name}"))
}

/// The help text for one command, or the list of all.
pub fn help(topic: Option<&str>) -> String {
    match topic.and_then(|t| COMMANDS.iter().find(|(name, _)| *name == t)) {
        Some((_, line)) => line.to_string(),
        None => {
            let mut out = String::from(
                "Commands (anything else is a message for the agent; //text sends /text):\n",
            );
            for (_, line) in COMMANDS {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: ParseContext = ParseContext {
        awaiting_approval: false,
    };
    const ASKING: ParseContext = ParseContext {
        awaiting_approval: true,
    };

    fn input(text: &str) -> Submission {
        Submission::UserInput {
            text: text.to_string(),
        }
    }

    #[test]
    fn approval_words_only_while_awaiting() {
        for (word, approved, always) in [
            ("yes", true, false),
            ("Y", true, false),
            ("approve", true, false),
            ("ok", true, false),
            ("always", true, true),
            ("a", true, true),
            ("no", false, false),
            ("n", false, false),
            (" deny ", false, false),
        ] {
            assert_eq!(
                parse(word, ASKING),
                Submission::Approval {
                    approved,
                    always,
                    request_id: None
                },
                "{word}"
            );
        }
        assert_eq!(parse("ok", IDLE), input("ok"));
        assert_eq!(parse("yes please do", ASKING), input("yes please do"));
    }

    #[test]
    fn json_approval_objects() {
        assert_eq!(
            parse(
                r#"{"approved": true, "always": true, "request_id": "r1"}"#,
                IDLE
            ),
            Submission::Approval {
                approved: true,
                always: true,
                request_id: Some("r1".into())
            }
        );
        assert_eq!(
            parse(r#"{"approve": false, "always": true, "id": "r2"}"#, IDLE),
            Submission::Approval {
                approved: false,
                always: false,
                request_id: Some("r2".into())
            }
        );
        assert_eq!(parse(r#"{"name": "x"}"#, IDLE), input(r#"{"name": "x"}"#));
    }

    #[test]
    fn thread_controls() {
        assert_eq!(parse("/undo", IDLE), Submission::Undo);
        assert_eq!(parse("/REDO", IDLE), Submission::Redo);
        assert_eq!(parse("/compact", IDLE), Submission::Compact);
        assert_eq!(parse("/clear", IDLE), Submission::Clear);
        assert_eq!(parse("/new", IDLE), Submission::NewThread);
        assert_eq!(parse("/threads", IDLE), Submission::ListThreads);
        assert_eq!(
            parse("/thread abc-123", IDLE),
            Submission::SwitchThread {
                id: "abc-123".into()
            }
        );
        assert!(matches!(
            parse("/thread", IDLE),
            Submission::BadCommand { .. }
        ));
        assert_eq!(parse("/interrupt", IDLE), Submission::Interrupt);
        assert_eq!(parse("/resume", IDLE), Submission::Resume);
        assert_eq!(parse("/summarize", IDLE), Submission::Summarize);
        assert_eq!(parse("/suggest", IDLE), Submission::Suggest);
        assert_eq!(parse("/quit", IDLE), Submission::Quit);
        assert_eq!(parse("/exit", ASKING), Submission::Quit);
    }

    #[test]
    fn router_commands() {
        assert_eq!(
            parse("/job  back up the notes ", IDLE),
            Submission::Command(Command::CreateJob {
                description: "back up the notes".into(),
                plan: false,
            })
        );
        assert_eq!(
            parse("/job --plan  back up the notes", IDLE),
            Submission::Command(Command::CreateJob {
                description: "back up the notes".into(),
                plan: true,
            })
        );
        assert!(matches!(
            parse("/job --plan", IDLE),
            Submission::BadCommand { .. }
        ));
        // Only the flag word: `--planet` is part of the description.
        assert_eq!(
            parse("/job --planet", IDLE),
            Submission::Command(Command::CreateJob {
                description: "--planet".into(),
                plan: false,
            })
        );
        assert!(matches!(parse("/job", IDLE), Submission::BadCommand { .. }));
        assert_eq!(
            parse("/status", IDLE),
            Submission::Command(Command::JobStatus { id: None })
        );
        assert_eq!(
            parse("/status j1", IDLE),
            Submission::Command(Command::JobStatus {
                id: Some("j1".into())
            })
        );
        assert_eq!(
            parse("/cancel j1", IDLE),
            Submission::Command(Command::CancelJob { id: "j1".into() })
        );
        assert_eq!(parse("/list", IDLE), Submission::Command(Command::ListJobs));
        assert_eq!(parse("/jobs", IDLE), Submission::Command(Command::ListJobs));
        assert_eq!(
            parse("/help", IDLE),
            Submission::Command(Command::Help { topic: None })
        );
        assert_eq!(
            parse("/help /undo", IDLE),
            Submission::Command(Command::Help {
                topic: Some("undo".into())
            })
        );
        assert_eq!(parse("/ping", IDLE), Submission::Command(Command::Ping));
        assert_eq!(
            parse("/version", IDLE),
            Submission::Command(Command::Version)
        );
        assert_eq!(parse("/tools", IDLE), Submission::Command(Command::Tools));
        assert_eq!(parse("/debug", IDLE), Submission::Command(Command::Debug));
        assert_eq!(
            parse("/model gpt-x", IDLE),
            Submission::Command(Command::Model {
                name: Some("gpt-x".into())
            })
        );
        assert_eq!(parse("/models", IDLE), Submission::Command(Command::Models));
        assert!(help(None).contains("/models"));
    }

    #[test]
    fn unknown_commands_get_suggestions_not_the_llm() {
        assert_eq!(
            parse("/undoo", IDLE),
            Submission::UnknownCommand {
                name: "undoo".into(),
                suggestion: Some("/undo".into())
            }
        );
        assert_eq!(
            parse("/zzzzzzzz", IDLE),
            Submission::UnknownCommand {
                name: "zzzzzzzz".into(),
                suggestion: None
            }
        );
    }

    #[test]
    fn heartbeat_is_not_a_command_until_the_daemon_runs_it() {
        assert_eq!(
            parse("/heartbeat", IDLE),
            Submission::UnknownCommand {
                name: "heartbeat".into(),
                suggestion: None
            }
        );
        assert!(!help(None).contains("heartbeat"), "{}", help(None));
    }

    #[test]
    fn slashes_that_are_not_commands_are_input() {
        assert_eq!(
            parse("/etc/hosts is broken", IDLE),
            input("/etc/hosts is broken")
        );
        assert_eq!(parse("//help me", IDLE), input("/help me"));
        assert_eq!(
            parse("what does /undo do?", IDLE),
            input("what does /undo do?")
        );
        assert_eq!(parse("/", IDLE), input("/"));
    }

    #[test]
    fn help_lists_commands() {
        assert!(help(None).contains("/undo"));
        assert_eq!(help(Some("undo")), "/undo: go back one turn");
    }
}
