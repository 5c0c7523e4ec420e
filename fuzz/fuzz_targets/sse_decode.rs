//! Fuzzes the SSE decoder: the events decoded from a byte stream must not
//! depend on how the stream was split into chunks (whole, byte by byte, or at
//! fuzzer-chosen points), and nothing may panic.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run sse_decode -- -dict=sse.dict -max_total_time=240`

#![no_main]

use cairn_llm::sse::{SseEvent, SseParser};
use libfuzzer_sys::fuzz_target;

/// Decodes `chunks` as one stream, ending it with `finish`.
fn decode<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for chunk in chunks {
        // Fuzz inputs are far below the overflow limit.
        events.extend(parser.push(chunk).unwrap_or_else(|e| panic!("{e}")));
    }
    events.extend(parser.finish());
    events
}

fuzz_target!(|input: (Vec<u16>, &[u8])| {
    let (cuts, bytes) = input;
    let whole = decode([bytes]);

    let by_byte = decode(bytes.chunks(1));
    assert_eq!(
        by_byte, whole,
        "byte-by-byte decoding differs for {bytes:?}"
    );

    let mut points: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (bytes.len() + 1))
        .collect();
    points.sort_unstable();
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        chunks.push(&bytes[start..p]);
        start = p;
    }
    chunks.push(&bytes[start..]);
    let split = decode(chunks.iter().copied());
    assert_eq!(
        split, whole,
        "decoding split at {cuts:?} differs for {bytes:?}"
    );

    for event in &whole {
        assert!(
            !event.data.contains('\r'),
            "a line end leaked into data: {event:?}"
        );
    }
});
