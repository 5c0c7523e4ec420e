//! `cairn secret leaks [--json]`: the secrets leak detection found on their
//! way out, newest first. Each names the secret, where it was going and a
//! short excerpt with the value already replaced; no value is ever stored.

use std::process::ExitCode;

use anyhow::Context;
use cairn_store::{SecretLeak, Store};
use secrecy::ExposeSecret;

use crate::settings;

/// Lists the latest `limit` leaks found.
pub fn run(limit: u32, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    super::runtime()?.block_on(async {
        let (store, _) = Store::open(config.database_url.expose_secret())
            .await
            .context("cannot open the database")?;
        let leaks = store.secret_leaks(limit).await;
        store.close().await;
        let leaks = leaks.context("cannot read the secret leaks")?;
        if as_json {
            println!("{}", serde_json::to_string_pretty(&leaks)?);
        } else if leaks.is_empty() {
            println!("no secret was found leaving");
        } else {
            print!("{}", render(&leaks));
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// One block per leak: when, which secret, where to; then its excerpt.
fn render(leaks: &[SecretLeak]) -> String {
    let mut out = String::new();
    for leak in leaks {
        let whose: Vec<String> = [
            leak.agent.as_ref().map(|a| format!("agent {a}")),
            leak.session_id.as_ref().map(|s| format!("session {s}")),
            leak.run_id.as_ref().map(|r| format!("run {r}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        out.push_str(&format!(
            "{}  {}  {} {}{}\n    {}\n",
            leak.at.format("%Y-%m-%d %H:%M:%S"),
            leak.secret,
            leak.place,
            leak.target,
            if whose.is_empty() {
                String::new()
            } else {
                format!(" ({})", whose.join(", "))
            },
            leak.context.replace('\n', " "),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn a_leak_shows_its_name_place_and_excerpt() {
        let leak = SecretLeak {
            id: uuid::Uuid::nil(),
            at: Utc.with_ymd_and_hms(2026, 12, 2, 9, 0, 0).unwrap(),
            secret: "GH".into(),
            place: "tool".into(),
            target: "http_request".into(),
            agent: None,
            session_id: Some("cli:me".into()),
            run_id: None,
            context: "http://x.test/?k=[secret:GH]\nmore".into(),
        };
        assert_eq!(
            render(&[leak]),
            "2026-12-02 09:00:00  GH  tool http_request (session cli:me)\n    http://x.test/?k=[secret:GH] more\n"
        );
    }
}
