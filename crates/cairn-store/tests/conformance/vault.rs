//! The vault: values sealed at rest, listed without values, resolved
//! (marking them used), removed, and moved to a new key in one go.

use chrono::{DateTime, TimeZone, Utc};
use secrecy::{ExposeSecret, SecretString};

use crate::fixture::Fixture;
use cairn_store::VaultKey;

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
}

fn value(s: &str) -> SecretString {
    SecretString::from(s.to_string())
}

fn exposed(pairs: &[(String, SecretString)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.expose_secret()))
        .collect()
}

pub async fn vault_values_are_sealed_listed_resolved_and_removed(fx: &Fixture) {
    let s = &fx.store;
    let key = VaultKey::derive(&[1; 32]);
    assert!(s.vault_list().await.unwrap().is_empty());
    assert!(
        s.vault_set(&key, "GH", &value("s3cr3t-7781"), at(0))
            .await
            .unwrap()
    );
    assert!(
        s.vault_set(&key, "LLM", &value("sk-one"), at(1))
            .await
            .unwrap()
    );
    // Set again: a new value, the same creation time.
    assert!(
        !s.vault_set(&key, "LLM", &value("sk-two"), at(2))
            .await
            .unwrap()
    );

    let listed = s.vault_list().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["GH", "LLM"]);
    assert_eq!((listed[1].created_at, listed[1].updated_at), (at(1), at(2)));
    assert!(
        listed
            .iter()
            .all(|e| e.last_used_at.is_none() && e.key_id == key.id())
    );

    // Only ciphertext in the table.
    let raw = s.vault_raw_for_tests().await.unwrap();
    assert!(
        !raw.contains("s3cr3t-7781") && !raw.contains("sk-two"),
        "{raw}"
    );

    assert_eq!(
        exposed(&s.vault_values(&key).await.unwrap()),
        [("GH", "s3cr3t-7781"), ("LLM", "sk-two")]
    );
    // The scanner's read marks nothing; a resolution marks what it read.
    assert!(
        s.vault_list()
            .await
            .unwrap()
            .iter()
            .all(|e| e.last_used_at.is_none())
    );
    let got = s
        .vault_resolve(&key, &["LLM".to_string(), "NOPE".to_string()], at(5))
        .await
        .unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), ["LLM"]);
    assert_eq!(got["LLM"].expose_secret(), "sk-two");
    let listed = s.vault_list().await.unwrap();
    assert_eq!(
        listed.iter().map(|e| e.last_used_at).collect::<Vec<_>>(),
        [None, Some(at(5))]
    );

    assert!(s.vault_remove("GH").await.unwrap());
    assert!(!s.vault_remove("GH").await.unwrap());
    assert_eq!(
        exposed(&s.vault_values(&key).await.unwrap()),
        [("LLM", "sk-two")]
    );
    assert_eq!(s.vault_key_ids().await.unwrap(), [key.id()]);
}

pub async fn a_wrong_key_is_named_and_changes_nothing(fx: &Fixture) {
    let s = &fx.store;
    let key = VaultKey::derive(&[1; 32]);
    let other = VaultKey::derive(&[2; 32]);
    s.vault_set(&key, "GH", &value("v"), at(0)).await.unwrap();
    let err = s.vault_values(&other).await.unwrap_err().to_string();
    assert!(err.contains("the vault") && err.contains(key.id()), "{err}");
    let err = s
        .vault_resolve(&other, &["GH".to_string()], at(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("GH"), "{err}");
    assert_eq!(s.vault_list().await.unwrap()[0].last_used_at, None);
    // A rekey from the wrong key moves nothing.
    let third = VaultKey::derive(&[3; 32]);
    assert!(s.vault_rekey(&other, &third).await.is_err());
    assert_eq!(s.vault_key_ids().await.unwrap(), [key.id()]);
}

pub async fn a_rekey_moves_every_value_at_once_and_resumes(fx: &Fixture) {
    let s = &fx.store;
    let old = VaultKey::derive(&[1; 32]);
    let new = VaultKey::derive(&[2; 32]);
    for (i, name) in ["A", "B", "C"].iter().enumerate() {
        s.vault_set(&old, name, &value(&format!("v{i}")), at(0))
            .await
            .unwrap();
    }
    assert_eq!(s.vault_rekey(&old, &new).await.unwrap(), 3);
    assert_eq!(s.vault_key_ids().await.unwrap(), [new.id()]);
    assert_eq!(
        exposed(&s.vault_values(&new).await.unwrap()),
        [("A", "v0"), ("B", "v1"), ("C", "v2")]
    );
    assert!(s.vault_values(&old).await.is_err());
    // Run again (a rotation resumed after a crash): nothing left to move.
    assert_eq!(s.vault_rekey(&old, &new).await.unwrap(), 0);
    assert_eq!(s.vault_list().await.unwrap()[0].created_at, at(0));
}
