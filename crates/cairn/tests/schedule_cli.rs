//! Black-box tests of `cairn schedule explain` (the built binary, via assert_cmd).
#![expect(clippy::unwrap_used, reason = "test helpers unwrap freely")]

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn cairn() -> Command {
    let mut cmd = Command::cargo_bin("cairn").unwrap();
    // Keep the user's own config out of the picture.
    cmd.env(
        "CAIRN_HOME",
        std::env::temp_dir().join("cairn-schedule-cli-test"),
    )
    // Without --tz the configured user zone applies; pin it.
    .env("CAIRN_TIMEZONE", "Europe/Paris");
    cmd
}

fn explain_json(args: &[&str]) -> Value {
    let out = cairn()
        .args(["schedule", "explain"])
        .args(args)
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

fn next(value: &Value) -> Vec<String> {
    value["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn weekday_mornings_in_new_york_across_the_march_change() {
    let v = explain_json(&[
        "0 9 * * 1-5",
        "--tz",
        "America/New_York",
        "--from",
        "2026-03-06T00:00:00Z",
        "--count",
        "5",
    ]);
    assert_eq!(v["kind"], "cron");
    assert_eq!(v["normalized"], "0 9 * * 1-5");
    assert_eq!(
        v["description"],
        "at 09:00, Monday through Friday (America/New_York)"
    );
    assert_eq!(v["timezone"], "America/New_York");
    // Fri 6 at 14:00Z (EST), then Mon 9 - Thu 12 at 13:00Z (EDT after 8 March).
    assert_eq!(
        next(&v),
        [
            "2026-03-06T14:00:00Z",
            "2026-03-09T13:00:00Z",
            "2026-03-10T13:00:00Z",
            "2026-03-11T13:00:00Z",
            "2026-03-12T13:00:00Z"
        ]
    );
}

#[test]
fn skipped_local_time_fires_once_at_the_end_of_the_gap() {
    let v = explain_json(&[
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-03-07T12:00:00Z",
        "--count",
        "3",
    ]);
    // 2026-03-08 02:30 does not exist: once at 03:00 EDT (07:00Z); then 02:30 EDT.
    assert_eq!(
        next(&v),
        [
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:30:00Z",
            "2026-03-10T06:30:00Z"
        ]
    );
}

#[test]
fn repeated_local_time_fires_once_on_fall_back_day() {
    let v = explain_json(&[
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-10-31T12:00:00Z",
        "--count",
        "3",
    ]);
    // 01:30 happens twice on 2026-11-01; only the first (EDT, 05:30Z) fires.
    assert_eq!(
        next(&v),
        [
            "2026-11-01T05:30:00Z",
            "2026-11-02T06:30:00Z",
            "2026-11-03T06:30:00Z"
        ]
    );
}

#[test]
fn human_weekdays_equal_cron_weekdays() {
    let common = [
        "--tz",
        "Europe/Paris",
        "--from",
        "2026-03-25T08:00:00Z",
        "--count",
        "8",
    ];
    let human = explain_json(&[&["every weekday at 9am"][..], &common[..]].concat());
    let cron = explain_json(&[&["0 9 * * MON-FRI"][..], &common[..]].concat());
    assert_eq!(human["kind"], "cron");
    assert_eq!(human["normalized"], cron["normalized"]);
    assert_eq!(next(&human), next(&cron));
    assert_eq!(next(&human).len(), 8);
}

#[test]
fn in_90m_is_exactly_90_minutes_after_from() {
    let v = explain_json(&["in 90m", "--from", "2026-03-09T10:17:00Z"]);
    assert_eq!(v["kind"], "once");
    assert_eq!(v["normalized"], "2026-03-09T11:47:00Z");
    assert_eq!(next(&v), ["2026-03-09T11:47:00Z"]);
    assert_eq!(
        v["timezone"], "Europe/Paris",
        "no --tz: the configured user zone"
    );
}

#[test]
fn intervals_report_their_anchor() {
    let v = explain_json(&["every 2h", "--from", "2026-03-09T10:17:00Z", "--count", "2"]);
    assert_eq!(v["kind"], "interval");
    assert_eq!(v["normalized"], "every 7200s from 2026-03-09T10:17:00Z");
    assert_eq!(
        v["description"],
        "every 2 hours (from 2026-03-09T10:17:00Z)"
    );
    assert_eq!(next(&v), ["2026-03-09T12:17:00Z", "2026-03-09T14:17:00Z"]);
}

#[test]
fn text_output_is_readable() {
    cairn()
        .args([
            "schedule",
            "explain",
            "0 9 * * 1-5",
            "--tz",
            "America/New_York",
            "--from",
            "2026-03-06T00:00:00Z",
            "--count",
            "2",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("kind         cron"))
        .stdout(predicate::str::contains("normalized   0 9 * * 1-5"))
        .stdout(predicate::str::contains(
            "description  at 09:00, Monday through Friday (America/New_York)",
        ))
        .stdout(predicate::str::contains("2026-03-06T14:00:00Z"))
        .stdout(predicate::str::contains("2026-03-09T13:00:00Z"));
}

#[test]
fn bad_expression_exits_2_with_the_error_on_stderr() {
    cairn()
        .args(["schedule", "explain", "every 5 blorps"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "\"every 5 blorps\": unknown unit \"blorps\"; expected s, m, h, d",
        ));
    cairn()
        .args(["schedule", "explain", "0 25 * * *"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("hour 25 out of range 0-23"));
}

#[test]
fn bad_zone_from_and_past_one_shot_exit_2() {
    cairn()
        .args(["schedule", "explain", "0 9 * * *", "--tz", "Mars/Olympus"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown time zone \"Mars/Olympus\"",
        ));
    cairn()
        .args(["schedule", "explain", "0 9 * * *", "--from", "yesterday"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--from \"yesterday\""));
    cairn()
        .args([
            "schedule",
            "explain",
            "2026-01-01T00:00:00Z",
            "--from",
            "2026-03-09T10:17:00Z",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not in the future"));
}
