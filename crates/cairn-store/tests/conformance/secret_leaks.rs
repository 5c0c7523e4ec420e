//! Secrets found leaving: recorded by name, listed newest first.

use chrono::{Duration, TimeZone, Utc};
use uuid::Uuid;

use crate::fixture::Fixture;
use cairn_store::SecretLeak;

fn leak(secs: i64, secret: &str, place: &str) -> SecretLeak {
    SecretLeak {
        id: Uuid::now_v7(),
        at: Utc.with_ymd_and_hms(2026, 12, 2, 9, 0, 0).unwrap() + Duration::seconds(secs),
        secret: secret.into(),
        place: place.into(),
        target: "http_request".into(),
        agent: Some("main".into()),
        session_id: Some("cli:me".into()),
        run_id: None,
        context: "GET https://x.test/?k=[secret:GH]".into(),
    }
}

pub async fn secret_leaks_are_recorded_and_listed_newest_first(fx: &Fixture) {
    let s = &fx.store;
    assert!(s.secret_leaks(10).await.unwrap().is_empty());
    let first = leak(0, "GH", "tool");
    let second = leak(5, "shape:github", "channel");
    let third = SecretLeak {
        agent: None,
        session_id: None,
        run_id: Some("run-1".into()),
        ..leak(9, "LLM", "llm")
    };
    for l in [&first, &second, &third] {
        s.record_secret_leak(l).await.unwrap();
    }
    let listed = s.secret_leaks(10).await.unwrap();
    assert_eq!(listed, [third.clone(), second.clone(), first]);
    assert_eq!(s.secret_leaks(2).await.unwrap(), [third, second]);
}
