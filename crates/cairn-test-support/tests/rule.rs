//! The one rule, seen from outside: this test binary runs one of its own
//! cases again as a child with the variables set or unset, and reads how
//! it ended. The child case does its work only under `RULE_CHILD`.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

use std::process::{Command, Output};

/// Reports what the PostgreSQL finder said, when run as the child.
#[test]
fn child_asks_for_postgres() {
    if std::env::var_os("RULE_CHILD").is_none() {
        return;
    }
    let found = cairn_test_support::postgres::server_url("child");
    println!("FOUND {found:?}");
}

/// The child case with `vars` set (and the two PostgreSQL variables
/// unset unless given); its skips are counted in `skips`, not in the run's list.
fn child_counting(vars: &[(&str, &str)], skips: &std::path::Path) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_asks_for_postgres", "--nocapture"])
        .env("RULE_CHILD", "1")
        .env("CAIRN_TEST_SKIPS", skips)
        .env_remove("CAIRN_TEST_POSTGRES_URL")
        .env_remove("CAIRN_REQUIRE_POSTGRES");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// [`child_counting`] into a throwaway list.
fn child(vars: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    child_counting(vars, &dir.path().join("skips.txt"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A skip is counted: one line naming the test and why in the skip list.
#[test]
fn a_skip_is_counted_in_the_skip_list() {
    let dir = tempfile::tempdir().unwrap();
    let skips = dir.path().join("nested/skips.txt");
    for _ in 0..2 {
        assert!(child_counting(&[], &skips).status.success());
    }
    let list = std::fs::read_to_string(&skips).unwrap();
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("child: CAIRN_TEST_POSTGRES_URL is not set")),
        "{list}"
    );
}

#[test]
fn unset_skips_with_a_message() {
    for flag in [None, Some("0"), Some(""), Some("yes")] {
        let vars: Vec<(&str, &str)> = flag
            .map(|f| ("CAIRN_REQUIRE_POSTGRES", f))
            .into_iter()
            .collect();
        let out = child(&vars);
        let text = text(&out);
        assert!(out.status.success(), "{flag:?}: {text}");
        assert!(text.contains("FOUND None"), "{flag:?}: {text}");
        assert!(
            text.contains("SKIPPED child: CAIRN_TEST_POSTGRES_URL is not set"),
            "{flag:?}: {text}"
        );
    }
}

#[test]
fn required_but_unset_fails() {
    for url in [None, Some("")] {
        let mut vars = vec![("CAIRN_REQUIRE_POSTGRES", "1")];
        vars.extend(url.map(|u| ("CAIRN_TEST_POSTGRES_URL", u)));
        let out = child(&vars);
        let text = text(&out);
        assert!(!out.status.success(), "{url:?}: {text}");
        assert!(
            text.contains("CAIRN_REQUIRE_POSTGRES=1 but CAIRN_TEST_POSTGRES_URL is not set"),
            "{text}"
        );
    }
}

#[test]
fn set_is_used_whatever_the_flag() {
    for flag in ["1", "0"] {
        let out = child(&[
            ("CAIRN_TEST_POSTGRES_URL", "postgres://x@127.0.0.1:1/db"),
            ("CAIRN_REQUIRE_POSTGRES", flag),
        ]);
        let text = text(&out);
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains(r#"FOUND Some("postgres://x@127.0.0.1:1/db")"#),
            "{text}"
        );
    }
}
