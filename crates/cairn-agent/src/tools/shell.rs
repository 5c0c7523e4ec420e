//! The `shell` tool: runs one allowlisted program directly (no `/bin/sh`) in the workspace.
//!
//! The command is split into words by [`super::shell_words`]; shell syntax is refused
//! unless [`ShellConfig::allow_shell_syntax`] is set, in which case it runs under
//! `sh -c` but every program in it must still be allowlisted. The child gets its own
//! process group, which is killed on timeout, cancellation, or when the call ends, so
//! no process outlives its tool call.
//!
//! The argument checks are a first filter, not the defence: the command starts
//! through [`Sandbox::spawn`], confined by Landlock to the workspace with a clean
//! environment (see [`crate::sandbox`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::args::{opt_u64, req_str};
use super::paths::{
    ForbiddenPaths, canonicalize_partial, default_forbidden_paths, normalize_lexically, off_runtime,
};
use super::shell_words::{self, SplitError};
use super::{CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema};
use crate::runner::Authorized;
use crate::sandbox::{Sandbox, SandboxError, SandboxSettings};

/// Configuration of the `shell` tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShellConfig {
    /// Programs that may run, by the exact word used (`"*"` allows any program).
    pub allowed_programs: Vec<String>,
    /// Arguments refused per program (exact, or as `arg=...`), e.g. `find -exec`.
    pub blocked_arguments: BTreeMap<String, Vec<String>>,
    /// Paths no argument may name (see [`ForbiddenPaths`]).
    pub forbidden_paths: Vec<String>,
    /// Run through `sh -c`, permitting pipes, chaining, redirection and globs.
    pub allow_shell_syntax: bool,
    /// The shell used when shell syntax is allowed.
    pub shell_program: String,
    /// Default and maximum run time of one command.
    #[serde(with = "cairn_core::duration::serde_compact")]
    pub timeout: Duration,
    /// Most bytes kept from each of stdout and stderr (the rest is counted, not kept).
    pub max_output_bytes: usize,
    /// Environment variables copied from the daemon besides `PATH` and `LANG`;
    /// everything else is withheld (`HOME` and `TMPDIR` are always the sandbox's).
    #[serde(alias = "env_passthrough")]
    pub pass_env: Vec<String>,
    /// Environment variables set for every command.
    pub env: BTreeMap<String, String>,
    /// Confine commands with Landlock where the kernel has it; `false` runs them
    /// as if it had not (unconfined, and refused unattended unless allowed).
    pub landlock: bool,
    /// Where Landlock is unavailable, still run commands nobody approves
    /// (autonomy `full`, routines whose `allowed_tools` list `shell`), unconfined.
    pub allow_unconfined: bool,
    /// Paths commands may read (and execute) besides the system ones.
    pub read_paths: Vec<PathBuf>,
    /// Paths commands must never read (cairn's home and database), set by the
    /// binary: a workspace or read path holding one is refused.
    #[serde(skip)]
    pub protected_paths: Vec<PathBuf>,
}

impl ShellConfig {
    /// The sandbox settings these options describe.
    pub fn sandbox_settings(&self) -> SandboxSettings {
        SandboxSettings {
            landlock: self.landlock,
            allow_unconfined: self.allow_unconfined,
            read_paths: self.read_paths.clone(),
            protected: self.protected_paths.clone(),
        }
    }
}

impl Default for ShellConfig {
    fn default() -> Self {
        let programs = [
            "ls",
            "cat",
            "echo",
            "printf",
            "grep",
            "rg",
            "find",
            "head",
            "tail",
            "wc",
            "sort",
            "uniq",
            "cut",
            "tr",
            "diff",
            "cmp",
            "file",
            "stat",
            "du",
            "df",
            "tree",
            "date",
            "cal",
            "pwd",
            "whoami",
            "uname",
            "hostname",
            "basename",
            "dirname",
            "realpath",
            "which",
            "git",
            "jq",
            "true",
            "false",
            "seq",
            "md5sum",
            "sha256sum",
        ];
        let blocked = [
            (
                "find",
                vec![
                    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
                    "-fprintf", "-fls",
                ],
            ),
            (
                "git",
                vec![
                    "-c",
                    "--config-env",
                    "--exec-path",
                    "--upload-pack",
                    "--receive-pack",
                    "--ext-diff",
                ],
            ),
            ("rg", vec!["--pre"]),
        ];
        let env = [
            ("TERM", "dumb"),
            ("PAGER", "cat"),
            ("GIT_PAGER", "cat"),
            ("GIT_TERMINAL_PROMPT", "0"),
        ];
        Self {
            allowed_programs: programs.map(String::from).to_vec(),
            blocked_arguments: blocked
                .into_iter()
                .map(|(p, args)| (p.to_string(), args.into_iter().map(String::from).collect()))
                .collect(),
            forbidden_paths: default_forbidden_paths(),
            allow_shell_syntax: false,
            shell_program: "/bin/sh".into(),
            timeout: Duration::from_secs(120),
            max_output_bytes: 512 * 1024,
            pass_env: ["USER", "LC_ALL", "LC_CTYPE", "TZ"]
                .map(String::from)
                .to_vec(),
            env: env
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            landlock: true,
            allow_unconfined: false,
            read_paths: Vec::new(),
            protected_paths: Vec::new(),
        }
    }
}

