//! The browser tools against Debian's chromium and the pages of [`site`]:
//! script-written text, a login form (approved and denied), requests to a
//! private address by XHR and by redirect (refused, then allowed), the
//! tab limit, a page that never loads, a hung renderer, a select, the
//! profile's cookies, screenshots, no process left behind, and a browser
//! that crashes as it starts.
//!
//! Skipped, saying why, without chromium, unless `CAIRN_REQUIRE_BROWSER=1`
//! (CI) makes that a failure.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "test code unwraps freely and may use blocking std::fs"
)]

mod crashes;
mod credentials;
mod site;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_agent::policy::{AutonomyLevel, PolicyGate, ToolPolicyConfig};
use cairn_agent::runner::{Approver, AutoApprove, DenyAll, ToolResult, ToolRunner, ToolStatus};
use cairn_agent::sandbox::{Sandbox, SandboxSettings};
use cairn_agent::tools::browser::{BrowserConfig, Browsers};
use cairn_agent::tools::http::HttpConfig;
use cairn_agent::tools::net::NetClient;
use cairn_agent::tools::web_fetch::WebFetchTool;
use cairn_agent::tools::{ToolContext, ToolRegistry};
use cairn_core::chat::ToolCall;
use serde_json::{Value, json};
use site::Site;

/// Debian's chromium (or `CAIRN_TEST_CHROMIUM`), or `None` after recording the skip.
fn chromium(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("CAIRN_TEST_CHROMIUM")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if path.exists() {
        return Some(path);
    }
    cairn_test_support::missing(
        test,
        "CAIRN_REQUIRE_BROWSER",
        "chromium is needed (Debian: apt-get install -y chromium; or set CAIRN_TEST_CHROMIUM)",
    );
    None
}

/// A browser for the agent `main` over the site, its tools (and
/// `web_fetch`) behind a supervised policy.
struct Rig {
    /// Every result's text, for notes that come with a later call.
    said: std::sync::Mutex<String>,
    browsers: Arc<Browsers>,
    runner: ToolRunner,
    ctx: ToolContext,
    home: tempfile::TempDir,
}

/// `[tools.http]` letting the site (127.0.0.1) through, not the secret server.
fn site_only() -> HttpConfig {
    HttpConfig {
        allowed_private_networks: vec!["127.0.0.1".into()],
        ..HttpConfig::default()
    }
}

impl Rig {
    async fn new(test: &str, http: HttpConfig, config: BrowserConfig) -> Option<Rig> {
        Some(Rig::with(chromium(test)?, http, config))
    }

    /// A rig whose browser is `executable`.
    fn with(executable: PathBuf, http: HttpConfig, config: BrowserConfig) -> Rig {
        let home = tempfile::tempdir().unwrap();
        let workspace = home.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(home.path().join("config.toml"), "SECRET-OF-THE-HOME").unwrap();
        let sandbox = Arc::new(Sandbox::new(SandboxSettings {
            protected: vec![home.path().to_path_buf()],
            // A test's own executable may live outside the system paths.
            read_paths: vec![executable.clone()],
            ..SandboxSettings::default()
        }));
        let net = Arc::new(NetClient::new(http).unwrap());
        let browsers = Arc::new(Browsers::new(
            config,
            executable,
            home.path().join("browser"),
            Arc::clone(&net),
            sandbox,
        ));
        let mut registry = ToolRegistry::new();
        for tool in browsers.tools("main", &workspace) {
            registry.register(tool).unwrap();
        }
        registry.register(Arc::new(WebFetchTool::new(net))).unwrap();
        let policy = PolicyGate::new(&ToolPolicyConfig {
            autonomy: AutonomyLevel::Supervised,
            ..ToolPolicyConfig::default()
        });
        let runner = ToolRunner::new(Arc::new(registry), Arc::new(policy));
        let ctx = ToolContext::new(&workspace, "s1");
        Rig {
            said: std::sync::Mutex::default(),
            browsers,
            runner,
            ctx,
            home,
        }
    }

