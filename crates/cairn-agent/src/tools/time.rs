//! The `time_now` tool.

use std::sync::LazyLock;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

use super::args::opt_str;
use super::{CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema};
use crate::runner::Authorized;

/// `time_now`: the current date and time in the user's (or a named) time zone.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeNowTool;

/// Not reusable: the time moves on, so a second call must read the clock again.
static TIME_NOW: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "time_now",
        RiskLevel::ReadOnly,
        "Current date and time in the user's time zone (or in `timezone`, an IANA name such as Europe/Paris).",
    )
    .params(schema::closed(
        json!({"timezone": {"type": "string", "description": "IANA time zone; defaults to the user's"}}),
        &[],
    ))
    .aliased(&["now", "current_time", "time", "date"])
    .not_reusable()
});

#[async_trait]
impl Tool for TimeNowTool {
    fn spec(&self) -> &ToolSpec {
        &TIME_NOW
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let tz = match opt_str(&args, "timezone")? {
            Some(name) => name
                .trim()
                .parse::<Tz>()
                .map_err(|_| ToolError::InvalidArguments(format!("unknown time zone `{name}`")))?,
            None => ctx.timezone,
        };
        Ok(ToolOutput::ok(describe(ctx.now(), tz)))
    }
}

/// One line per fact, so the model does not have to do date arithmetic.
fn describe(now: DateTime<Utc>, tz: Tz) -> String {
    let local = now.with_timezone(&tz);
    format!(
        "local: {} ({}, {})\nutc: {}\nunix: {}",
        local.format("%Y-%m-%d %H:%M:%S %:z"),
        local.format("%A"),
        tz.name(),
        now.format("%Y-%m-%dT%H:%M:%SZ"),
        now.timestamp()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::clock::FixedClock;
    use chrono::TimeZone;
    use std::sync::Arc;

    fn ctx() -> ToolContext {
        let at = Utc.with_ymd_and_hms(2026, 3, 29, 0, 30, 0).unwrap();
        ToolContext::new("/tmp", "s")
            .with_clock(Arc::new(FixedClock::new(at)))
            .with_timezone(chrono_tz::Europe::Berlin)
    }

    #[tokio::test]
    async fn reports_time_in_context_zone() {
        let out = TimeNowTool
            .execute(json!({}), &ctx(), &Authorized::for_tests())
            .await
            .unwrap();
        assert_eq!(
            out.content,
            "local: 2026-03-29 01:30:00 +01:00 (Sunday, Europe/Berlin)\nutc: 2026-03-29T00:30:00Z\nunix: 1774744200"
        );
    }

    #[tokio::test]
    async fn named_zone_overrides_and_bad_zone_is_an_error() {
        let out = TimeNowTool
            .execute(
                json!({"timezone": "America/New_York"}),
                &ctx(),
                &Authorized::for_tests(),
            )
            .await
            .unwrap();
        assert!(
            out.content
                .starts_with("local: 2026-03-28 20:30:00 -04:00 (Saturday")
        );
        let err = TimeNowTool
            .execute(
                json!({"timezone": "Mars/Olympus"}),
                &ctx(),
                &Authorized::for_tests(),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(m) if m.contains("Mars/Olympus")));
    }
}
