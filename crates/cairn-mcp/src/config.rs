//! `[[mcp.servers]]`: the MCP servers cairn connects to, as written in
//! config.toml, `${VAR}` expanded, checked, every problem named by its key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use cairn_agent::tools::RiskLevel;
use cairn_core::config::expand::expand_env;
use serde::Deserialize;
use serde_json::Value;

use crate::names;

/// When a server's process (or session) is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartMode {
    /// At the first call of one of its tools (its tool list is remembered
    /// from the last connection; a server never connected is started at once
    /// to learn it).
    #[default]
    Lazy,
    /// When cairn starts.
    Startup,
}

/// How cairn reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A process cairn starts and talks to over its standard input and output.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it, on top of the clean environment ([`crate::process`]).
        env: BTreeMap<String, String>,
        /// The variables of cairn's own environment it gets
        /// ([`crate::process::INHERITED`]), as read once at start-up.
        inherited: BTreeMap<String, String>,
        /// Its working directory (default: its own folder,
        /// `CAIRN_HOME/mcp/<name>`); never inside the workspace.
        cwd: Option<PathBuf>,
        /// Start it confined by the shell sandbox (Landlock: the workspace
        /// and its own folder, which is its HOME).
        sandbox: bool,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL.
        url: String,
        /// Headers sent with every request (credentials, usually).
        headers: BTreeMap<String, String>,
    },
}

/// One configured server.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its name, normalized (`a-z`, `0-9`, `_`): tools are `mcp__<name>__<tool>`.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// When it is started.
    pub start: StartMode,
    /// False leaves it out entirely.
    pub enabled: bool,
    /// Tool-name patterns (`*`, `?`) of its tools that run without asking.
    pub allow: Vec<String>,
    /// Tool-name patterns of its tools that are never offered nor run.
    pub deny: Vec<String>,
    /// The risk of its tools (default `write`, so `supervised` asks); a
    /// tool's `destructiveHint` raises it, nothing lowers it.
    pub risk: Option<RiskLevel>,
    /// A call with neither an answer nor a progress notification for this long is cancelled.
    pub timeout: Duration,
    /// The longest one call may run, progress or not.
    pub max_call: Duration,
    /// How long connecting (start, handshake, tool list) may take.
    pub connect_timeout: Duration,
    /// Most characters of one result kept for the model.
    pub max_output_chars: usize,
    /// Most bytes of one message accepted from the server.
    pub max_message_bytes: usize,
    /// Why it cannot start: its table names an unset `${VAR}` (each key and
    /// variable). It is then never started and its tools are not offered.
    pub unavailable: Option<String>,
}

impl std::fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Environment values and headers hold credentials: names only.
        let transport = match &self.transport {
            Transport::Stdio {
                command, args, env, ..
            } => format!(
                "stdio {command} ({} args, env {:?})",
                args.len(),
                env.keys().collect::<Vec<_>>()
            ),
            Transport::Http { headers, .. } => {
                format!("http (headers {:?})", headers.keys().collect::<Vec<_>>())
            }
        };
        f.debug_struct("ServerSpec")
            .field("name", &self.name)
            .field("transport", &transport)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl ServerSpec {
    /// A stdio server with default settings (tests, examples), given
    /// cairn's own [`INHERITED`](crate::process::INHERITED) variables as
    /// this process has them.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Self {
        let ours: BTreeMap<String, String> = crate::process::INHERITED
            .iter()
            .filter_map(|n| Some(((*n).to_string(), std::env::var(n).ok()?)))
            .collect();
        Self::with_transport(
            name,
            Transport::Stdio {
                command: command.to_string(),
                args: args.iter().map(|a| (*a).to_string()).collect(),
                env: BTreeMap::new(),
                inherited: crate::process::inherited(&ours),
                cwd: None,
                sandbox: false,
            },
        )
    }

    /// An HTTP server with default settings (tests, examples).
    pub fn http(name: &str, url: &str) -> Self {
        Self::with_transport(
            name,
            Transport::Http {
                url: url.to_string(),
                headers: BTreeMap::new(),
            },
        )
    }

    fn with_transport(name: &str, transport: Transport) -> Self {
        let raw = Raw::default();
        Self {
            name: names::server_name(name).unwrap_or_else(|_| name.to_string()),
            transport,
            start: raw.start,
            enabled: true,
            allow: Vec::new(),
            deny: Vec::new(),
            risk: None,
            timeout: Duration::from_secs(raw.timeout_secs),
            max_call: Duration::from_secs(raw.max_call_secs),
            connect_timeout: Duration::from_secs(raw.connect_timeout_secs),
            max_output_chars: raw.max_output_chars,
            max_message_bytes: raw.max_message_bytes,
            unavailable: None,
        }
    }

    /// `stdio: COMMAND` or `http: URL` (query strings and user info hidden).
    pub fn endpoint(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, .. } => format!("stdio: {command}"),
            Transport::Http { url, .. } => {
                format!("http: {}", cairn_core::config::redact_url(url))
            }
        }
    }

    /// True when `tool` (the server's own name for it) is denied here.
    pub fn denies(&self, tool: &str) -> bool {
        matches_any(&self.deny, tool)
    }

    /// True when `tool` runs without asking.
    pub fn allows(&self, tool: &str) -> bool {
        matches_any(&self.allow, tool)
    }
}

