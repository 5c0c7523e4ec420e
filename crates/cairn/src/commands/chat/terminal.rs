//! The terminal side of a chat: reading lines (rustyline on a terminal, plain
//! lines from a pipe), printing streamed answers and tool activity, and
//! asking for approvals.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_agent::LoopEvent;
use cairn_agent::chat::ChatSink;
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

/// Where lines come from.
enum Source {
    /// An interactive terminal, with editing and history.
    Editor(Box<DefaultEditor>, Option<PathBuf>),
    /// A pipe or file: lines in order, no prompts.
    Piped(Box<dyn BufRead + Send>),
}

/// What a read produced.
pub enum Line {
    /// A line of text.
    Text(String),
    /// Ctrl-C at the prompt: drop the line.
    Cancelled,
    /// End of input (Ctrl-D, end of the pipe).
    End,
}

/// Reads lines on a blocking thread so the async side never stalls.
#[derive(Clone)]
pub struct LineReader {
    source: Arc<Mutex<Source>>,
    interactive: bool,
}

impl LineReader {
    /// Rustyline with history at `history` when stdin is a terminal; plain lines otherwise.
    pub fn new(history: Option<PathBuf>) -> Self {
        let interactive = std::io::stdin().is_terminal();
        let source = if interactive {
            match DefaultEditor::new() {
                Ok(mut editor) => {
                    if let Some(path) = &history {
                        // A missing history file is the normal first run.
                        let _ = editor.load_history(path);
                    }
                    Source::Editor(Box::new(editor), history)
                }
                Err(_) => Source::Piped(Box::new(std::io::BufReader::new(std::io::stdin()))),
            }
        } else {
            Source::Piped(Box::new(std::io::BufReader::new(std::io::stdin())))
        };
        Self {
            source: Arc::new(Mutex::new(source)),
            interactive,
        }
    }

    /// Whether a person is typing (stdin is a terminal).
    pub fn interactive(&self) -> bool {
        self.interactive
    }

    /// Reads one line, showing `prompt` on a terminal.
    pub async fn read(&self, prompt: &str) -> Line {
        let source = Arc::clone(&self.source);
        let prompt = prompt.to_string();
        tokio::task::spawn_blocking(move || {
            let mut source = source.lock().unwrap_or_else(|p| p.into_inner());
            match &mut *source {
                Source::Editor(editor, history) => match editor.readline(&prompt) {
                    Ok(line) => {
                        if !line.trim().is_empty() {
                            let _ = editor.add_history_entry(line.as_str());
                            if let Some(path) = history {
                                let _ = editor.save_history(path);
                            }
                        }
                        Line::Text(line)
                    }
                    Err(ReadlineError::Interrupted) => Line::Cancelled,
                    Err(_) => Line::End,
                },
                Source::Piped(reader) => {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => Line::End,
                        Ok(_) => Line::Text(line.trim_end_matches(['\n', '\r']).to_string()),
                    }
                }
            }
        })
        .await
        .unwrap_or(Line::End)
    }
}

/// How approvals are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Ask on the terminal (or read the answer from the piped lines).
    Ask,
    /// `--yes`: approve what the policy would ask about (denials stay denials).
    Yes,
    /// Nobody can answer: ask means no.
    Decline,
}

/// Prints a turn as it happens and answers approvals.
pub struct TerminalSink {
    reader: LineReader,
    approvals: ApprovalMode,
    streaming: bool,
    streamed: AtomicBool,
    show_tools: bool,
}

impl TerminalSink {
    /// A sink reading approval answers from `reader`.
    pub fn new(
        reader: LineReader,
        approvals: ApprovalMode,
        streaming: bool,
        show_tools: bool,
    ) -> Self {
        Self {
            reader,
            approvals,
            streaming,
            streamed: AtomicBool::new(false),
            show_tools,
        }
    }

    /// Whether answer text was printed as it streamed (and since when it was last reset).
    pub fn take_streamed(&self) -> bool {
        self.streamed.swap(false, Ordering::SeqCst)
    }
}

impl ChatSink for TerminalSink {
    fn on_event(&self, event: LoopEvent) {
        match event {
            LoopEvent::TextDelta(text) => {
                self.streamed.store(true, Ordering::SeqCst);
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
            LoopEvent::ToolStarted { tool, .. } if self.show_tools => {
                if self.streamed.swap(false, Ordering::SeqCst) {
                    println!();
                }
                eprintln!("  [tool] {tool} …");
            }
            LoopEvent::ToolFinished { tool, status, .. } if self.show_tools => {
                eprintln!("  [tool] {tool}: {}", status.as_str());
            }
            LoopEvent::ContextRecovered if self.show_tools => {
                eprintln!("  [context] the conversation was compacted to fit the model's window");
            }
            _ => {}
        }
    }

    fn streaming(&self) -> bool {
        self.streaming
    }

    fn approver(&self) -> Option<&dyn Approver> {
        Some(self)
    }
}

#[async_trait]
impl Approver for TerminalSink {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        match self.approvals {
            ApprovalMode::Yes => return ApprovalAnswer::Yes,
            ApprovalMode::Decline => {
                eprintln!(
                    "[Approval Required] Tool: {} — declined (no one can answer; use --yes)",
                    request.tool
                );
                return ApprovalAnswer::No;
            }
            ApprovalMode::Ask => {}
        }
        if self.streamed.swap(false, Ordering::SeqCst) {
            println!();
        }
        eprintln!(
            "[Approval Required] Tool: {} Args: {}",
            request.tool, request.summary
        );
        for _ in 0..3 {
            match self.reader.read("  (y)es / (n)o / (a)lways > ").await {
                Line::Text(answer) => match answer.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" | "approve" | "ok" => return ApprovalAnswer::Yes,
                    "a" | "always" => return ApprovalAnswer::Always,
                    "n" | "no" | "deny" => return ApprovalAnswer::No,
                    _ => eprintln!("  please answer y, n or a"),
                },
                Line::Cancelled | Line::End => return ApprovalAnswer::No,
            }
        }
        ApprovalAnswer::No
    }

    /// The person at the terminal answers, or answered up front with
    /// `--yes`; without a terminal and without `--yes` nobody does.
    fn person_present(&self) -> bool {
        !matches!(self.approvals, ApprovalMode::Decline)
    }
}
