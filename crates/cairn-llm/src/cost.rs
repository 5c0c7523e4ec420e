//! Per-model prices and per-call cost, in integer micro-dollars (no floats).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// Micro-dollars in one dollar.
pub const MICROS_PER_DOLLAR: u64 = 1_000_000;

/// The price of one model, in micro-dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Micro-dollars per million prompt tokens.
    pub input_micros_per_mtok: u64,
    /// Micro-dollars per million generated tokens.
    pub output_micros_per_mtok: u64,
}

impl ModelPrice {
    /// A price from micro-dollars per million input and output tokens.
    pub const fn new(input_micros_per_mtok: u64, output_micros_per_mtok: u64) -> Self {
        Self {
            input_micros_per_mtok,
            output_micros_per_mtok,
        }
    }

    /// The cost of `usage`, rounded up to the next micro-dollar so that many
    /// small calls never add up to less than they cost.
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        // Each product fits in u128; only the sum can overflow.
        let scaled = (u128::from(usage.input_tokens) * u128::from(self.input_micros_per_mtok))
            .saturating_add(
                u128::from(usage.output_tokens) * u128::from(self.output_micros_per_mtok),
            );
        u64::try_from(scaled.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}

/// Model name to price. Lookup is exact first, then the longest known prefix
/// (so `gpt-4o-2024-08-06` uses `gpt-4o`), also after dropping a
/// `vendor/` prefix as OpenRouter writes it (`openai/gpt-4o`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
}

/// Built-in prices (USD per million tokens, as micro-dollars), early 2026 list prices.
const BUILTIN: &[(&str, u64, u64)] = &[
    ("gpt-4o", 2_500_000, 10_000_000),
    ("gpt-4o-mini", 150_000, 600_000),
    ("gpt-4.1", 2_000_000, 8_000_000),
    ("gpt-4.1-mini", 400_000, 1_600_000),
    ("gpt-4.1-nano", 100_000, 400_000),
    ("o3-mini", 1_100_000, 4_400_000),
    ("o4-mini", 1_100_000, 4_400_000),
    ("claude-3-haiku", 250_000, 1_250_000),
    ("claude-3-5-haiku", 800_000, 4_000_000),
    ("claude-haiku-4-5", 1_000_000, 5_000_000),
    ("claude-3-5-sonnet", 3_000_000, 15_000_000),
    ("claude-3-7-sonnet", 3_000_000, 15_000_000),
    ("claude-sonnet-4", 3_000_000, 15_000_000),
    ("claude-opus-4", 15_000_000, 75_000_000),
    ("claude-opus-4-5", 5_000_000, 25_000_000),
];

impl PriceTable {
    /// A table with no prices (every model costs 0).
    pub fn empty() -> Self {
        Self::default()
    }

    /// The small built-in table of well-known models.
    pub fn builtin() -> Self {
        let mut table = Self::empty();
        for &(model, input, output) in BUILTIN {
            table.insert(model, ModelPrice::new(input, output));
        }
        table
    }

    /// Sets (or replaces) the price of a model.
    pub fn insert(&mut self, model: impl Into<String>, price: ModelPrice) {
        self.prices.insert(model.into(), price);
    }

    /// Builder form of [`PriceTable::insert`].
    #[must_use]
    pub fn with(mut self, model: impl Into<String>, price: ModelPrice) -> Self {
        self.insert(model, price);
        self
    }

    /// Overrides entries of this table with every entry of `other`.
    pub fn merge(&mut self, other: &PriceTable) {
        for (model, price) in &other.prices {
            self.prices.insert(model.clone(), *price);
        }
    }

    /// The price for `model`, if known.
    pub fn lookup(&self, model: &str) -> Option<&ModelPrice> {
        self.lookup_exact_or_prefix(model).or_else(|| {
            let (_, bare) = model.rsplit_once('/')?;
            self.lookup_exact_or_prefix(bare)
        })
    }

    fn lookup_exact_or_prefix(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(price) = self.prices.get(model) {
            return Some(price);
        }
        self.prices
            .iter()
            .filter(|(known, _)| model.starts_with(known.as_str()))
            .max_by_key(|(known, _)| known.len())
            .map(|(_, price)| price)
    }

    /// The cost of `usage` on `model`; 0 (with a debug log) for unknown models.
    pub fn cost_micros(&self, model: &str, usage: &Usage) -> u64 {
        match self.lookup(model) {
            Some(price) => price.cost_micros(usage),
            None => {
                tracing::debug!(model, "no price known for model; counting its cost as 0");
                0
            }
        }
    }

    /// Number of priced models.
    pub fn len(&self) -> usize {
        self.prices.len()
    }

    /// Whether no model is priced.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            estimated: false,
        }
    }

    #[test]
    fn cost_is_integer_and_rounds_up() {
        let price = ModelPrice::new(150_000, 600_000); // $0.15 / $0.60 per M
        assert_eq!(price.cost_micros(&usage(1_000_000, 0)), 150_000);
        assert_eq!(price.cost_micros(&usage(1000, 500)), 150 + 300);
        assert_eq!(price.cost_micros(&usage(1, 0)), 1); // 0.15 micro-dollars rounds up
        assert_eq!(price.cost_micros(&usage(0, 0)), 0);
        let huge = ModelPrice::new(u64::MAX, u64::MAX);
        assert_eq!(huge.cost_micros(&usage(u64::MAX, u64::MAX)), u64::MAX);
    }

    #[test]
    fn lookup_prefers_exact_then_longest_prefix_then_vendor_stripped() {
        let table = PriceTable::builtin();
        let mini = table.lookup("gpt-4o-mini-2024-07-18").unwrap();
        assert_eq!(mini.input_micros_per_mtok, 150_000);
        assert_eq!(
            table
                .lookup("gpt-4o-2024-08-06")
                .unwrap()
                .input_micros_per_mtok,
            2_500_000
        );
        assert_eq!(
            table.lookup("openai/gpt-4o").unwrap().input_micros_per_mtok,
            2_500_000
        );
        assert_eq!(
            table
                .lookup("claude-opus-4-5-20251101")
                .unwrap()
                .input_micros_per_mtok,
            5_000_000
        );
        assert!(table.lookup("llama3:8b").is_none());
        assert_eq!(table.cost_micros("llama3:8b", &usage(10, 10)), 0);
    }

    #[test]
    fn overrides_replace_builtin_prices() {
        let mut table = PriceTable::builtin();
        table.merge(&PriceTable::empty().with("gpt-4o", ModelPrice::new(1, 2)));
        assert_eq!(table.lookup("gpt-4o").unwrap(), &ModelPrice::new(1, 2));
        assert!(!table.is_empty());
        let json = serde_json::to_string(&table).unwrap();
        let back: PriceTable = serde_json::from_str(&json).unwrap();
        assert_eq!(back, table);
    }
}
