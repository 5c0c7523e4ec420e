//! The chat service over a real SQLite store and the fake LLM server:
//! sessions, interrupts, approvals by message, resume, isolation, pruning and
//! compaction when the provider reports an overflow.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]
#![expect(
    clippy::disallowed_methods,
    reason = "test fixtures may use blocking std::fs"
)]

mod harness;
mod models;
mod safety;

use std::sync::Arc;

use cairn_core::clock::Clock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_agent::chat::Reply;
use cairn_llm::testing::Scripted;
use serde_json::json;

use harness::{Harness, Sink, answer, notice};

#[tokio::test]
async fn concurrent_first_messages_create_one_session() {
    let h = Harness::new().await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let service = Arc::clone(&h.service);
        tasks.spawn(async move {
            service
                .handle(
                    Harness::inbound("terminal", None, "/ping"),
                    &Sink::default(),
                )
                .await
        });
    }
    for reply in tasks.join_all().await {
        assert_eq!(notice(&reply), "pong");
    }
    assert_eq!(h.store.list_sessions().await.unwrap().len(), 1);
    assert_eq!(h.service.sessions().len().await, 1);
}

#[tokio::test]
async fn a_new_message_interrupts_the_running_turn() {
    let h = Harness::new().await;
    h.server
        .push(Scripted::text("too slow").with_delay(Duration::from_secs(600)));
    h.server.push(Scripted::text("fast answer"));
    let sink = Arc::new(Sink {
        auto_approve: true,
        ..Default::default()
    });
    let first = {
        let (service, sink) = (Arc::clone(&h.service), Arc::clone(&sink));
        tokio::spawn(async move {
            service
                .handle(Harness::inbound("terminal", None, "first"), sink.as_ref())
                .await
        })
    };
    h.wait_for_requests(1).await;
    let second = h.say("second").await;
    assert_eq!(answer(&second), "fast answer");
    assert!(notice(&first.await.unwrap()).contains("Interrupted"));
    let turns = h.stored_turns().await;
    let states: Vec<&str> = turns.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["interrupted", "completed"]);
    assert!(
        h.sent(1).contains("first"),
        "the interrupted message stays in the history"
    );
}

#[tokio::test]
async fn approvals_can_come_as_later_messages() {
    let h = Harness::new().await;
    for _ in 0..2 {
        h.server
            .push(Scripted::tool_call("writer", json!({"text": "x"})));
        h.server.push(Scripted::text("finished"));
    }
    let sink = Arc::new(Sink::default());
    for (word, runs) in [("yes", 1), ("no", 1)] {
        let turn = {
            let (service, sink) = (Arc::clone(&h.service), Arc::clone(&sink));
            tokio::spawn(async move {
                service
                    .handle(
                        Harness::inbound("terminal", None, "write it"),
                        sink.as_ref(),
                    )
                    .await
            })
        };
        sink.approval_needed.notified().await;
        assert_eq!(
            sink.approvals.lock().unwrap().last().unwrap().tool,
            "writer"
        );
        let reply = h
            .service
            .handle(Harness::inbound("terminal", None, word), &Sink::default())
            .await;
        assert_eq!(
            notice(&reply),
            if word == "yes" {
                "Approved."
            } else {
                "Declined."
            }
        );
        assert_eq!(answer(&turn.await.unwrap()), "finished");
        assert_eq!(h.writer.0.load(Ordering::SeqCst), runs);
    }
    // "yes" with nothing pending is not an approval.
    assert_eq!(
        h.say("/ping").await,
        Reply::Notice {
            text: "pong".into()
        }
    );
}

#[tokio::test]
async fn resume_continues_an_interrupted_turn() {
    let h = Harness::new().await;
    h.server
        .push(Scripted::text("never arrives").with_delay(Duration::from_secs(600)));
    h.server.push(Scripted::text("resumed answer"));
    let sink = Arc::new(Sink {
        auto_approve: true,
        ..Default::default()
    });
    let turn = {
        let (service, sink) = (Arc::clone(&h.service), Arc::clone(&sink));
        tokio::spawn(async move {
            service
                .handle(
                    Harness::inbound("terminal", None, "long question"),
                    sink.as_ref(),
                )
                .await
        })
    };
    h.wait_for_requests(1).await;
    assert!(h.service.interrupt("ada", "terminal"));
    assert!(notice(&turn.await.unwrap()).contains("/resume"));
    assert_eq!(answer(&h.say("/resume").await), "resumed answer");
    let turns = h.stored_turns().await;
    assert_eq!(turns.len(), 1, "the resumed turn is the same turn");
    assert_eq!(turns[0]["state"], "completed");
    assert_eq!(turns[0]["user_input"], "long question");
    assert!(notice(&h.say("/resume").await).contains("Nothing to resume"));
}