    async fn call_with(&self, tool: &str, args: Value, approver: &dyn Approver) -> ToolResult {
        let call = ToolCall {
            id: "c1".into(),
            name: tool.into(),
            arguments: args,
        };
        let result = self.runner.run(&call, &self.ctx, approver).await;
        self.said.lock().unwrap().push_str(&result.content);
        result
    }

    /// Opens `url`, then reads it again until it shows `text`
    /// (what its script writes after load), for up to five seconds.
    async fn until(&self, url: &str, text: &str) -> String {
        let mut page = self.ok("browser_open", json!({"url": url})).await;
        for _ in 0..50 {
            if page.contains(text) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            page = self.ok("browser_snapshot", json!({})).await;
        }
        page
    }

    async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.call_with(tool, args, &AutoApprove).await
    }

    /// Calls `tool` and insists it succeeded; answers its text.
    async fn ok(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args).await;
        assert_eq!(
            result.status,
            ToolStatus::Success,
            "{tool}: {}",
            result.content
        );
        result.content
    }

    fn profile(&self) -> PathBuf {
        self.home.path().join("browser/main/profile")
    }
}

/// The ref of the line of `snapshot` that contains `what`.
fn reference(snapshot: &str, what: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(what) && l.contains("[e"))
        .unwrap_or_else(|| panic!("no element {what} in:\n{snapshot}"));
    let start = line.find("[e").unwrap() + 1;
    let end = start + line[start..].find(']').unwrap();
    line[start..end].to_string()
}

/// The processes whose command line names `dir` (the browser's folder).
fn processes_using(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(&needle) {
            let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // A zombie is dead already: only its parent's wait is missing.
            if !state.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')) {
                found.push(text);
            }
        }
    }
    found
}

/// Whether every process naming `dir` runs with `no_new_privs`, which the
/// sandbox's Landlock confinement sets.
fn all_confined(dir: &Path) -> bool {
    let needle = dir.display().to_string();
    let mut seen = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains(&needle) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        if !status.contains("NoNewPrivs:\t1") {
            return false;
        }
        seen += 1;
    }
    seen > 0
}

