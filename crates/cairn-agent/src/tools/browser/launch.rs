//! Starting the browser: headless Chromium, talking over two FIFOs
//! (`--remote-debugging-pipe`, no listening port any local user could
//! drive), started through the agent's [`Sandbox`] (Landlock: its folder
//! and a private temporary directory writable, the rest of `CAIRN_HOME`
//! unreadable) and watched by a small `sh` in a process group of its own:
//! when the daemon dies, even by SIGKILL, the pipe to that shell's input
//! closes and it kills the whole group; when the browser exits, the shell
//! kills what it left. Dropping a [`Process`] kills the group at once.
//!
//! (A parent-death signal would need `prctl` between `fork` and `exec`,
//! which is `unsafe`; and the sandbox starts children from a short-lived
//! thread, whose end would deliver it.)

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use crate::sandbox::{Confined, Sandbox, SandboxError};

/// The watcher: opens the FIFOs as the browser's descriptors 3 and 4,
/// starts the browser (`$@`) in the background, and kills the process
/// group when its own input (the daemon's pipe) closes or the browser ends.
const WATCHER: &str = r#"exec 5<&0 3<"$1" 4>"$2"; shift 2
"$@" </dev/null 5<&- &
browser=$!
exec 3<&- 4>&-
{ read -r _ <&5; kill -KILL 0; } &
exec 5<&-
wait "$browser"
kill -KILL 0"#;

/// Chromium's switches besides the folder, the proxy and the bounds: no
/// background traffic of its own that can be turned off, no crash reports,
/// no shared memory in `/dev/shm` (outside what Landlock grants).
const SWITCHES: &[&str] = &[
    "--headless",
    "--remote-debugging-pipe",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--metrics-recording-only",
    "--no-pings",
    "--password-store=basic",
    "--use-mock-keychain",
    "--disable-features=Translate,OptimizationHints,MediaRouter,NetworkTimeServiceQuerying,AutofillServerCommunication,CertificateTransparencyComponentUpdater,BackForwardCache",
    "--mute-audio",
    "--hide-scrollbars",
    "--force-color-profile=srgb",
    "--window-size=1280,800",
    // Page memory: each renderer's JavaScript heap is bounded.
    "--js-flags=--max-old-space-size=512",
];

/// Bytes of the browser's standard error kept for a failure's message.
const STDERR_TAIL: usize = 4096;

/// What a start needs.
#[derive(Debug, Clone)]
pub(super) struct LaunchSpec {
    /// The Chromium or Chrome executable.
    pub executable: PathBuf,
    /// `CAIRN_HOME/browser/<agent>`: the profile, the FIFOs and downloads.
    pub dir: PathBuf,
    /// The port of the proxy every connection goes through.
    pub proxy_port: u16,
    /// At most this many renderer processes.
    pub max_renderers: usize,
}

impl LaunchSpec {
    /// The profile folder (cookies, storage), kept across starts.
    pub fn profile(&self) -> PathBuf {
        self.dir.join("profile")
    }

    /// Where the browser puts downloads before they are moved to the inbox.
    pub fn downloads(&self) -> PathBuf {
        self.dir.join("downloads")
    }

    fn arguments(&self, as_root: bool) -> Vec<String> {
        let mut args: Vec<String> = SWITCHES.iter().map(|s| (*s).to_string()).collect();
        args.push(format!("--user-data-dir={}", self.profile().display()));
        args.push(format!(
            "--proxy-server=http://127.0.0.1:{}",
            self.proxy_port
        ));
        // Loopback goes through the proxy too (Chromium skips it by default).
        args.push("--proxy-bypass-list=<-loopback>".into());
        args.push(format!("--renderer-process-limit={}", self.max_renderers));
        if as_root {
            // Chromium refuses to run as root with its own sandbox; Landlock
            // still confines the whole browser.
            args.push("--no-sandbox".into());
        }
        args.push("about:blank".into());
        args
    }
}

/// A running browser's process group.
#[derive(Debug)]
pub(super) struct Process {
    /// The watcher (its child the browser) and its temporary directory.
    confined: Confined,
    /// Held open: closing it (or the daemon dying) makes the watcher kill the group.
    _input: Option<tokio::process::ChildStdin>,
    group: Option<rustix::process::Pid>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
}

impl Process {
    /// The end of its standard error, for a failure's message.
    pub fn stderr_tail(&self) -> String {
        let tail = self
            .stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let bytes: Vec<u8> = tail.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        !matches!(self.confined.child.try_wait(), Ok(None))
    }

