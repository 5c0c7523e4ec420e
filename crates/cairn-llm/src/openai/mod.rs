//! Client for OpenAI-compatible chat completions (`POST {base}/chat/completions`).
//!
//! Works with OpenAI, OpenRouter, Ollama, vLLM, llama.cpp server and LM Studio;
//! parsing tolerates their deviations (null content, missing usage or
//! finish reason, arguments as string or object, unknown fields).

mod stream;
mod wire;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::Value;

use crate::client::{ClientCore, RawResponse};
use crate::error::LlmError;
use crate::http::Wire;
use crate::http_provider::{HttpProvider, ParseProblem, Protocol};
use crate::models::{ModelPage, models_in};
use crate::types::ChatRequest;
use stream::OpenAiDecoder;
use wire::{MaxTokensField, parse_completion, request_body};

/// An OpenAI-compatible chat-completions client (no retries; see `build_provider`).
pub type OpenAiClient = HttpProvider<OpenAiProtocol>;

/// The OpenAI chat-completions wire protocol, as used by [`OpenAiClient`].
#[derive(Debug, Clone)]
pub struct OpenAiProtocol {
    max_tokens_field: MaxTokensField,
}

impl Protocol for OpenAiProtocol {
    type Decoder = OpenAiDecoder;

    fn endpoint(base: &str) -> String {
        format!("{base}/chat/completions")
    }

    fn models_endpoint(base: &str) -> String {
        format!("{base}/models")
    }

    /// One page: OpenAI-compatible servers list every model at once.
    fn models_page_url(models_url: &str, _after: Option<&str>) -> String {
        models_url.to_owned()
    }

    /// `{"data": [{"id": …}, …]}`.
    fn parse_models(value: &Value) -> Result<ModelPage, &'static str> {
        Ok(ModelPage {
            models: models_in(value, None)?,
            next: None,
        })
    }

    fn new(core: &ClientCore) -> Self {
        let official = reqwest::Url::parse(&core.base_url)
            .ok()
            .and_then(|u| u.host_str().map(|h| h == "api.openai.com"))
            .unwrap_or(false);
        Self {
            max_tokens_field: if official {
                MaxTokensField::MaxCompletionTokens
            } else {
                MaxTokensField::MaxTokens
            },
        }
    }

    fn headers(&self, core: &ClientCore) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = core.api_key() {
            headers.insert(AUTHORIZATION, core.secret_header(&format!("Bearer {key}"))?);
        }
        Ok(headers)
    }

    fn body(&self, core: &ClientCore, request: &ChatRequest, stream: bool) -> Value {
        request_body(
            request,
            core.model_for(request),
            core.max_tokens,
            self.max_tokens_field,
            stream,
        )
    }

    fn parse(value: &Value) -> Result<RawResponse, ParseProblem> {
        parse_completion(value)
    }

    fn decoder(wire: Wire) -> OpenAiDecoder {
        OpenAiDecoder::new(wire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelInfo;
    use serde_json::json;

    #[test]
    fn model_lists_need_a_data_array_and_skip_entries_without_id() {
        let page = OpenAiProtocol::parse_models(
            &json!({"data": [{"id": "a"}, {"object": "model"}, {"id": " "}]}),
        )
        .unwrap();
        assert_eq!(page.models, [ModelInfo::new("a")]);
        assert_eq!(page.next, None);
        assert_eq!(
            OpenAiProtocol::parse_models(&json!({"models": []})).unwrap_err(),
            "has no `data` array"
        );
    }
}
