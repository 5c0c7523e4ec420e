//! Unit tests of the scheduling primitives' helpers.

use super::*;

#[test]
fn labels_are_one_short_line() {
    assert_eq!(short("check the deploy\nand more"), "check the deploy");
    let long = "x".repeat(200);
    assert_eq!(short(&long).chars().count(), LABEL_CHARS);
    assert!(short(&long).ends_with('…'));
}

#[test]
fn action_types_are_checked_against_what_the_tool_allows() {
    let only = [ActionType::Notification, ActionType::LlmPrompt];
    assert_eq!(
        ActionType::parse(&json!({}), "action", &only).unwrap(),
        ActionType::Notification
    );
    let err = ActionType::parse(&json!({"action": "tool_call"}), "action", &only).unwrap_err();
    assert!(
        err.to_string().contains("notification, llm_prompt"),
        "{err}"
    );
    let err = ActionType::parse(&json!({"action": "email"}), "action", &only).unwrap_err();
    assert!(err.to_string().contains("\"email\""), "{err}");
}
