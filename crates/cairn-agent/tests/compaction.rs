//! Context monitor tiers and the compactor against a real workspace directory,
//! the in-process provider and the fake LLM server over HTTP.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use CompactionStrategy::{MoveToWorkspace, Summarize, Truncate};
use cairn_agent::context::{
    CompactionError, CompactionResult, CompactionStrategy, Compactor, ContextMonitor,
    estimate_turns,
};
use cairn_agent::session::{Thread, Turn, TurnKind, TurnState, TurnUsage};
use cairn_core::chat::{ChatMessage, Role, ToolCall};
use cairn_llm::testing::{FakeLlmServer, InstantProvider, Scripted};
use cairn_llm::{LlmProvider, build_provider};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 14, 9, 30, 0).unwrap()
}

fn started(number: u32) -> DateTime<Utc> {
    now() - Duration::minutes(60) + Duration::minutes(i64::from(number))
}

fn turn(number: u32, messages: Vec<ChatMessage>) -> Turn {
    let user_input = messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let response = messages.last().map(|m| m.content.clone());
    Turn {
        position: 0,
        number,
        kind: TurnKind::Exchange,
        user_input,
        response,
        messages,
        tool_calls: Vec::new(),
        state: TurnState::Completed,
        started_at: started(number),
        completed_at: Some(started(number)),
        error: None,
        usage: TurnUsage::default(),
        model: None,
        route: None,
    }
}

/// A plain exchange whose texts name the turn ("question 3", "answer 3").
fn exchange(number: u32) -> Turn {
    turn(
        number,
        vec![
            ChatMessage::user(format!("question {number} about the garden")),
            ChatMessage::assistant(format!("answer {number}: water the tomatoes")),
        ],
    )
}

/// An exchange in which the model calls two tools before answering.
fn tool_turn(number: u32) -> Turn {
    let call = |n: u32| ToolCall {
        id: format!("call_{number}_{n}"),
        name: "shell".into(),
        arguments: json!({"command": format!("cat notes-{number}-{n}.txt")}),
    };
    turn(
        number,
        vec![
            ChatMessage::user(format!("read my notes {number}")),
            ChatMessage::assistant_tool_calls("reading", vec![call(1), call(2)]),
            ChatMessage::tool_result(
                format!("call_{number}_1"),
                "shell",
                format!("note {number}.1: dentist Tuesday"),
            ),
            ChatMessage::tool_result(
                format!("call_{number}_2"),
                "shell",
                format!("note {number}.2: invoice 1234"),
            ),
            ChatMessage::assistant(format!("your notes {number} say dentist and invoice")),
        ],
    )
}

/// Turns 1..=n, every third one with tool calls.
fn thread_of(n: u32) -> Vec<Turn> {
    (1..=n)
        .map(|i| {
            if i % 3 == 2 {
                tool_turn(i)
            } else {
                exchange(i)
            }
        })
        .collect()
}

fn numbers(turns: &[Turn]) -> Vec<u32> {
    turns.iter().map(|t| t.number).collect()
}

