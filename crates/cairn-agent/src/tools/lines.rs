//! Reading a window of lines from a text stream under a byte cap; `file_read`
//! uses it, and it takes any reader so tests can count what it pulls.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What [`read_lines`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineWindow {
    /// The bytes of the lines returned (at most the cap).
    pub bytes: Vec<u8>,
    /// Lines seen, including skipped ones and the one that stopped the read.
    pub seen: u64,
    /// Lines returned whole.
    pub taken: u64,
    /// The 1-based line at which the cap cut the output, if it did.
    pub cut_at: Option<u64>,
}

/// Reads lines `offset..` (1-based), at most `limit` of them and `max` bytes in
/// all. A first line longer than `max` is returned cut to its head.
pub async fn read_lines<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    offset: u64,
    limit: u64,
    max: usize,
) -> std::io::Result<LineWindow> {
    let mut window = LineWindow::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).await?;
        if n == 0 {
            break;
        }
        window.seen += 1;
        if window.seen < offset {
            continue;
        }
        if window.taken >= limit {
            break;
        }
        if window.bytes.len() + line.len() > max {
            if window.bytes.is_empty() {
                // A single huge line: show its head rather than nothing.
                window.bytes.extend_from_slice(&line[..max]);
            }
            window.cut_at = Some(window.seen);
            break;
        }
        window.bytes.extend_from_slice(&line);
        window.taken += 1;
    }
    Ok(window)
}
