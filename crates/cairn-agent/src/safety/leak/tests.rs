use std::sync::Mutex;

use async_trait::async_trait;
use cairn_core::chat::ToolCall;
use secrecy::SecretString;
use serde_json::json;

use super::*;

#[derive(Default)]
struct Kept(Mutex<Vec<FoundLeak>>);

#[async_trait]
impl LeakRecorder for Kept {
    async fn record(&self, leak: FoundLeak) {
        self.0.lock().unwrap().push(leak);
    }
}

fn guard() -> (LeakGuard, Arc<Kept>) {
    let guard = LeakGuard::new(&[WatchedSecret::new("GH", SecretString::from("s3cr3t-7781"))]);
    let kept = Arc::new(Kept::default());
    guard.attach_recorder(kept.clone());
    (guard, kept)
}

#[tokio::test]
async fn a_hit_is_recorded_by_name_with_a_redacted_excerpt() {
    let (guard, kept) = guard();
    let origin = LeakOrigin::session("cli:me");
    let args = json!({"url": "http://127.0.0.1:9/?k=s3cr3t-7781", "headers": {"X": "s3cr3t-7781"}});
    let names = guard
        .check_json(LeakPlace::Tool, "http_request", &args, &origin)
        .await;
    assert_eq!(names, ["GH"]);
    let kept = kept.0.lock().unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].secret, "GH");
    assert_eq!(kept[0].target, "http_request");
    assert_eq!(kept[0].origin, origin);
    assert!(
        kept[0].context.contains("?k=[secret:GH]"),
        "{}",
        kept[0].context
    );
    assert!(!kept[0].context.contains("s3cr3t"));
}

#[tokio::test]
async fn clean_text_records_nothing() {
    let (guard, kept) = guard();
    let names = guard
        .check(
            LeakPlace::Channel,
            "telegram",
            "all fine",
            &LeakOrigin::default(),
        )
        .await;
    assert!(names.is_empty());
    assert!(kept.0.lock().unwrap().is_empty());
}

#[tokio::test]
async fn messages_to_the_model_are_redacted_in_text_and_calls() {
    let (guard, kept) = guard();
    let messages = vec![
        ChatMessage::user("my key is s3cr3t-7781"),
        ChatMessage::assistant_tool_calls(
            String::new(),
            vec![ToolCall {
                id: "1".into(),
                name: "shell".into(),
                arguments: json!({"command": "echo s3cr3t-7781", "n": 1}),
            }],
        ),
        ChatMessage::tool_result("1", "shell", "done"),
    ];
    let messages = guard
        .redact_messages(&messages, "model", &LeakOrigin::default())
        .await
        .unwrap();
    assert_eq!(messages[0].content, "my key is [secret:GH]");
    assert_eq!(
        messages[1].tool_calls[0].arguments,
        json!({"command": "echo [secret:GH]", "n": 1})
    );
    assert_eq!(messages[2].content, "done");
    assert_eq!(kept.0.lock().unwrap().len(), 2);
    assert!(
        guard
            .redact_messages(&messages, "model", &LeakOrigin::default())
            .await
            .is_none()
    );
}

#[tokio::test]
async fn a_replaced_set_is_in_force_for_every_clone() {
    let (guard, _) = guard();
    let clone = guard.clone();
    guard.replace(&[WatchedSecret::new(
        "NEW",
        SecretString::from("n3w-value-99"),
    )]);
    assert_eq!(
        clone.redact("s3cr3t-7781 n3w-value-99"),
        "s3cr3t-7781 [secret:NEW]"
    );
}

#[test]
fn the_blocked_text_names_the_secret_only() {
    let text = blocked_text(&["GH".into()], "the call's arguments");
    assert!(text.contains("`GH`"));
    assert!(text.starts_with("blocked"));
}
