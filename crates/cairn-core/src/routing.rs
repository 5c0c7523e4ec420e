//! Query classification for model routing (`[routing]` in config.toml).
//!
//! Rules are tried by descending `priority` (ties in the order written);
//! the first that matches a message gives its `hint`, and a route for that
//! hint (`[routing.models.<hint>]`) names the model, and optionally the
//! provider, that answers the turn. A message matching no rule, or whose
//! hint has no route, goes to the default model.
//!
//! A rule matches when the message's length in characters is within
//! `min_length..=max_length` (each optional) and, if the rule lists any
//! `keywords` or `patterns`, one of them is found: keywords as whole words
//! or phrases in any case ("prove" finds "Prove it" but not "improve"),
//! patterns as case-sensitive regular expressions. A rule with neither
//! matches on length alone.

use std::collections::BTreeMap;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// `[routing]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// `[[routing.rules]]`.
    pub rules: Vec<RuleSpec>,
    /// `[routing.models.<hint>]`.
    pub models: BTreeMap<String, RouteSpec>,
}

/// One `[[routing.rules]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuleSpec {
    /// The hint this rule gives (the key of a route).
    pub hint: String,
    /// Words or phrases found in any case, as whole words.
    pub keywords: Vec<String>,
    /// Case-sensitive regular expressions.
    pub patterns: Vec<String>,
    /// Fewest characters of a message this rule applies to.
    pub min_length: Option<usize>,
    /// Most characters of a message this rule applies to.
    pub max_length: Option<usize>,
    /// Higher is tried first.
    pub priority: i64,
}

/// One `[routing.models.<hint>]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// The provider, as named in `llm.provider` or `[[llm.fallbacks]]`;
    /// the main provider when absent.
    #[serde(default)]
    pub provider: Option<String>,
    /// The model that answers.
    pub model: String,
}

/// A rule ready to match.
#[derive(Debug, Clone)]
struct Rule {
    hint: String,
    keywords: Vec<String>,
    patterns: Vec<Regex>,
    min_length: Option<usize>,
    max_length: Option<usize>,
}

/// The rules, compiled and in the order they are tried.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    rules: Vec<Rule>,
}