#[tokio::test]
async fn clear_is_undoable() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("one"));
    h.server.push(Scripted::text("two"));
    h.say("first").await;
    h.say("second").await;
    assert!(notice(&h.say("/clear").await).contains("Cleared"));
    assert!(h.stored_turns().await.is_empty());
    assert!(notice(&h.say("/undo").await).contains("Undone"));
    assert_eq!(h.stored_turns().await.len(), 2);
    assert!(notice(&h.say("/redo").await).contains("Redone"));
    assert!(h.stored_turns().await.is_empty());
}

#[tokio::test]
async fn equal_thread_ids_on_two_channels_never_meet() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("noted on a"));
    h.server.push(Scripted::text("fresh on b"));
    let sink = Sink {
        auto_approve: true,
        ..Default::default()
    };
    h.service
        .handle(
            Harness::inbound("telegram", Some("42"), "secret plan on telegram"),
            &sink,
        )
        .await;
    h.service
        .handle(
            Harness::inbound("slack", Some("42"), "hello from slack"),
            &sink,
        )
        .await;
    assert!(!h.sent(1).contains("secret plan"), "{}", h.sent(1));
    assert_eq!(h.store.list_sessions().await.unwrap().len(), 2);
}

#[tokio::test]
async fn idle_sessions_are_pruned_and_reload_with_their_history() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("hi"));
    h.server.push(Scripted::text("welcome back"));
    h.say("remember the word pelican").await;
    assert_eq!(h.service.prune_idle().await, 0, "not idle yet");
    h.clock.set(h.clock.now() + chrono::Duration::hours(2));
    assert_eq!(h.service.prune_idle().await, 1);
    assert!(h.service.sessions().is_empty().await);
    assert_eq!(answer(&h.say("what was the word?").await), "welcome back");
    assert!(h.sent(1).contains("pelican"));
}

#[tokio::test]
async fn a_context_overflow_is_compacted_into_a_summary_and_retried_once() {
    let h = Harness::new().await;
    for n in 0..7 {
        h.server.push(Scripted::text(format!("answer {n}")));
    }
    for n in 0..7 {
        h.say(&format!("question {n}")).await;
    }
    h.server.push(Scripted::context_length_exceeded());
    h.server
        .push(Scripted::text("SUMMARY: questions 0 to 1 were asked."));
    h.server.push(Scripted::text("fits now"));
    let sink = Sink {
        auto_approve: true,
        ..Default::default()
    };
    let reply = h
        .service
        .handle(Harness::inbound("terminal", None, "question 7"), &sink)
        .await;
    assert_eq!(answer(&reply), "fits now");
    assert_eq!(sink.compactions.lock().unwrap().len(), 1);

    let requests = h.server.requests();
    let overflowed = requests.len() - 3;
    let retried = requests.len() - 1;
    let before = requests[overflowed].body["messages"]
        .as_array()
        .unwrap()
        .len();
    let after = requests[retried].body["messages"].as_array().unwrap().len();
    assert!(after < before, "retried with less: {after} vs {before}");
    assert!(
        h.sent(retried).contains("SUMMARY: questions 0 to 1"),
        "the summary is in the conversation"
    );
    assert!(h.sent(retried).contains("question 7"));

    let turns = h.stored_turns().await;
    assert_eq!(turns[0]["kind"], "summary");
    assert_eq!(turns.last().unwrap()["state"], "completed");
    let daily = std::fs::read_dir(h.workspace.path().join("daily"))
        .unwrap()
        .count();
    assert_eq!(daily, 1, "the summary is also in the daily log");
}

#[tokio::test]
async fn compact_by_hand_summarizes_older_turns() {
    let h = Harness::new().await;
    for n in 0..7 {
        h.server.push(Scripted::text(format!("answer {n}")));
        h.say(&format!("question {n}")).await;
    }
    h.server.push(Scripted::text("SUMMARY by hand"));
    let reply = h.say("/compact").await;
    assert!(
        notice(&reply).contains("Compacted (summarize)"),
        "{reply:?}"
    );
    let turns = h.stored_turns().await;
    assert_eq!(turns.len(), 6, "a summary and the 5 recent turns");
    assert_eq!(turns[0]["kind"], "summary");
    assert!(notice(&h.say("/undo").await).contains("Undone"));
    assert_eq!(h.stored_turns().await.len(), 7);
}
