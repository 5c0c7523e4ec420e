//! `cairn routine create NAME --schedule WHEN (--message TEXT | --prompt
//! TEXT) [--channel C]`: a routine without writing YAML, made by the one
//! routine service as `apply` makes one from a file, then shown as
//! `cairn routine show NAME` shows it.

use cairn_automation::routines::service::ServiceError;
use cairn_core::routine::RoutineSpec;
use cairn_core::schedule::{Schedule, ScheduleKind};
use chrono::Utc;
use chrono_tz::Tz;

use super::routine::Ctx;
use super::routine_ops;
use crate::cli::RoutineCreateArgs;
use crate::exit::BadInput;

/// The spec the arguments describe, checked before the database is opened:
/// the schedule read (a one-shot time, `tomorrow at 9am`, makes a `once`
/// trigger; anything else recurs), the channel one `[channels]` has.
pub fn spec(
    args: &RoutineCreateArgs,
    zone: Tz,
    channels: &[String],
) -> anyhow::Result<RoutineSpec> {
    let schedule = Schedule::parse(&args.schedule, zone, Utc::now()).map_err(|e| {
        BadInput(format!(
            "--schedule \"{}\": {e}; write it as \"every weekday at 9am\", \"0 9 * * 1-5\", \"every 2h\" or \"tomorrow at 9am\" (`cairn schedule explain` tries one)",
            args.schedule
        ))
    })?;
    let trigger = match schedule.kind() {
        ScheduleKind::Once => serde_json::json!({ "type": "once", "at": args.schedule }),
        _ => serde_json::json!({ "type": "cron", "schedule": args.schedule }),
    };
    let action = match (&args.message, &args.prompt) {
        (Some(message), None) => serde_json::json!({ "type": "notification", "message": message }),
        (None, Some(prompt)) => serde_json::json!({ "type": "lightweight", "prompt": prompt }),
        // clap requires exactly one.
        _ => return Err(BadInput("give --message TEXT or --prompt TEXT".into()).into()),
    };
    let mut notify = serde_json::json!({});
    if let Some(channel) = &args.channel {
        if !channels.iter().any(|c| c == channel) {
            return Err(BadInput(format!(
                "--channel: no channel named \"{channel}\" (configured: {}); add a [channels.{channel}] table to config.toml",
                channels.join(", ")
            ))
            .into());
        }
        notify = serde_json::json!({ "channel": channel });
    }
    let spec = serde_json::json!({
        "name": args.name,
        "trigger": trigger,
        "action": action,
        "notify": notify,
    });
    serde_json::from_value(spec)
        .map_err(|e| BadInput(format!("routine \"{}\": {e}", args.name)).into())
}

/// Creates the routine (a name taken is refused: `apply` changes one) and
/// prints it as `show` does.
pub(super) async fn create(ctx: &Ctx, spec: RoutineSpec) -> anyhow::Result<()> {
    let name = spec.name.clone();
    match ctx.service.create(spec, &ctx.actor()).await {
        Ok(_) => {}
        Err(ServiceError::Problems { name, problems }) => {
            // Named by the options they came from.
            let lines: Vec<String> = problems
                .iter()
                .map(|p| {
                    let option = match p.path.as_str() {
                        "trigger.schedule" | "trigger.at" => "--schedule",
                        "action.message" => "--message",
                        "action.prompt" => "--prompt",
                        "name" => "NAME",
                        other => other,
                    };
                    format!("routine \"{name}\": {option}: {}", p.message)
                })
                .collect();
            return Err(super::routine_files::refusal(&lines).into());
        }
        Err(e) => return Err(routine_ops::cli_error(e)),
    }
    if !ctx.json {
        eprintln!("created routine \"{name}\"; `cairn routine show {name}` shows it again");
    }
    super::routine::show(ctx, &name).await
}
