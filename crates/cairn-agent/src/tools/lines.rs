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
///
/// Works on the reader's buffer chunk by chunk, never on a whole line, so a
/// multi-gigabyte line costs at most `max` bytes of memory and of reading
/// (plus one buffer); lines before `offset` are skipped without being kept.
pub async fn read_lines<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    offset: u64,
    limit: u64,
    max: usize,
) -> std::io::Result<LineWindow> {
    let mut window = LineWindow::default();
    // Where the current line starts in `window.bytes`, while one is being taken.
    let mut line_start = 0;
    let mut in_line = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            // A last line without a newline still counts as a line.
            if in_line && window.seen >= offset {
                window.taken += 1;
            }
            break;
        }
        // A chunk that does not continue a line starts one.
        if !in_line {
            window.seen += 1;
            if window.seen >= offset && window.taken >= limit {
                break;
            }
        }
        let (len, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(newline) => (newline + 1, true),
            None => (chunk.len(), false),
        };
        if window.seen >= offset {
            if window.bytes.len() + len > max {
                if line_start == 0 {
                    // A first line longer than the cap: show its head rather than nothing.
                    let room = max - window.bytes.len();
                    window.bytes.extend_from_slice(&chunk[..room]);
                } else {
                    window.bytes.truncate(line_start);
                }
                window.cut_at = Some(window.seen);
                break;
            }
            window.bytes.extend_from_slice(&chunk[..len]);
            if ends_line {
                window.taken += 1;
                line_start = window.bytes.len();
            }
        }
        reader.consume(len);
        in_line = !ends_line;
    }
    Ok(window)
}