impl RoutingConfig {
    /// Compiles the rules; every problem is reported with its path
    /// (`routing.rules[1].patterns[0]: …`).
    pub fn classifier(&self) -> Result<Classifier, Vec<String>> {
        let mut problems = Vec::new();
        let mut rules = Vec::new();
        for (i, spec) in self.rules.iter().enumerate() {
            let at = format!("routing.rules[{i}]");
            if spec.hint.trim().is_empty() {
                problems.push(format!("{at}.hint: must not be empty"));
            }
            if let (Some(min), Some(max)) = (spec.min_length, spec.max_length)
                && min > max
            {
                problems.push(format!(
                    "{at}: min_length ({min}) is greater than max_length ({max})"
                ));
            }
            let mut patterns = Vec::new();
            for (j, pattern) in spec.patterns.iter().enumerate() {
                match regex::RegexBuilder::new(pattern)
                    .size_limit(1 << 20)
                    .build()
                {
                    Ok(re) => patterns.push(re),
                    Err(e) => problems.push(format!("{at}.patterns[{j}] {pattern:?}: {e}")),
                }
            }
            for (j, keyword) in spec.keywords.iter().enumerate() {
                if keyword.trim().is_empty() {
                    problems.push(format!("{at}.keywords[{j}]: must not be empty"));
                }
            }
            rules.push((
                spec.priority,
                i,
                Rule {
                    hint: spec.hint.trim().to_string(),
                    keywords: spec
                        .keywords
                        .iter()
                        .map(|k| k.trim().to_lowercase())
                        .collect(),
                    patterns,
                    min_length: spec.min_length,
                    max_length: spec.max_length,
                },
            ));
        }
        for (hint, route) in &self.models {
            if route.model.trim().is_empty() {
                problems.push(format!("routing.models.{hint}.model: must not be empty"));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        // Descending priority; the order written breaks ties.
        rules.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(Classifier {
            rules: rules.into_iter().map(|(_, _, rule)| rule).collect(),
        })
    }

    /// Hints some rule gives that no route serves (such messages go to the
    /// default model), each once, in rule order.
    pub fn unrouted_hints(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for rule in &self.rules {
            let hint = rule.hint.trim();
            if !self.models.contains_key(hint) && !out.contains(&hint) {
                out.push(hint);
            }
        }
        out
    }
}

impl Classifier {
    /// The hint of the first rule `message` matches.
    pub fn classify(&self, message: &str) -> Option<&str> {
        let length = message.chars().count();
        let lower = message.to_lowercase();
        self.rules
            .iter()
            .find(|rule| rule.matches(message, &lower, length))
            .map(|rule| rule.hint.as_str())
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

impl Rule {
    fn matches(&self, message: &str, lower: &str, length: usize) -> bool {
        if self.min_length.is_some_and(|min| length < min)
            || self.max_length.is_some_and(|max| length > max)
        {
            return false;
        }
        if self.keywords.is_empty() && self.patterns.is_empty() {
            return true;
        }
        self.keywords.iter().any(|k| contains_words(lower, k))
            || self.patterns.iter().any(|p| p.is_match(message))
    }
}

/// Whether `needle` occurs in `haystack` with no letter or digit right before or after it.
fn contains_words(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    haystack.match_indices(needle).any(|(at, found)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + found.len()..].chars().next();
        // A needle that itself starts or ends with a non-word character
        // (`c++`, `#rust`) needs no boundary on that side.
        let edge_start = needle.chars().next().is_some_and(char::is_alphanumeric);
        let edge_end = needle
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
        let joined_before = edge_start && word(before);
        let joined_after = edge_end && word(after);
        !joined_before && !joined_after
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(rules: Vec<RuleSpec>) -> RoutingConfig {
        RoutingConfig {
            rules,
            models: BTreeMap::new(),
        }
    }

    fn rule(hint: &str, priority: i64) -> RuleSpec {
        RuleSpec {
            hint: hint.into(),
            priority,
            ..RuleSpec::default()
        }
    }

    #[test]
    fn keywords_are_whole_words_in_any_case() {
        let c = config(vec![RuleSpec {
            keywords: vec!["prove".into(), "Step by step".into(), "c++".into()],
            ..rule("reasoning", 0)
        }])
        .classifier()
        .unwrap();
        assert_eq!(c.classify("Prove that 2 is prime"), Some("reasoning"));
        assert_eq!(c.classify("do it STEP BY STEP please"), Some("reasoning"));
        assert_eq!(c.classify("modern C++ question"), Some("reasoning"));
        assert_eq!(c.classify("improve my essay"), None);
        assert_eq!(c.classify("proven results"), None);
    }

    #[test]
    fn patterns_are_case_sensitive_regexes() {
        let c = config(vec![RuleSpec {
            patterns: vec![r"```|\bSELECT\b".into()],
            ..rule("code", 0)
        }])
        .classifier()
        .unwrap();
        assert_eq!(c.classify("SELECT * FROM t"), Some("code"));
        assert_eq!(c.classify("select * from t"), None);
        assert_eq!(c.classify("look: ```rust"), Some("code"));
    }

    #[test]
    fn lengths_bound_rules_and_priority_orders_them() {
        let c = config(vec![
            RuleSpec {
                keywords: vec!["prove".into()],
                min_length: Some(20),
                ..rule("reasoning", 10)
            },
            RuleSpec {
                max_length: Some(10),
                ..rule("quick", 1)
            },
            RuleSpec {
                keywords: vec!["prove".into()],
                ..rule("later", 1)
            },
        ])
        .classifier()
        .unwrap();
        assert_eq!(
            c.classify("prove that the sum of two even numbers is even"),
            Some("reasoning")
        );
        // Too short for the first rule; the length-only rule is next.
        assert_eq!(c.classify("prove it"), Some("quick"));
        assert_eq!(c.classify("please prove it"), Some("later"));
        assert_eq!(c.classify("a message of some length"), None);
        // Characters, not bytes.
        assert_eq!(c.classify("éééééééééé"), Some("quick"));
    }

    #[test]
    fn problems_name_their_path() {
        let mut cfg = config(vec![
            RuleSpec {
                patterns: vec!["ok".into(), "(".into()],
                min_length: Some(5),
                max_length: Some(2),
                ..rule(" ", 0)
            },
            rule("code", 0),
        ]);
        cfg.models.insert(
            "code".into(),
            RouteSpec {
                provider: None,
                model: "".into(),
            },
        );
        let problems = cfg.classifier().unwrap_err();
        assert!(
            problems[0].starts_with("routing.rules[0].hint"),
            "{problems:?}"
        );
        assert!(problems[1].contains("min_length (5) is greater than max_length (2)"));
        assert!(problems[2].starts_with("routing.rules[0].patterns[1] \"(\""));
        assert!(problems[3].starts_with("routing.models.code.model"));
        assert_eq!(cfg.unrouted_hints(), vec![""]);
    }

    #[test]
    fn the_seed_shape_parses_from_toml() {
        let cfg: RoutingConfig = toml::from_str(
            r#"
            [[rules]]
            hint = "reasoning"
            keywords = ["prove", "step by step"]
            min_length = 40
            priority = 10

            [models.reasoning]
            provider = "anthropic"
            model = "claude-sonnet-4-5"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.rules[0].min_length, Some(40));
        assert_eq!(
            cfg.models["reasoning"].provider.as_deref(),
            Some("anthropic")
        );
        assert!(cfg.unrouted_hints().is_empty());
        assert!(
            toml::from_str::<RoutingConfig>("[[rules]]\nhint = \"x\"\nkeyword = []\n").is_err()
        );
    }
}
