//! Model routing for chat turns: the person's message is classified by the
//! `[routing]` rules ([`cairn_core::routing`]) and a route for the hint
//! answers the turn with its own model, and provider when it names one.
//! The binary builds the routes' providers (behind the same cost guard as
//! the main one); this module only picks.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_core::routing::Classifier;
use cairn_llm::LlmProvider;

/// A model that answers the turns of one hint.
#[derive(Debug, Clone)]
pub struct Route {
    /// The hint it serves.
    pub hint: String,
    /// The provider that answers (the main one unless the route names another).
    pub provider: Arc<dyn LlmProvider>,
    /// The model asked.
    pub model: String,
}

/// The rules and the routes.
#[derive(Debug, Clone, Default)]
pub struct ModelRouter {
    classifier: Classifier,
    routes: HashMap<String, Route>,
}

impl ModelRouter {
    /// A router over compiled rules and the routes built for their hints.
    pub fn new(classifier: Classifier, routes: Vec<Route>) -> Self {
        Self {
            classifier,
            routes: routes.into_iter().map(|r| (r.hint.clone(), r)).collect(),
        }
    }

    /// The route for `message`: the first matching rule's hint, if a route
    /// serves it; `None` means the default model.
    pub fn route(&self, message: &str) -> Option<&Route> {
        self.routes.get(self.classifier.classify(message)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::routing::{RouteSpec, RoutingConfig, RuleSpec};

    #[test]
    fn a_hint_without_a_route_goes_to_the_default() {
        let config = RoutingConfig {
            rules: vec![
                RuleSpec {
                    hint: "code".into(),
                    keywords: vec!["rust".into()],
                    ..RuleSpec::default()
                },
                RuleSpec {
                    hint: "math".into(),
                    keywords: vec!["prove".into()],
                    ..RuleSpec::default()
                },
            ],
            models: [(
                "code".to_string(),
                RouteSpec {
                    provider: None,
                    model: "coder".into(),
                },
            )]
            .into(),
        };
        let provider: Arc<dyn LlmProvider> = cairn_llm::build_provider(
            &cairn_llm::ProviderSettings::new(cairn_llm::ProviderKind::OpenAiCompatible, "main")
                .with_base_url("http://127.0.0.1:9/v1")
                .with_max_retries(0),
        )
        .unwrap();
        let router = ModelRouter::new(
            config.classifier().unwrap(),
            vec![Route {
                hint: "code".into(),
                provider,
                model: "coder".into(),
            }],
        );
        assert_eq!(router.route("help with rust").unwrap().model, "coder");
        assert!(router.route("prove it").is_none());
        assert!(router.route("hello").is_none());
    }
}
