//! Path confinement shared by the file tools and the shell's argument checks.
//!
//! A path is accepted only if, after lexical normalisation *and* canonicalisation
//! (which resolves symlinks), it lies under an allowed root and matches no
//! forbidden pattern. We then open the normalised path we checked, never the raw one.

use std::path::{Component, Path, PathBuf};

use super::ToolError;

/// Paths no tool may touch, whatever the roots say (credentials, key material).
pub fn default_forbidden_paths() -> Vec<String> {
    [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/sudoers.d",
        "/proc/*/environ",
        "/root",
        "~/.ssh",
        "~/.gnupg",
        "~/.aws",
        "~/.azure",
        "~/.kube",
        "~/.docker/config.json",
        "~/.config/gcloud",
        "~/.config/gh",
        "~/.netrc",
        "~/.git-credentials",
        "~/.pgpass",
        "~/.cairn/secrets",
        "~/.cairn/config.toml",
        "~/.cairn/.env",
        "~/.cairn/cairn.db",
    ]
    .map(String::from)
    .to_vec()
}

/// Patterns of forbidden paths.
///
/// `/abs/path` forbids that path and everything under it (`*` matches one
/// component). `~/rest` forbids `rest` under any directory — we deliberately do
/// not read `$HOME`, so `~/.ssh` blocks every `.ssh` directory, which errs safe.
#[derive(Debug, Clone, Default)]
pub struct ForbiddenPaths {
    absolute: Vec<Vec<String>>,
    anywhere: Vec<Vec<String>>,
}

impl ForbiddenPaths {
    /// Compiles a list of patterns; empty entries are ignored.
    pub fn new(patterns: &[String]) -> Self {
        let mut out = Self::default();
        for pattern in patterns {
            let pattern = pattern.trim();
            if let Some(rest) = pattern.strip_prefix("~/") {
                let parts = components(Path::new(rest));
                if !parts.is_empty() {
                    out.anywhere.push(parts);
                }
            } else if pattern.starts_with('/') {
                out.absolute.push(components(Path::new(pattern)));
            }
        }
        out
    }

    /// The pattern `path` matches, if any. `path` should be absolute and normalised.
    pub fn matches(&self, path: &Path) -> Option<String> {
        let parts = components(path);
        for pattern in &self.absolute {
            if parts.len() >= pattern.len()
                && pattern.iter().zip(&parts).all(|(p, c)| p == "*" || p == c)
            {
                return Some(format!("/{}", pattern.join("/")));
            }
        }
        for pattern in &self.anywhere {
            if parts
                .windows(pattern.len())
                .any(|w| w.iter().zip(pattern).all(|(c, p)| p == "*" || p == c))
            {
                return Some(format!("~/{}", pattern.join("/")));
            }
        }
        None
    }
}

/// The normal components of a path as strings (root and `.` dropped).
fn components(path: &Path) -> Vec<String> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            Component::ParentDir => Some("..".to_string()),
            _ => None,
        })
        .collect()
}

pub use crate::sandbox::normalize_lexically;

/// Runs blocking path work (canonicalisation walks the file system) on tokio's
/// blocking pool, so async tools never stall a runtime worker on a slow disk.
pub(crate) async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Failed(format!("the path check did not finish: {e}")))?
}