/// Every tool call has its results and every result its call, in order.
fn assert_paired(turns: &[Turn]) {
    let mut open: HashSet<String> = HashSet::new();
    for message in turns.iter().flat_map(|t| &t.messages) {
        match message.role {
            Role::Assistant => {
                assert!(open.is_empty(), "calls without results: {open:?}");
                open.extend(message.tool_calls.iter().map(|c| c.id.clone()));
            }
            Role::Tool => {
                let id = message.tool_call_id.clone().unwrap();
                assert!(open.remove(&id), "result {id} without its call");
            }
            _ => assert!(open.is_empty(), "calls without results: {open:?}"),
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn archive_file(dir: &Path) -> std::path::PathBuf {
    dir.join("context/archive/2025-03-14.md")
}

fn daily_file(dir: &Path) -> std::path::PathBuf {
    dir.join("daily/2025-03-14.md")
}

/// A system prompt that brings system prompt + `turns` to exactly `total` tokens.
///
/// A run of `x` with no spaces is estimated at bytes / 4 tokens (plus 4 for the
/// message), so the padding is exact.
fn prompt_for_total(turns: &[Turn], total: usize) -> String {
    let pad = total - estimate_turns(turns) - 4;
    "x".repeat(pad * 4)
}

fn instant_compactor(dir: &Path) -> (Arc<InstantProvider>, Compactor) {
    let llm = Arc::new(InstantProvider::new());
    llm.push_text("SUMMARY: tomatoes need water; notes mention dentist and invoice 1234");
    let compactor =
        Compactor::new(llm.clone(), dir.to_path_buf()).with_monitor(ContextMonitor::new(100_000));
    (llm, compactor)
}

/// A compactor summarizing through the fake server with these settings.
fn fake_compactor(settings: cairn_llm::ProviderSettings, dir: &Path) -> Compactor {
    let llm: Arc<dyn LlmProvider> = build_provider(&settings).unwrap();
    Compactor::new(llm, dir.to_path_buf())
}

async fn run(c: &Compactor, turns: &mut Vec<Turn>, s: CompactionStrategy) -> CompactionResult {
    c.compact(turns, s, now()).await.unwrap()
}

/// `maybe_compact` that must compact.
async fn maybe(c: &Compactor, turns: &mut Vec<Turn>, prompt: &str) -> CompactionResult {
    c.maybe_compact(turns, prompt, now())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn at_or_below_80_percent_nothing_happens() {
    let dir = tempfile::tempdir().unwrap();
    let (llm, compactor) = instant_compactor(dir.path());
    let mut turns = thread_of(20);
    let before = turns.clone();
    let prompt = prompt_for_total(&turns, 80_000);
    let b = compactor.monitor().measure_turns(&prompt, &turns);
    assert_eq!((b.total_tokens, b.usage_pct), (80_000, 80.0));
    assert_eq!(compactor.monitor().suggest(&b), None);
    let result = compactor
        .maybe_compact(&mut turns, &prompt, now())
        .await
        .unwrap();
    assert!(result.is_none());
    assert_eq!(turns, before);
    assert_eq!(llm.calls(), 0);
    assert!(!dir.path().join("context").exists() && !dir.path().join("daily").exists());
}

#[tokio::test]
async fn just_above_80_percent_moves_old_turns_to_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let (llm, compactor) = instant_compactor(dir.path());
    let mut turns = thread_of(20);
    // 85% exactly is still the first tier.
    for total in [80_001, 85_000] {
        let prompt = prompt_for_total(&turns, total);
        let b = compactor.monitor().measure_turns(&prompt, &turns);
        assert_eq!(
            compactor.monitor().suggest(&b),
            Some(MoveToWorkspace { keep_recent: 10 })
        );
    }
    let prompt = prompt_for_total(&turns, 80_001);
    let result = maybe(&compactor, &mut turns, &prompt).await;
    assert_eq!(result.strategy, MoveToWorkspace { keep_recent: 10 });
    assert_eq!(result.turns_removed, 10);
    assert_eq!(numbers(&turns), (11..=20).collect::<Vec<_>>());
    assert!(result.tokens_after < result.tokens_before);
    assert!(!result.summary_written && result.summary.is_none());
    assert_eq!(
        result.archive_path.as_deref(),
        Some(archive_file(dir.path()).as_path())
    );
    let archive = read(&archive_file(dir.path()));
    assert!(archive.contains("## Turn 1 — 2025-03-14 08:31:00 UTC"));
    assert!(archive.contains("## Turn 10 — "));
    assert!(!archive.contains("## Turn 11 — "));
    assert_eq!(llm.calls(), 0);
    assert!(!daily_file(dir.path()).exists());
    assert_paired(&turns);
}

#[tokio::test]
async fn just_above_85_percent_summarizes_into_a_summary_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (llm, compactor) = instant_compactor(dir.path());
    let mut turns = thread_of(20);
    let prompt = prompt_for_total(&turns, 85_001);
    let result = maybe(&compactor, &mut turns, &prompt).await;
    assert_eq!(result.strategy, Summarize { keep_recent: 5 });
    assert_eq!(result.turns_removed, 15);
    assert!(result.summary_written);
    assert_eq!(numbers(&turns), [15, 16, 17, 18, 19, 20]);
    assert_eq!(turns[0].kind, TurnKind::Summary);
    assert!(turns[0].response.as_ref().unwrap().contains("invoice 1234"));
    assert_eq!(llm.calls(), 1);
    assert!(read(&daily_file(dir.path())).contains("invoice 1234"));
    assert_paired(&turns);
}

#[tokio::test]
async fn just_above_95_percent_truncates_after_archiving() {
    let dir = tempfile::tempdir().unwrap();
    let (llm, compactor) = instant_compactor(dir.path());
    let mut turns = thread_of(20);
    let prompt = prompt_for_total(&turns, 95_001);
    let b = compactor.monitor().measure_turns(&prompt, &turns);
    assert!(b.usage_pct > 95.0 && b.usage_pct < 95.01);
    let result = maybe(&compactor, &mut turns, &prompt).await;
    assert_eq!(result.strategy, Truncate { keep_recent: 3 });
    assert_eq!(result.turns_removed, 17);
    assert_eq!(numbers(&turns), [18, 19, 20]);
    assert_eq!(llm.calls(), 0, "truncation never calls the model");
    let archive = read(&archive_file(dir.path()));
    assert!(archive.starts_with("# Archived 09:30:00 UTC (truncate)"));
    for n in 1..=17 {
        assert!(
            archive.contains(&format!("## Turn {n} — ")),
            "turn {n} not archived"
        );
    }
    assert_paired(&turns);
}

#[tokio::test]
async fn summary_goes_into_the_thread_and_the_daily_log() {
    let server = FakeLlmServer::start().await.unwrap();
    server.push(Scripted::text(
        "- Facts: tomatoes need water; dentist Tuesday; invoice 1234",
    ));
    let dir = tempfile::tempdir().unwrap();
    let compactor = fake_compactor(server.openai_settings(), dir.path());

    let mut thread = Thread::new(uuid::Uuid::now_v7(), None, 10, now());
    thread.turns = thread_of(8);
    let result = run(&compactor, &mut thread.turns, Summarize { keep_recent: 5 }).await;

    assert_eq!(result.turns_removed, 3);
    assert_eq!(result.fallback, None);
    assert!(result.tokens_after < result.tokens_before);
    let summary = result.summary.clone().unwrap();
    assert_eq!(
        summary,
        "- Facts: tomatoes need water; dentist Tuesday; invoice 1234"
    );
    // The summary stands for turns 1-3 at the head of the thread; it travels
    // with the system prompt, so the history still starts with the person.
    assert_eq!(numbers(&thread.turns), [3, 4, 5, 6, 7, 8]);
    assert_eq!(thread.turns[0].kind, TurnKind::Summary);
    assert_eq!(thread.summary().as_deref(), Some(summary.as_str()));
    let history = thread.history();
    assert_eq!(history[0].role, Role::User);
    assert!(history[0].content.contains("question 4"));
    assert_eq!(thread.next_turn_number(), 9);
    assert_paired(&thread.turns);

    let daily = read(&daily_file(dir.path()));
    assert!(daily.starts_with("## Conversation summary — 09:30 UTC (turns 1–3)\n\n"));
    assert!(daily.contains(&summary));

    // One request, carrying the older turns' text (tool calls and results
    // included) and none of the kept turns.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    assert_eq!(body["max_tokens"], 1024);
    assert!((body["temperature"].as_f64().unwrap() - 0.3).abs() < 1e-6);
    let raw = &requests[0].raw_body;
    for part in [
        "question 1 about the garden",
        "answer 3: water the tomatoes",
        "cat notes-2-1.txt",
        "note 2.2: invoice 1234",
    ] {
        assert!(raw.contains(part), "request lacks {part:?}");
    }
    assert!(!raw.contains("question 4"));
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Open tasks")
    );
}

#[tokio::test]
async fn an_earlier_summary_is_summarized_again_not_stacked() {
    let server = FakeLlmServer::start().await.unwrap();
    server.push(Scripted::text("NEW SUMMARY"));
    let dir = tempfile::tempdir().unwrap();
    let compactor = fake_compactor(server.openai_settings(), dir.path());

    let mut turns = vec![Turn::summary(
        3,
        "EARLIER: the budget is 12k euros",
        started(3),
    )];
    turns.extend((4..=10).map(exchange));
    run(&compactor, &mut turns, Summarize { keep_recent: 5 }).await;
    assert!(
        server.requests()[0]
            .raw_body
            .contains("the budget is 12k euros")
    );
    assert_eq!(numbers(&turns), [5, 6, 7, 8, 9, 10]);
    let summaries = turns.iter().filter(|t| t.kind == TurnKind::Summary).count();
    assert_eq!(summaries, 1);
    assert!(turns[0].response.as_ref().unwrap().contains("NEW SUMMARY"));
}

#[tokio::test(start_paused = true)]
async fn a_server_error_falls_back_to_truncation_with_an_archive() {
    let server = FakeLlmServer::start().await.unwrap();
    // The first answer and every retry get a 500 (an empty script answers 500).
    server.push(Scripted::server_error(500));
    let dir = tempfile::tempdir().unwrap();
    let compactor = fake_compactor(server.openai_settings(), dir.path());
    let mut turns = thread_of(8);
    let result = run(&compactor, &mut turns, Summarize { keep_recent: 5 }).await;
    assert_eq!(result.strategy, Truncate { keep_recent: 5 });
    let fallback = result.fallback.unwrap();
    assert!(
        fallback.contains("summarizing failed") && fallback.contains("500"),
        "{fallback}"
    );
    assert!(!result.summary_written && result.summary.is_none());
    assert_eq!(result.turns_removed, 3);
    assert_eq!(numbers(&turns), [4, 5, 6, 7, 8]);
    let archive = read(&archive_file(dir.path()));
    for part in ["## Turn 1 — ", "## Turn 3 — ", "note 2.1: dentist Tuesday"] {
        assert!(archive.contains(part), "archive lacks {part:?}");
    }
    assert!(!daily_file(dir.path()).exists());
    assert_paired(&turns);
}

#[tokio::test]
async fn an_auth_error_falls_back_and_keeps_an_earlier_summary() {
    let server = FakeLlmServer::start().await.unwrap();
    server.push(Scripted::auth_error());
    let dir = tempfile::tempdir().unwrap();
    let compactor = fake_compactor(server.anthropic_settings(), dir.path());
    let mut turns = vec![Turn::summary(2, "EARLIER FACTS", started(2))];
    turns.extend((3..=9).map(tool_turn));
    let result = run(&compactor, &mut turns, Summarize { keep_recent: 5 }).await;
    assert_eq!(server.requests().len(), 1, "auth errors are not retried");
    assert!(result.fallback.unwrap().contains("credentials"));
    assert_eq!(result.turns_removed, 2);
    assert_eq!(numbers(&turns), [2, 5, 6, 7, 8, 9]);
    assert_eq!(turns[0].kind, TurnKind::Summary);
    let archive = read(&archive_file(dir.path()));
    assert!(archive.contains("## Turn 3 — ") && archive.contains("## Turn 4 — "));
    assert_paired(&turns);
}

#[tokio::test]
async fn the_archive_is_appended_to_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (_, compactor) = instant_compactor(dir.path());
    let path = archive_file(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "written by hand\n\n").unwrap();

    let mut turns = thread_of(6);
    let strategy = MoveToWorkspace { keep_recent: 2 };
    let first = run(&compactor, &mut turns, strategy).await;
    assert_eq!(first.turns_removed, 4);
    turns.extend((7..=9).map(tool_turn));
    let later = now() + Duration::minutes(5);
    let second = compactor
        .compact(&mut turns, strategy, later)
        .await
        .unwrap();
    assert_eq!(second.turns_removed, 3);
    assert_eq!(numbers(&turns), [8, 9]);

    let archive = read(&path);
    assert!(
        archive.starts_with("written by hand\n\n# Archived 09:30:00 UTC (move_to_workspace)\n\n")
    );
    let second_at = archive.find("# Archived 09:35:00 UTC").unwrap();
    for n in 1..=4 {
        let at = archive.find(&format!("## Turn {n} — ")).unwrap();
        assert!(at < second_at);
    }
    for n in 5..=7 {
        let at = archive.find(&format!("## Turn {n} — ")).unwrap();
        assert!(at > second_at);
    }
    // Full text: input, answer, tool calls with arguments, tool results.
    for part in [
        "**User:**\nquestion 1 about the garden",
        "**Assistant:**\nanswer 1: water the tomatoes",
        "**Tool call** `shell` (call_7_2): `{\"command\":\"cat notes-7-2.txt\"}`",
        "**Tool result** `shell` (call_7_1):\n```\nnote 7.1: dentist Tuesday\n```",
    ] {
        assert!(archive.contains(part), "archive lacks {part:?}\n{archive}");
    }
}