    /// Kills the whole group now.
    pub fn kill(&mut self) {
        if let Some(group) = self.group {
            // ESRCH (already gone) is the common, harmless case.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }

    /// Resolves when it has exited (its watcher ends with the browser).
    pub async fn ended(&mut self) {
        let _ = self.confined.child.wait().await;
    }

    /// Waits up to `limit` for it to exit by itself (after `Browser.close`).
    pub async fn wait_exit(&mut self, limit: std::time::Duration) -> bool {
        tokio::time::timeout(limit, self.ended()).await.is_ok()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A started browser: its process group and its end of the pipe.
pub(super) struct Launched {
    pub process: Process,
    pub reader: pipe::Receiver,
    pub writer: pipe::Sender,
}

/// Starts the browser as `spec` says, in `sandbox`.
pub(super) async fn launch(spec: &LaunchSpec, sandbox: &Sandbox) -> Result<Launched, String> {
    let (input, output) = make_fifos(spec).await?;
    // Read-write opens never wait for the other end (Linux), and keep the
    // FIFOs usable until the browser opens them.
    let writer = pipe::OpenOptions::new()
        .read_write(true)
        .open_sender(&input)
        .map_err(|e| format!("cannot open {}: {e}", input.display()))?;
    let reader = pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&output)
        .map_err(|e| format!("cannot open {}: {e}", output.display()))?;
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(WATCHER)
        .arg("cairn-browser")
        .arg(&input)
        .arg(&output)
        .arg(&spec.executable)
        .args(spec.arguments(rustix::process::geteuid().is_root()))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let confined = sandbox
        .spawn_at(command, &spec.dir, &spec.dir)
        .await
        .map_err(|e| match e {
            SandboxError::Spawn(e) => format!("cannot start /bin/sh for the browser: {e}"),
            other => other.to_string(),
        })?;
    Ok(Launched {
        process: process(confined),
        reader,
        writer,
    })
}

fn process(mut confined: Confined) -> Process {
    let stderr = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
    if let Some(mut pipe) = confined.child.stderr.take() {
        let tail = Arc::clone(&stderr);
        // Drained to the end, so the browser never blocks on a full pipe.
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let mut tail = tail
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                tail.extend(&chunk[..n]);
                let extra = tail.len().saturating_sub(STDERR_TAIL);
                tail.drain(..extra);
            }
        });
    }
    let group = confined
        .child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    Process {
        _input: confined.child.stdin.take(),
        group,
        stderr,
        confined,
    }
}

/// The browser's folder (owner only) with its profile and two fresh FIFOs:
/// `(input, output)` as the browser sees them.
async fn make_fifos(spec: &LaunchSpec) -> Result<(PathBuf, PathBuf), String> {
    let spec = spec.clone();
    tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::DirBuilderExt;
        for dir in [&spec.dir, &spec.profile(), &spec.downloads()] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let input = spec.dir.join("cdp-in");
        let output = spec.dir.join("cdp-out");
        for fifo in [&input, &output] {
            fresh_fifo(fifo)?;
        }
        Ok((input, output))
    })
    .await
    .map_err(|e| format!("preparing the browser's folder failed: {e}"))?
}

#[expect(
    clippy::disallowed_methods,
    reason = "runs on the blocking pool (make_fifos)"
)]
fn fresh_fifo(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
    }
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        path,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .map_err(|e| format!("cannot create the pipe {}: {e}", path.display()))
}

/// The first executable of `candidates` found (a path, or a name looked up
/// on `path`, a `PATH` value).
pub fn find_on_path(candidates: &[&str], path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    #[expect(
        clippy::disallowed_methods,
        reason = "called once at start-up, off any hot path"
    )]
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    candidates.iter().find_map(|candidate| {
        if candidate.contains('/') {
            let p = PathBuf::from(candidate);
            return executable(&p).then_some(p);
        }
        std::env::split_paths(path?)
            .map(|dir| dir.join(candidate))
            .find(|p| p.is_absolute() && executable(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switches_send_everything_through_the_proxy_and_keep_the_profile() {
        let spec = LaunchSpec {
            executable: "/usr/bin/chromium".into(),
            dir: "/home/cairn/browser/main".into(),
            proxy_port: 4100,
            max_renderers: 6,
        };
        let args = spec.arguments(false);
        for expected in [
            "--user-data-dir=/home/cairn/browser/main/profile",
            "--proxy-server=http://127.0.0.1:4100",
            "--proxy-bypass-list=<-loopback>",
            "--remote-debugging-pipe",
            "--renderer-process-limit=6",
        ] {
            assert!(args.iter().any(|a| a == expected), "{expected}: {args:?}");
        }
        assert!(!args.iter().any(|a| a == "--no-sandbox"));
        assert!(spec.arguments(true).iter().any(|a| a == "--no-sandbox"));
    }

    #[test]
    fn executables_are_found_by_path_or_name() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("chromium-browser");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let plain = dir.path().join("google-chrome");
        std::fs::write(&plain, "not executable").unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = dir.path().as_os_str();
        assert_eq!(
            find_on_path(
                &["chromium", "google-chrome", "chromium-browser"],
                Some(path)
            ),
            Some(exe.clone())
        );
        assert_eq!(find_on_path(&["google-chrome"], Some(path)), None);
        assert_eq!(
            find_on_path(&[exe.to_str().unwrap()], None),
            Some(exe.clone())
        );
        assert_eq!(find_on_path(&["chromium"], None), None);
    }
}
