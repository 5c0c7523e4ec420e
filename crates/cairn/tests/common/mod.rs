//! Test fixtures shared by the binary's black-box tests.
#![allow(
    dead_code,
    reason = "not in every build: each test file uses its own part"
)]

pub mod agents;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex, mpsc};

/// What the receiver does with one request.
#[derive(Clone, Copy)]
pub enum Answer {
    /// Answer with this status.
    Status(u16),
    /// Holds the request until the test releases it, then answers 200.
    Hold,
}

/// One received request: lower-cased headers and the body.
pub type Request = (Vec<(String, String)>, String);

/// A webhook receiver: answers from a script (then 200), records requests.
pub struct Receiver {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
    pub release: mpsc::Sender<()>,
}

impl Receiver {
    pub fn start(script: Vec<Answer>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (release, released) = mpsc::channel::<()>();
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            let mut script = script.into_iter();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut headers = Vec::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(": ") {
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.parse().unwrap_or(0);
                        }
                        headers.push((k.to_ascii_lowercase(), v.to_string()));
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                seen.lock()
                    .unwrap()
                    .push((headers, String::from_utf8_lossy(&body).into_owned()));
                let status = match script.next().unwrap_or(Answer::Status(200)) {
                    Answer::Status(s) => s,
                    Answer::Hold => {
                        let _ = released.recv();
                        200
                    }
                };
                let text = if status < 300 {
                    "ok"
                } else {
                    "receiver trouble"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        Receiver {
            url,
            requests,
            release,
        }
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub fn ids(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(h, _)| {
                h.iter()
                    .find(|(k, _)| k == "x-cairn-notification-id")
                    .map(|(_, v)| v.clone())
            })
            .collect()
    }
}

/// A `cairn daemon` child process, killed if the test ends early.
pub struct DaemonChild(pub std::process::Child);

impl DaemonChild {
    /// Starts `cmd` (a cairn command with its environment) as `cairn daemon`.
    pub fn start(mut cmd: std::process::Command) -> DaemonChild {
        cmd.arg("daemon")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        DaemonChild(cmd.spawn().unwrap())
    }

    /// Waits until `status` (a `cairn --json status` command maker) reports this daemon.
    pub fn wait_running(&self, status: impl Fn() -> std::process::Command) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let out = status().args(["--json", "status"]).output().unwrap();
            let pid = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .ok()
                .and_then(|v| v["daemon"]["pid"].as_u64());
            if out.status.success() && pid == Some(u64::from(self.0.id())) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon never came up"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn stop(mut self) {
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let status = self.0.wait().unwrap();
        assert!(status.success(), "the daemon exited with {status}");
    }
}

impl Drop for DaemonChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