#[tokio::test]
async fn truncation_keeps_an_earlier_summary_and_archives_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (llm, compactor) = instant_compactor(dir.path());
    let mut turns = vec![Turn::summary(4, "EARLIER FACTS", started(4))];
    turns.extend((5..=12).map(tool_turn));
    let result = run(&compactor, &mut turns, Truncate { keep_recent: 3 }).await;
    assert_eq!(result.turns_removed, 5);
    assert_eq!(numbers(&turns), [4, 10, 11, 12]);
    assert_eq!(turns[0].kind, TurnKind::Summary);
    let archive = read(&archive_file(dir.path()));
    assert!(
        !archive.contains("EARLIER FACTS"),
        "the kept summary is not archived"
    );
    assert!(archive.contains("## Turn 5 — ") && archive.contains("## Turn 9 — "));
    assert_eq!(llm.calls(), 0);
    assert_paired(&turns);

    // Only the summary left to drop: nothing changes, nothing is written.
    let len = read(&archive_file(dir.path())).len();
    let again = run(&compactor, &mut turns, Truncate { keep_recent: 3 }).await;
    assert_eq!(again.turns_removed, 0);
    assert_eq!(numbers(&turns), [4, 10, 11, 12]);
    assert_eq!(read(&archive_file(dir.path())).len(), len);
}

