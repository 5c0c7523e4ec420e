//! `cairn skill list|show`: the skills the agent is offered (folders with a
//! `SKILL.md` in `workspace/skills/` and `skills.paths`); with `--agent ID`,
//! that agent's (its own workspace's `skills/` and `skills.paths`).

use std::process::ExitCode;

use cairn_agent::skills::{discover, read_body, skill_dirs};
use serde_json::json;

use crate::cli::{SkillArgs, SkillCommand};
use crate::exit::BadInput;
use crate::settings;

/// Runs one `cairn skill` subcommand.
pub fn run(args: &SkillArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let workspace = match &args.agent {
        Some(id) => crate::wiring::workspace_of(&config, &crate::wiring::agent_named(&config, id)?),
        None => config.workspace.clone(),
    };
    let dirs = skill_dirs(&workspace, &config.skills.paths);
    crate::commands::runtime()?.block_on(async {
        let set = discover(&dirs).await;
        match &args.command {
            SkillCommand::List => {
                if as_json {
                    let skills: Vec<_> = set
                        .skills
                        .iter()
                        .map(|s| json!({"name": s.name, "description": s.description, "file": s.file}))
                        .collect();
                    let skipped: Vec<_> = set
                        .problems
                        .iter()
                        .map(|p| json!({"file": p.file, "line": p.line, "message": p.message}))
                        .collect();
                    let out = json!({"skills": skills, "skipped": skipped});
                    println!("{}", serde_json::to_string_pretty(&out)?);
                } else {
                    if set.skills.is_empty() {
                        println!("no skills (looked in {})", join(&dirs));
                    }
                    for s in &set.skills {
                        println!("{}  {}\n    {}", s.name, s.file.display(), s.description);
                    }
                    for p in &set.problems {
                        eprintln!("skipped: {p}");
                    }
                }
            }
            SkillCommand::Show { name } => {
                let Some(skill) = set.get(name) else {
                    return Err(BadInput(format!(
                        "no skill named `{name}` (see `cairn skill list`)"
                    ))
                    .into());
                };
                let text = read_body(skill).await.map_err(|e| {
                    anyhow::anyhow!("cannot read {}: {e}", skill.file.display())
                })?;
                if as_json {
                    let out = json!({
                        "name": skill.name,
                        "description": skill.description,
                        "file": skill.file,
                        "text": text,
                    });
                    println!("{}", serde_json::to_string_pretty(&out)?);
                } else {
                    print!("{text}");
                }
            }
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

fn join(dirs: &[cairn_agent::skills::SkillDir]) -> String {
    dirs.iter()
        .map(|d| d.path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
