//! Fuzzes the submission parser (what a typed line means): nothing may panic,
//! and the parse keeps its promises: plain text goes to the agent unchanged,
//! `//text` sends `/text`, a pending approval only changes approval answers,
//! suggestions name real commands, and every submission survives JSON.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run submission_parse -- -dict=submission.dict -max_total_time=240`

#![no_main]

use cairn_core::submission::{COMMANDS, ParseContext, Submission, parse};
use libfuzzer_sys::fuzz_target;

const IDLE: ParseContext = ParseContext {
    awaiting_approval: false,
};
const ASKING: ParseContext = ParseContext {
    awaiting_approval: true,
};

fuzz_target!(|text: &str| {
    let idle = parse(text, IDLE);
    let asking = parse(text, ASKING);
    assert_eq!(
        idle,
        parse(text, IDLE),
        "{text:?}: parse is not deterministic"
    );

    let trimmed = text.trim();
    if !trimmed.starts_with('/') && !trimmed.starts_with('{') {
        assert_eq!(
            idle,
            Submission::UserInput {
                text: text.to_string()
            },
            "{text:?}: plain text must reach the agent unchanged"
        );
    }
    if let Some(literal) = trimmed.strip_prefix("//") {
        assert_eq!(
            idle,
            Submission::UserInput {
                text: format!("/{literal}")
            },
            "{text:?}: //text must send /text"
        );
    }
    if !matches!(asking, Submission::Approval { .. }) {
        assert_eq!(
            asking, idle,
            "{text:?}: a pending approval changed a non-answer"
        );
    }
    match &idle {
        Submission::UnknownCommand { name, suggestion } => {
            assert!(!name.is_empty(), "{text:?}: empty command name");
            if let Some(s) = suggestion {
                let known = s
                    .strip_prefix('/')
                    .is_some_and(|s| COMMANDS.iter().any(|(c, _)| *c == s));
                assert!(known, "{text:?}: suggestion {s:?} is not a command");
            }
        }
        Submission::Approval {
            approved, always, ..
        } => assert!(*approved || !*always, "{text:?}: 'always' on a denial"),
        _ => {}
    }
    for submission in [&idle, &asking] {
        let json = serde_json::to_string(submission)
            .unwrap_or_else(|e| panic!("{submission:?} does not serialize: {e}"));
        let back: Submission = serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("{json} does not deserialize: {e}"));
        assert_eq!(&back, submission, "{json} round-trips to something else");
    }
});