fn matches_any(patterns: &[String], tool: &str) -> bool {
    let exposed = names::tool_part(tool);
    patterns.iter().any(|p| {
        let p = names::pattern(p);
        cairn_agent::policy::glob_match(&p, &exposed)
    })
}

/// A problem in `[[mcp.servers]]`: the key (`mcp.servers[1].url`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Where.
    pub key: String,
    /// What.
    pub message: String,
}

impl std::fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// One `[[mcp.servers]]` entry as written.
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
struct Raw {
    name: String,
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    sandbox: bool,
    url: Option<String>,
    headers: BTreeMap<String, String>,
    start: StartMode,
    enabled: bool,
    allow: Vec<String>,
    deny: Vec<String>,
    risk: Option<RiskLevel>,
    timeout_secs: u64,
    max_call_secs: u64,
    connect_timeout_secs: u64,
    max_output_chars: usize,
    max_message_bytes: usize,
}

impl Default for Raw {
    fn default() -> Self {
        Self {
            name: String::new(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            sandbox: false,
            url: None,
            headers: BTreeMap::new(),
            start: StartMode::Lazy,
            enabled: true,
            allow: Vec::new(),
            deny: Vec::new(),
            risk: None,
            timeout_secs: 60,
            max_call_secs: 600,
            connect_timeout_secs: 30,
            max_output_chars: 30_000,
            max_message_bytes: 8 * 1024 * 1024,
        }
    }
}

/// Parses the `[[mcp.servers]]` array (as JSON), expanding `${VAR}` from
/// `env`. Every problem of every server is reported; disabled servers are
/// checked too, and kept (with `enabled = false`) so commands can show them.
pub fn parse_servers(
    table: Option<&Value>,
    env: &(impl cairn_core::text::Vars + ?Sized),
) -> Result<Vec<ServerSpec>, Vec<ConfigProblem>> {
    let Some(table) = table else {
        return Ok(Vec::new());
    };
    let Some(entries) = table.as_array() else {
        return Err(vec![problem(
            "mcp.servers",
            "expected [[mcp.servers]] tables (an array)",
        )]);
    };
    let mut problems = Vec::new();
    let mut specs: Vec<ServerSpec> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let key = format!("mcp.servers[{i}]");
        let mut value = entry.clone();
        let mut unset = Vec::new();
        expand_env(&mut value, &key, env, &mut unset);
        // An unset variable leaves its string as written: the entry is
        // still checked, and kept as unavailable (never started).
        let raw: Raw = match serde_json::from_value(value) {
            Ok(raw) => raw,
            Err(e) => {
                problems.push(problem(&key, &e.to_string()));
                continue;
            }
        };
        if let Ok(name) = names::server_name(&raw.name) {
            if seen.contains(&name) {
                problems.push(problem(
                    &format!("{key}.name"),
                    &format!("\"{name}\" names two servers"),
                ));
                continue;
            }
            seen.push(name);
        }
        let before = problems.len();
        let spec = check(&key, raw, &mut problems);
        if let Some(mut spec) = spec.filter(|_| problems.len() == before) {
            if let Transport::Stdio { inherited, .. } = &mut spec.transport {
                *inherited = crate::process::inherited(env);
            }
            if !unset.is_empty() {
                let why: Vec<String> = unset.iter().map(ToString::to_string).collect();
                spec.unavailable = Some(why.join("; "));
            }
            specs.push(spec);
        }
    }
    if problems.is_empty() {
        Ok(specs)
    } else {
        Err(problems)
    }
}

fn problem(key: &str, message: &str) -> ConfigProblem {
    ConfigProblem {
        key: key.to_string(),
        message: message.to_string(),
    }
}

