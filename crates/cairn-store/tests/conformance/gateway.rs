//! API tokens, pairing codes and idempotency keys.

use cairn_store::{IdempotencyClaim, NewApiToken, PairOutcome, PairingState, StoreError};
use chrono::{Duration, TimeZone, Utc};

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
    assert_eq!(
        s.pairing_state().await.unwrap(),
        PairingState {
            wrong_codes: 0,
            tokens_ever: false
        }
    );
    s.create_pairing_code("c1", now, now + Duration::minutes(10))
        .await
        .unwrap();
    let PairOutcome::Paired(paired) = s
        .pair_with_code("c1", &new_token("device-1", "t1", None), now, LIMIT)
        .await
        .unwrap()
    else {
        panic!("the code pairs")
    };
    assert_eq!(paired.name, "device-1");
    assert!(s.pairing_state().await.unwrap().tokens_ever);
    // Spent: a second use records nothing.
    assert_eq!(
        s.pair_with_code("c1", &new_token("device-2", "t2", None), now, LIMIT)
            .await
            .unwrap(),
        PairOutcome::Wrong { wrong_codes: 1 }
    );
    assert!(s.authenticate_api_token("t2", now).await.unwrap().is_none());
    // Unknown and expired codes buy nothing.
    assert_eq!(
        s.pair_with_code("zz", &new_token("device-3", "t3", None), now, LIMIT)
            .await
            .unwrap(),
        PairOutcome::Wrong { wrong_codes: 2 }
    );
    s.create_pairing_code("c2", now, now + Duration::minutes(10))
        .await
        .unwrap();
    // A new code starts the count over.
    assert_eq!(s.pairing_state().await.unwrap().wrong_codes, 0);
    let late = now + Duration::minutes(10);
    assert_eq!(
        s.pair_with_code("c2", &new_token("device-4", "t4", None), late, LIMIT)
            .await
            .unwrap(),
        PairOutcome::Wrong { wrong_codes: 1 }
    );
}

const LIMIT: u32 = 10;

pub async fn wrong_pairing_codes_void_every_code_at_the_limit(fx: &Fixture) {
    let s = &fx.store;
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let later = now + Duration::minutes(10);
    s.create_pairing_code("right", now, later).await.unwrap();
    s.create_pairing_code("other", now, later).await.unwrap();
    for n in 1..=LIMIT {
        assert_eq!(
            s.pair_with_code("guess", &new_token("x", "tx", None), now, LIMIT)
                .await
                .unwrap(),
            PairOutcome::Wrong { wrong_codes: n }
        );
    }
    // Every outstanding code is void: the right one no longer pairs.
    for code in ["right", "other"] {
        assert_eq!(
            s.pair_with_code(code, &new_token("y", "ty", None), now, LIMIT)
                .await
                .unwrap(),
            PairOutcome::Locked
        );
    }
    assert_eq!(s.pairing_state().await.unwrap().wrong_codes, LIMIT);
    // Only a new code lifts the lock, and the old ones stay void.
    s.create_pairing_code("fresh", now, later).await.unwrap();
    assert_eq!(
        s.pair_with_code("right", &new_token("y", "ty", None), now, LIMIT)
            .await
            .unwrap(),
        PairOutcome::Wrong { wrong_codes: 1 }
    );
    assert!(matches!(
        s.pair_with_code("fresh", &new_token("z", "tz", None), now, LIMIT)
            .await
            .unwrap(),
        PairOutcome::Paired(_)
    ));
    assert!(s.authenticate_api_token("ty", now).await.unwrap().is_none());
}

