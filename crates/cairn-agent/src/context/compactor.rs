//! The compactor: shrinks a thread's turns by one of three strategies, and
//! never loses what it removes (the full text goes to the workspace archive).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_core::chat::ChatMessage;
use cairn_llm::{ChatRequest, LlmProvider};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::files::{append, archive_path, daily_path};
use super::monitor::{CompactionStrategy, ContextMonitor, estimate_turns};
use super::transcript::{cut_middle, render_turns};
use crate::session::{Turn, TurnKind};

/// Sampling temperature of the summarization call: low, to stay factual.
pub const SUMMARY_TEMPERATURE: f64 = 0.3;
/// Cap on the summary's length in tokens.
pub const SUMMARY_MAX_TOKENS: u32 = 1024;

/// What the cheap model is told to do with the older turns.
pub const SUMMARY_PROMPT: &str = "You compress the earlier part of a conversation between a person \
and their AI assistant, so the assistant can carry on without the original text. \
Write a concise summary in the conversation's language, as short bullet points under the \
headings Facts, Decisions and Open tasks. Keep every fact learned, decision made, open task \
or promise (and who owes it), and every name, number, date, time, amount, file path and URL \
that may matter later, including what tool results showed. If the transcript starts with an \
earlier summary, fold its content in. Drop greetings, repetition and dead ends. \
Never invent anything that is not in the transcript.";

/// Why compaction failed. The turns are left as they were.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// A workspace file could not be written.
    #[error("could not write {}: {source}", path.display())]
    Io {
        /// The file (or directory) being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionResult {
    /// The strategy applied (`Truncate` when summarizing failed).
    pub strategy: CompactionStrategy,
    /// Why the requested strategy was not the one applied, if it was not.
    pub fallback: Option<String>,
    /// Turns taken out of the thread (a summary turn put in does not count).
    pub turns_removed: usize,
    /// Estimated tokens of the turns before.
    pub tokens_before: usize,
    /// Estimated tokens of the turns after.
    pub tokens_after: usize,
    /// Whether a summary was written to the daily log and put into the thread.
    pub summary_written: bool,
    /// The summary text, when one was made.
    pub summary: Option<String>,
    /// The archive file that received the removed turns' full text.
    pub archive_path: Option<PathBuf>,
}

impl CompactionResult {
    fn unchanged(strategy: CompactionStrategy, tokens: usize) -> Self {
        Self {
            strategy,
            fallback: None,
            turns_removed: 0,
            tokens_before: tokens,
            tokens_after: tokens,
            summary_written: false,
            summary: None,
            archive_path: None,
        }
    }
}

/// Shrinks conversations; one per agent, shared across threads.
#[derive(Debug, Clone)]
pub struct Compactor {
    llm: Arc<dyn LlmProvider>,
    workspace: PathBuf,
    monitor: ContextMonitor,
    tz: Tz,
    memory: Option<Arc<crate::memory::MemoryService>>,
}

impl Compactor {
    /// A compactor summarizing with `cheap_llm` and writing under `workspace`,
    /// with the default context limit and dates in UTC.
    pub fn new(cheap_llm: Arc<dyn LlmProvider>, workspace: PathBuf) -> Self {
        Self {
            llm: cheap_llm,
            workspace,
            monitor: ContextMonitor::default(),
            tz: Tz::UTC,
            memory: None,
        }
    }

    /// Uses this monitor (the main model's limit) for `maybe_compact` and overflows.
    #[must_use]
    pub fn with_monitor(mut self, monitor: ContextMonitor) -> Self {
        self.monitor = monitor;
        self
    }

    /// Dates the workspace files and times their headings in this zone (default UTC).
    #[must_use]
    pub fn with_time_zone(mut self, tz: Tz) -> Self {
        self.tz = tz;
        self
    }

