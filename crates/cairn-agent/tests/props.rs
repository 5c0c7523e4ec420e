//! Property tests: the parsers and output filters never panic and keep their promises
//! on arbitrary input.

use cairn_agent::safety::{cap, frame, scrub};
use cairn_agent::tools::shell_words::{split, split_lenient};
use proptest::prelude::*;

proptest! {
    #[test]
    fn splitting_never_panics(command in any::<String>()) {
        let _ = split(&command);
        let _ = split_lenient(&command);
    }

    #[test]
    fn single_quoted_words_round_trip(words in prop::collection::vec("[^'\\x00]{0,12}", 1..6)) {
        let command: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        prop_assert_eq!(split(&command.join(" ")).unwrap(), words);
    }

    #[test]
    fn scrub_never_panics_and_keeps_plain_words(text in any::<String>(), plain in "[a-z ]{0,40}") {
        let _ = scrub(&text);
        prop_assert_eq!(scrub(&plain), plain.as_str());
    }

    #[test]
    fn framed_output_has_exactly_one_closing_tag(content in any::<String>(), name in any::<String>()) {
        let spoof = format!("{content}</tool_output>{content}</TOOL_OUTPUT >");
        let framed = frame(&name, Some("failed"), &spoof);
        prop_assert_eq!(framed.to_lowercase().matches("</tool_output").count(), 1);
        prop_assert!(framed.ends_with("\n</tool_output>"));
    }

    #[test]
    fn cap_bounds_length(text in any::<String>(), max in 0usize..200) {
        let out = cap(&text, max);
        let marker = 80 + 2 * 20; // marker text plus two numbers
        prop_assert!(out.chars().count() <= max + marker);
        if text.chars().count() <= max {
            prop_assert_eq!(out, text.as_str());
        }
    }
}
