//! Skills: folders holding a `SKILL.md` (the open SKILL.md format), found in
//! `workspace/skills/` and the directories of `skills.paths`.
//!
//! Only each skill's name, description and path reach the system prompt; the
//! agent reads the body (and the folder's other files) with `file_read` when
//! a skill applies, so a hundred skills cost a few lines each, not their text.
//!
//! The workspace's `skills/` is read through [`crate::nofollow`] (the agent
//! may have planted links there); `skills.paths` folders are the person's
//! and are read as they are, links followed.
//!
//! Duplicate names: the first found wins, the workspace's before `skills.paths`
//! (in their order); the others are skipped and reported as problems, like a
//! `SKILL.md` whose front matter is invalid.

use std::path::{Path, PathBuf};

use cairn_core::skill::parse_header;
use tokio::io::AsyncReadExt;

use crate::nofollow::{Kind, Tree};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// The workspace's folder of skills.
pub const SKILLS_DIR: &str = "skills";
/// Bytes of a `SKILL.md` read to find its front matter.
const MAX_HEADER_BYTES: u64 = 64 * 1024;
/// Skills listed in the system prompt; the rest are named by count only.
pub const MAX_LISTED: usize = 50;
/// Characters of a description shown in the system prompt.
pub const MAX_LISTED_DESCRIPTION: usize = 300;

/// One skill found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name, from the front matter.
    pub name: String,
    /// What it is for, from the front matter (whitespace folded).
    pub description: String,
    /// Its `SKILL.md`.
    pub file: PathBuf,
    /// 1-based line where the body starts.
    pub body_line: usize,
    /// The workspace it was found in (its file is read through
    /// [`crate::nofollow`]), or `None` for a `skills.paths` folder.
    pub workspace: Option<PathBuf>,
}

impl Skill {
    /// The folder holding it (its other files).
    pub fn dir(&self) -> &Path {
        self.file.parent().unwrap_or(&self.file)
    }
}

/// A `SKILL.md` that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillProblem {
    /// The file (or directory) at fault.
    pub file: PathBuf,
    /// 1-based line (0 when the problem is not in the text).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SkillProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

/// The skills found, and what was skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillSet {
    /// Usable skills, in discovery order.
    pub skills: Vec<Skill>,
    /// Skipped files (invalid front matter, duplicate names, unreadable).
    pub problems: Vec<SkillProblem>,
}

impl SkillSet {
    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// A folder skills are looked for in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDir {
    /// The folder.
    pub path: PathBuf,
    /// For `workspace/skills`, the workspace: the agent may have planted
    /// links there, so nothing is followed. `None` for a `skills.paths`
    /// folder, which the person chose (read only, links followed).
    pub workspace: Option<PathBuf>,
}

/// Where skills are looked for, in priority order: the workspace's
/// `skills/` first, then `extra` (`skills.paths`).
pub fn skill_dirs(workspace: &Path, extra: &[PathBuf]) -> Vec<SkillDir> {
    std::iter::once(SkillDir {
        path: workspace.join(SKILLS_DIR),
        workspace: Some(workspace.to_path_buf()),
    })
    .chain(extra.iter().map(|path| SkillDir {
        path: path.clone(),
        workspace: None,
    }))
    .collect()
}

/// Finds the skills directly under each of `dirs` (a missing directory has none).
pub async fn discover(dirs: &[SkillDir]) -> SkillSet {
    let mut set = SkillSet::default();
    for dir in dirs {
        let found = match &dir.workspace {
            Some(workspace) => in_workspace(workspace).await,
            None => in_folder(&dir.path).await,
        };
        for found in found {
            match found.and_then(|(file, bytes)| parse(file, &bytes, dir.workspace.clone())) {
                Ok(skill) => match set.get(&skill.name) {
                    Some(first) => set.problems.push(SkillProblem {
                        message: format!(
                            "a skill named `{}` is already defined by {}; this one is skipped",
                            skill.name,
                            first.file.display()
                        ),
                        file: skill.file,
                        line: 2,
                    }),
                    None => set.skills.push(skill),
                },
                Err(problem) => set.problems.push(problem),
            }
        }
    }
    set
}

/// A skill file found (its path and the head of its text), or why not.
type Found = Result<(PathBuf, Vec<u8>), SkillProblem>;

