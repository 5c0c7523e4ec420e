//! Tests of `config/registry.rs`.

use super::*;

#[test]
fn keys_are_unique_and_sorted_into_sections() {
    let mut keys: Vec<_> = SETTINGS.iter().map(|d| d.key).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), SETTINGS.len());
    assert!(SETTINGS.iter().all(|d| d.key.contains('.')));
}

#[test]
fn seed_environment_names_are_known() {
    for name in [
        "ROUTINES_ENABLED",
        "ROUTINES_MAX_CONCURRENT",
        // The seeds' ROUTINES_EVENT_CACHE_REFRESH is gone: routine
        // changes reach the engine through the store's change signal.
        "HEARTBEAT_ENABLED",
        "HEARTBEAT_INTERVAL_SECS",
        "HEARTBEAT_NOTIFY_CHANNEL",
        "HEARTBEAT_NOTIFY_USER",
        "MAX_PARALLEL_JOBS",
        "AGENT_NAME",
        "DATABASE_URL",
    ] {
        assert!(SETTINGS.iter().any(|d| d.env.contains(&name)), "{name}");
    }
}

#[test]
fn suggests_near_keys() {
    assert_eq!(
        closest("heartbeat.intervall_secs"),
        Some("heartbeat.interval_secs")
    );
    assert_eq!(closest("completely.different"), None);
}
