//! `type = "log"`: one structured log line, confirmed at once.

use std::io::Write;
use std::sync::{Arc, Mutex};

use cairn_core::notification::Notification;
use serde_json::json;

use crate::{ID, channel, notification, with_outcome};

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the log channel writes for `n` (and that it confirms the delivery).
async fn logged(n: &Notification) -> String {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let log = channel(json!({"type": "log"}));
    assert_eq!(log.deliver(n).await.unwrap().detail, "logged");
    String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
}

#[tokio::test]
async fn the_log_channel_writes_one_structured_line_and_confirms() {
    let text = logged(&notification()).await;
    // The body has a line break: quoted, it stays one line.
    assert_eq!(
        text,
        format!(
            " INFO cairn::notify: notification id={ID} user=alice channel=ops priority=high \
             source=routine:run-42 tags=[\"disk\", \"warning\"] title=\"Disk almost full\" \
             body=\"/var is at 93 %.\\nClean up the caches.\"\n"
        )
    );
}

#[tokio::test]
async fn the_logged_title_starts_with_the_outcome_marker() {
    let text = logged(&with_outcome("failed")).await;
    assert!(text.contains("title=\"❌ Disk almost full\""), "{text}");
}
