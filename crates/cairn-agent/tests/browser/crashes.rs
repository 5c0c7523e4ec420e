//! A browser that crashes as it starts: started once more when it crashed
//! once (the tool works and says so), failing at once, not after the
//! start limit, when it crashes every time.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_agent::runner::ToolStatus;
use cairn_agent::tools::browser::BrowserConfig;
use serde_json::json;

use super::{Rig, chromium, site_only};
use crate::site::Site;

/// A script in `dir` that dies of a segfault, then (when `recovers`, and
/// the crash has left its mark in the browser's folder, its working
/// directory) runs `chromium`.
fn crashing(dir: &Path, chromium: &Path, recovers: bool) -> PathBuf {
    let script = dir.join("crashing-chromium");
    let then = if recovers {
        format!("exec {} \"$@\"", chromium.display())
    } else {
        String::new()
    };
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ -e crashed ] || {{ : > crashed; kill -SEGV $$; }}\n{then}\nkill -SEGV $$\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_that_crashes_once_as_it_starts_is_started_again() {
    let test = "a_browser_that_crashes_once_as_it_starts_is_started_again";
    let Some(real) = chromium(test) else { return };
    let site = Site::start().await;
    let bin = tempfile::tempdir().unwrap();
    let rig = Rig::with(
        crashing(bin.path(), &real, true),
        site_only(),
        BrowserConfig::default(),
    );
    let opened = rig
        .ok("browser_open", json!({"url": site.url("/js")}))
        .await;
    assert!(opened.contains("Title: Status"), "{opened}");
    assert!(rig.home.path().join("browser/main/crashed").exists());
    rig.ok("browser_snapshot", json!({})).await;
    let said = rig.said.lock().unwrap().clone();
    assert!(
        said.contains("the browser exited as it started; it was started once more"),
        "{said}"
    );
    rig.ok("browser_close", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_that_always_crashes_fails_at_once_and_says_so() {
    let test = "a_browser_that_always_crashes_fails_at_once_and_says_so";
    let Some(real) = chromium(test) else { return };
    let bin = tempfile::tempdir().unwrap();
    let rig = Rig::with(
        crashing(bin.path(), &real, false),
        site_only(),
        BrowserConfig::default(),
    );
    let started = Instant::now();
    let result = rig
        .call("browser_open", json!({"url": "http://127.0.0.1:9/"}))
        .await;
    assert_eq!(result.status, ToolStatus::Failed, "{}", result.content);
    assert!(
        result.content.contains("exited before answering, twice"),
        "{}",
        result.content
    );
    // The start limit is 30 s: an exit is seen as it happens.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
