//! A small incremental Server-Sent Events parser.
//!
//! Bytes go in as they arrive (chunk boundaries anywhere, even inside a UTF-8
//! character or between `\r` and `\n`); complete events come out. Handles
//! comments, `event:` names, multi-line `data:`, and LF, CRLF or CR line ends.

/// Longest line or event we buffer before giving up (protects memory).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, if the server gave one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// Whether this is the OpenAI end-of-stream marker `data: [DONE]`.
    pub fn is_done_marker(&self) -> bool {
        self.data.trim() == "[DONE]"
    }
}

/// The stream sent a line or event larger than [`MAX_EVENT_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("server-sent event larger than {MAX_EVENT_BYTES} bytes")]
pub struct SseOverflow;

/// Incremental parser state.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended with `\r`; a leading `\n` belongs to it.
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseOverflow> {
        let mut events = Vec::new();
        let mut rest = chunk;
        // An empty chunk leaves a pending `\r` pending: the `\n` may come next.
        if self.skip_lf && !rest.is_empty() {
            self.skip_lf = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..pos]);
            if rest[pos] == b'\r' {
                match rest.get(pos + 1) {
                    Some(b'\n') => rest = &rest[pos + 2..],
                    Some(_) => rest = &rest[pos + 1..],
                    None => {
                        self.skip_lf = true;
                        rest = &[];
                    }
                }
            } else {
                rest = &rest[pos + 1..];
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.process_line(&line)? {
                events.push(event);
            }
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > MAX_EVENT_BYTES {
            return Err(SseOverflow);
        }
        Ok(events)
    }

    /// Ends the stream: a final event without its blank line is still delivered.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            // An overflow here is impossible: `push` already bounded the line.
            let _ = self.process_line(&line);
        }
        self.dispatch()
    }

    fn process_line(&mut self, line: &[u8]) -> Result<Option<SseEvent>, SseOverflow> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.first() == Some(&b':') {
            return Ok(None); // comment / keep-alive
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                if self.data.len() > MAX_EVENT_BYTES {
                    return Err(SseOverflow);
                }
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {} // id, retry and unknown fields do not matter here
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(parser.push(chunk).unwrap());
        }
        out.extend(parser.finish());
        out
    }

    fn data(event: &SseEvent) -> &str {
        &event.data
    }

    #[test]
    fn simple_events_and_done_marker() {
        let events = parse_all(&[b"data: {\"a\":1}\n\ndata: [DONE]\n\n"]);
        assert_eq!(events.len(), 2);
        assert_eq!(data(&events[0]), "{\"a\":1}");
        assert!(events[1].is_done_marker());
    }

    #[test]
    fn comments_event_names_and_multiline_data() {
        let events = parse_all(&[
            b": keep-alive\nevent: message_start\ndata: line1\ndata: line2\nid: 7\n\n",
        ]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.as_deref(), Some("message_start"));
        assert_eq!(data(&events[0]), "line1\nline2");
    }

    #[test]
    fn crlf_and_cr_line_ends() {
        let events = parse_all(&[b"data: a\r\n\r\ndata: b\r\rdata:c\n\n"]);
        let got: Vec<_> = events.iter().map(data).collect();
        assert_eq!(got, ["a", "b", "c"]);
    }

    #[test]
    fn chunk_boundaries_anywhere() {
        let whole = "event: x\r\ndata: héllo wörld\r\n\r\ndata: [DONE]\r\n\r\n".as_bytes();
        let expected = parse_all(&[whole]);
        for split in 0..whole.len() {
            let (a, b) = whole.split_at(split);
            assert_eq!(parse_all(&[a, b]), expected, "split at {split}");
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(parse_all(&bytes), expected);
        assert_eq!(expected[0].data, "héllo wörld");
    }

    /// Found by the `sse_decode` fuzz target: an empty chunk after a `\r`
    /// forgot that a `\n` may still complete the line end.
    #[test]
    fn an_empty_chunk_between_cr_and_lf_changes_nothing() {
        let expected = parse_all(&[b"data: a\r\ndata: b\r\n\r\n"]);
        assert_eq!(expected.len(), 1);
        assert_eq!(
            parse_all(&[b"data: a\r", b"", b"\ndata: b\r\n\r\n"]),
            expected
        );
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        assert!(parse_all(&[b"\n\n\nevent: ping\n\n"]).is_empty());
        let events = parse_all(&[b"data\n\n"]);
        assert_eq!(data(&events[0]), "");
    }

    #[test]
    fn final_event_without_blank_line_is_delivered() {
        let events = parse_all(&[b"data: tail"]);
        assert_eq!(data(&events[0]), "tail");
    }

    #[test]
    fn oversized_line_is_an_error_not_a_crash() {
        let mut parser = SseParser::new();
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        assert_eq!(parser.push(&big), Err(SseOverflow));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn parse_in_pieces(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        let mut start = 0;
        for &cut in cuts {
            let cut = cut.min(bytes.len()).max(start);
            out.extend(parser.push(&bytes[start..cut]).unwrap_or_default());
            start = cut;
        }
        out.extend(parser.push(&bytes[start..]).unwrap_or_default());
        out.extend(parser.finish());
        out
    }

    proptest! {
        /// However the bytes are cut into chunks, the same events come out.
        #[test]
        fn chunking_never_changes_the_events(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), Just(b'd'), Just(b'a'), Just(b't'), Just(0xC3u8), Just(0xA9u8), any::<u8>()],
                0..300,
            ),
            mut cuts in proptest::collection::vec(0usize..300, 0..8),
        ) {
            cuts.sort_unstable();
            prop_assert_eq!(parse_in_pieces(&bytes, &cuts), parse_in_pieces(&bytes, &[]));
        }
    }
}
