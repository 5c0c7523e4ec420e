//! The file tools: `file_read`, `file_write` and `list_dir`, confined to the workspace.
//!
//! A path is resolved and checked first ([`PathScope`]), then opened by a walk
//! from its root that follows no symbolic link ([`crate::nofollow`]), so a
//! dangling link or one swapped in after the check cannot lead outside; a
//! hard-linked or special file is refused the same way.

use std::path::PathBuf;
use std::sync::LazyLock;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::args::{opt_bool, opt_str, opt_u64, req_str};
use super::lines::{LineWindow, read_lines};
use super::paths::{
    ForbiddenPaths, PathScope, canonicalize_partial, default_forbidden_paths, off_runtime,
};
use super::{CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema};
use crate::nofollow::{FsError, Kind as EntryKind, OpenFor, Tree};
use crate::runner::Authorized;

/// Configuration shared by the file tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilesConfig {
    /// Directories usable besides the workspace (absolute paths).
    pub extra_roots: Vec<PathBuf>,
    /// Paths never readable or writable, even inside a root (see [`ForbiddenPaths`]).
    pub forbidden_paths: Vec<String>,
    /// Most bytes `file_read` returns per call.
    pub max_read_bytes: usize,
    /// Largest content `file_write` accepts.
    pub max_write_bytes: usize,
    /// Most entries `list_dir` returns.
    pub max_list_entries: usize,
    /// Directories `file_read` and `list_dir` may read but `file_write`
    /// never writes: the skill folders of `skills.paths`, set at start-up
    /// (not a `[tools.files]` key).
    #[serde(skip)]
    pub read_only_roots: Vec<PathBuf>,
}

impl Default for FilesConfig {
    fn default() -> Self {
        Self {
            extra_roots: Vec::new(),
            forbidden_paths: default_forbidden_paths(),
            max_read_bytes: 256 * 1024,
            max_write_bytes: 4 * 1024 * 1024,
            max_list_entries: 1000,
            read_only_roots: Vec::new(),
        }
    }
}

impl FilesConfig {
    /// Resolves the model's `raw` path inside the workspace or an extra root
    /// (or, for reading, a read-only root), refusing forbidden paths; every
    /// file tool goes through here. The file-system walk runs off the async runtime.
    async fn target(
        &self,
        ctx: &ToolContext,
        raw: &str,
        access: Access,
    ) -> Result<Target, ToolError> {
        let workspace = ctx.workspace.clone();
        let writable = self.extra_roots.clone();
        let mut extra_roots = self.extra_roots.clone();
        let read_only = if access == Access::Read {
            self.read_only_roots.clone()
        } else {
            Vec::new()
        };
        extra_roots.extend(read_only.iter().cloned());
        let forbidden = ForbiddenPaths::new(&self.forbidden_paths);
        let raw = raw.to_string();
        off_runtime(move || {
            let scope = PathScope::new(&workspace, &extra_roots, forbidden)?;
            let path = scope.resolve(&raw)?;
            let shown = scope.display(&path);
            // A folder of skills.paths is the person's, not the agent's: its
            // files may have several names. Not one the agent may write, though.
            let canonical = |roots: &[PathBuf]| -> Vec<PathBuf> {
                roots
                    .iter()
                    .filter_map(|r| canonicalize_partial(r).ok())
                    .collect()
            };
            let persons = scope.root_of(&path).is_some_and(|root| {
                !root.starts_with(scope.workspace())
                    && canonical(&read_only).iter().any(|r| r == root)
                    && !canonical(&writable).iter().any(|r| r == root)
            });
            Ok(Target {
                scope,
                path,
                shown,
                persons,
            })
        })
        .await
    }
}

/// What a file tool does with its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Reads it (read-only roots allowed).
    Read,
    /// Writes it (workspace and extra roots only).
    Write,
}

/// A path argument after resolution.
struct Target {
    /// The roots it was resolved in.
    scope: PathScope,
    /// The resolved absolute path.
    path: PathBuf,
    /// The path as messages show it (relative to its root).
    shown: String,
    /// Whether its root is a read-only folder of the person's (`skills.paths`).
    persons: bool,
}

impl Target {
    /// Its root's tree and the path relative to that root.
    fn below(&self) -> Result<(Tree, PathBuf), ToolError> {
        let outside =
            || ToolError::NotPermitted(format!("`{}` is outside the workspace", self.shown));
        let root = self.scope.root_of(&self.path).ok_or_else(outside)?;
        let rel = self.path.strip_prefix(root).map_err(|_| outside())?;
        let tree = Tree::new(root);
        let tree = if self.persons {
            tree.allowing_hard_links()
        } else {
            tree
        };
        Ok((tree, rel.to_path_buf()))
    }

