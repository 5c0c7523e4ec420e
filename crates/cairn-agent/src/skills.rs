//! Skills: folders holding a `SKILL.md` (the open SKILL.md format), found in
//! `workspace/skills/` and the directories of `skills.paths`.
//!
//! Only each skill's name, description and path reach the system prompt; the
//! agent reads the body (and the folder's other files) with `file_read` when
//! a skill applies, so a hundred skills cost a few lines each, not their text.
//!
//! Duplicate names: the first found wins, the workspace's before `skills.paths`
//! (in their order); the others are skipped and reported as problems, like a
//! `SKILL.md` whose front matter is invalid.

use std::path::{Path, PathBuf};

use cairn_core::skill::parse_header;
use tokio::io::AsyncReadExt;

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
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

/// Where skills are looked for, in priority order: the workspace's
/// `skills/` first, then `extra` (`skills.paths`).
pub fn skill_dirs(workspace: &Path, extra: &[PathBuf]) -> Vec<PathBuf> {
    std::iter::once(workspace.join("skills"))
        .chain(extra.iter().cloned())
        .collect()
}

/// Finds the skills directly under each of `dirs` (a missing directory has none).
pub async fn discover(dirs: &[PathBuf]) -> SkillSet {
    let mut set = SkillSet::default();
    for dir in dirs {
        let mut entries = match tokio::fs::read_dir(dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                set.problems.push(SkillProblem {
                    file: dir.clone(),
                    line: 0,
                    message: format!("cannot list the directory: {e}"),
                });
                continue;
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
        for file in folders {
            match read_skill(&file).await {
                Ok(skill) => match set.get(&skill.name) {
                    Some(first) => set.problems.push(SkillProblem {
                        message: format!(
                            "a skill named `{}` is already defined by {}; this one is skipped",
                            skill.name,
                            first.file.display()
                        ),
                        file,
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

async fn read_skill(file: &Path) -> Result<Skill, SkillProblem> {
    let problem = |line, message| SkillProblem {
        file: file.to_path_buf(),
        line,
        message,
    };
    let mut bytes = Vec::new();
    tokio::fs::File::open(file)
        .await
        .map_err(|e| problem(0, format!("cannot read: {e}")))?
        .take(MAX_HEADER_BYTES)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| problem(0, format!("cannot read: {e}")))?;
    let text = String::from_utf8_lossy(&bytes);
    let header = parse_header(&text).map_err(|e| problem(e.line, e.message))?;
    Ok(Skill {
        name: header.name,
        description: header.description,
        file: file.to_path_buf(),
        body_line: header.body_line,
    })
}

/// Reads the whole `SKILL.md` of `skill` (for `cairn skill show`).
pub async fn read_body(skill: &Skill) -> std::io::Result<String> {
    tokio::fs::read_to_string(&skill.file).await
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
    #![allow(clippy::unwrap_used, clippy::disallowed_methods)]

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
}
