//! Documents a person sends in a chat, kept in the workspace's `inbox/`
//! under their own name (made safe, numbered when taken), written
//! through the no-follow walk: a planted `inbox` link or a name taken by
//! a link is never written through.

use std::path::Path;

use cairn_agent::nofollow::{FsError, Tree};

/// The workspace folder documents sent in a chat are saved to.
pub const INBOX: &str = "inbox";

/// Saves `bytes` as a new file in `workspace/inbox/` named after `name`;
/// returns its path relative to the workspace.
pub async fn save(workspace: &Path, name: &str, bytes: Vec<u8>) -> Result<String, String> {
    let name = safe_name(name);
    let saved = Tree::new(workspace).run(move |tree| {
        let (stem, ext) = match name.rsplit_once('.') {
            Some((s, e)) if !s.is_empty() => (s.to_string(), format!(".{e}")),
            _ => (name.clone(), String::new()),
        };
        for n in 0..1000 {
            let candidate = if n == 0 {
                name.clone()
            } else {
                format!("{stem}-{n}{ext}")
            };
            match tree.create_new(&Path::new(INBOX).join(&candidate), &bytes) {
                Ok(()) => return Ok(Ok(format!("{INBOX}/{candidate}"))),
                Err(FsError::Exists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Err(format!("{INBOX}: too many files named {name}")))
    });
    match saved.await {
        Ok(saved) => saved,
        Err(e) => Err(format!("{}: {e}", workspace.display())),
    }
}

/// The text the agent gets for a message that came with a saved file.
pub fn with_note(text: &str, saved: &str) -> String {
    let note = format!("(The person sent a file, saved in the workspace as {saved}.)");
    if text.trim().is_empty() {
        note
    } else {
        format!("{text}\n\n{note}")
    }
}

/// A file name without directories or characters a shell would trip on.
pub fn safe_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    if cleaned.is_empty() {
        "file".into()
    } else {
        cleaned.chars().take(100).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_made_safe() {
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("my report (1).pdf"), "my_report__1_.pdf");
        assert_eq!(safe_name(".."), "file");
    }
}