    /// Indexes each daily summary it writes as a `daily` memory.
    #[must_use]
    pub fn with_memory(mut self, memory: Arc<crate::memory::MemoryService>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The monitor in use.
    pub fn monitor(&self) -> &ContextMonitor {
        &self.monitor
    }

    /// The workspace directory files are written under.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Measures the system prompt plus the turns and applies the suggested
    /// strategy, if any. Call before each turn; `None` when nothing changed.
    pub async fn maybe_compact(
        &self,
        turns: &mut Vec<Turn>,
        system_prompt: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<CompactionResult>, CompactionError> {
        let breakdown = self.monitor.measure_turns(system_prompt, turns);
        let Some(strategy) = self.monitor.suggest(&breakdown) else {
            return Ok(None);
        };
        let result = self.compact(turns, strategy, now).await?;
        Ok((result.turns_removed > 0).then_some(result))
    }

    /// Shrinks the turns after the provider reported a context-length error.
    ///
    /// The estimate evidently ran low, so this cuts at least as hard as
    /// `Summarize { keep_recent: 5 }` (harder if the monitor suggests it), and
    /// keeps fewer turns when that would remove none, so the retry is smaller.
    /// `turns_removed == 0` means there was nothing left to remove.
    pub async fn compact_for_overflow(
        &self,
        turns: &mut Vec<Turn>,
        system_prompt: &str,
        now: DateTime<Utc>,
    ) -> Result<CompactionResult, CompactionError> {
        let floor = CompactionStrategy::Summarize { keep_recent: 5 };
        let breakdown = self.monitor.measure_turns(system_prompt, turns);
        let mut strategy = match self.monitor.suggest(&breakdown) {
            Some(s) if s.severity() >= floor.severity() => s,
            _ => floor,
        };
        // Keep fewer turns when all exchanges would be kept, so at least one
        // leaves (earlier summary turns do not count: they are folded in).
        let exchanges = turns
            .iter()
            .filter(|t| t.kind == TurnKind::Exchange)
            .count();
        if exchanges <= strategy.keep_recent() {
            strategy = strategy.with_keep_recent(exchanges.saturating_sub(1));
        }
        self.compact(turns, strategy, now).await
    }

    /// Applies `strategy` to `turns`, writing what it removes to the workspace
    /// first. On an error the turns are unchanged.
    pub async fn compact(
        &self,
        turns: &mut Vec<Turn>,
        strategy: CompactionStrategy,
        now: DateTime<Utc>,
    ) -> Result<CompactionResult, CompactionError> {
        let tokens_before = estimate_turns(turns);
        let split = turns.len().saturating_sub(strategy.keep_recent());
        // Only earlier summaries older than the kept turns: nothing new to
        // fold in, and re-summarizing a summary on every turn would burn tokens.
        if turns[..split].iter().all(|t| t.kind == TurnKind::Summary) {
            return Ok(CompactionResult::unchanged(strategy, tokens_before));
        }
        match strategy {
            CompactionStrategy::Summarize { .. } => {
                self.summarize(turns, split, strategy, tokens_before, now)
                    .await
            }
            CompactionStrategy::MoveToWorkspace { .. } | CompactionStrategy::Truncate { .. } => {
                let kept = latest_summary(&turns[..split]);
                let dropped: Vec<&Turn> = turns[..split]
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| Some(*i) != kept)
                    .map(|(_, t)| t)
                    .collect();
                if dropped.is_empty() {
                    return Ok(CompactionResult::unchanged(strategy, tokens_before));
                }
                let path = self.archive(dropped, strategy, now).await?;
                let removed = drop_older(turns, split, kept);
                Ok(CompactionResult {
                    turns_removed: removed,
                    tokens_after: estimate_turns(turns),
                    archive_path: Some(path),
                    ..CompactionResult::unchanged(strategy, tokens_before)
                })
            }
        }
    }

    async fn summarize(
        &self,
        turns: &mut Vec<Turn>,
        split: usize,
        strategy: CompactionStrategy,
        tokens_before: usize,
        now: DateTime<Utc>,
    ) -> Result<CompactionResult, CompactionError> {
        // The summary is lossy, so the full text is archived first; that also
        // makes a failed summary safe to fall back from.
        let archive = self.archive(&turns[..split], strategy, now).await?;
        let summary = match self.ask_for_summary(&turns[..split]).await {
            Ok(summary) => summary,
            Err(reason) => {
                let reason = format!("summarizing failed ({reason}); truncated instead");
                tracing::warn!(%reason, "context compaction fell back to truncation");
                let truncate = CompactionStrategy::Truncate {
                    keep_recent: strategy.keep_recent(),
                };
                let kept = latest_summary(&turns[..split]);
                let removed = drop_older(turns, split, kept);
                return Ok(CompactionResult {
                    fallback: Some(reason),
                    turns_removed: removed,
                    tokens_after: estimate_turns(turns),
                    archive_path: Some(archive),
                    ..CompactionResult::unchanged(truncate, tokens_before)
                });
            }
        };
        let first = turns[0].number;
        let last = turns[split - 1].number;
        let local = now.with_timezone(&self.tz);
        let entry = format!(
            "## Conversation summary — {} (turns {first}–{last})\n\n{summary}\n\n",
            local.format("%H:%M %Z")
        );
        append(
            &self.workspace,
            &daily_path(&self.workspace, local.date_naive()),
            &entry,
        )
        .await?;
        if let Some(memory) = &self.memory
            && let Err(e) = memory.index_daily(local.date_naive(), &summary).await
        {
            // The daily file holds it; `cairn memory add` can index it by hand.
            tracing::warn!(error = %e, "indexing the daily summary as a memory failed");
        }
        turns.drain(..split);
        turns.insert(0, Turn::summary(last, &summary, now));
        tracing::info!(turns = split, "context compacted into a summary");
        Ok(CompactionResult {
            turns_removed: split,
            tokens_after: estimate_turns(turns),
            summary_written: true,
            summary: Some(summary),
            archive_path: Some(archive),
            ..CompactionResult::unchanged(strategy, tokens_before)
        })
    }

    /// One call to the cheap model; `Err` carries why there is no summary.
    async fn ask_for_summary(&self, older: &[Turn]) -> Result<String, String> {
        let transcript = cut_middle(&render_turns(older, self.tz), self.transcript_budget());
        let request = ChatRequest::new(vec![
            ChatMessage::system(SUMMARY_PROMPT),
            ChatMessage::user(format!(
                "Summarize this conversation transcript:\n\n{transcript}"
            )),
        ])
        .with_temperature(SUMMARY_TEMPERATURE)
        .with_max_tokens(SUMMARY_MAX_TOKENS);
        let response = self
            .llm
            .complete(&request)
            .await
            .map_err(|e| e.to_string())?;
        let summary = response.text.trim();
        if summary.is_empty() {
            return Err("the model returned an empty summary".to_string());
        }
        Ok(summary.to_string())
    }

    /// Bytes of transcript the cheap model can read: its window (or the
    /// monitor's limit) less the answer and prompt, at a conservative 3 bytes
    /// per token so the summarization call cannot overflow in turn.
    fn transcript_budget(&self) -> usize {
        let window = self
            .llm
            .context_window()
            .and_then(|w| usize::try_from(w).ok())
            .unwrap_or(self.monitor.limit());
        let reserved = SUMMARY_MAX_TOKENS as usize + 1_000;
        (window.saturating_sub(reserved) * 3).max(8_000)
    }

    /// Appends the full text of `turns` to today's archive file.
    async fn archive<'a>(
        &self,
        turns: impl IntoIterator<Item = &'a Turn>,
        strategy: CompactionStrategy,
        now: DateTime<Utc>,
    ) -> Result<PathBuf, CompactionError> {
        let local = now.with_timezone(&self.tz);
        let path = archive_path(&self.workspace, local.date_naive());
        let text = format!(
            "# Archived {} ({})\n\n{}",
            local.format("%H:%M:%S %Z"),
            strategy.name(),
            render_turns(turns, self.tz)
        );
        append(&self.workspace, &path, &text).await?;
        Ok(path)
    }
}

