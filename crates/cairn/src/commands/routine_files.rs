//! Reading routine files for `cairn routine apply|validate`: every problem in
//! every file, each with its file, line, routine and field path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use cairn_automation::routines::define::zone_of;
use cairn_automation::routines::define::{not_configured, prepare, unknown_agent};
use cairn_core::routine::{MAIN_AGENT, RoutineSpec, SpecFormat, line_of};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::exit::BadInput;

/// A routine file that passed every check.
pub struct Checked {
    /// Where it was read from.
    pub file: PathBuf,
    /// The spec as written.
    pub spec: RoutineSpec,
    /// The file's text, to locate a field found wrong later.
    text: String,
}

impl Checked {
    /// `FILE:LINE` of the field at `path` (`FILE` when it cannot be found).
    pub fn at(&self, path: &str) -> String {
        at(&self.file.display().to_string(), &self.text, path)
    }
}

/// `FILE:LINE` of the field at `path` in a file's `text`.
fn at(shown: &str, text: &str, path: &str) -> String {
    match line_of(text, SpecFormat::from_file_name(shown), path) {
        Some(line) => format!("{shown}:{line}"),
        None => shown.to_string(),
    }
}

/// The files `path` names: itself, or every `*.yaml|*.yml|*.json` in it, by name.
#[expect(
    clippy::disallowed_methods,
    reason = "runs before the runtime starts: reads the files a person named, once"
)]
fn files_of(path: &Path) -> Result<Vec<PathBuf>, BadInput> {
    let cannot = |e: std::io::Error| BadInput(format!("cannot read {}: {e}", path.display()));
    if !path.is_dir() {
        std::fs::metadata(path).map_err(cannot)?;
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(cannot)? {
        let file = entry.map_err(cannot)?.path();
        let ext = file
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if file.is_file() && matches!(ext.as_deref(), Some("yaml" | "yml" | "json")) {
            files.push(file);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(BadInput(format!(
            "no *.yaml, *.yml or *.json files in {}",
            path.display()
        )));
    }
    Ok(files)
}

/// The ids of `[[agents]]`, `main` first: the agents routines may run as.
/// A table with problems is refused, naming them.
pub fn configured_agents(config: &cairn_core::config::Config) -> anyhow::Result<Vec<String>> {
    Ok(crate::wiring::agents(config)?
        .all()
        .iter()
        .map(|a| a.id.clone())
        .collect())
}

/// The agents routines may run as, and the one a routine naming none runs
/// as (`--agent`).
pub struct AgentChoice<'a> {
    /// The ids of `[[agents]]`, `main` first.
    pub known: &'a [String],
    /// `--agent`: for the routines that do not name theirs (`None`: main).
    pub default: Option<String>,
}

impl AgentChoice<'_> {
    /// `--agent` checked: an id of `[[agents]]`.
    fn check_default(&self) -> Result<(), BadInput> {
        match self
            .default
            .as_deref()
            .and_then(|a| not_configured(a, self.known))
        {
            Some(why) => Err(BadInput(format!("--agent: {why}"))),
            None => Ok(()),
        }
    }

    /// `spec` as applied: given `--agent` when it names no agent of its own.
    fn fill(&self, spec: &mut RoutineSpec) {
        if spec.agent.is_none()
            && let Some(agent) = self.default.as_deref().filter(|a| *a != MAIN_AGENT)
        {
            spec.agent = Some(agent.to_string());
        }
    }
}

/// Reads and checks every file `path` names, the routines naming no agent
/// given `agents.default`; all problems, or every routine.
#[expect(
    clippy::disallowed_methods,
    reason = "runs before the runtime starts: reads the files a person named, once"
)]
pub fn check(
    path: &Path,
    user_zone: Tz,
    now: DateTime<Utc>,
    agents: &AgentChoice<'_>,
) -> Result<Vec<Checked>, BadInput> {
    agents.check_default()?;
    let mut problems = Vec::new();
    let mut checked = Vec::new();
    for file in files_of(path)? {
        let shown = file.display().to_string();
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) => {
                problems.push(format!("{shown}: cannot read: {e}"));
                continue;
            }
        };
        let format = SpecFormat::from_file_name(&shown);
        // Every shape problem, each at its line; what is left of a spec
        // with some is checked further, so one run says everything.
        let (mut spec, misshapen, stand_ins) = match RoutineSpec::parse_all(&text, format) {
            Ok(spec) => (spec, false, Vec::new()),
            Err(found) => {
                problems.extend(found.problems.iter().map(|e| match e.line {
                    Some(line) => format!("{shown}:{line}: {}", e.message),
                    None => format!("{shown}: {}", e.message),
                }));
                match found.rest {
                    Some(rest) => (*rest, true, found.stand_ins),
                    None => continue,
                }
            }
        };
        agents.fill(&mut spec);
        let mut found = prepare(&spec, user_zone, now).err().unwrap_or_default();
        found.extend(unknown_agent(&spec, agents.known));
        // What stands in for a part taken out is not the file's to answer for.
        found.retain(|p| !stand_ins.iter().any(|s| p.path.starts_with(s.as_str())));
        if misshapen || !found.is_empty() {
            for p in found {
                problems.push(format!(
                    "{}: routine \"{}\": {}: {}",
                    at(&shown, &text, &p.path),
                    spec.name,
                    p.path,
                    p.message
                ));
            }
            continue;
        }
        checked.push(Checked { file, spec, text });
    }
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for c in &checked {
        if let Some(first) = seen.insert(&c.spec.name, &c.file) {
            problems.push(format!(
                "{}: routine \"{}\" is also defined in {}; names must be unique",
                c.file.display(),
                c.spec.name,
                first.display()
            ));
        }
    }
    if problems.is_empty() {
        Ok(checked)
    } else {
        Err(refusal(&problems))
    }
}

/// Every problem found, as one error: nothing is written.
pub fn refusal(problems: &[String]) -> BadInput {
    let count = problems.len();
    let noun = if count == 1 { "problem" } else { "problems" };
    BadInput(format!(
        "{count} {noun}, nothing written:\n  {}",
        problems.join("\n  ")
    ))
}
