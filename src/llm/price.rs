//! What model calls cost: [`Cost`], an amount in US dollars kept exactly, and
//! [`Price`], a model's price per million tokens, the table of which `rlm.toml`'s
//! `[prices]` holds. One table serves `--max-cost` and `rlm eval`'s cost columns.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Add;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Nanodollars in a dollar: the unit a [`Cost`] counts in, fine enough for a call of a
/// few tokens of the cheapest model and wide enough for 18 billion dollars.
const NANOS_PER_USD: f64 = 1e9;

/// An amount in US dollars, counted in whole nanodollars so that costs add up exactly
/// from many threads (a run's ledger keeps them in an atomic integer) and compare as
/// equal. It reads and writes as a plain number of dollars in JSON.
///
/// ```
/// use rlm_registry::llm::Cost;
///
/// let cost = Cost::from_usd(0.25)?;
/// assert_eq!(cost.usd(), 0.25);
/// assert_eq!((cost + cost).to_string(), "$0.5000");
/// assert!(Cost::from_usd(-1.0).is_err() && Cost::from_usd(f64::NAN).is_err());
/// assert_eq!(serde_json::to_string(&cost)?, "0.25");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost {
    nanos: u64,
}

impl Cost {
    /// Nothing.
    pub const ZERO: Cost = Cost { nanos: 0 };

    /// `usd` dollars; a negative, infinite or NaN amount is refused with what it was.
    pub fn from_usd(usd: f64) -> Result<Cost, String> {
        if !usd.is_finite() || usd < 0.0 {
            return Err(format!(
                "{usd} is not an amount of dollars (a number ≥ 0 is needed)"
            ));
        }
        // Saturates past u64::MAX nanodollars, which no budget reaches.
        Ok(Cost {
            nanos: (usd * NANOS_PER_USD).round() as u64,
        })
    }

    /// Whole nanodollars.
    pub fn from_nanos(nanos: u64) -> Cost {
        Cost { nanos }
    }

    /// In nanodollars.
    pub fn nanos(self) -> u64 {
        self.nanos
    }

    /// In dollars.
    pub fn usd(self) -> f64 {
        self.nanos as f64 / NANOS_PER_USD
    }

    /// `self - other`, or nothing when `other` is more.
    pub fn saturating_sub(self, other: Cost) -> Cost {
        Cost::from_nanos(self.nanos.saturating_sub(other.nanos))
    }
}

impl Add for Cost {
    type Output = Cost;

    fn add(self, other: Cost) -> Cost {
        Cost::from_nanos(self.nanos.saturating_add(other.nanos))
    }
}

/// Dollars with four decimals (`$0.0012`), enough to tell one cheap call from another.
impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${:.4}", self.usd())
    }
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.usd())
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Cost, D::Error> {
        Cost::from_usd(f64::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// A model's price in US dollars per million tokens, as providers list it.
///
/// ```
/// use rlm_registry::llm::Price;
///
/// let price = Price::new(0.15, 0.6)?;
/// assert_eq!(price.cost(1_000_000, 500_000).usd(), 0.45);
/// assert!(Price::new(-0.15, 0.6).is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Dollars per million prompt tokens.
    pub input: f64,
    /// Dollars per million completion tokens (thinking included).
    pub output: f64,
}

impl Price {
    /// `input` and `output` dollars per million tokens, each a number ≥ 0.
    pub fn new(input: f64, output: f64) -> Result<Price, String> {
        for (name, value) in [("input", input), ("output", output)] {
            Cost::from_usd(value).map_err(|e| format!("`{name}`: {e}"))?;
        }
        Ok(Price { input, output })
    }

    /// What `prompt_tokens` in and `completion_tokens` out cost.
    pub fn cost(&self, prompt_tokens: u64, completion_tokens: u64) -> Cost {
        let usd =
            (prompt_tokens as f64 * self.input + completion_tokens as f64 * self.output) / 1e6;
        // Past what a dollar amount can hold, the most there is: never less than the truth.
        Cost::from_usd(usd).unwrap_or(Cost::from_nanos(u64::MAX))
    }
}

/// Prices by model name, as `rlm.toml`'s `[prices."<model>"]` tables give them.
///
/// ```
/// use rlm_registry::llm::{Price, PriceTable};
///
/// let table = PriceTable::default().with("gpt-4o-mini", Price::new(0.15, 0.6)?);
/// assert_eq!(table.get("gpt-4o-mini"), Some(Price::new(0.15, 0.6)?));
/// assert_eq!(table.get("other"), None);
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl PriceTable {
    /// This table with `model`'s price set to `price`.
    pub fn with(mut self, model: impl Into<String>, price: Price) -> PriceTable {
        self.prices.insert(model.into(), price);
        self
    }

    /// The price of `model`, if the table has it.
    pub fn get(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied()
    }

    /// Whether the table lists no model.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }
}

/// What an answered call cost this run: nothing known for a cached answer (an earlier
/// run paid for it); else the server's reported cost, or failing that the tokens at
/// `price`; `None` when neither is known.
///
/// ```
/// use rlm_registry::llm::{Completion, Cost, Price, call_cost};
///
/// let price = Price::new(1.0, 2.0)?;
/// let answer = Completion::new("4").with_tokens(1_000, 500);
/// assert_eq!(call_cost(&answer, Some(price)), Some(Cost::from_usd(0.002)?));
/// assert_eq!(call_cost(&answer, None), None);
/// # Ok::<(), String>(())
/// ```
pub fn call_cost(completion: &super::Completion, price: Option<Price>) -> Option<Cost> {
    if completion.cached {
        return None;
    }
    completion.cost.or_else(|| {
        price.map(|price| price.cost(completion.prompt_tokens, completion.completion_tokens))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_read_back_from_json_and_refuse_negative_amounts() {
        let cost: Cost = serde_json::from_str("0.000123").unwrap();
        assert_eq!(cost.nanos(), 123_000);
        assert!(serde_json::from_str::<Cost>("-1").is_err());
        assert!(serde_json::from_str::<Cost>("\"x\"").is_err());
    }

    #[test]
    fn a_cost_past_any_amount_is_the_largest_not_nothing() {
        let price = Price::new(f64::MAX, 0.0).unwrap();
        assert_eq!(price.cost(u64::MAX, 0), Cost::from_nanos(u64::MAX));
    }

    #[test]
    fn a_price_with_an_infinite_side_is_refused_naming_it() {
        let error = Price::new(0.1, f64::INFINITY).unwrap_err();
        assert!(error.starts_with("`output`"), "{error}");
    }
}