/// Index of the latest summary turn among `turns`, which truncation keeps:
/// it is short and the only memory of what came before it.
fn latest_summary(turns: &[Turn]) -> Option<usize> {
    turns.iter().rposition(|t| t.kind == TurnKind::Summary)
}

/// Removes `turns[..split]`, putting back the one at `kept` (if any) in
/// front; returns how many turns left the thread.
fn drop_older(turns: &mut Vec<Turn>, split: usize, kept: Option<usize>) -> usize {
    let mut older: Vec<Turn> = turns.drain(..split).collect();
    if let Some(i) = kept.filter(|i| *i < older.len()) {
        turns.insert(0, older.swap_remove(i));
    }
    older.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_llm::testing::InstantProvider;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 14, 9, 30, 0).unwrap()
    }

    fn turns(n: u32) -> Vec<Turn> {
        (1..=n)
            .map(|i| {
                let mut t = Turn::summary(i, "x", at());
                t.kind = TurnKind::Exchange;
                t.messages = vec![
                    ChatMessage::user(format!("q{i}")),
                    ChatMessage::assistant("a"),
                ];
                t
            })
            .collect()
    }

    #[test]
    fn dropping_puts_the_kept_summary_first() {
        let mut all = turns(6);
        all[1].kind = TurnKind::Summary;
        let kept = latest_summary(&all[..4]);
        let removed = drop_older(&mut all, 4, kept);
        assert_eq!(removed, 3);
        let numbers: Vec<u32> = all.iter().map(|t| t.number).collect();
        assert_eq!(numbers, [2, 5, 6]);
    }

    #[tokio::test]
    async fn too_few_turns_is_a_no_op_without_io_or_model() {
        let dir = tempfile::tempdir().unwrap();
        let llm = Arc::new(InstantProvider::new());
        let compactor = Compactor::new(llm.clone(), dir.path().to_path_buf());
        let mut all = turns(3);
        for strategy in [
            CompactionStrategy::MoveToWorkspace { keep_recent: 3 },
            CompactionStrategy::Summarize { keep_recent: 5 },
            CompactionStrategy::Truncate { keep_recent: 3 },
        ] {
            let result = compactor.compact(&mut all, strategy, at()).await.unwrap();
            assert_eq!(result.turns_removed, 0);
            assert_eq!(result.tokens_before, result.tokens_after);
            assert_eq!(result.archive_path, None);
        }
        assert_eq!(all.len(), 3);
        assert_eq!(llm.calls(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn a_lone_earlier_summary_is_not_summarized_again() {
        let dir = tempfile::tempdir().unwrap();
        let llm = Arc::new(InstantProvider::new());
        let compactor = Compactor::new(llm.clone(), dir.path().to_path_buf());
        let mut all = turns(6);
        all[0].kind = TurnKind::Summary;
        let strategy = CompactionStrategy::Summarize { keep_recent: 5 };
        let result = compactor.compact(&mut all, strategy, at()).await.unwrap();
        assert_eq!(result.turns_removed, 0);
        assert_eq!(llm.calls(), 0);

        // On overflow, one more exchange goes so the retry is smaller.
        let result = compactor
            .compact_for_overflow(&mut all, "", at())
            .await
            .unwrap();
        assert_eq!(
            result.strategy,
            CompactionStrategy::Summarize { keep_recent: 4 }
        );
        assert_eq!((result.turns_removed, all.len()), (2, 5));
        assert_eq!(llm.calls(), 1);
    }

    #[tokio::test]
    async fn an_empty_summary_falls_back_to_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let llm = Arc::new(InstantProvider::new());
        llm.push_text("   ");
        let compactor = Compactor::new(llm, dir.path().to_path_buf());
        let mut all = turns(4);
        let strategy = CompactionStrategy::Summarize { keep_recent: 1 };
        let result = compactor.compact(&mut all, strategy, at()).await.unwrap();
        assert_eq!(
            result.strategy,
            CompactionStrategy::Truncate { keep_recent: 1 }
        );
        assert!(result.fallback.unwrap().contains("empty summary"));
        assert_eq!(all.len(), 1);
    }

    #[test]
    fn transcript_budget_follows_the_smaller_known_window() {
        let llm = Arc::new(InstantProvider::new());
        let compactor = Compactor::new(llm, PathBuf::from("/nonexistent"))
            .with_monitor(ContextMonitor::new(10_000));
        assert_eq!(compactor.transcript_budget(), (10_000 - 1024 - 1_000) * 3);
        let tiny = compactor.with_monitor(ContextMonitor::new(100));
        assert_eq!(tiny.transcript_budget(), 8_000);
    }
}
