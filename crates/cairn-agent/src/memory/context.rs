//! The `[Memory context]` section: what recall found for the person's
//! message, bounded in size, given to the model just before that message.

use super::{MemoryService, RecallHit};

/// The section's first line.
pub const HEADER: &str = "[Memory context]";

/// Formats hits as `[Memory context]\n- key: content` lines, as many whole
/// lines as fit in `max_chars` (the first one cut to fit if it alone is too
/// long). `None` when there is nothing to say or no room.
pub fn format_context(hits: &[RecallHit], max_chars: usize) -> Option<String> {
    let mut text = String::from(HEADER);
    let mut lines = 0;
    for hit in hits {
        let content = hit
            .doc
            .content
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let line = match &hit.doc.key {
            Some(key) => format!("\n- {key}: {content}"),
            None => format!("\n- {content}"),
        };
        let used = text.chars().count();
        if used + line.chars().count() <= max_chars {
            text.push_str(&line);
            lines += 1;
        } else if lines == 0 && used + 8 < max_chars {
            let room = max_chars - used - 1;
            text.extend(line.chars().take(room));
            text.push('…');
            lines += 1;
            break;
        } else {
            break;
        }
    }
    (lines > 0).then_some(text)
}

impl MemoryService {
    /// The `[Memory context]` for the person's `message`: recall with the
    /// configured top-k and minimum relevance, bounded to the configured
    /// size. `None` when nothing is relevant, the section is off
    /// (`context_chars = 0`), or recall failed (the turn goes on without it).
    pub async fn context_for(&self, message: &str) -> Option<String> {
        if self.settings.context_chars == 0 {
            return None;
        }
        let recall = match self.recall(message, self.settings.top_k).await {
            Ok(recall) => recall,
            Err(e) => {
                tracing::warn!(error = %e, "memory recall before the turn failed");
                return None;
            }
        };
        // A conversation memory that is this very message (auto-saved) says nothing new.
        let hits: Vec<RecallHit> = recall
            .hits
            .into_iter()
            .filter(|h| h.doc.content.trim() != message.trim())
            .collect();
        format_context(&hits, self.settings.context_chars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MatchedBy;
    use cairn_store::{MemoryCategory, MemoryDoc};
    use chrono::Utc;

    fn hit(key: Option<&str>, content: &str) -> RecallHit {
        RecallHit {
            doc: MemoryDoc {
                id: uuid::Uuid::now_v7(),
                user_id: "u".into(),
                agent: cairn_store::MAIN_AGENT.into(),
                shared: false,
                key: key.map(str::to_string),
                content: content.into(),
                category: MemoryCategory::Core,
                source: "t".into(),
                content_hash: String::new(),
                created_at: Utc::now(),
                updated_at: Utc::now(),
                accessed_at: None,
                embedding_model: None,
            },
            score: 1.0,
            keyword_score: Some(1.0),
            vector_score: None,
            matched_by: MatchedBy::Keyword,
        }
    }

    #[test]
    fn lines_fit_the_bound() {
        let hits = [
            hit(Some("coffee"), "espresso,\n no sugar"),
            hit(None, "lives in Lyon"),
        ];
        assert_eq!(
            format_context(&hits, 1000).unwrap(),
            "[Memory context]\n- coffee: espresso, no sugar\n- lives in Lyon"
        );
        assert_eq!(
            format_context(&hits, 45).unwrap(),
            "[Memory context]\n- coffee: espresso, no sugar"
        );
        let cut = format_context(&[hit(None, &"x".repeat(500))], 100).unwrap();
        assert_eq!(cut.chars().count(), 100);
        assert!(cut.ends_with('…'));
        assert_eq!(format_context(&[], 1000), None);
        assert_eq!(format_context(&hits, 10), None);
    }
}
