//! The event matcher: channel filters, several routines per message, bad and
//! oversized patterns, unicode, and agreement with the patterns one by one.

use cairn_automation::routines::event_matcher::{
    EventMatcher, EventPattern, PatternProblem, validate_pattern,
};
use proptest::prelude::*;
use regex::Regex;
use uuid::Uuid;

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn routine(n: u128, channel: Option<&str>, pattern: &str) -> EventPattern {
    EventPattern {
        id: id(n),
        name: format!("routine-{n}"),
        channel: channel.map(str::to_string),
        pattern: pattern.to_string(),
    }
}

#[test]
fn table() {
    let matcher = EventMatcher::build([
        routine(1, None, r"deploy\s+\w+"),
        routine(2, Some("slack"), "incident"),
        routine(3, Some("telegram"), "incident"),
        routine(4, None, "^ping$"),
        routine(5, None, "(?i)urgent|asap"),
        routine(6, None, "café|日本語"),
        routine(7, None, "Deploy"),
    ])
    .unwrap();
    let cases: &[(&str, &str, &[u128])] = &[
        // no filter: any channel
        ("cli", "please deploy   web now", &[1]),
        ("slack", "deploy api", &[1]),
        // channel filter
        ("slack", "incident on db", &[2]),
        ("telegram", "incident on db", &[3]),
        ("cli", "incident on db", &[]),
        // several routines on one message, in id order
        ("slack", "URGENT: deploy db, incident", &[1, 2, 5]),
        // anchored
        ("cli", "ping", &[4]),
        ("cli", "ping me", &[]),
        // case-sensitive as written
        ("cli", "Deploy now", &[7]),
        ("cli", "DEPLOY web", &[]),
        ("cli", "asap", &[5]),
        // unicode text and patterns
        ("cli", "un café s'il vous plaît", &[6]),
        ("cli", "日本語のメッセージ", &[6]),
        ("cli", "deploy über", &[1]),
        ("cli", "", &[]),
    ];
    for (channel, text, want) in cases {
        let want: Vec<Uuid> = want.iter().map(|n| id(*n)).collect();
        assert_eq!(matcher.matches(channel, text), want, "{channel}: {text:?}");
    }
}

#[test]
fn order_does_not_depend_on_input_order() {
    let a = EventMatcher::build([routine(2, None, "x"), routine(1, None, "x")]).unwrap();
    let b = EventMatcher::build([routine(1, None, "x"), routine(2, None, "x")]).unwrap();
    assert_eq!(a.matches("c", "x"), vec![id(1), id(2)]);
    assert_eq!(b.matches("c", "x"), vec![id(1), id(2)]);
}

#[test]
fn empty_matcher_matches_nothing() {
    assert!(
        EventMatcher::build([])
            .unwrap()
            .matches("c", "hi")
            .is_empty()
    );
    assert!(EventMatcher::empty().is_empty());
}

#[test]
fn every_bad_pattern_is_reported_with_routine_and_pattern() {
    let errors = EventMatcher::build([
        routine(1, None, "fine"),
        routine(2, None, "deploy("),
        routine(3, None, r"\p{Nope}"),
        routine(4, None, ""),
    ])
    .unwrap_err();
    assert_eq!(errors.len(), 3, "{errors:?}");
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors[0].routine_id, Some(id(2)));
    assert!(
        messages[0].starts_with(
            "routine \"routine-2\": event pattern `deploy(`: invalid regular expression: "
        ),
        "{}",
        messages[0]
    );
    assert!(messages[0].contains("unclosed group"), "{}", messages[0]);
    assert!(
        messages[1].contains("routine-3") && messages[1].contains(r"`\p{Nope}`"),
        "{}",
        messages[1]
    );
    assert!(
        messages[1].contains("Unicode property not found"),
        "{}",
        messages[1]
    );
    assert_eq!(errors[2].problem, PatternProblem::Empty);
    assert!(messages[2].contains("routine-4"), "{}", messages[2]);
}

#[test]
fn oversized_pattern_is_refused_clearly() {
    let errors = EventMatcher::build([routine(1, None, "ok"), routine(9, None, "(a{1000}){1000}")])
        .unwrap_err();
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0].problem, PatternProblem::TooBig { .. }));
    assert_eq!(
        errors[0].to_string(),
        "routine \"routine-9\": event pattern `(a{1000}){1000}`: it compiles to more than \
         1024 KiB (large repetition counts such as {1000} multiply); simplify it"
    );
}

