//! Turns that survive a caller going away, approvals that do not wait
//! forever, and a compacted history that every provider accepts.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_agent::chat::Reply;
use cairn_llm::testing::Scripted;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::harness::{Harness, Sink, Wire, answer, notice};

/// A model call that will not answer while the test runs.
fn stalled() -> Scripted {
    Scripted::text("never arrives").with_delay(Duration::from_secs(600))
}

/// Runs a message in its own task, as a channel serving a client would.
fn spawn_turn(h: &Harness, text: &str, sink: Arc<Sink>) -> JoinHandle<Reply> {
    let service = Arc::clone(&h.service);
    let inbound = Harness::inbound("terminal", None, text);
    tokio::spawn(async move { service.handle(inbound, sink.as_ref()).await })
}

fn approving() -> Arc<Sink> {
    Arc::new(Sink {
        auto_approve: true,
        ..Default::default()
    })
}

/// Guards a step that used to hang, so a regression fails instead of stalling CI.
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("{what} never finished"))
}

#[tokio::test]
async fn the_message_is_stored_before_the_model_is_called() {
    let h = Harness::new().await;
    h.server.push(stalled());
    let turn = spawn_turn(&h, "remember the milk", approving());
    h.wait_for_requests(1).await;
    let turns = h.stored_turns().await;
    assert_eq!(turns.len(), 1, "the running turn is stored: {turns:?}");
    assert_eq!(turns[0]["state"], "processing");
    assert_eq!(turns[0]["messages"][0]["content"], "remember the milk");
    turn.abort();
}

#[tokio::test]
async fn a_turn_whose_caller_went_away_resumes_without_rerunning_tools() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("answer one"));
    h.say("first question").await;
    h.server
        .push(Scripted::tool_call("writer", json!({"text": "x"})));
    h.server.push(stalled());
    let turn = spawn_turn(&h, "second question", approving());
    // Request 3 is the model call after the tool ran: the result exists.
    h.wait_for_requests(3).await;
    turn.abort(); // the client went away mid-turn
    assert!(turn.await.unwrap_err().is_cancelled());
    assert_eq!(h.writer.0.load(Ordering::SeqCst), 1);
    let turns = h.stored_turns().await;
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(
        turns[1]["messages"].to_string().contains("written"),
        "the tool result was recorded when it arrived: {}",
        turns[1]["messages"]
    );

    h.server.push(Scripted::text("done after resume"));
    assert_eq!(answer(&h.say("/resume").await), "done after resume");
    assert_eq!(
        h.writer.0.load(Ordering::SeqCst),
        1,
        "a tool that finished is not run again"
    );
    let sent = h.sent(3);
    for part in ["first question", "answer one", "second question", "written"] {
        assert!(sent.contains(part), "{part} missing from {sent}");
    }
    let turns = h.stored_turns().await;
    let states: Vec<&str> = turns.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["completed", "completed"]);
}

#[tokio::test]
async fn a_tool_result_is_kept_while_slower_calls_still_run() {
    let h = Harness::new().await;
    h.server.push(Scripted::tool_calls([
        ("writer", json!({"text": "x"})),
        ("slow", json!({})),
    ]));
    let turn = spawn_turn(&h, "write, and wait for the slow one", approving());
    h.wait_for_requests(1).await;
    let mut kept = false;
    for _ in 0..1000 {
        let turns = h.stored_turns().await;
        if turns
            .first()
            .is_some_and(|t| t["messages"].to_string().contains("written"))
        {
            kept = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        kept,
        "the writer's result was not stored while the slow call ran"
    );
    turn.abort(); // the process goes away with the slow call still running
    let _ = turn.await;

    h.server.push(Scripted::text("resumed"));
    assert_eq!(answer(&h.say("/resume").await), "resumed");
    assert_eq!(h.writer.0.load(Ordering::SeqCst), 1, "not run again");
    let sent = h.sent(1);
    assert!(sent.contains("written"), "{sent}");
    assert!(
        sent.contains("did not finish"),
        "the slow call is answered as unfinished: {sent}"
    );
}

#[tokio::test]
async fn a_dropped_turn_leaves_the_whole_history_in_memory_and_in_the_store() {
    let h = Harness::new().await;
    h.server.push(Scripted::text("answer one"));
    h.say("first question").await;
    h.server.push(stalled());
    let turn = spawn_turn(&h, "second question", approving());
    h.wait_for_requests(2).await;
    turn.abort();
    let _ = turn.await;

    h.server.push(Scripted::text("answer three"));
    assert_eq!(answer(&h.say("third question").await), "answer three");
    let sent = h.sent(2);
    for part in [
        "first question",
        "answer one",
        "second question",
        "third question",
    ] {
        assert!(sent.contains(part), "{part} missing from {sent}");
    }
    let turns = h.stored_turns().await;
    let states: Vec<&str> = turns.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["completed", "interrupted", "completed"]);
    assert_eq!(turns[0]["messages"][1]["content"], "answer one");
}