    /// Opens the target without following a symbolic link below its root
    /// (see [`Tree::open`]), off the async runtime.
    async fn open(&self, how: OpenFor) -> Result<tokio::fs::File, ToolError> {
        let (tree, rel) = self.below()?;
        let file = tree
            .run(move |tree| tree.open(&rel, how))
            .await
            .map_err(|e| tool_error(e, &self.shown))?;
        Ok(tokio::fs::File::from_std(file))
    }
}

/// A refusal of the no-follow walk as the model sees it, naming the path
/// as `shown` (relative to the workspace when inside it).
fn tool_error(e: FsError, shown: &str) -> ToolError {
    match e {
        FsError::Link { .. } | FsError::HardLink { .. } | FsError::Exists { .. } => {
            ToolError::NotPermitted(e.to_string())
        }
        FsError::IsDir { .. } => ToolError::InvalidArguments(format!("`{shown}` is a directory")),
        FsError::NotDir { .. } | FsError::Special { .. } | FsError::BadPath { .. } => {
            ToolError::InvalidArguments(e.to_string())
        }
        FsError::NotFound { .. } => {
            ToolError::Io(format!("cannot open `{shown}`: no such file or directory"))
        }
        FsError::Io { .. } => ToolError::Io(e.to_string()),
    }
}

fn io_err(what: &str, shown: &str, e: std::io::Error) -> ToolError {
    ToolError::Io(format!("{what} `{shown}`: {e}"))
}

/// `file_read`: reads a text file, optionally a range of lines.
#[derive(Debug, Clone)]
pub struct FileReadTool {
    config: FilesConfig,
}

impl FileReadTool {
    /// A `file_read` tool with this configuration.
    pub fn new(config: FilesConfig) -> Self {
        Self { config }
    }
}

static FILE_READ: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "file_read",
        RiskLevel::ReadOnly,
        "Read a text file in the workspace. Long files are cut; use offset/limit (1-based lines) to page.",
    )
    .params(schema::closed(
        json!({
            "path": {"type": "string", "description": "file path, relative to the workspace"},
            "offset": {"type": "integer", "minimum": 1, "description": "first line to return (1-based)"},
            "limit": {"type": "integer", "minimum": 1, "description": "most lines to return"}
        }),
        &["path"],
    ))
});

#[async_trait]
impl Tool for FileReadTool {
    fn spec(&self) -> &ToolSpec {
        &FILE_READ
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let raw = req_str(&args, "path")?;
        let offset = opt_u64(&args, "offset")?.unwrap_or(1).max(1);
        let limit = opt_u64(&args, "limit")?.unwrap_or(u64::MAX);
        let target = self.config.target(ctx, raw, Access::Read).await?;
        let shown = target.shown.clone();
        let file = target.open(OpenFor::Read).await.map_err(|e| match e {
            ToolError::InvalidArguments(m) if m.ends_with("is a directory") => {
                ToolError::InvalidArguments(format!("{m}; use list_dir"))
            }
            other => other,
        })?;
        let meta = file
            .metadata()
            .await
            .map_err(|e| io_err("cannot read", &shown, e))?;
        let mut reader = BufReader::new(file);

        let head = reader
            .fill_buf()
            .await
            .map_err(|e| io_err("cannot read", &shown, e))?;
        if head.iter().take(8192).any(|&b| b == 0) {
            return Err(ToolError::InvalidArguments(format!(
                "`{shown}` is a binary file ({} bytes); file_read shows text only",
                meta.len()
            )));
        }

        let max = self.config.max_read_bytes;
        let LineWindow {
            bytes,
            seen,
            taken,
            cut_at,
        } = read_lines(&mut reader, offset, limit, max)
            .await
            .map_err(|e| io_err("cannot read", &shown, e))?;
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some(next) = cut_at {
            text.push_str(&format!(
                "\n[file_read: output cut at {max} bytes (file is {} bytes); continue with offset={next}]",
                meta.len()
            ));
        } else if seen == 0 {
            text = format!("[file_read: `{shown}` is empty]");
        } else if taken == 0 && seen < offset {
            text = format!("[file_read: `{shown}` has only {seen} lines]");
        }
        Ok(ToolOutput::ok(text))
    }
}

/// `file_write`: writes or appends text to a file in the workspace.
#[derive(Debug, Clone)]
pub struct FileWriteTool {
    config: FilesConfig,
}

impl FileWriteTool {
    /// A `file_write` tool with this configuration.
    pub fn new(config: FilesConfig) -> Self {
        Self { config }
    }
}