#[tokio::test]
async fn tool_calls_keep_their_results_under_every_strategy() {
    for strategy in [
        MoveToWorkspace { keep_recent: 4 },
        Summarize { keep_recent: 4 },
        Truncate { keep_recent: 4 },
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (_, compactor) = instant_compactor(dir.path());
        let mut turns: Vec<Turn> = (1..=9).map(tool_turn).collect();
        assert_paired(&turns);
        let result = run(&compactor, &mut turns, strategy).await;
        assert_eq!(result.turns_removed, 5, "{strategy}");
        assert_paired(&turns);
        let last = turns.last().unwrap();
        assert_eq!(last.messages.len(), 5, "{strategy}: a kept turn is whole");
    }
}

#[tokio::test]
async fn overflow_compacts_even_when_nothing_is_suggested() {
    let dir = tempfile::tempdir().unwrap();
    let (llm, compactor) = instant_compactor(dir.path());
    // Far below 80%, and fewer turns than Summarize keeps: still shrinks.
    let mut turns = thread_of(4);
    let result = compactor
        .compact_for_overflow(&mut turns, "be brief", now())
        .await
        .unwrap();
    assert_eq!(result.strategy, Summarize { keep_recent: 3 });
    assert_eq!(result.turns_removed, 1);
    assert_eq!(numbers(&turns), [1, 2, 3, 4]);
    assert_eq!(turns[0].kind, TurnKind::Summary);
    assert_eq!(llm.calls(), 1);

    // With 10 turns, the floor is Summarize keeping 5.
    let mut turns = thread_of(10);
    let result = compactor
        .compact_for_overflow(&mut turns, "", now())
        .await
        .unwrap();
    assert_eq!(result.strategy, Summarize { keep_recent: 5 });

    // Above 95% the monitor's harder cut wins.
    let mut turns = thread_of(10);
    let prompt = prompt_for_total(&turns, 99_000);
    let result = compactor
        .compact_for_overflow(&mut turns, &prompt, now())
        .await
        .unwrap();
    assert_eq!(result.strategy, Truncate { keep_recent: 3 });

    // Nothing left to remove.
    let mut empty = Vec::new();
    let result = compactor
        .compact_for_overflow(&mut empty, "", now())
        .await
        .unwrap();
    assert_eq!(result.turns_removed, 0);
}