pub async fn idempotency_keys_replay_the_first_response(fx: &Fixture) {
    let s = &fx.store;
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let ttl = Duration::hours(24);
    let lease = Duration::minutes(1);
    let claim = |scope: &'static str, key: &'static str, at| {
        s.claim_idempotency_key(scope, key, "p1", at, ttl, lease)
    };
    assert_eq!(
        claim("webhook", "k1", now).await.unwrap(),
        IdempotencyClaim::Claimed
    );
    assert_eq!(
        claim("webhook", "k1", now).await.unwrap(),
        IdempotencyClaim::InFlight
    );
    // Another scope is another key.
    assert_eq!(
        claim("other", "k1", now).await.unwrap(),
        IdempotencyClaim::Claimed
    );
    // The body comes back byte for byte, whatever its key order or spacing.
    let body = r#"{"response":"hi",  "model":"m"}"#;
    assert!(
        s.complete_idempotency_key("webhook", "k1", "p1", body)
            .await
            .unwrap()
    );
    assert_eq!(
        claim("webhook", "k1", now + Duration::hours(23))
            .await
            .unwrap(),
        IdempotencyClaim::Done(body.to_string())
    );
    // After the ttl the key is forgotten and the request runs again.
    assert_eq!(
        claim("webhook", "k1", now + ttl).await.unwrap(),
        IdempotencyClaim::Claimed
    );
    // A failed request releases its claim; a completed one is not released.
    assert_eq!(
        claim("webhook", "k2", now).await.unwrap(),
        IdempotencyClaim::Claimed
    );
    s.release_idempotency_key("webhook", "k2", "p1")
        .await
        .unwrap();
    assert_eq!(
        claim("webhook", "k2", now).await.unwrap(),
        IdempotencyClaim::Claimed
    );
    assert_eq!(
        s.prune_idempotency_keys(now + Duration::hours(48))
            .await
            .unwrap(),
        3
    );
}

pub async fn a_lapsed_idempotency_claim_is_free_again(fx: &Fixture) {
    let s = &fx.store;
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let (ttl, lease) = (Duration::hours(24), Duration::minutes(1));
    let claim =
        |owner: &'static str, at| s.claim_idempotency_key("webhook", "k", owner, at, ttl, lease);
    // p1 claims the key, renews once, then dies without finishing.
    assert_eq!(claim("p1", now).await.unwrap(), IdempotencyClaim::Claimed);
    let renewed = now + Duration::seconds(50);
    assert!(
        s.renew_idempotency_key("webhook", "k", "p1", renewed + lease)
            .await
            .unwrap()
    );
    // Within the renewed lease the key is still running, for anyone.
    assert_eq!(
        claim("p2", renewed + Duration::seconds(59)).await.unwrap(),
        IdempotencyClaim::InFlight
    );
    // Once the lease lapses the key is free: p2 takes it over.
    let lapsed = renewed + lease;
    assert_eq!(
        claim("p2", lapsed).await.unwrap(),
        IdempotencyClaim::Claimed
    );
    // The dead owner can no longer renew, complete or release it.
    assert!(
        !s.renew_idempotency_key("webhook", "k", "p1", lapsed + lease)
            .await
            .unwrap()
    );
    assert!(
        !s.complete_idempotency_key("webhook", "k", "p1", "{}")
            .await
            .unwrap()
    );
    s.release_idempotency_key("webhook", "k", "p1")
        .await
        .unwrap();
    assert_eq!(
        claim("p3", lapsed).await.unwrap(),
        IdempotencyClaim::InFlight
    );
    assert!(
        s.complete_idempotency_key("webhook", "k", "p2", "{\"ok\":true}")
            .await
            .unwrap()
    );
    // A finished request's answer never lapses.
    assert_eq!(
        claim("p3", lapsed + Duration::hours(1)).await.unwrap(),
        IdempotencyClaim::Done("{\"ok\":true}".into())
    );
}

pub async fn a_one_time_key_is_seen_once_within_its_ttl(fx: &Fixture) {
    let s = &fx.store;
    let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let ttl = Duration::minutes(10);
    assert!(s.first_sighting("hook:r1", "sig", now, ttl).await.unwrap());
    assert!(!s.first_sighting("hook:r1", "sig", now, ttl).await.unwrap());
    assert!(
        !s.first_sighting("hook:r1", "sig", now + Duration::minutes(9), ttl)
            .await
            .unwrap()
    );
    assert!(s.first_sighting("hook:r2", "sig", now, ttl).await.unwrap());
    assert!(
        s.first_sighting("hook:r1", "sig", now + ttl, ttl)
            .await
            .unwrap()
    );
}