#[test]
fn validate_pattern_matches_build() {
    assert!(validate_pattern("r", r"deploy\s+\w+").is_ok());
    let err = validate_pattern("my-routine", "(a{1000}){1000}").unwrap_err();
    assert_eq!(err.routine, "my-routine");
    assert_eq!(err.routine_id, None);
    assert!(matches!(err.problem, PatternProblem::TooBig { .. }));
    let err = validate_pattern("my-routine", "[z-a]").unwrap_err();
    assert!(
        err.to_string().contains("my-routine") && err.to_string().contains("`[z-a]`"),
        "{err}"
    );
}

const WORDS: &[&str] = &[
    "deploy", "web", "api", "é", "日本", "ok", "Fail", "x", "Éa", "straße", "ü",
];

fn pattern_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(WORDS).prop_map(str::to_string),
        proptest::sample::select(WORDS).prop_map(|w| format!(r"{w}\s+\w+")),
        (
            proptest::sample::select(WORDS),
            proptest::sample::select(WORDS)
        )
            .prop_map(|(a, b)| format!("{a}|{b}")),
        proptest::sample::select(WORDS).prop_map(|w| format!("(?i)^{w}")),
        proptest::sample::select(WORDS).prop_map(|w| format!(r"\b{w}\b")),
        // Unicode word boundaries: matched apart from the main set, through
        // their literals, or in the second set when they have none.
        proptest::sample::select(WORDS).prop_map(|w| format!(r"\b{w}\w*")),
        proptest::sample::select(WORDS).prop_map(|w| format!(r"(?i)\b{w}\b|x{w}")),
        proptest::sample::select(WORDS).prop_map(|w| format!(r"\B{w}")),
        proptest::sample::select(WORDS).prop_map(|w| format!(r"\w+{w}\b")),
        proptest::sample::select(WORDS).prop_map(|w| format!(r"\b{{start}}{w}|{w}\b{{end}}")),
        proptest::sample::select(WORDS).prop_map(|w| format!(r"(?-u:\b){w}")),
        Just(r"\b\w\b".to_string()),
    ]
}

fn text_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            proptest::sample::select(WORDS).prop_map(str::to_string),
            "[a-zA-Z éÉü日ß_0-9.]{0,4}"
        ],
        0..8,
    )
    .prop_map(|words| words.join(" "))
}

proptest! {
    #[test]
    fn matches_agrees_with_each_regex_alone(
        routines in proptest::collection::vec(
            (pattern_strategy(), proptest::option::of(proptest::sample::select(&["a", "b"][..]))),
            0..30,
        ),
        channel in proptest::sample::select(&["a", "b", "c"][..]),
        text in text_strategy(),
    ) {
        let patterns: Vec<EventPattern> = routines
            .iter()
            .enumerate()
            .map(|(i, (p, c))| routine(i as u128, *c, p))
            .collect();
        let matcher = EventMatcher::build(patterns.clone()).unwrap();
        let want: Vec<Uuid> = patterns
            .iter()
            .filter(|p| p.channel.as_deref().is_none_or(|c| c == channel))
            .filter(|p| Regex::new(&p.pattern).unwrap().is_match(&text))
            .map(|p| p.id)
            .collect();
        prop_assert_eq!(matcher.matches(channel, &text), want);
    }
}

#[test]
fn unicode_word_boundaries_on_non_ascii_text() {
    let matcher = EventMatcher::build([
        routine(1, None, r"\bcafé\b"),
        routine(2, None, r"\bété"),
        routine(3, None, r"(?i)\bÉTÉ\b"),
        routine(4, None, r"\b\w+ße\b"),
        routine(5, None, "plain"),
        routine(6, Some("slack"), r"\b日本\b"),
    ])
    .unwrap();
    let cases: &[(&str, &str, &[u128])] = &[
        ("cli", "un café, merci", &[1]),
        // é is a word character, so no boundary inside "cafés"
        ("cli", "deux cafés", &[]),
        ("cli", "l'été dernier", &[2, 3]),
        ("cli", "arrêté", &[]),
        ("cli", "die Straße ist plain", &[4, 5]),
        ("slack", "日本 です", &[6]),
        ("cli", "日本 です", &[]),
    ];
    for (channel, text, want) in cases {
        let want: Vec<Uuid> = want.iter().map(|n| id(*n)).collect();
        assert_eq!(matcher.matches(channel, text), want, "{channel}: {text:?}");
    }
}