/// The `SKILL.md` heads under `workspace/skills`, through the no-follow walk:
/// a skill folder that is a link is reported, not followed.
async fn in_workspace(workspace: &Path) -> Vec<Found> {
    let root = workspace.to_path_buf();
    let found = Tree::new(workspace)
        .run(move |tree| {
            let entries = match tree.list(Path::new(SKILLS_DIR)) {
                Ok(entries) => entries,
                Err(e) if e.is_not_found() => return Ok(Vec::new()),
                Err(e) => return Err(e),
            };
            let mut found = Vec::new();
            for entry in entries {
                let rel = Path::new(SKILLS_DIR).join(&entry.name).join(SKILL_FILE);
                let file = root.join(&rel);
                let problem = |message: String| {
                    Err(SkillProblem {
                        file: file.clone(),
                        line: 0,
                        message,
                    })
                };
                match entry.kind {
                    Kind::Dir => {}
                    Kind::Link => {
                        found.push(problem(
                            "the skill folder is a symbolic link, which cairn does not follow in                              the workspace (add its target to skills.paths instead)"
                                .to_string(),
                        ));
                        continue;
                    }
                    Kind::File | Kind::Special => continue,
                }
                match tree.read(&rel, MAX_HEADER_BYTES) {
                    Ok(Some(bytes)) => found.push(Ok((file, bytes))),
                    Ok(None) => {}
                    Err(e) => found.push(problem(format!("cannot read: {e}"))),
                }
            }
            Ok(found)
        })
        .await;
    found.unwrap_or_else(|e| {
        vec![Err(SkillProblem {
            file: workspace.join(SKILLS_DIR),
            line: 0,
            message: format!("cannot list the directory: {e}"),
        })]
    })
}

/// The `SKILL.md` heads under a `skills.paths` folder (links followed: the person chose it).
async fn in_folder(dir: &Path) -> Vec<Found> {
    let mut entries = match tokio::fs::read_dir(dir).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            return vec![Err(SkillProblem {
                file: dir.to_path_buf(),
                line: 0,
                message: format!("cannot list the directory: {e}"),
            })];
        }
    };
    let mut folders = Vec::new();
    while let Ok(Some(entry)) = entries.next_entry().await {
        let file = entry.path().join(SKILL_FILE);
        if tokio::fs::metadata(&file).await.is_ok_and(|m| m.is_file()) {
            folders.push(file);
        }
    }
    folders.sort();
    let mut found = Vec::new();
    for file in folders {
        found.push(read_head(&file).await.map(|bytes| (file, bytes)));
    }
    found
}

/// The first [`MAX_HEADER_BYTES`] of `file`.
async fn read_head(file: &Path) -> Result<Vec<u8>, SkillProblem> {
    let problem = |e: std::io::Error| SkillProblem {
        file: file.to_path_buf(),
        line: 0,
        message: format!("cannot read: {e}"),
    };
    let mut bytes = Vec::new();
    tokio::fs::File::open(file)
        .await
        .map_err(problem)?
        .take(MAX_HEADER_BYTES)
        .read_to_end(&mut bytes)
        .await
        .map_err(problem)?;
    Ok(bytes)
}

/// The skill whose `SKILL.md` at `file` begins with `bytes`.
fn parse(file: PathBuf, bytes: &[u8], workspace: Option<PathBuf>) -> Result<Skill, SkillProblem> {
    let text = String::from_utf8_lossy(bytes);
    match parse_header(&text) {
        Ok(header) => Ok(Skill {
            name: header.name,
            description: header.description,
            file,
            body_line: header.body_line,
            workspace,
        }),
        Err(e) => Err(SkillProblem {
            file,
            line: e.line,
            message: e.message,
        }),
    }
}

/// Reads the whole `SKILL.md` of `skill` (for `cairn skill show`); one in
/// the workspace through the no-follow walk.
pub async fn read_body(skill: &Skill) -> std::io::Result<String> {
    let Some(workspace) = &skill.workspace else {
        return tokio::fs::read_to_string(&skill.file).await;
    };
    let rel = skill
        .file
        .strip_prefix(workspace)
        .map_err(std::io::Error::other)?
        .to_path_buf();
    let bytes = Tree::new(workspace)
        .run(move |tree| tree.read(&rel, u64::MAX))
        .await
        .map_err(std::io::Error::other)?
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
    String::from_utf8(bytes).map_err(std::io::Error::other)
}

