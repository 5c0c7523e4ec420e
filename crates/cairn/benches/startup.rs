//! How long `cairn daemon` takes to be ready (its gateway serving, so
//! `/healthz` answers) and to have started every part, on a fresh home and
//! restarted on an existing one: the wall time from the process's spawn to
//! its "gateway listening" line, and the daemon's own times and time per
//! start-up phase (its "daemon started" log line). Medians over
//! `STARTUP_RUNS` (5) starts each.
//!
//! `cargo bench -p cairn --bench startup`; `CAIRN_BIN` names another built
//! cairn (then nothing is built for it). Progress on stderr, one JSON object
//! on stdout. Targets and the latest figures: docs/performance.md.
#![expect(clippy::unwrap_used, reason = "a benchmark: set-up unwraps")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

/// One start: wall time to ready, and the daemon's phases (name → ms).
struct Start {
    wall_ms: f64,
    ready_ms: f64,
    started_ms: f64,
    phases: Vec<(String, f64)>,
}

fn start_once(bin: &str, home: &std::path::Path) -> Start {
    let began = Instant::now();
    let mut child = Command::new(bin)
        .args(["--log-format", "json", "daemon"])
        .env("CAIRN_HOME", home)
        .env("CAIRN_GATEWAY_PORT", "0")
        .env("CAIRN_LOG", "warn,cairn=info")
        .env_remove("CAIRN_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_LLM_PROVIDER")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (mut wall_ms, mut ready) = (None, None);
    for line in stderr.lines() {
        let line = line.unwrap();
        if wall_ms.is_none() && line.starts_with("gateway listening on") {
            wall_ms = Some(began.elapsed().as_secs_f64() * 1e3);
        }
        if let Ok(v) = serde_json::from_str::<Value>(&line)
            && v["fields"]["message"] == "daemon started: every part runs"
        {
            ready = Some(v["fields"].clone());
        }
        if wall_ms.is_some() && ready.is_some() {
            break;
        }
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    child.wait().unwrap();
    let fields = ready.expect("the daemon logged no \"daemon started\" line");
    let phases = fields["phases"]
        .as_str()
        .unwrap_or_default()
        .strip_suffix(" ms")
        .unwrap_or_default()
        // A phase's name may hold a comma ("store, vault and sandbox").
        .split(" ms, ")
        .filter_map(|p| {
            let (name, ms) = p.rsplit_once(' ')?;
            Some((name.to_string(), ms.parse().ok()?))
        })
        .collect();
    Start {
        wall_ms: wall_ms.expect("no \"gateway listening\" line"),
        ready_ms: fields["ready_ms"].as_str().unwrap().parse().unwrap(),
        started_ms: fields["started_ms"].as_str().unwrap().parse().unwrap(),
        phases,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let m = xs[xs.len() / 2];
    (m * 100.0).round() / 100.0
}

fn summary(starts: &[Start]) -> Value {
    let mut phases: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let order: Vec<&str> = starts[0].phases.iter().map(|(n, _)| n.as_str()).collect();
    for s in starts {
        for (name, ms) in &s.phases {
            phases.entry(name.as_str()).or_default().push(*ms);
        }
    }
    let per_phase: Vec<Value> = order
        .iter()
        .map(|name| json!({ "phase": name, "median_ms": median(phases[name].clone()) }))
        .collect();
    json!({
        "runs": starts.len(),
        "wall_ms_median": median(starts.iter().map(|s| s.wall_ms).collect()),
        "wall_ms": starts.iter().map(|s| (s.wall_ms * 100.0).round() / 100.0).collect::<Vec<_>>(),
        "ready_ms_median": median(starts.iter().map(|s| s.ready_ms).collect()),
        "started_ms_median": median(starts.iter().map(|s| s.started_ms).collect()),
        "phases": per_phase,
    })
}

fn main() {
    let bin = std::env::var("CAIRN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_cairn").into());
    let runs: usize = std::env::var("STARTUP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut fresh = Vec::new();
    let mut existing = Vec::new();
    let keep = tempfile::tempdir().unwrap();
    for i in 0..runs {
        let dir = tempfile::tempdir().unwrap();
        let s = start_once(&bin, dir.path());
        eprintln!(
            "fresh home {}: ready {:.1} ms (wall {:.1} ms), started {:.1} ms",
            i + 1,
            s.ready_ms,
            s.wall_ms,
            s.started_ms
        );
        fresh.push(s);
    }
    // One home made once, then restarted.
    start_once(&bin, keep.path());
    for i in 0..runs {
        let s = start_once(&bin, keep.path());
        eprintln!(
            "existing home {}: ready {:.1} ms (wall {:.1} ms), started {:.1} ms",
            i + 1,
            s.ready_ms,
            s.wall_ms,
            s.started_ms
        );
        existing.push(s);
    }
    let out = json!({
        "binary": bin,
        "fresh_home": summary(&fresh),
        "existing_home": summary(&existing),
        "ready": "wall: spawn to the \"gateway listening\" line; ready_ms: the daemon's own clock, from main to /healthz answering; started_ms and phases: to every part running (other requests wait for it)",
    });
    println!("{out}");
}
