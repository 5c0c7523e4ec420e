//! What a provider says about the models it serves (`GET /v1/models`).

use serde::Serialize;
use serde_json::Value;

/// One model a provider offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    /// The id a request names (what `/model ID` takes).
    pub id: String,
    /// A name for people, when the provider gives one (Anthropic's `display_name`).
    pub display_name: Option<String>,
}

impl ModelInfo {
    /// A model known by its id only.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            display_name: None,
        }
    }
}

/// One page of a model list, and the cursor of the next page if any.
#[derive(Debug, Default)]
pub(crate) struct ModelPage {
    pub models: Vec<ModelInfo>,
    pub next: Option<String>,
}

/// The models in a list's `data` array (`{"data": [{"id": …}, …]}`, both
/// protocols), with the name for people under `name_key` when the protocol
/// has one; entries without an id are skipped.
pub(crate) fn models_in(
    value: &Value,
    name_key: Option<&str>,
) -> Result<Vec<ModelInfo>, &'static str> {
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or("has no `data` array")?;
    Ok(data
        .iter()
        .filter_map(|m| {
            let id = m.get("id")?.as_str().filter(|id| !id.trim().is_empty())?;
            Some(ModelInfo {
                id: id.to_owned(),
                display_name: name_key
                    .and_then(|key| m.get(key)?.as_str())
                    .map(str::to_owned),
            })
        })
        .collect())
}

/// Most pages followed in one listing (a server that always says "more"
/// cannot keep a caller busy).
pub(crate) const MAX_MODEL_PAGES: usize = 20;