#[tokio::test]
async fn files_are_dated_in_the_chosen_zone() {
    let dir = tempfile::tempdir().unwrap();
    let (_, compactor) = instant_compactor(dir.path());
    let compactor = compactor.with_time_zone(chrono_tz::Pacific::Auckland);
    let mut turns = thread_of(4);
    // 20:00 UTC on the 14th is 09:00 on the 15th in Auckland (NZDT).
    let evening = Utc.with_ymd_and_hms(2025, 3, 14, 20, 0, 0).unwrap();
    let result = compactor
        .compact(&mut turns, Summarize { keep_recent: 1 }, evening)
        .await
        .unwrap();
    assert!(
        result
            .archive_path
            .unwrap()
            .ends_with("context/archive/2025-03-15.md")
    );
    let daily = read(&dir.path().join("daily/2025-03-15.md"));
    assert!(
        daily.starts_with("## Conversation summary — 09:00 NZDT (turns 1–3)"),
        "{daily}"
    );
}

#[tokio::test]
async fn a_write_error_names_the_file_and_leaves_the_turns_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("context"), "a file, not a directory").unwrap();
    let (llm, compactor) = instant_compactor(dir.path());
    let mut turns = thread_of(8);
    let before = turns.clone();
    for strategy in [Truncate { keep_recent: 3 }, Summarize { keep_recent: 3 }] {
        let err = compactor
            .compact(&mut turns, strategy, now())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CompactionError::Io { path, .. } if path.starts_with(dir.path().join("context"))),
            "{err}"
        );
        assert!(err.to_string().contains("context"), "{err}");
        assert_eq!(turns, before);
    }
    assert_eq!(
        llm.calls(),
        0,
        "nothing is summarized before the archive is safe"
    );
}
