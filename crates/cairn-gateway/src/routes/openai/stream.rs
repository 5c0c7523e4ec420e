//! A completion streamed as OpenAI's `chat.completion.chunk` events: the
//! role, the text deltas as the model writes them, the client tool calls,
//! the finish reason, the usage when asked, then `[DONE]`.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::Event as SseEvent;
use cairn_agent::agent_loop::{LoopOutcome, LoopStatus};
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::DropGuard;

use super::error::OpenAiError;
use super::{CompletionUsage, failure, out_tool_calls};

/// What the running turn sends the stream.
pub(super) enum Piece {
    Delta(String),
    End(Box<LoopOutcome>),
}

/// What every chunk of one completion repeats.
pub(super) struct ChunkHead {
    pub(super) id: String,
    pub(super) created: i64,
    pub(super) model: String,
    pub(super) include_usage: bool,
}

impl ChunkHead {
    fn chunk(&self, choices: Value, usage: Option<CompletionUsage>) -> SseEvent {
        let mut body = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "choices": choices,
        });
        if self.include_usage {
            body["usage"] = json!(usage);
        }
        SseEvent::default().data(body.to_string())
    }

    fn delta(&self, delta: Value, finish: Option<&str>) -> SseEvent {
        self.chunk(
            json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
            None,
        )
    }
}

/// Turns the pieces of a running turn into chunks.
pub(super) struct Pump {
    chunk: ChunkHead,
    rx: mpsc::UnboundedReceiver<Piece>,
    queue: VecDeque<SseEvent>,
    streamed: bool,
    ended: bool,
    /// Cancels the turn when the client goes away (the stream is dropped).
    _stop: DropGuard,
}

impl Pump {
    /// A pump over `rx`, starting with the role chunk.
    pub(super) fn new(
        chunk: ChunkHead,
        rx: mpsc::UnboundedReceiver<Piece>,
        stop: DropGuard,
    ) -> Self {
        let role = chunk.delta(json!({"role": "assistant", "content": ""}), None);
        Self {
            chunk,
            rx,
            queue: VecDeque::from([role]),
            streamed: false,
            ended: false,
            _stop: stop,
        }
    }

    fn error(&mut self, error: &OpenAiError) {
        self.ended = true;
        self.queue
            .push_back(SseEvent::default().data(error.body().to_string()));
    }

    fn finish(&mut self, outcome: &LoopOutcome) {
        if let Some(error) = failure(&outcome.status) {
            return self.error(&error);
        }
        self.ended = true;
        // Text not streamed as it came (a structured answer) goes in one delta.
        if !self.streamed && !outcome.text.is_empty() {
            let delta = self.chunk.delta(json!({"content": outcome.text}), None);
            self.queue.push_back(delta);
        }
        let finish = if let LoopStatus::ClientTools { calls } = &outcome.status {
            let calls: Vec<Value> = out_tool_calls(calls)
                .into_iter()
                .enumerate()
                .map(|(index, call)| {
                    let mut call = json!(call);
                    call["index"] = json!(index);
                    call
                })
                .collect();
            let delta = self.chunk.delta(json!({"tool_calls": calls}), None);
            self.queue.push_back(delta);
            "tool_calls"
        } else {
            "stop"
        };
        let stop = self.chunk.delta(json!({}), Some(finish));
        self.queue.push_back(stop);
        if self.chunk.include_usage {
            let usage = self
                .chunk
                .chunk(json!([]), Some(CompletionUsage::from(outcome)));
            self.queue.push_back(usage);
        }
        self.queue.push_back(SseEvent::default().data("[DONE]"));
    }
}

/// The chunks of `pump`, as an SSE stream.
pub(super) fn stream_of(pump: Pump) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(pump, |mut pump| async move {
        loop {
            if let Some(event) = pump.queue.pop_front() {
                return Some((Ok(event), pump));
            }
            if pump.ended {
                return None;
            }
            match pump.rx.recv().await {
                Some(Piece::Delta(text)) => {
                    pump.streamed = true;
                    let delta = pump.chunk.delta(json!({"content": text}), None);
                    return Some((Ok(delta), pump));
                }
                Some(Piece::End(outcome)) => pump.finish(&outcome),
                // The turn's task ended without a word (it panicked).
                None => pump.error(&OpenAiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the turn ended unexpectedly",
                )),
            }
        }
    })
}