/// `shell`: runs a command in the workspace under the command policy.
#[derive(Debug, Clone)]
pub struct ShellTool {
    config: ShellConfig,
    forbidden: ForbiddenPaths,
    sandbox: Arc<Sandbox>,
}

impl ShellTool {
    /// A `shell` tool with this configuration.
    pub fn new(config: ShellConfig) -> Self {
        let forbidden = ForbiddenPaths::new(&config.forbidden_paths);
        let sandbox = Arc::new(Sandbox::new(config.sandbox_settings()));
        Self {
            config,
            forbidden,
            sandbox,
        }
    }

    /// The sandbox its commands start in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Checks a command against the policy; returns the argv to execute.
    pub fn check(&self, command: &str, workspace: &Path) -> Result<Vec<String>, ToolError> {
        let refuse = |e: SplitError| match e {
            SplitError::Refused(_) => ToolError::NotPermitted(e.to_string()),
            _ => ToolError::InvalidArguments(e.to_string()),
        };
        let segments = if self.config.allow_shell_syntax {
            shell_words::split_lenient(command)
                .map_err(refuse)?
                .segments
        } else {
            vec![shell_words::split(command).map_err(refuse)?]
        };
        for words in &segments {
            self.check_words(words, workspace)?;
        }
        if self.config.allow_shell_syntax {
            Ok(vec![
                self.config.shell_program.clone(),
                "-c".into(),
                command.to_string(),
            ])
        } else {
            Ok(segments.into_iter().next().unwrap_or_default())
        }
    }

    fn check_words(&self, words: &[String], workspace: &Path) -> Result<(), ToolError> {
        let Some(program) = words.first() else {
            return Ok(());
        };
        let allowed = &self.config.allowed_programs;
        if !allowed.iter().any(|p| p == "*" || p == program) {
            let hint = if program.contains('/') {
                " (use the bare program name)"
            } else {
                ""
            };
            return Err(ToolError::NotPermitted(format!(
                "program `{program}` is not in the shell allowlist{hint}; allowed: {}",
                allowed.join(", ")
            )));
        }
        let base = program.rsplit('/').next().unwrap_or(program);
        if let Some(blocked) = self.config.blocked_arguments.get(base) {
            for arg in &words[1..] {
                let name = arg.split('=').next().unwrap_or(arg);
                if blocked.iter().any(|b| b == arg || b == name) {
                    return Err(ToolError::NotPermitted(format!(
                        "argument `{name}` is not allowed for `{base}`"
                    )));
                }
            }
        }
        for word in words {
            if let Some(pattern) = self.forbidden_in(word, workspace) {
                return Err(ToolError::NotPermitted(format!(
                    "`{word}` names a protected path (matches `{pattern}`)"
                )));
            }
        }
        Ok(())
    }

    /// The forbidden pattern a word refers to, looking at the word, the value of
    /// `--opt=value`, and a path glued to a short option or redirection.
    fn forbidden_in(&self, word: &str, workspace: &Path) -> Option<String> {
        let mut candidates =
            vec![word.trim_start_matches(|c: char| c.is_ascii_digit() || "<>&".contains(c))];
        if let Some((_, value)) = word.split_once('=') {
            candidates.push(value);
        }
        if let Some(i) = word.find(['/', '~']).filter(|_| word.starts_with('-')) {
            candidates.push(&word[i..]);
        }
        for candidate in candidates {
            if candidate.is_empty() || (candidate.starts_with('-') && !candidate.contains('/')) {
                continue;
            }
            let joined = workspace.join(candidate);
            let normal = normalize_lexically(&joined);
            if let Some(p) = self.forbidden.matches(&normal) {
                return Some(p);
            }
            // A symlink in the workspace must not smuggle a protected path past us.
            if let Some(p) = canonicalize_partial(&normal)
                .ok()
                .and_then(|canonical| self.forbidden.matches(&canonical))
            {
                return Some(p);
            }
        }
        None
    }
}

