//! [`ReloadableProvider`]: the provider a running process can replace when
//! its configuration is reloaded (a new model, key, address or timeout),
//! while a turn in progress keeps the one it started with
//! ([`LlmProvider::current`], [`pin`]).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_core::live::Live;

use crate::error::LlmError;
use crate::models::ModelInfo;
use crate::provider::LlmProvider;
use crate::types::{ChatRequest, ChatResponse, ResponseStream};

/// A provider whose inner provider can be replaced; every call goes to the
/// one in force when it is made.
#[derive(Debug, Clone)]
pub struct ReloadableProvider {
    inner: Live<dyn LlmProvider>,
}

impl ReloadableProvider {
    /// Starts with `inner`.
    pub fn new(inner: Arc<dyn LlmProvider>) -> Self {
        Self {
            inner: Live::new(inner),
        }
    }

    /// Puts `inner` in force for every later call.
    pub fn replace(&self, inner: Arc<dyn LlmProvider>) {
        self.inner.set(inner);
    }
}

/// `provider`'s current inner provider when it is reloadable, else itself:
/// what a caller keeps for a whole turn.
pub fn pin(provider: &Arc<dyn LlmProvider>) -> Arc<dyn LlmProvider> {
    provider.current().unwrap_or_else(|| Arc::clone(provider))
}

/// `text` with a `'static` lifetime. The trait lends names by reference and
/// the provider that owns them may be replaced meanwhile, so the few names
/// a process ever configures are kept for its lifetime (once each).
fn intern(text: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = names.get(text) {
        return known;
    }
    let kept: &'static str = Box::leak(text.to_string().into_boxed_str());
    names.insert(kept);
    kept
}

#[async_trait]
impl LlmProvider for ReloadableProvider {
    fn name(&self) -> &str {
        intern(self.inner.get().name())
    }

    fn model(&self) -> &str {
        intern(self.inner.get().model())
    }

    fn context_window(&self) -> Option<u32> {
        self.inner.get().context_window()
    }

    fn vision(&self) -> bool {
        self.inner.get().vision()
    }

    fn current(&self) -> Option<Arc<dyn LlmProvider>> {
        Some(self.inner.get())
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.inner.get().list_models().await
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.inner.get().complete(request).await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        self.inner.get().stream(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{ProviderKind, ProviderSettings, build_provider};

    fn client(model: &str) -> Arc<dyn LlmProvider> {
        build_provider(
            &ProviderSettings::new(ProviderKind::OpenAiCompatible, model)
                .with_base_url("http://127.0.0.1:9/v1"),
        )
        .unwrap()
    }

    #[test]
    fn a_replacement_reaches_later_callers_and_not_a_pinned_one() {
        let reloadable = ReloadableProvider::new(client("one"));
        let shared: Arc<dyn LlmProvider> = Arc::new(reloadable.clone());
        let pinned = pin(&shared);
        reloadable.replace(client("two"));
        assert_eq!(shared.model(), "two");
        assert_eq!(pinned.model(), "one");
        assert_eq!(pin(&shared).model(), "two");
        // A provider that never changes pins to itself.
        let plain = client("plain");
        assert!(Arc::ptr_eq(&pin(&plain), &plain));
    }
}
