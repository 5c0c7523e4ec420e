//! Inbound chat channels: the polling lease and cursor, allowed users,
//! strangers told once, and pairing through the gateway's codes.

use chrono::{Duration, TimeZone, Utc};

use crate::fixture::Fixture;
use cairn_store::ChannelPairing;

fn at(secs: i64) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap() + Duration::seconds(secs)
}

pub async fn one_process_polls_a_channel_and_the_cursor_survives_it(fx: &Fixture) {
    let s = &fx.store;
    let lease = Duration::seconds(30);
    assert_eq!(
        s.claim_channel_poll("tg", "a", at(0), lease).await.unwrap(),
        Some(0)
    );
    // Held: the other process waits; the holder renews.
    assert_eq!(
        s.claim_channel_poll("tg", "b", at(10), lease)
            .await
            .unwrap(),
        None
    );
    assert!(s.advance_channel_cursor("tg", "a", 42).await.unwrap());
    assert!(!s.advance_channel_cursor("tg", "b", 99).await.unwrap());
    // Never backwards.
    assert!(s.advance_channel_cursor("tg", "a", 7).await.unwrap());
    assert_eq!(
        s.claim_channel_poll("tg", "a", at(20), lease)
            .await
            .unwrap(),
        Some(42)
    );
    // Lapsed (the holder died): the other takes over where it stopped.
    assert_eq!(
        s.claim_channel_poll("tg", "b", at(49), lease)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.claim_channel_poll("tg", "b", at(51), lease)
            .await
            .unwrap(),
        Some(42)
    );
    assert!(!s.advance_channel_cursor("tg", "a", 50).await.unwrap());
    // Released at shutdown: free at once.
    s.release_channel_poll("tg", "b").await.unwrap();
    assert_eq!(
        s.claim_channel_poll("tg", "a", at(52), lease)
            .await
            .unwrap(),
        Some(42)
    );
    // Channels are independent.
    assert_eq!(
        s.claim_channel_poll("other", "b", at(52), lease)
            .await
            .unwrap(),
        Some(0)
    );
}

pub async fn channel_users_are_allowed_once_and_strangers_told_once(fx: &Fixture) {
    let s = &fx.store;
    assert!(!s.channel_user_allowed("tg", "42").await.unwrap());
    assert!(
        s.allow_channel_user("tg", "42", "cli", at(0))
            .await
            .unwrap()
    );
    assert!(
        !s.allow_channel_user("tg", "42", "cli", at(1))
            .await
            .unwrap()
    );
    assert!(s.channel_user_allowed("tg", "42").await.unwrap());
    assert!(!s.channel_user_allowed("other", "42").await.unwrap());
    let users = s.list_channel_users(Some("tg")).await.unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(
        (users[0].user_id.as_str(), users[0].origin.as_str()),
        ("42", "cli")
    );
    assert_eq!(s.list_channel_users(None).await.unwrap().len(), 1);
    assert!(s.note_channel_stranger("tg", "7", at(0)).await.unwrap());
    assert!(!s.note_channel_stranger("tg", "7", at(5)).await.unwrap());
}

pub async fn a_pairing_code_allows_one_channel_user(fx: &Fixture) {
    let s = &fx.store;
    s.create_pairing_code("hash-1", at(0), at(900))
        .await
        .unwrap();
    let paired = s
        .pair_channel_user("hash-1", "tg", "42", at(10), 10)
        .await
        .unwrap();
    assert_eq!(paired, ChannelPairing::Allowed);
    assert!(s.channel_user_allowed("tg", "42").await.unwrap());
    assert_eq!(
        s.list_channel_users(None).await.unwrap()[0].origin,
        "pairing"
    );
    // Spent: a second use is a wrong code, counted with the gateway's.
    let again = s
        .pair_channel_user("hash-1", "tg", "43", at(11), 10)
        .await
        .unwrap();
    assert_eq!(again, ChannelPairing::Wrong { wrong_codes: 1 });
    assert_eq!(s.pairing_state().await.unwrap().wrong_codes, 1);
    assert!(!s.channel_user_allowed("tg", "43").await.unwrap());
    for _ in 0..9 {
        s.pair_channel_user("nope", "tg", "43", at(12), 10)
            .await
            .unwrap();
    }
    assert_eq!(
        s.pair_channel_user("nope", "tg", "43", at(13), 10)
            .await
            .unwrap(),
        ChannelPairing::Locked
    );
}

pub async fn a_channel_message_is_taken_once_until_it_is_forgotten(fx: &Fixture) {
    let s = &fx.store;
    let keep = Duration::days(8);
    assert!(
        s.first_channel_message("wa", "wamid.A", at(0), keep)
            .await
            .unwrap()
    );
    // Delivered again (the app retries; a restarted daemon hears it again).
    assert!(
        !s.first_channel_message("wa", "wamid.A", at(60), keep)
            .await
            .unwrap()
    );
    // Channels are independent.
    assert!(
        s.first_channel_message("wa2", "wamid.A", at(60), keep)
            .await
            .unwrap()
    );
    // Past the app's retries, the old ids are forgotten as new ones come.
    let later = at(0) + keep + Duration::seconds(1);
    assert!(
        s.first_channel_message("wa", "wamid.B", later, keep)
            .await
            .unwrap()
    );
    assert!(
        s.first_channel_message("wa", "wamid.A", later, keep)
            .await
            .unwrap()
    );
    assert!(
        !s.first_channel_message("wa", "wamid.B", later, keep)
            .await
            .unwrap()
    );
}

pub async fn a_kept_delivery_waits_until_it_is_forgotten(fx: &Fixture) {
    let s = &fx.store;
    let second = s
        .keep_channel_delivery("wa", "{\"n\":2}", at(2))
        .await
        .unwrap();
    let first = s
        .keep_channel_delivery("wa", "{\"n\":1}", at(1))
        .await
        .unwrap();
    s.keep_channel_delivery("other", "{}", at(0)).await.unwrap();
    let kept = s.kept_channel_deliveries("wa", 10).await.unwrap();
    assert_eq!(
        kept,
        [
            (first.clone(), "{\"n\":1}".to_string()),
            (second.clone(), "{\"n\":2}".to_string())
        ]
    );
    assert_eq!(s.kept_channel_deliveries("wa", 1).await.unwrap().len(), 1);
    s.forget_channel_delivery(&first).await.unwrap();
    // Forgetting twice (two daemons handled it) is fine.
    s.forget_channel_delivery(&first).await.unwrap();
    let kept = s.kept_channel_deliveries("wa", 10).await.unwrap();
    assert_eq!(kept, [(second, "{\"n\":2}".to_string())]);
    assert_eq!(
        s.kept_channel_deliveries("other", 10).await.unwrap().len(),
        1
    );
}