static SHELL: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "shell",
        RiskLevel::Dangerous,
        "Run one allowlisted program with arguments in the workspace (no pipes, redirection or chaining). Returns stdout, stderr and the exit status.",
    )
    .params(schema::closed(
        json!({
            "command": {"type": "string", "description": "the command line, e.g. `git status --short`"},
            "timeout_secs": {"type": "integer", "minimum": 1, "description": "shorter time limit for this command"}
        }),
        &["command"],
    ))
});

#[async_trait]
impl Tool for ShellTool {
    fn spec(&self) -> &ToolSpec {
        &SHELL
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let command = req_str(&args, "command")?;
        let mut timeout = self.config.timeout.min(ctx.limits.timeout);
        if let Some(secs) = opt_u64(&args, "timeout_secs")? {
            timeout = timeout.min(Duration::from_secs(secs.max(1)));
        }
        // The check resolves symlinks (file-system walks): off the async runtime.
        let argv = {
            let (tool, command, workspace) =
                (self.clone(), command.to_string(), ctx.workspace.clone());
            off_runtime(move || tool.check(&command, &workspace)).await?
        };
        let is_dir = tokio::fs::metadata(&ctx.workspace)
            .await
            .is_ok_and(|m| m.is_dir());
        if !is_dir {
            return Err(ToolError::Failed(format!(
                "the workspace {} is not a directory",
                ctx.workspace.display()
            )));
        }
        let Some((program, rest)) = argv.split_first() else {
            return Err(ToolError::InvalidArguments("the command is empty".into()));
        };

        let mut cmd = tokio::process::Command::new(program);
        cmd.args(rest)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for name in &self.config.pass_env {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd.envs(&self.config.env);
        #[cfg(unix)]
        cmd.process_group(0);

        let mut confined = self
            .sandbox
            .spawn(cmd, &ctx.workspace)
            .await
            .map_err(|e| match e {
                SandboxError::Refused(m) => ToolError::NotPermitted(m),
                SandboxError::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    ToolError::Failed(format!("program `{program}` was not found"))
                }
                SandboxError::Spawn(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    ToolError::Failed(format!(
                        "cannot start `{program}`: {e} (commands run only programs under the \
                         system paths, the workspace and tools.shell.read_paths)"
                    ))
                }
                SandboxError::Spawn(e) => {
                    ToolError::Failed(format!("cannot start `{program}`: {e}"))
                }
                other => ToolError::Failed(other.to_string()),
            })?;
        let child = &mut confined.child;
        let _group = GroupKiller(child.id());
        let cap = self.config.max_output_bytes;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let work = async {
            let (out, err, status) = tokio::join!(
                read_capped(stdout, cap),
                read_capped(stderr, cap),
                child.wait()
            );
            (out, err, status)
        };
        let (out, err, status) = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            () = tokio::time::sleep(timeout) => return Err(ToolError::Timeout(timeout)),
            r = work => r,
        };
        let status =
            status.map_err(|e| ToolError::Failed(format!("waiting for `{program}`: {e}")))?;
        Ok(render(out, err, status))
    }
}

