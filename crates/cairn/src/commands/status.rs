//! `cairn status`: the daemon's state file, judged (running, stale, not
//! running). Exit 0 when a daemon runs, 3 otherwise (as `systemctl status`).

use std::process::ExitCode;

use chrono::Utc;

use crate::daemon::state_file::{self, DaemonState, Liveness};

/// Prints the daemon's status.
pub fn run(json: bool) -> anyhow::Result<ExitCode> {
    let home = crate::settings::home_dir()?;
    let state = super::runtime()?.block_on(state_file::read(&home))?;
    let now = Utc::now();
    let liveness = state.as_ref().map(|s| {
        if s.stopping && state_file::liveness(s, now) != Liveness::Running {
            Liveness::NotRunning
        } else {
            state_file::liveness(s, now)
        }
    });
    let age = state
        .as_ref()
        .map(|s| (now - s.updated_at).num_seconds().max(0));
    // Only a home whose daemon has run has a database to read (opening one
    // would create it); a database that cannot be read is said so, not fatal.
    let paused = match &state {
        Some(_) => paused_routines(),
        None => Ok(Vec::new()),
    };
    if json {
        let status = match liveness {
            Some(l) => serde_json::to_value(l)?,
            None => serde_json::Value::from("never_started"),
        };
        let out = serde_json::json!({
            "status": status,
            "state_file": state_file::path(&home),
            "age_secs": age,
            "daemon": state,
            "paused_routines": match &paused {
                Ok(list) => serde_json::json!(list.iter().map(|(name, p)| serde_json::json!({
                    "name": name,
                    "by": p.by,
                    "at": p.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    "note": p.note,
                })).collect::<Vec<_>>()),
                Err(_) => serde_json::Value::Null,
            },
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(&home, state.as_ref(), liveness, age.unwrap_or(0));
        match &paused {
            Ok(list) => {
                for (name, p) in list {
                    let mut line = format!(
                        "routine {name}: paused by {} at {}",
                        p.by,
                        p.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    );
                    if let Some(note) = &p.note {
                        line.push_str(&format!(": {note}"));
                    }
                    println!("{line}");
                }
            }
            Err(e) => println!("routines: cannot read the database: {e:#}"),
        }
    }
    Ok(if liveness == Some(Liveness::Running) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

fn print_text(
    home: &std::path::Path,
    state: Option<&DaemonState>,
    liveness: Option<Liveness>,
    age: i64,
) {
    let (Some(state), Some(liveness)) = (state, liveness) else {
        println!(
            "cairn daemon: not running (no {} yet: it has never run on this home)",
            state_file::path(home).display()
        );
        return;
    };
    let verdict = match liveness {
        Liveness::Running => format!("running (pid {})", state.pid),
        Liveness::Stale => format!(
            "not responding (pid {} is alive but its state file is {age}s old)",
            state.pid
        ),
        Liveness::NotRunning => format!(
            "not running (pid {} is gone; last state {age}s old)",
            state.pid
        ),
    };
    println!("cairn daemon: {verdict}");
    println!(
        "version {}, started {}",
        state.version,
        state
            .started_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    if let Some(gateway) = &state.gateway {
        println!("gateway: http://{gateway}");
    }
    println!("database: {}", state.database);
    println!("components:");
    for (name, h) in &state.components {
        let state = serde_json::to_value(h.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let mut line = format!("  {name:<26} {state:<12} restarts {}", h.restarts);
        if let Some(at) = h.retry_at {
            line.push_str(&format!(
                ", retry at {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
        }
        if let Some(error) = &h.last_error {
            line.push_str(&format!(", last error: {error}"));
        }
        println!("{line}");
    }
}

/// The configured user's paused routines, by name, with their pause.
fn paused_routines() -> anyhow::Result<Vec<(String, cairn_core::routine::Pause)>> {
    use secrecy::ExposeSecret;
    let config = crate::settings::load()?;
    super::runtime()?.block_on(async {
        let (store, _) = cairn_store::Store::open(config.database_url.expose_secret()).await?;
        let routines = store.list_routines(Some(&config.user.id)).await;
        store.close().await;
        Ok(routines?
            .into_iter()
            .filter_map(|r| r.runtime.paused.map(|p| (r.spec.name, p)))
            .collect())
    })
}