#[tokio::test]
async fn an_unanswered_approval_is_declined_after_the_timeout() {
    let h = Harness::build(Wire::OpenAi, Duration::from_millis(200)).await;
    h.server
        .push(Scripted::tool_call("writer", json!({"text": "x"})));
    h.server.push(Scripted::text("I will ask you first"));
    // This channel cannot prompt, and nobody answers.
    let sink = Sink::default();
    let reply = within(
        "the turn waiting for approval",
        h.service
            .handle(Harness::inbound("terminal", None, "write it"), &sink),
    )
    .await;
    assert_eq!(answer(&reply), "I will ask you first");
    assert_eq!(h.writer.0.load(Ordering::SeqCst), 0);
    assert!(
        h.sent(1)
            .contains("nobody answered the approval request within"),
        "the model is told why: {}",
        h.sent(1)
    );
}

#[tokio::test]
async fn interrupt_or_a_new_message_ends_a_pending_approval() {
    let h = Harness::new().await;
    let sink = Arc::new(Sink::default());

    h.server
        .push(Scripted::tool_call("writer", json!({"text": "x"})));
    let turn = spawn_turn(&h, "write it", Arc::clone(&sink));
    sink.approval_needed.notified().await;
    let reply = h
        .service
        .handle(
            Harness::inbound("terminal", None, "/interrupt"),
            &Sink::default(),
        )
        .await;
    assert_eq!(notice(&reply), "Interrupted.");
    assert!(notice(&within("the interrupted turn", turn).await.unwrap()).contains("Interrupted"));

    h.server
        .push(Scripted::tool_call("writer", json!({"text": "y"})));
    let turn = spawn_turn(&h, "write again", Arc::clone(&sink));
    sink.approval_needed.notified().await;
    h.server.push(Scripted::text("something else, then"));
    let reply = within("the new message", h.say("actually, never mind")).await;
    assert_eq!(answer(&reply), "something else, then");
    assert!(notice(&turn.await.unwrap()).contains("Interrupted"));
    assert_eq!(h.writer.0.load(Ordering::SeqCst), 0, "nothing was approved");
}

/// Roles of a request's conversation, system prompt left out.
fn roles(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .filter(|r| r != "system")
        .collect()
}

#[tokio::test]
async fn a_compacted_thread_starts_with_the_person_in_both_wire_formats() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let h = Harness::build(wire, Duration::from_secs(120)).await;
        for n in 0..7 {
            h.server.push(Scripted::text(format!("answer {n}")));
            h.say(&format!("question {n}")).await;
        }
        h.server.push(Scripted::text("SUMMARY: seven questions"));
        assert!(notice(&h.say("/compact").await).contains("Compacted"));
        h.server.push(Scripted::text("after compaction"));
        assert_eq!(answer(&h.say("question 7").await), "after compaction");

        let last = h.server.requests().len() - 1;
        let body = h.server.requests()[last].body.clone();
        let messages = h.messages(last);
        let roles = roles(&messages);
        assert_eq!(
            roles[0], "user",
            "{wire:?}: the person speaks first: {roles:?}"
        );
        for pair in roles.windows(2) {
            assert_ne!(pair[0], pair[1], "{wire:?}: roles alternate: {roles:?}");
        }
        let system = match wire {
            Wire::OpenAi => messages[0].to_string(),
            Wire::Anthropic => body["system"].to_string(),
        };
        assert!(
            system.contains("SUMMARY: seven questions"),
            "{wire:?}: the summary travels with the system prompt: {system}"
        );
        assert!(messages.last().unwrap().to_string().contains("question 7"));
    }
}

#[tokio::test]
async fn pruning_a_session_forgets_its_always_answers_until_it_comes_back() {
    let h = Harness::new().await;
    h.server
        .push(Scripted::tool_call("writer", json!({"text": "x"})));
    h.server.push(Scripted::text("written once"));
    let sink = Arc::new(Sink::default());
    let turn = spawn_turn(&h, "write it", Arc::clone(&sink));
    sink.approval_needed.notified().await;
    let reply = h
        .service
        .handle(
            Harness::inbound("terminal", None, "always"),
            &Sink::default(),
        )
        .await;
    assert_eq!(notice(&reply), "Approved.");
    assert_eq!(answer(&turn.await.unwrap()), "written once");
    let session = h.store.list_sessions().await.unwrap()[0].id.to_string();
    let policy = h.service.agent().runner().policy().clone();
    assert_eq!(policy.session_allow_list(&session), ["writer"]);

    use cairn_core::clock::Clock;
    h.clock.set(h.clock.now() + chrono::Duration::hours(2));
    assert_eq!(h.service.prune_idle().await, 1);
    assert!(
        policy.session_allow_list(&session).is_empty(),
        "the gate forgets a pruned session"
    );

    // The answer is kept with the session, so it holds again when it returns.
    h.server
        .push(Scripted::tool_call("writer", json!({"text": "y"})));
    h.server.push(Scripted::text("written twice"));
    let reply = within(
        "a turn that must not ask again",
        h.service.handle(
            Harness::inbound("terminal", None, "write again"),
            sink.as_ref(),
        ),
    )
    .await;
    assert_eq!(answer(&reply), "written twice");
    assert_eq!(h.writer.0.load(Ordering::SeqCst), 2);
}