/// Kills the child's process group when dropped (timeout, cancel, or normal end).
pub(crate) struct GroupKiller(pub(crate) Option<u32>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // ESRCH (group already gone) is the common, harmless case.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Bytes kept from a stream and the total the stream produced.
pub(crate) struct Captured {
    pub(crate) kept: Vec<u8>,
    total: u64,
}

/// Reads a stream to its end, keeping at most `cap` bytes; the rest is drained so the
/// child never blocks on a full pipe.
pub(crate) async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>, cap: usize) -> Captured {
    let mut captured = Captured {
        kept: Vec::new(),
        total: 0,
    };
    let Some(mut stream) = stream else {
        return captured;
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                captured.total += n as u64;
                let room = cap.saturating_sub(captured.kept.len());
                captured.kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    captured
}

fn render(out: Captured, err: Captured, status: std::process::ExitStatus) -> ToolOutput {
    let mut text = String::new();
    let mut section = |label: &str, c: &Captured| {
        if c.total == 0 {
            return;
        }
        if !label.is_empty() {
            text.push_str(if text.is_empty() { "" } else { "\n" });
            text.push_str(label);
            text.push('\n');
        }
        text.push_str(&String::from_utf8_lossy(&c.kept));
        if c.total > c.kept.len() as u64 {
            text.push_str(&format!(
                "\n[{} cut at {} of {} bytes]",
                if label.is_empty() { "stdout" } else { "stderr" },
                c.kept.len(),
                c.total
            ));
        }
    };
    section("", &out);
    section("[stderr]", &err);
    if text.is_empty() {
        text.push_str("(no output)");
    }
    if !status.success() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        match status.code() {
            Some(code) => text.push_str(&format!("[exit status {code}]")),
            None => text.push_str(&signal_note(status)),
        }
        // The command's own outcome (grep finding nothing, a file it may not
        // read): the model sees it, self-repair does not count it.
        return ToolOutput::reported_failure(text);
    }
    ToolOutput::ok(text)
}

#[cfg(unix)]
fn signal_note(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    format!("[terminated by signal {}]", status.signal().unwrap_or(0))
}

#[cfg(not(unix))]
fn signal_note(_: std::process::ExitStatus) -> String {
    "[terminated abnormally]".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> ShellTool {
        ShellTool::new(ShellConfig::default())
    }

    fn refusal(command: &str) -> String {
        match tool().check(command, Path::new("/tmp/ws")) {
            Err(ToolError::NotPermitted(m)) => m,
            other => panic!("{command:?} gave {other:?}"),
        }
    }

    #[test]
    fn allowlist_and_blocked_arguments() {
        assert_eq!(
            tool().check("ls -la", Path::new("/tmp")).unwrap(),
            ["ls", "-la"]
        );
        assert!(refusal("rm -rf /").contains("`rm` is not in the shell allowlist"));
        assert!(refusal("/bin/ls").contains("bare program name"));
        assert!(refusal("find . -exec rm {} +").contains("`-exec` is not allowed for `find`"));
        assert!(refusal("git -c core.pager=sh log").contains("`-c`"));
        assert!(refusal("git --upload-pack=evil fetch").contains("--upload-pack"));
    }

    #[test]
    fn forbidden_paths_in_any_form() {
        assert!(refusal("cat /etc/shadow").contains("protected path"));
        assert!(refusal("cat ../../../../../../etc/shadow").contains("protected path"));
        assert!(refusal("grep -r key /home/me/.ssh").contains("~/.ssh"));
        assert!(refusal("grep --file=/etc/shadow x").contains("protected"));
        assert!(refusal("head -n1 '~/.ssh/id_rsa'").contains("protected"));
        assert!(tool().check("cat /etc/hostname", Path::new("/tmp")).is_ok());
    }

    #[test]
    fn shell_syntax_refused_with_reasons() {
        assert!(refusal("ls | sh").contains("pipes"));
        assert!(refusal("ls; id").contains("sequences"));
        assert!(refusal("ls && id").contains("chaining"));
        assert!(refusal("echo x > f").contains("redirections"));
        assert!(refusal("echo $(id)").contains("command substitution"));
        assert!(refusal("(ls)").contains("subshells"));
    }

    #[test]
    fn lenient_mode_checks_every_program() {
        let t = ShellTool::new(ShellConfig {
            allow_shell_syntax: true,
            ..ShellConfig::default()
        });
        let argv = t.check("ls | grep x > out.txt", Path::new("/tmp")).unwrap();
        assert_eq!(argv, ["/bin/sh", "-c", "ls | grep x > out.txt"]);
        assert!(
            matches!(t.check("ls | sh", Path::new("/tmp")), Err(ToolError::NotPermitted(m)) if m.contains("`sh`"))
        );
        assert!(matches!(
            t.check("echo hi >/etc/shadow", Path::new("/tmp")),
            Err(ToolError::NotPermitted(_))
        ));
        assert!(matches!(
            t.check("echo `id`", Path::new("/tmp")),
            Err(ToolError::NotPermitted(_))
        ));
    }

    #[test]
    fn bad_quoting_is_invalid_arguments() {
        assert!(matches!(
            tool().check("echo 'x", Path::new("/tmp")),
            Err(ToolError::InvalidArguments(_))
        ));
        assert!(matches!(
            tool().check("", Path::new("/tmp")),
            Err(ToolError::InvalidArguments(_))
        ));
    }
}
