//! `cairn schedule explain`: kind, normalized form, description and next fire times of an expression.

use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;

use cairn_core::schedule::{Schedule, parse_zone};

use crate::cli::ExplainArgs;
use crate::exit::BadInput;

/// Most fire times listed at once; more is almost certainly a typo.
const MAX_COUNT: usize = 10_000;

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Explains one expression read in `--tz` (or `default_zone`), relative to `--from` (or now).
pub fn explain(args: &ExplainArgs, json: bool, default_zone: Tz) -> anyhow::Result<ExitCode> {
    let zone = match &args.tz {
        Some(name) => parse_zone(name).map_err(|e| BadInput(format!("--tz: {e}")))?,
        None => default_zone,
    };
    let now = match &args.from {
        Some(text) => DateTime::parse_from_rfc3339(text.trim())
            .map_err(|e| {
                BadInput(format!(
                    "--from \"{text}\": {e}; expected an RFC 3339 instant such as 2026-03-09T09:00:00Z"
                ))
            })?
            .to_utc(),
        None => Utc::now(),
    };
    if args.count > MAX_COUNT {
        return Err(BadInput(format!(
            "--count {}: at most {MAX_COUNT} fire times can be listed",
            args.count
        ))
        .into());
    }
    let schedule = Schedule::parse(&args.expr, zone, now).map_err(|e| BadInput(e.to_string()))?;
    let next: Vec<DateTime<Utc>> = schedule.fire_times(now).take(args.count).collect();

    if json {
        let value = serde_json::json!({
            "kind": schedule.kind().as_str(),
            "normalized": schedule.normalized(),
            "description": schedule.describe(),
            "timezone": zone.name(),
            "next": next.iter().map(|t| rfc3339(*t)).collect::<Vec<_>>(),
        });
        println!("{value}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("kind         {}", schedule.kind());
    println!("normalized   {}", schedule.normalized());
    println!("description  {}", schedule.describe());
    println!("timezone     {}", zone.name());
    if next.is_empty() {
        println!("next         (none)");
    }
    for (i, t) in next.iter().enumerate() {
        let label = if i == 0 { "next" } else { "" };
        let local = t.with_timezone(&zone).format("%a %Y-%m-%d %H:%M:%S %Z");
        println!("{label:<12} {}  ({local})", rfc3339(*t));
    }
    Ok(ExitCode::SUCCESS)
}
