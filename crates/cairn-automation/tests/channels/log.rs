//! `type = "log"`: one structured log line, confirmed at once.

use std::io::Write;
use std::sync::{Arc, Mutex};

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

#[tokio::test]
async fn the_log_channel_writes_one_structured_line_and_confirms() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let log = channel(json!({"type": "log"}));
    assert_eq!(log.deliver(&notification()).await.unwrap().detail, "logged");

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
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
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    channel(json!({"type": "log"}))
        .deliver(&with_outcome("failed"))
        .await
        .unwrap();
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("title=\"❌ Disk almost full\""), "{text}");
}
