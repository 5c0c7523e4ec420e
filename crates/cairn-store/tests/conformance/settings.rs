//! Migrations and the settings table.

use serde_json::json;

use crate::fixture::Fixture;

pub async fn migrations_apply_once(fx: &Fixture) {
    let again = fx.store.migrate().await.unwrap();
    assert!(again.applied.is_empty());
    assert_eq!(again.already_applied, cairn_store::MIGRATIONS.len());
    let status = fx.store.migration_status().await.unwrap();
    assert_eq!(status.len(), cairn_store::MIGRATIONS.len());
    assert!(status.iter().all(|m| m.applied_at.is_some()));
    // A second process migrating the same database changes nothing either.
    let (other, report) = cairn_store::Store::open(&fx.url).await.unwrap();
    assert!(report.applied.is_empty());
    other.close().await;
}

pub async fn settings_round_trip(fx: &Fixture) {
    let s = &fx.store;
    assert_eq!(s.get_setting("cost.day").await.unwrap(), None);
    s.set_setting(
        "cost.day",
        &json!({"date": "2026-11-21", "spent_cents": 12}),
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_setting("cost.day").await.unwrap(),
        Some(json!({"date": "2026-11-21", "spent_cents": 12}))
    );
    s.set_setting("cost.day", &json!(7)).await.unwrap();
    assert_eq!(s.get_setting("cost.day").await.unwrap(), Some(json!(7)));
    assert!(s.delete_setting("cost.day").await.unwrap());
    assert!(!s.delete_setting("cost.day").await.unwrap());
    assert_eq!(s.get_setting("cost.day").await.unwrap(), None);
}

pub async fn settings_prefix_is_literal(fx: &Fixture) {
    let s = &fx.store;
    for key in ["a%b.1", "a%b.2", "axb.3", "a_b.4", "b.5"] {
        s.set_setting(key, &json!(key)).await.unwrap();
    }
    let keys: Vec<String> = s
        .list_settings("a%b.")
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, ["a%b.1", "a%b.2"]);
    let keys: Vec<String> = s
        .list_settings("a_")
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, ["a_b.4"]);
    assert_eq!(s.list_settings("").await.unwrap().len(), 5);
}
