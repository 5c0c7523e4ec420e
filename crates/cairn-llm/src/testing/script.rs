//! What the fake server answers: a queue of [`Scripted`] responses.

use std::time::Duration;

use serde_json::Value;

/// One tool call the fake model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments object.
    pub arguments: Value,
}

/// Protocol-shaped errors, rendered in each wire format's own error body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    RateLimited,
    Server,
    Auth,
    ContextLength,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ScriptBody {
    Reply {
        text: String,
        tool_calls: Vec<FakeToolCall>,
    },
    Error {
        kind: ErrorKind,
        status: u16,
    },
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

/// One scripted answer of the fake server, built with the constructors below
/// and adjusted with the `with_*` modifiers.
///
/// Replies are rendered in the protocol of the endpoint that was hit, whole or
/// streamed as the request asked (`"stream": true`).
#[derive(Debug, Clone, PartialEq)]
pub struct Scripted {
    pub(crate) body: ScriptBody,
    pub(crate) delay: Duration,
    /// Answer only once this many held requests have arrived (see [`Scripted::held_until`]).
    pub(crate) held_until: Option<usize>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) usage: Option<(u64, u64)>,
    pub(crate) model: Option<String>,
    pub(crate) finish_reason: Option<Option<String>>,
    pub(crate) chunk_bytes: Option<usize>,
    pub(crate) chunk_delay: Duration,
    pub(crate) arguments_as_object: bool,
}

impl Scripted {
    fn new(body: ScriptBody) -> Self {
        Self {
            body,
            delay: Duration::ZERO,
            held_until: None,
            headers: Vec::new(),
            usage: Some((10, 5)),
            model: None,
            finish_reason: None,
            chunk_bytes: None,
            chunk_delay: Duration::ZERO,
            arguments_as_object: false,
        }
    }

    /// A plain text answer (usage 10 in / 5 out unless changed).
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(ScriptBody::Reply {
            text: text.into(),
            tool_calls: Vec::new(),
        })
    }

    /// One native tool call.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::tool_calls([(name, arguments)])
    }

    /// Several native tool calls in one answer.
    pub fn tool_calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        Self::text_with_tool_calls("", calls)
    }

    /// Text and native tool calls in one answer.
    pub fn text_with_tool_calls<N: Into<String>>(
        text: impl Into<String>,
        calls: impl IntoIterator<Item = (N, Value)>,
    ) -> Self {
        Self::new(ScriptBody::Reply {
            text: text.into(),
            tool_calls: calls
                .into_iter()
                .map(|(name, arguments)| FakeToolCall {
                    name: name.into(),
                    arguments,
                })
                .collect(),
        })
    }

    /// HTTP 429 in the protocol's error shape, with `Retry-After: <secs>` when given.
    pub fn rate_limited(retry_after_secs: Option<u64>) -> Self {
        let scripted = Self::new(ScriptBody::Error {
            kind: ErrorKind::RateLimited,
            status: 429,
        });
        match retry_after_secs {
            Some(secs) => scripted.with_header("retry-after", secs.to_string()),
            None => scripted,
        }
    }

    /// A 5xx error (e.g. 500, 503, 529) in the protocol's error shape.
    pub fn server_error(status: u16) -> Self {
        Self::new(ScriptBody::Error {
            kind: ErrorKind::Server,
            status,
        })
    }

    /// HTTP 401 in the protocol's error shape.
    pub fn auth_error() -> Self {
        Self::new(ScriptBody::Error {
            kind: ErrorKind::Auth,
            status: 401,
        })
    }

    /// HTTP 400 "context too long" in the protocol's own phrasing (OpenAI
    /// `context_length_exceeded`, Anthropic "prompt is too long").
    pub fn context_length_exceeded() -> Self {
        Self::new(ScriptBody::Error {
            kind: ErrorKind::ContextLength,
            status: 400,
        })
    }

    /// Any status with this exact body (JSON content type when it parses as JSON).
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        let body = body.into();
        let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
            "application/json"
        } else {
            "text/plain"
        };
        Self::raw_with_content_type(status, content_type, body)
    }

    /// A raw JSON body with this status, for off-spec responses.
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Self::raw_with_content_type(status, "application/json", body)
    }

    /// A raw SSE body (status 200, `text/event-stream`), for off-spec streams.
    pub fn raw_stream(body: impl Into<String>) -> Self {
        Self::raw_with_content_type(200, "text/event-stream", body)
    }

    /// A raw body with any status and content type.
    pub fn raw_with_content_type(
        status: u16,
        content_type: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        Self::new(ScriptBody::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// Waits this long (tokio time) before answering.
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Holds the answer until `n` requests answered by held answers (this
    /// one's included) have arrived, all of them waiting meanwhile: proof
    /// that their callers work side by side. Held answers form groups of
    /// `n` in the order their requests arrive. Answers HTTP 500 saying so
    /// if the group does not fill within 10 seconds (real time).
    #[must_use]
    pub fn held_until(mut self, n: usize) -> Self {
        self.held_until = Some(n);
        self
    }

    /// Adds a response header.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Reports this usage (input, output tokens).
    #[must_use]
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some((input_tokens, output_tokens));
        self
    }

    /// Reports no usage at all (off-spec servers).
    #[must_use]
    pub fn without_usage(mut self) -> Self {
        self.usage = None;
        self
    }

    /// Reports this model instead of echoing the requested one.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sends this finish/stop reason (`None`: omit it) instead of the natural one.
    #[must_use]
    pub fn with_finish_reason(mut self, reason: Option<&str>) -> Self {
        self.finish_reason = Some(reason.map(str::to_owned));
        self
    }

    /// Streams the body in pieces of this many bytes (cutting lines and
    /// characters anywhere) instead of one piece per event.
    #[must_use]
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = Some(bytes.max(1));
        self
    }

    /// Waits this long (tokio time) between streamed pieces.
    #[must_use]
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// OpenAI protocol only: sends tool-call arguments as a JSON object rather
    /// than a JSON-encoded string (as some local servers do).
    #[must_use]
    pub fn with_arguments_as_object(mut self) -> Self {
        self.arguments_as_object = true;
        self
    }
}