/// Waits (a little) until no process names `dir`.
async fn all_gone(dir: &Path) -> Vec<String> {
    for _ in 0..50 {
        let left = processes_using(dir);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    processes_using(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_written_text_is_seen_by_the_browser_and_not_by_web_fetch() {
    let test = "script_written_text_is_seen_by_the_browser_and_not_by_web_fetch";
    let site = Site::start().await;
    let Some(rig) = Rig::new(test, site_only(), BrowserConfig::default()).await else {
        return;
    };
    let fetched = rig.ok("web_fetch", json!({"url": site.url("/js")})).await;
    assert!(fetched.contains("Loading"), "{fetched}");
    assert!(!fetched.contains("All systems green"), "{fetched}");

    let opened = rig
        .ok("browser_open", json!({"url": site.url("/js")}))
        .await;
    assert!(opened.contains("Title: Status"), "{opened}");
    assert!(
        opened.contains(&format!("URL: {}", site.url("/js"))),
        "{opened}"
    );
    assert!(opened.contains("# Status"), "{opened}");
    assert!(opened.contains("All systems green 4417"), "{opened}");
    let snapshot = rig.ok("browser_snapshot", json!({})).await;
    assert!(snapshot.contains("All systems green 4417"), "{snapshot}");

    assert!(
        !processes_using(&rig.profile()).is_empty(),
        "the browser runs"
    );
    if Sandbox::new(SandboxSettings::default()).is_confined() {
        assert!(
            all_confined(&rig.profile()),
            "the browser runs in the sandbox"
        );
    }
    let closed = rig.ok("browser_close", json!({})).await;
    assert!(closed.contains("the browser was closed"), "{closed}");
    assert_eq!(all_gone(&rig.profile()).await, Vec::<String>::new());
    assert!(rig.browsers.open().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_form_sends_what_was_typed_when_approved_and_nothing_when_denied() {
    let test = "a_login_form_sends_what_was_typed_when_approved_and_nothing_when_denied";
    let site = Site::start().await;
    let Some(rig) = Rig::new(test, site_only(), BrowserConfig::default()).await else {
        return;
    };
    let page = rig
        .ok("browser_open", json!({"url": site.url("/login")}))
        .await;
    let (user, password, submit) = (
        reference(&page, "textbox \"User\""),
        reference(&page, "textbox \"Password\""),
        reference(&page, "button \"Sign in\""),
    );
    // Denied: nothing is typed, nothing is sent.
    let denied = rig
        .call_with(
            "browser_type",
            json!({"ref": user, "text": "ada"}),
            &DenyAll,
        )
        .await;
    assert_eq!(denied.status, ToolStatus::Declined, "{}", denied.content);
    let denied = rig
        .call_with("browser_click", json!({"ref": submit}), &DenyAll)
        .await;
    assert_eq!(denied.status, ToolStatus::Declined, "{}", denied.content);
    let page = rig.ok("browser_snapshot", json!({})).await;
    assert!(!page.contains("ada"), "{page}");
    assert!(
        !site.site_requests().iter().any(|r| r.starts_with("POST")),
        "{:?}",
        site.site_requests()
    );
    // Approved: the server gets both values.
    rig.ok("browser_type", json!({"ref": user, "text": "ada"}))
        .await;
    let typed = rig
        .ok(
            "browser_type",
            json!({"ref": password, "text": "s3cret pass"}),
        )
        .await;
    assert!(typed.contains("= \"ada\""), "{typed}");
    let after = rig.ok("browser_click", json!({"ref": submit})).await;
    assert!(after.contains("Welcome, ada"), "{after}");
    assert!(after.contains("Title: Welcome"), "{after}");
    let requests = site.site_requests();
    assert!(
        requests.contains(&"BODY user=ada&password=s3cret+pass".to_string()),
        "{requests:?}"
    );
    // Back to the form, and typing with submit sends it too.
    let back = rig.ok("browser_back", json!({})).await;
    assert!(back.contains("Title: Sign in"), "{back}");
    let user = reference(&back, "textbox \"User\"");
    let sent = rig
        .ok(
            "browser_type",
            json!({"ref": user, "text": "grace", "submit": true}),
        )
        .await;
    assert!(sent.contains("Welcome, grace"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_approved_hosts_need_no_approval_for_writes() {
    let test = "auto_approved_hosts_need_no_approval_for_writes";
    let site = Site::start().await;
    let config = BrowserConfig {
        auto_approve_hosts: vec!["127.0.0.1".into()],
        ..BrowserConfig::default()
    };
    let Some(rig) = Rig::new(test, site_only(), config).await else {
        return;
    };
    let page = rig
        .ok("browser_open", json!({"url": site.url("/choose")}))
        .await;
    let colour = reference(&page, "combobox \"Colour\"");
    assert!(page.contains("options: Red | Green"), "{page}");
    // Nobody could approve: it runs because the host is listed.
    let chosen = rig
        .call_with(
            "browser_select",
            json!({"ref": colour, "value": "Green"}),
            &DenyAll,
        )
        .await;
    assert_eq!(chosen.status, ToolStatus::Success, "{}", chosen.content);
    assert!(chosen.content.contains("chose g"), "{}", chosen.content);
    let wrong = rig
        .call("browser_select", json!({"ref": colour, "value": "Blue"}))
        .await;
    assert_eq!(
        wrong.status,
        ToolStatus::InvalidArguments,
        "{}",
        wrong.content
    );
    assert!(wrong.content.contains("Red | Green"), "{}", wrong.content);
    let stale = rig.call("browser_click", json!({"ref": "e99"})).await;
    assert_eq!(stale.status, ToolStatus::InvalidArguments);
    assert!(
        stale.content.contains("take a browser_snapshot"),
        "{}",
        stale.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_to_a_private_address_by_xhr_or_redirect_follow_the_network_rules() {
    let test = "requests_to_a_private_address_by_xhr_or_redirect_follow_the_network_rules";
    let site = Site::start().await;
    let Some(rig) = Rig::new(test, site_only(), BrowserConfig::default()).await else {
        return;
    };
    let page = rig.until(&site.url("/xhr"), "fetch failed").await;
    assert!(!page.contains("SECRET-7781"), "{page}");
    assert!(
        rig.said
            .lock()
            .unwrap()
            .contains("refused a request to http://127.0.0.2"),
        "the refusal was reported"
    );
    let page = rig.until(&site.url("/ws"), "socket closed").await;
    assert!(page.contains("socket closed"), "{page}");
    let redirected = rig
        .call("browser_open", json!({"url": site.url("/redirect")}))
        .await;
    assert_eq!(
        redirected.status,
        ToolStatus::Failed,
        "{}",
        redirected.content
    );
    assert!(
        redirected.content.contains("ERR_BLOCKED_BY_CLIENT"),
        "{}",
        redirected.content
    );
    assert!(
        redirected
            .content
            .contains("refused a request to http://127.0.0.2"),
        "the refusal says why: {}",
        redirected.content
    );
    let direct = rig
        .call(
            "browser_open",
            json!({"url": format!("{}/hidden", site.secret)}),
        )
        .await;
    assert_eq!(direct.status, ToolStatus::Failed, "{}", direct.content);
    assert!(
        direct.content.contains("private or local"),
        "{}",
        direct.content
    );
    assert_eq!(
        site.secret_requests(),
        Vec::<String>::new(),
        "the secret server was reached"
    );

    let both = HttpConfig {
        allowed_private_networks: vec!["127.0.0.1".into(), "127.0.0.2".into()],
        ..HttpConfig::default()
    };
    let Some(open) = Rig::new(test, both, BrowserConfig::default()).await else {
        return;
    };
    let page = open.until(&site.url("/xhr"), "got").await;
    assert!(page.contains("got SECRET-7781"), "{page}");
    open.until(&site.url("/ws"), "socket closed").await;
    let redirected = open
        .ok("browser_open", json!({"url": site.url("/redirect")}))
        .await;
    assert!(redirected.contains("SECRET-7781"), "{redirected}");
    let mut reached = site.secret_requests();
    // The redirected page's icon, asked for once it showed.
    reached.retain(|r| r != "/favicon.ico");
    assert_eq!(reached, ["/hidden", "/socket", "/hidden"], "{reached:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_past_max_tabs_are_refused_and_a_page_that_never_loads_times_out() {
    let test = "tabs_past_max_tabs_are_refused_and_a_page_that_never_loads_times_out";
    let site = Site::start().await;
    let config = BrowserConfig {
        max_tabs: 4,
        timeout_secs: 3,
        ..BrowserConfig::default()
    };
    let Some(rig) = Rig::new(test, site_only(), config).await else {
        return;
    };
    for n in 1..=4 {
        let page = rig
            .ok(
                "browser_open",
                json!({"url": site.url(&format!("/page/{n}"))}),
            )
            .await;
        assert!(
            page.contains(&format!("Tab {n} of {n}")) || n == 1,
            "{page}"
        );
    }
    let fifth = rig
        .call("browser_open", json!({"url": site.url("/page/5")}))
        .await;
    assert_eq!(fifth.status, ToolStatus::Failed, "{}", fifth.content);
    assert!(
        fifth.content.contains("tools.browser.max_tabs"),
        "{}",
        fifth.content
    );
    let closed = rig.ok("browser_close", json!({})).await;
    assert!(closed.contains("/page/4"), "{closed}");

    let slow = rig
        .call("browser_open", json!({"url": site.url("/slow")}))
        .await;
    assert_eq!(slow.status, ToolStatus::Failed, "{}", slow.content);
    assert!(
        slow.content.contains("did not finish loading within 3s"),
        "{}",
        slow.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_renderer_is_killed_and_the_tool_says_so() {
    let test = "a_hung_renderer_is_killed_and_the_tool_says_so";
    let site = Site::start().await;
    let config = BrowserConfig {
        timeout_secs: 3,
        ..BrowserConfig::default()
    };
    let Some(rig) = Rig::new(test, site_only(), config).await else {
        return;
    };
    rig.ok("browser_open", json!({"url": site.url("/page/1")}))
        .await;
    let hung = rig
        .call("browser_open", json!({"url": site.url("/hang")}))
        .await;
    assert_eq!(hung.status, ToolStatus::Failed, "{}", hung.content);
    assert!(
        hung.content.contains("stopped responding"),
        "{}",
        hung.content
    );
    assert!(
        hung.content.contains("its tab was closed"),
        "{}",
        hung.content
    );
    // The other tab still works.
    let page = rig.ok("browser_snapshot", json!({})).await;
    assert!(page.contains("Page 1"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profile_keeps_cookies_and_screenshots_land_in_media() {
    let test = "the_profile_keeps_cookies_and_screenshots_land_in_media";
    let site = Site::start().await;
    let Some(rig) = Rig::new(test, site_only(), BrowserConfig::default()).await else {
        return;
    };
    rig.ok("browser_open", json!({"url": site.url("/cookie")}))
        .await;
    let shot = rig.call("browser_screenshot", json!({})).await;
    assert_eq!(shot.status, ToolStatus::Success, "{}", shot.content);
    assert_eq!(shot.images.len(), 1);
    let file = rig
        .ctx
        .workspace
        .join("media")
        .join(shot.images[0].file_name());
    let png = std::fs::read(&file).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        shot.content
            .contains(&format!("media/{}", shot.images[0].file_name()))
    );
    let message = shot.to_message();
    assert_eq!(
        message.images.len(),
        1,
        "the image goes with the tool message"
    );

    rig.browsers.shutdown().await;
    assert_eq!(all_gone(&rig.profile()).await, Vec::<String>::new());
    let page = rig
        .ok("browser_open", json!({"url": site.url("/whoami")}))
        .await;
    assert!(page.contains("cookie: seen=yes-2231"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_browser_is_closed() {
    let test = "an_idle_browser_is_closed";
    let site = Site::start().await;
    let config = BrowserConfig {
        idle_secs: 1,
        ..BrowserConfig::default()
    };
    let Some(rig) = Rig::new(test, site_only(), config).await else {
        return;
    };
    rig.ok("browser_open", json!({"url": site.url("/page/1")}))
        .await;
    assert_eq!(rig.browsers.open().await, ["main"]);
    // Its idle watch closes it a second after the call.
    let mut open = rig.browsers.open().await;
    for _ in 0..100 {
        if open.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        open = rig.browsers.open().await;
    }
    assert!(open.is_empty(), "still open: {open:?}");
    assert_eq!(all_gone(&rig.profile()).await, Vec::<String>::new());
    let again = rig.call("browser_snapshot", json!({})).await;
    assert!(
        again.content.contains("call browser_open first"),
        "{}",
        again.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_are_refused_unless_allowed_then_land_in_the_inbox() {
    let test = "downloads_are_refused_unless_allowed_then_land_in_the_inbox";
    let site = Site::start().await;
    for allowed in [false, true] {
        let config = BrowserConfig {
            downloads: allowed,
            ..BrowserConfig::default()
        };
        let Some(rig) = Rig::new(test, site_only(), config).await else {
            return;
        };
        let page = rig
            .ok("browser_open", json!({"url": site.url("/files")}))
            .await;
        rig.ok(
            "browser_click",
            json!({"ref": reference(&page, "the report")}),
        )
        .await;
        let inbox = rig.ctx.workspace.join("inbox/report.csv");
        if allowed {
            for _ in 0..50 {
                if inbox.exists() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(
                std::fs::read_to_string(&inbox).unwrap(),
                "day,visits\nmonday,3\n"
            );
            let next = rig.ok("browser_snapshot", json!({})).await;
            assert!(
                rig.said
                    .lock()
                    .unwrap()
                    .contains("downloaded report.csv into inbox/report.csv"),
                "{next}"
            );
        } else {
            let said = rig.said.lock().unwrap().clone();
            let next = rig.ok("browser_snapshot", json!({})).await;
            assert!(
                said.contains("refused: tools.browser.downloads is off")
                    || next.contains("refused: tools.browser.downloads is off"),
                "{said}{next}"
            );
            assert!(!inbox.exists());
        }
    }
}
