//! An OpenAI-compatible `/v1/embeddings` client (OpenAI, Ollama, vLLM,
//! llama.cpp and LM Studio all serve it): texts in, vectors out, in order.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use crate::error::LlmError;
use crate::http::Wire;

/// Where and how to compute embeddings.
#[derive(Clone)]
pub struct EmbeddingsSettings {
    /// A name for messages (`openai`, `ollama`, …).
    pub provider: String,
    /// Base URL up to and including `/v1` (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The embedding model.
    pub model: String,
    /// Asked-for vector size (OpenAI's `dimensions`); `None` leaves the model's own.
    pub dimensions: Option<u32>,
    /// Bearer token, if the server needs one.
    pub api_key: Option<SecretString>,
    /// Per-request timeout; `None` sets no client timers (paused-time tests).
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for EmbeddingsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingsSettings")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Most texts sent in one request (servers cap the batch; OpenAI at 2048).
const MAX_BATCH: usize = 256;

/// An embeddings client; cheap to clone.
#[derive(Debug, Clone)]
pub struct EmbeddingsClient {
    wire: Wire,
    http: reqwest::Client,
    endpoint: String,
    model: String,
    dimensions: Option<u32>,
}

impl EmbeddingsClient {
    /// Validates the settings and prepares the HTTP client.
    pub fn new(settings: &EmbeddingsSettings) -> Result<Self, LlmError> {
        let model = settings.model.trim();
        if model.is_empty() {
            return Err(LlmError::config("embeddings model must not be empty"));
        }
        let base = settings.base_url.trim().trim_end_matches('/');
        let url = reqwest::Url::parse(base).map_err(|e| {
            LlmError::config(format!("embeddings base_url is not a valid URL: {e}"))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LlmError::config(format!(
                "embeddings base_url must use http or https, not {:?}",
                url.scheme()
            )));
        }
        let mut builder =
            crate::tls::client_builder().user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")));
        builder = match settings.timeout {
            Some(timeout) => builder.connect_timeout(timeout),
            None => builder.pool_idle_timeout(None),
        };
        let http = builder
            .build()
            .map_err(|e| LlmError::config(format!("cannot build the HTTP client: {e}")))?;
        let api_key = settings
            .api_key
            .as_ref()
            .filter(|k| !k.expose_secret().trim().is_empty())
            .map(|k| SecretString::from(k.expose_secret().trim()));
        Ok(Self {
            wire: Wire {
                provider: settings.provider.clone(),
                timeout: settings.timeout,
                api_key,
            },
            http,
            endpoint: format!("{base}/embeddings"),
            model: model.to_string(),
            dimensions: settings.dimensions,
        })
    }

    /// The model vectors come from (stored with each vector, so a model
    /// change is noticed).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// One vector per text, in the order given.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(MAX_BATCH) {
            out.extend(self.embed_batch(batch).await?);
        }
        Ok(out)
    }

    /// One text's vector.
    pub async fn embed_one(&self, text: &str) -> Result<Vec<f32>, LlmError> {
        self.embed(&[text.to_string()])
            .await?
            .pop()
            .ok_or_else(|| LlmError::bad_response(&self.wire.provider, "no embedding returned"))
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        if let Some(dimensions) = self.dimensions {
            body["dimensions"] = json!(dimensions);
        }
        let mut request = self.http.post(&self.endpoint).json(&body);
        if let Some(key) = &self.wire.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                .map_err(|_| {
                    LlmError::config("api_key contains characters not allowed in a header")
                })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let response = self.wire.send(request).await?;
        if !response.status().is_success() {
            return Err(self.wire.error_from_response(response).await);
        }
        let bytes = self.wire.read_body(response).await?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::bad_response(&self.wire.provider, format!("embeddings are not JSON: {e}"))
        })?;
        parse_embeddings(&value, texts.len())
            .map_err(|message| LlmError::bad_response(&self.wire.provider, message))
    }
}

/// The vectors of an OpenAI-shaped answer (`data[].embedding`, ordered by `index`).
fn parse_embeddings(value: &Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or("no data array in the embeddings answer")?;
    let mut indexed = Vec::with_capacity(data.len());
    for (position, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(position, |i| usize::try_from(i).unwrap_or(usize::MAX));
        let vector = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or("an embeddings item has no embedding array")?
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or("an embedding holds something other than numbers")?;
        indexed.push((index, vector));
    }
    indexed.sort_by_key(|(i, _)| *i);
    if indexed.len() != expected || indexed.iter().enumerate().any(|(n, (i, _))| n != *i) {
        return Err(format!(
            "asked for {expected} embeddings, got {} (indexes do not match)",
            indexed.len()
        ));
    }
    Ok(indexed.into_iter().map(|(_, v)| v).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_put_back_in_index_order() {
        let v = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.5]}
        ]});
        assert_eq!(
            parse_embeddings(&v, 2).unwrap(),
            vec![vec![1.0, 0.5], vec![0.0, 1.0]]
        );
        assert!(parse_embeddings(&v, 3).is_err());
        assert!(parse_embeddings(&json!({"data": [{"embedding": ["x"]}]}), 1).is_err());
    }

    #[test]
    fn debug_hides_the_key() {
        let s = EmbeddingsSettings {
            provider: "openai".into(),
            base_url: "https://api.openai.com/v1".into(),
            model: "text-embedding-3-small".into(),
            dimensions: None,
            api_key: Some(SecretString::from("sk-secret-embed")),
            timeout: None,
        };
        assert!(!format!("{s:?}").contains("sk-secret-embed"));
    }
}