static FILE_WRITE: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "file_write",
        RiskLevel::Write,
        "Write text to a file in the workspace (creating parent directories), replacing it unless append is true.",
    )
    .params(schema::closed(
        json!({
            "path": {"type": "string", "description": "file path, relative to the workspace"},
            "content": {"type": "string", "description": "the text to write"},
            "append": {"type": "boolean", "description": "append instead of replacing", "default": false}
        }),
        &["path", "content"],
    ))
});

#[async_trait]
impl Tool for FileWriteTool {
    fn spec(&self) -> &ToolSpec {
        &FILE_WRITE
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let raw = req_str(&args, "path")?;
        let content = req_str(&args, "content")?;
        let append = opt_bool(&args, "append")?.unwrap_or(false);
        if content.len() > self.config.max_write_bytes {
            return Err(ToolError::InvalidArguments(format!(
                "content is {} bytes; the limit is {}",
                content.len(),
                self.config.max_write_bytes
            )));
        }
        let target = self.config.target(ctx, raw, Access::Write).await?;
        let shown = target.shown.clone();
        let how = if append {
            OpenFor::Append
        } else {
            OpenFor::Replace
        };
        let mut file = target.open(how).await?;
        {
            use tokio::io::AsyncWriteExt;
            file.write_all(content.as_bytes())
                .await
                .map_err(|e| io_err("cannot write", &shown, e))?;
            file.flush()
                .await
                .map_err(|e| io_err("cannot write", &shown, e))?;
        }
        let verb = if append { "appended" } else { "wrote" };
        Ok(ToolOutput::ok(format!(
            "{verb} {} bytes to {shown}",
            content.len()
        )))
    }
}

/// `list_dir`: lists a directory in the workspace, optionally a few levels deep.
#[derive(Debug, Clone)]
pub struct ListDirTool {
    config: FilesConfig,
}

impl ListDirTool {
    /// A `list_dir` tool with this configuration.
    pub fn new(config: FilesConfig) -> Self {
        Self { config }
    }
}

const MAX_DEPTH: u64 = 5;

static LIST_DIR: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "list_dir",
        RiskLevel::ReadOnly,
        "List a directory in the workspace: directories end in /, files show their size; symlinks are shown, not followed.",
    )
    .params(schema::closed(
        json!({
            "path": {"type": "string", "description": "directory, relative to the workspace", "default": "."},
            "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "default": 1}
        }),
        &[],
    ))
});

#[async_trait]
impl Tool for ListDirTool {
    fn spec(&self) -> &ToolSpec {
        &LIST_DIR
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let raw = opt_str(&args, "path")?.unwrap_or(".");
        let depth = opt_u64(&args, "depth")?.unwrap_or(1).clamp(1, MAX_DEPTH);
        let target = self.config.target(ctx, raw, Access::Read).await?;
        let shown = target.shown.clone();
        let (tree, start) = target.below()?;
        let max = self.config.max_list_entries;
        let listed = tree.run(move |tree| {
            let mut lines = Vec::new();
            let mut more = false;
            // Depth-first with sorted entries, so the listing reads like a tree;
            // each directory is opened by a walk from the root that follows no link.
            let mut stack: Vec<(PathBuf, u64)> = vec![(PathBuf::new(), 1)];
            while let Some((sub, level)) = stack.pop() {
                let entries = tree.list(&start.join(&sub))?;
                let mut subdirs = Vec::new();
                for entry in entries {
                    if lines.len() >= max {
                        more = true;
                        break;
                    }
                    let path = sub.join(&entry.name);
                    let rel = path.display();
                    lines.push(match entry.kind {
                        EntryKind::Dir => {
                            if level < depth {
                                subdirs.push((path.clone(), level + 1));
                            }
                            format!("{rel}/")
                        }
                        EntryKind::Link => format!("{rel} -> (symlink, not followed)"),
                        EntryKind::File => format!("{rel}  {} B", entry.len),
                        EntryKind::Special => format!("{rel}  (special file)"),
                    });
                }
                if more {
                    break;
                }
                stack.extend(subdirs.into_iter().rev());
            }
            Ok((lines, more))
        });
        let (mut lines, more) = listed.await.map_err(|e| tool_error(e, &shown))?;
        // Depth-first pops interleave levels; sorting by path restores tree order.
        lines.sort();
        if lines.is_empty() {
            return Ok(ToolOutput::ok(format!("{shown}/ is empty")));
        }
        let mut text = lines.join("\n");
        if more {
            text.push_str(&format!("\n[list_dir: stopped after {max} entries]"));
        }
        Ok(ToolOutput::ok(text))
    }
}