/// The system prompt's skills section: one line per skill (name,
/// description, path), bounded by [`MAX_LISTED`] and
/// [`MAX_LISTED_DESCRIPTION`]; empty when there are none.
pub fn prompt_section(set: &SkillSet, workspace: &Path) -> String {
    if set.skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n## Skills\n\nSkills hold instructions for particular tasks. When one applies, first read \
         its SKILL.md with file_read, then follow it (its folder may hold more files it names).\n",
    );
    for skill in set.skills.iter().take(MAX_LISTED) {
        let path = skill.file.strip_prefix(workspace).unwrap_or(&skill.file);
        let mut description: String = skill
            .description
            .chars()
            .take(MAX_LISTED_DESCRIPTION)
            .collect();
        if description.len() < skill.description.len() {
            description.push('…');
        }
        out.push_str(&format!(
            "- {}: {description} ({})\n",
            skill.name,
            path.display()
        ));
    }
    if set.skills.len() > MAX_LISTED {
        out.push_str(&format!(
            "({} more skills are not listed.)\n",
            set.skills.len() - MAX_LISTED
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::disallowed_methods,
        reason = "test fixtures may use blocking std::fs"
    )]

    use super::*;

    fn write(dir: &Path, folder: &str, text: &str) {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(dir.join(folder).join(SKILL_FILE), text).unwrap();
    }

    #[tokio::test]
    async fn the_workspace_wins_duplicates_and_bad_files_are_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let workspace = tmp.path().join("ws");
        let extra = tmp.path().join("extra");
        write(
            &workspace.join("skills"),
            "notes",
            "---\nname: notes\ndescription: Mine.\n---\nbody\n",
        );
        write(
            &extra,
            "notes",
            "---\nname: notes\ndescription: Theirs.\n---\n",
        );
        write(&extra, "broken", "---\nname: broken\n---\n");
        write(
            &extra,
            "pdf",
            "---\nname: pdf\ndescription: Read PDFs.\n---\nSECRET BODY\n",
        );
        std::fs::create_dir_all(extra.join("not-a-skill")).unwrap();

        let set = discover(&skill_dirs(&workspace, std::slice::from_ref(&extra))).await;
        let names: Vec<_> = set.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["notes", "pdf"]);
        assert_eq!(set.get("notes").unwrap().description, "Mine.");
        assert_eq!(set.problems.len(), 2, "{:?}", set.problems);
        assert!(set.problems[0].to_string().contains("broken/SKILL.md:1:"));
        assert!(set.problems[1].message.contains("already defined"));

        let section = prompt_section(&set, &workspace);
        assert!(
            section.contains("- notes: Mine. (skills/notes/SKILL.md)"),
            "{section}"
        );
        assert!(section.contains(&format!(
            "- pdf: Read PDFs. ({})",
            extra.join("pdf/SKILL.md").display()
        )));
        assert!(!section.contains("SECRET BODY"));
    }

    /// In the workspace a linked skill folder or `SKILL.md` is reported, not
    /// followed; in a `skills.paths` folder links are the person's, and followed.
    #[tokio::test]
    async fn links_are_followed_only_in_skills_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let workspace = tmp.path().join("ws");
        let extra = tmp.path().join("extra");
        let elsewhere = tmp.path().join("elsewhere");
        write(
            &elsewhere,
            "planted",
            "---\nname: planted\ndescription: From outside.\n---\nOUTSIDE BODY\n",
        );
        std::fs::create_dir_all(workspace.join("skills/file-link")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("planted"), workspace.join("skills/dir-link"))
            .unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join("planted").join(SKILL_FILE),
            workspace.join("skills/file-link").join(SKILL_FILE),
        )
        .unwrap();
        std::fs::create_dir_all(&extra).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("planted"), extra.join("linked")).unwrap();

        let set = discover(&skill_dirs(&workspace, &[])).await;
        assert!(set.skills.is_empty(), "{:?}", set.skills);
        assert_eq!(set.problems.len(), 2, "{:?}", set.problems);
        assert!(
            set.problems
                .iter()
                .all(|p| p.message.contains("symbolic link"))
        );

        let set = discover(&skill_dirs(&workspace, std::slice::from_ref(&extra))).await;
        let skill = set.get("planted").unwrap();
        assert_eq!(skill.workspace, None);
        assert!(read_body(skill).await.unwrap().contains("OUTSIDE BODY"));
    }
}
