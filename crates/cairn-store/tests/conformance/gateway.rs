//! API tokens, pairing codes and idempotency keys.

use cairn_store::{IdempotencyClaim, NewApiToken, StoreError};
use chrono::{Duration, TimeZone, Utc};
use serde_json::json;

use crate::fixture::Fixture;

pub fn new_token(name: &str, hash: &str, expires: Option<chrono::DateTime<Utc>>) -> NewApiToken {
    NewApiToken {
        name: name.to_string(),
        token_hash: hash.to_string(),
        origin: "cli".to_string(),
        expires_at: expires,
    }
}

pub async fn tokens_authenticate_until_revoked_or_expired(fx: &Fixture) {
    let s = &fx.store;
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    s.create_api_token(&new_token("laptop", "h1", None), now)
        .await
        .unwrap();
    s.create_api_token(
        &new_token("phone", "h2", Some(now + Duration::hours(1))),
        now,
    )
    .await
    .unwrap();
    // A live name cannot be taken twice.
    let err = s
        .create_api_token(&new_token("laptop", "h3", None), now)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");

    let found = s.authenticate_api_token("h1", now).await.unwrap().unwrap();
    assert_eq!(found.name, "laptop");
    assert!(
        s.authenticate_api_token("nope", now)
            .await
            .unwrap()
            .is_none()
    );
    // Expiry is exclusive of the instant itself.
    assert!(
        s.authenticate_api_token("h2", now + Duration::minutes(59))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        s.authenticate_api_token("h2", now + Duration::hours(1))
            .await
            .unwrap()
            .is_none()
    );

    assert!(s.revoke_api_token("laptop", now).await.unwrap());
    assert!(!s.revoke_api_token("laptop", now).await.unwrap());
    assert!(s.authenticate_api_token("h1", now).await.unwrap().is_none());
    // The name is free again once revoked; the revoked row stays listed.
    s.create_api_token(&new_token("laptop", "h4", None), now)
        .await
        .unwrap();
    let listed = s.list_api_tokens().await.unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed.iter().filter(|t| t.revoked_at.is_some()).count(), 1);
    let used = listed.iter().find(|t| t.token_hash == "h1").unwrap();
    assert_eq!(used.last_used_at, Some(now));
}

pub async fn a_pairing_code_buys_one_token(fx: &Fixture) {
    let s = &fx.store;
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    s.create_pairing_code("c1", now, now + Duration::minutes(10))
        .await
        .unwrap();
    let paired = s
        .pair_with_code("c1", &new_token("device-1", "t1", None), now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paired.name, "device-1");
    // Spent: a second use records nothing.
    assert!(
        s.pair_with_code("c1", &new_token("device-2", "t2", None), now)
            .await
            .unwrap()
            .is_none()
    );
    assert!(s.authenticate_api_token("t2", now).await.unwrap().is_none());
    // Unknown and expired codes buy nothing.
    assert!(
        s.pair_with_code("zz", &new_token("device-3", "t3", None), now)
            .await
            .unwrap()
            .is_none()
    );
    s.create_pairing_code("c2", now, now + Duration::minutes(10))
        .await
        .unwrap();
    let late = now + Duration::minutes(10);
    assert!(
        s.pair_with_code("c2", &new_token("device-4", "t4", None), late)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn idempotency_keys_replay_the_first_response(fx: &Fixture) {
    let s = &fx.store;
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let ttl = Duration::hours(24);
    assert_eq!(
        s.claim_idempotency_key("webhook", "k1", now, ttl)
            .await
            .unwrap(),
        IdempotencyClaim::Claimed
    );
    assert_eq!(
        s.claim_idempotency_key("webhook", "k1", now, ttl)
            .await
            .unwrap(),
        IdempotencyClaim::InFlight
    );
    // Another scope is another key.
    assert_eq!(
        s.claim_idempotency_key("other", "k1", now, ttl)
            .await
            .unwrap(),
        IdempotencyClaim::Claimed
    );
    s.complete_idempotency_key("webhook", "k1", &json!({"response": "hi"}))
        .await
        .unwrap();
    assert_eq!(
        s.claim_idempotency_key("webhook", "k1", now + Duration::hours(23), ttl)
            .await
            .unwrap(),
        IdempotencyClaim::Done(json!({"response": "hi"}))
    );
    // After the ttl the key is forgotten and the request runs again.
    assert_eq!(
        s.claim_idempotency_key("webhook", "k1", now + ttl, ttl)
            .await
            .unwrap(),
        IdempotencyClaim::Claimed
    );
    // A failed request releases its claim; a completed one is not released.
    assert_eq!(
        s.claim_idempotency_key("webhook", "k2", now, ttl)
            .await
            .unwrap(),
        IdempotencyClaim::Claimed
    );
    s.release_idempotency_key("webhook", "k2").await.unwrap();
    assert_eq!(
        s.claim_idempotency_key("webhook", "k2", now, ttl)
            .await
            .unwrap(),
        IdempotencyClaim::Claimed
    );
    assert_eq!(
        s.prune_idempotency_keys(now + Duration::hours(48))
            .await
            .unwrap(),
        3
    );
}
