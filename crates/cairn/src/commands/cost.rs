//! `cairn cost`: today's LLM spend (UTC day) against the daily budget, each
//! agent's against its share, and the calls of the last hour against the
//! hourly limit, read from the store.

use std::process::ExitCode;
use std::sync::Arc;

use cairn_agent::cost_guard::{AgentCost, CostGuard, CostStatus, format_dollars};
use cairn_core::clock::SystemClock;
use cairn_core::config::Config;
use cairn_llm::MICROS_PER_DOLLAR;
use cairn_store::Store;
use secrecy::ExposeSecret;

use crate::settings;

/// Prints the cost guard's status as text, or as the `CostStatus` JSON.
pub fn run(as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let status = crate::commands::runtime()?.block_on(load_status(&config))?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", render(&status));
    }
    Ok(ExitCode::SUCCESS)
}

async fn load_status(config: &Config) -> anyhow::Result<CostStatus> {
    let agents = crate::wiring::agents(config)?;
    let (store, _) = Store::open(config.database_url.expose_secret()).await?;
    let guard = CostGuard::load(store.clone(), &config.cost, Arc::new(SystemClock)).await;
    store.close().await;
    let guard = guard?;
    guard.set_agents(agents.shares());
    Ok(guard.status())
}

/// `cents` as dollars, with how much of it `spent` is.
fn used(spent_micros: u64, cents: u64) -> String {
    let micros = cents.saturating_mul(MICROS_PER_DOLLAR / 100);
    match u128::from(spent_micros)
        .saturating_mul(100)
        .checked_div(u128::from(micros))
    {
        Some(percent) => format!("{} ({percent}% used)", format_dollars(micros)),
        None => format_dollars(micros),
    }
}

fn render(status: &CostStatus) -> String {
    let budget = match status.daily_budget_cents {
        None => "unlimited".to_owned(),
        Some(cents) => used(status.spent_micros, cents),
    };
    let hourly = match status.hourly_limit {
        None => "unlimited".to_owned(),
        Some(limit) => format!("{limit} calls per hour"),
    };
    let state = if status.exceeded {
        "daily budget reached: LLM calls are refused until 00:00 UTC"
    } else if status.hourly_limit_reached() {
        "hourly limit reached: LLM calls are refused until the oldest leaves the hour"
    } else if status.warning {
        "warning: 80% of the daily budget is spent"
    } else {
        "ok"
    };
    let mut out = format!(
        "date          {} (UTC)\nspent today   {}\ndaily budget  {budget}\nhourly limit  {hourly}\nlast hour     {} calls\nstatus        {state}\n",
        status.date,
        format_dollars(status.spent_micros),
        status.hourly_calls,
    );
    // One agent is the whole: its line says nothing more.
    if status.agents.len() > 1 {
        out.push_str("\nper agent (today, UTC)\n");
        let width = status.agents.iter().map(|a| a.id.len()).max().unwrap_or(0);
        for agent in &status.agents {
            out.push_str(&format!("  {:<width$}  {}\n", agent.id, agent_line(agent)));
        }
    }
    out
}

/// One agent's spend, calls and share.
fn agent_line(agent: &AgentCost) -> String {
    let calls = match agent.calls {
        1 => "1 call".to_owned(),
        n => format!("{n} calls"),
    };
    let share = match agent.daily_budget_cents {
        None => String::new(),
        Some(_) if agent.exceeded => {
            "  share reached: its calls are refused until 00:00 UTC".to_owned()
        }
        Some(cents) => format!("  share {}", used(agent.spent_micros, cents)),
    };
    format!("{}  {calls}{share}", format_dollars(agent.spent_micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> CostStatus {
        CostStatus {
            date: chrono::NaiveDate::from_ymd_opt(2026, 3, 9).unwrap(),
            spent_micros: 4_200_000,
            daily_budget_cents: Some(500),
            hourly_calls: 3,
            hourly_limit: None,
            warning: true,
            exceeded: false,
            agents: vec![AgentCost {
                id: "main".into(),
                spent_micros: 4_200_000,
                calls: 3,
                daily_budget_cents: None,
                exceeded: false,
            }],
        }
    }

    #[test]
    fn text_shows_money_limits_and_state() {
        let text = render(&status());
        assert!(text.contains("spent today   $4.20\n"), "{text}");
        assert!(text.contains("daily budget  $5.00 (84% used)\n"), "{text}");
        assert!(text.contains("hourly limit  unlimited\n"), "{text}");
        assert!(text.contains("last hour     3 calls\n"), "{text}");
        assert!(text.contains("status        warning: 80%"), "{text}");
        let zero = CostStatus {
            daily_budget_cents: Some(0),
            exceeded: true,
            hourly_limit: Some(3),
            ..status()
        };
        let text = render(&zero);
        assert!(text.contains("daily budget  $0.00\n"), "{text}");
        assert!(text.contains("hourly limit  3 calls per hour\n"), "{text}");
        assert!(
            text.contains("status        daily budget reached"),
            "{text}"
        );
        assert!(!text.contains("per agent"), "main alone is the total");
    }

    #[test]
    fn text_shows_each_agents_line_and_share() {
        let line = |id: &str, spent, calls, share, exceeded| AgentCost {
            id: id.into(),
            spent_micros: spent,
            calls,
            daily_budget_cents: share,
            exceeded,
        };
        let text = render(&CostStatus {
            agents: vec![
                line("main", 3_900_000, 3, None, false),
                line("family", 200_000, 1, Some(50), false),
                line("coder", 100_000, 2, Some(10), true),
            ],
            ..status()
        });
        assert!(text.contains("\nper agent (today, UTC)\n"), "{text}");
        assert!(text.contains("  main    $3.90  3 calls\n"), "{text}");
        assert!(
            text.contains("  family  $0.20  1 call  share $0.50 (40% used)\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  coder   $0.10  2 calls  share reached: its calls are refused until 00:00 UTC\n"
            ),
            "{text}"
        );
    }
}