/// Judges one entry; problems go to `problems`.
fn check(key: &str, mut raw: Raw, problems: &mut Vec<ConfigProblem>) -> Option<ServerSpec> {
    let name = match names::server_name(&raw.name) {
        Ok(name) => name,
        Err(why) => {
            problems.push(problem(&format!("{key}.name"), &why));
            return None;
        }
    };
    let transport = transport(key, &mut raw, problems)?;
    check_limits(key, &raw, problems);
    Some(ServerSpec {
        name,
        transport,
        start: raw.start,
        enabled: raw.enabled,
        allow: raw.allow,
        deny: raw.deny,
        risk: raw.risk,
        timeout: Duration::from_secs(raw.timeout_secs),
        max_call: Duration::from_secs(raw.max_call_secs),
        connect_timeout: Duration::from_secs(raw.connect_timeout_secs),
        max_output_chars: raw.max_output_chars,
        max_message_bytes: raw.max_message_bytes,
        unavailable: None,
    })
}

/// The entry's transport, stdio or HTTP, its fields taken from `raw`;
/// `None` when it has neither or both.
fn transport(key: &str, raw: &mut Raw, problems: &mut Vec<ConfigProblem>) -> Option<Transport> {
    Some(match (raw.command.take(), raw.url.take()) {
        (Some(_), Some(_)) => {
            problems.push(problem(
                key,
                "both `command` (stdio) and `url` (HTTP) are set; keep one",
            ));
            return None;
        }
        (None, None) => {
            problems.push(problem(
                key,
                "needs `command` (a stdio server) or `url` (a streamable HTTP server)",
            ));
            return None;
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                problems.push(problem(&format!("{key}.command"), "is empty"));
            }
            if !raw.headers.is_empty() {
                problems.push(problem(
                    &format!("{key}.headers"),
                    "only for `url` servers; a stdio server takes `env`",
                ));
            }
            Transport::Stdio {
                command,
                args: std::mem::take(&mut raw.args),
                env: std::mem::take(&mut raw.env),
                inherited: BTreeMap::new(),
                cwd: raw.cwd.take(),
                sandbox: raw.sandbox,
            }
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                problems.push(problem(
                    &format!("{key}.url"),
                    "must start with http:// or https://",
                ));
            }
            for (field, set) in [
                ("args", !raw.args.is_empty()),
                ("env", !raw.env.is_empty()),
                ("cwd", raw.cwd.is_some()),
                ("sandbox", raw.sandbox),
            ] {
                if set {
                    problems.push(problem(
                        &format!("{key}.{field}"),
                        "only for `command` (stdio) servers",
                    ));
                }
            }
            Transport::Http {
                url,
                headers: std::mem::take(&mut raw.headers),
            }
        }
    })
}

/// Problems with the entry's time and size limits.
fn check_limits(key: &str, raw: &Raw, problems: &mut Vec<ConfigProblem>) {
    for (field, value, least) in [
        ("timeout_secs", raw.timeout_secs, 1),
        ("max_call_secs", raw.max_call_secs, 1),
        ("connect_timeout_secs", raw.connect_timeout_secs, 1),
        ("max_output_chars", raw.max_output_chars as u64, 100),
        ("max_message_bytes", raw.max_message_bytes as u64, 1024),
    ] {
        if value < least {
            problems.push(problem(
                &format!("{key}.{field}"),
                &format!("{value} is below {least}"),
            ));
        }
    }
    if raw.max_call_secs < raw.timeout_secs {
        problems.push(problem(
            &format!("{key}.max_call_secs"),
            "is below timeout_secs",
        ));
    }
}

