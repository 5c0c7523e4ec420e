//! Where log lines go: standard error, each line first through
//! [`cairn_core::config::redact_text`], so no URL credential, token after a
//! flag or bearer token reaches the log, whoever wrote the line (our code or
//! a dependency such as the MCP SDK quoting its endpoint).

use std::io::Write;

/// One log event's bytes, written redacted to stderr when it is dropped
/// (the formatter writes an event, then drops its writer).
#[derive(Debug, Default)]
pub struct RedactedStderr(Vec<u8>);

impl Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedStderr {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let shown = cairn_core::config::redact_text(&String::from_utf8_lossy(&self.0));
        // Nowhere to report a failed log write.
        let _ = std::io::stderr().lock().write_all(shown.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_kept_whole_until_it_is_written() {
        let mut w = RedactedStderr::default();
        w.write_all(b"url (http://h/x?token=S3").unwrap();
        w.write_all(b"CR) --password S3CR\n").unwrap();
        let shown = cairn_core::config::redact_text(&String::from_utf8_lossy(&w.0));
        assert!(!shown.contains("S3"), "{shown}");
        w.0.clear();
    }
}
