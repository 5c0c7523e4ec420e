//! What a provider says about the models it serves (`GET /v1/models`).

use serde::Serialize;

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

/// Most pages followed in one listing (a server that always says "more"
/// cannot keep a caller busy).
pub(crate) const MAX_MODEL_PAGES: usize = 20;