/// Canonicalises the longest existing prefix of `path` and re-appends the rest, so
/// symlinks are resolved even for a file that does not exist yet.
///
/// Blocking: async code calls it through [`off_runtime`].
#[expect(
    clippy::disallowed_methods,
    reason = "sync by design; the tools call it inside spawn_blocking"
)]
pub fn canonicalize_partial(path: &Path) -> std::io::Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(canonical) => {
                let mut out = canonical;
                out.extend(rest.iter().rev());
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name() else {
                    return Err(e);
                };
                rest.push(name.to_os_string());
                if !existing.pop() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Where a tool may read and write: canonical roots plus forbidden patterns.
#[derive(Debug, Clone)]
pub struct PathScope {
    roots: Vec<PathBuf>,
    forbidden: ForbiddenPaths,
}

impl PathScope {
    /// A scope of `workspace` plus `extra_roots`; roots that do not exist are skipped,
    /// but the workspace must exist.
    ///
    /// Blocking, like [`PathScope::resolve`]: async code calls both through [`off_runtime`].
    #[expect(
        clippy::disallowed_methods,
        reason = "sync by design; the tools call it inside spawn_blocking"
    )]
    pub fn new(
        workspace: &Path,
        extra_roots: &[PathBuf],
        forbidden: ForbiddenPaths,
    ) -> Result<Self, ToolError> {
        let workspace = std::fs::canonicalize(workspace).map_err(|e| {
            ToolError::Io(format!(
                "workspace {} is not usable: {e}",
                workspace.display()
            ))
        })?;
        let mut roots = vec![workspace];
        roots.extend(
            extra_roots
                .iter()
                .filter_map(|root| std::fs::canonicalize(root).ok()),
        );
        Ok(Self { roots, forbidden })
    }

    /// The canonical workspace root.
    pub fn workspace(&self) -> &Path {
        &self.roots[0]
    }

    /// Resolves a user-supplied path (relative to the workspace) to the canonical
    /// path to operate on, or explains why it is refused.
    pub fn resolve(&self, raw: &str) -> Result<PathBuf, ToolError> {
        if raw.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the path is empty".into()));
        }
        if raw.contains('\0') {
            return Err(ToolError::InvalidArguments(
                "the path contains a NUL byte".into(),
            ));
        }
        if raw.starts_with('~') {
            return Err(ToolError::NotPermitted(format!(
                "`{raw}`: `~` is not expanded; use a path relative to the workspace"
            )));
        }
        let joined = self.workspace().join(raw);
        let normal = normalize_lexically(&joined);
        let canonical = canonicalize_partial(&normal)
            .map_err(|e| ToolError::Io(format!("cannot resolve `{raw}`: {e}")))?;
        if !self.roots.iter().any(|root| canonical.starts_with(root)) {
            return Err(ToolError::NotPermitted(format!(
                "`{raw}` is outside the workspace{}",
                if normal == canonical {
                    ""
                } else {
                    " (after following symlinks)"
                }
            )));
        }
        if let Some(pattern) = self
            .forbidden
            .matches(&normal)
            .or_else(|| self.forbidden.matches(&canonical))
        {
            return Err(ToolError::NotPermitted(format!(
                "`{raw}` is a protected path (matches `{pattern}`)"
            )));
        }
        Ok(canonical)
    }

    /// The root `path` lies under (the deepest, when roots nest).
    pub fn root_of(&self, path: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .filter(|root| path.starts_with(root))
            .max_by_key(|root| root.components().count())
            .map(PathBuf::as_path)
    }

    /// The path as shown to the model: relative to the workspace when inside it.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(self.workspace()) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_normalisation() {
        assert_eq!(
            normalize_lexically(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize_lexically(Path::new("/a/..")), PathBuf::from("/"));
        assert_eq!(
            normalize_lexically(Path::new("/../../etc")),
            PathBuf::from("/etc")
        );
    }

    #[test]
    fn forbidden_patterns_match_prefixes_and_anywhere() {
        let f = ForbiddenPaths::new(&default_forbidden_paths());
        assert!(f.matches(Path::new("/etc/shadow")).is_some());
        assert!(f.matches(Path::new("/etc/passwd")).is_none());
        assert!(f.matches(Path::new("/proc/123/environ")).is_some());
        assert!(f.matches(Path::new("/proc/cpuinfo")).is_none());
        assert!(f.matches(Path::new("/home/u/.ssh/id_ed25519")).is_some());
        assert!(f.matches(Path::new("/home/u/.cairn/config.toml")).is_some());
        assert!(
            f.matches(Path::new("/home/u/.cairn/workspace/config.toml"))
                .is_none()
        );
        assert!(f.matches(Path::new("/home/u/notes/ssh.txt")).is_none());
    }

    #[test]
    fn scope_refuses_escapes_and_accepts_inside() {
        let dir = tempfile::tempdir().unwrap();
        let scope = PathScope::new(dir.path(), &[], ForbiddenPaths::default()).unwrap();
        let inside = scope.resolve("sub/new.txt").unwrap();
        assert!(inside.starts_with(scope.workspace()));
        assert_eq!(scope.display(&inside), "sub/new.txt");
        assert!(matches!(
            scope.resolve("../x"),
            Err(ToolError::NotPermitted(_))
        ));
        assert!(matches!(
            scope.resolve("/etc/hostname"),
            Err(ToolError::NotPermitted(_))
        ));
        assert!(matches!(
            scope.resolve("~/x"),
            Err(ToolError::NotPermitted(_))
        ));
        assert!(matches!(
            scope.resolve(""),
            Err(ToolError::InvalidArguments(_))
        ));
        assert!(scope.resolve("a/../b.txt").is_ok());
    }
}