/// The policy rules the servers' `allow` and `deny` lists stand for, as
/// `(allow, deny)` patterns over cairn's tool names (`mcp__github__get_*`),
/// for the one policy gate every call passes.
pub fn policy_rules(specs: &[ServerSpec]) -> (Vec<String>, Vec<String>) {
    let rules = |server: &ServerSpec, patterns: &[String]| -> Vec<String> {
        patterns
            .iter()
            .map(|p| names::exposed(&server.name, &names::pattern(p)))
            .collect()
    };
    let mut allow = Vec::new();
    let mut deny = Vec::new();
    for spec in specs {
        allow.extend(rules(spec, &spec.allow));
        deny.extend(rules(spec, &spec.deny));
    }
    (allow, deny)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn problems(table: Value) -> Vec<String> {
        parse_servers(Some(&table), &env(&[]))
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn both_transports_parse_with_variables_expanded() {
        let table = json!([
            {"name": "GitHub", "command": "npx", "args": ["-y", "srv"],
             "env": {"GITHUB_TOKEN": "${TOKEN}"}, "allow": ["get_*"], "risk": "readonly"},
            {"name": "remote", "url": "https://example.org/mcp",
             "headers": {"Authorization": "Bearer ${TOKEN}"}, "start": "startup", "timeout_secs": 5},
        ]);
        let specs = parse_servers(Some(&table), &env(&[("TOKEN", "s3cr3t")])).unwrap();
        assert_eq!(specs[0].name, "github");
        let Transport::Stdio { env, .. } = &specs[0].transport else {
            panic!("stdio");
        };
        assert_eq!(env["GITHUB_TOKEN"], "s3cr3t");
        assert_eq!(specs[0].risk, Some(RiskLevel::ReadOnly));
        assert_eq!(specs[1].start, StartMode::Startup);
        assert_eq!(specs[1].timeout, Duration::from_secs(5));
        let debug = format!("{specs:?}");
        assert!(!debug.contains("s3cr3t"), "{debug}");
        assert_eq!(
            policy_rules(&specs),
            (vec!["mcp__github__get_*".to_string()], vec![])
        );
    }

    #[test]
    fn every_problem_is_named_by_its_key() {
        let shown = problems(json!([
            {"name": "a", "command": "x", "url": "http://h"},
            {"name": "b"},
            {"name": "bad__name", "command": "x"},
            {"name": "c", "url": "ftp://h", "env": {"A": "1"}},
            {"name": "d", "command": "x", "colour": "red"},
            {"name": "e", "command": "x", "env": {"K": "${NOPE}"}},
            {"name": "f", "command": "x", "timeout_secs": 0},
            {"name": "a", "command": "y"},
        ]));
        let expect = [
            "mcp.servers[0]: both `command`",
            "mcp.servers[1]: needs `command`",
            "mcp.servers[2].name:",
            "mcp.servers[3].url: must start with http",
            "mcp.servers[3].env: only for `command`",
            "mcp.servers[4]: unknown field `colour`",
            "mcp.servers[6].timeout_secs: 0 is below 1",
            "mcp.servers[7].name: \"a\" names two servers",
        ];
        for e in expect {
            assert!(shown.iter().any(|s| s.starts_with(e)), "{e}\n{shown:#?}");
        }
        assert_eq!(shown.len(), expect.len(), "{shown:#?}");
    }

    #[test]
    fn a_server_naming_an_unset_variable_is_kept_unavailable_and_its_base_env_is_given() {
        let table = json!([
            {"name": "gh", "command": "x", "args": ["${ARG}"], "env": {"K": "${NOPE}"}},
            {"name": "ok", "command": "y"},
        ]);
        let specs = parse_servers(
            Some(&table),
            &env(&[("PATH", "/p"), ("HOME", "/home/me"), ("SECRET", "s")]),
        )
        .unwrap();
        assert_eq!(
            specs[0].unavailable.as_deref(),
            Some(
                "mcp.servers[0].args[0]: environment variable ARG is not set; \
                 mcp.servers[0].env.K: environment variable NOPE is not set"
            )
        );
        assert_eq!(specs[1].unavailable, None);
        let Transport::Stdio { inherited, .. } = &specs[1].transport else {
            panic!("stdio");
        };
        let names: Vec<&str> = inherited.keys().map(String::as_str).collect();
        assert_eq!(names, ["HOME", "PATH"]);
    }

    /// The reference (docs/configuration.md, written by cairn-core, which
    /// cannot see this crate) names every key of an entry and its default.
    #[test]
    fn the_configuration_reference_names_every_key_and_default() {
        let reference = cairn_core::config::reference::markdown();
        let start = reference.find("`[[mcp.servers]]`").unwrap();
        let text = &reference[start..reference[start..].find('\n').unwrap() + start];
        let defaults = serde_json::to_value(Raw::default()).unwrap();
        for (key, value) in defaults.as_object().unwrap() {
            assert!(text.contains(&format!("`{key}`")), "{key} in {text}");
            if let Some(n) = value.as_u64() {
                assert!(
                    text.contains(&format!("`{key}` (`{n}`")),
                    "{key}: {n} in {text}"
                );
            }
        }
    }

    #[test]
    fn allow_and_deny_match_the_servers_tool_names() {
        let mut spec = ServerSpec::stdio("s", "x", &[]);
        spec.allow = vec!["get-*".into()];
        spec.deny = vec!["delete_repo".into()];
        assert!(spec.allows("get-issue") && spec.allows("GET_ISSUE"));
        assert!(!spec.allows("create_issue"));
        assert!(spec.denies("delete_repo") && !spec.denies("delete_issue"));
    }
}
