//! The opt-in `store` provider: values shared across one run's agent tree (a parent
//! sets, a child reads), as JSON, with a limit on their total size.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{Effect, HostFunction, Provider};

/// The prefix of the handles `store_ref` gives out.
const REF_PREFIX: &str = "store:";

/// Values shared by every agent of a run. Cloning shares the same values.
///
/// ```
/// use rlm_registry::providers::Store;
///
/// let store = Store::new(1024);
/// store.set("k", serde_json::json!([1, 2]))?;
/// assert_eq!(store.clone().get("store:k"), Some(serde_json::json!([1, 2])));
/// assert!(store.set("big", serde_json::json!("x".repeat(2000))).is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug)]
pub struct Store {
    values: Arc<Mutex<BTreeMap<String, Value>>>,
    max_bytes: usize,
}

impl Store {
    /// An empty store holding at most `max_bytes` of JSON (keys included).
    pub fn new(max_bytes: usize) -> Store {
        Store {
            values: Arc::new(Mutex::new(BTreeMap::new())),
            max_bytes,
        }
    }

    fn values(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Value>> {
        self.values.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets `key` (a key or a `store_ref` handle) to `value`; `null` removes it. Refused,
    /// changing nothing, when the store would exceed its size limit.
    pub fn set(&self, key: &str, value: Value) -> Result<(), String> {
        let key = plain_key(key)?;
        let mut values = self.values();
        if value.is_null() {
            values.remove(key);
            return Ok(());
        }
        let others: usize = values
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .map(|(k, v)| size_of(k, v))
            .sum();
        let total = others + size_of(key, &value);
        if total > self.max_bytes {
            return Err(format!(
                "the store would hold {total} bytes, over its limit of {} bytes; store less, or remove values with store_set(key, nil)",
                self.max_bytes
            ));
        }
        values.insert(key.to_string(), value);
        Ok(())
    }

    /// The value of `key` (a key or a handle), if set.
    pub fn get(&self, key: &str) -> Option<Value> {
        let key = plain_key(key).ok()?;
        self.values().get(key).cloned()
    }

    /// A handle for `key` to hand to a child agent; `key` must be set.
    pub fn reference(&self, key: &str) -> Result<String, String> {
        let key = plain_key(key)?;
        if self.values().contains_key(key) {
            Ok(format!("{REF_PREFIX}{key}"))
        } else {
            Err(format!("no value stored under `{key}`"))
        }
    }
}

fn plain_key(key: &str) -> Result<&str, String> {
    let key = key.strip_prefix(REF_PREFIX).unwrap_or(key);
    if key.is_empty() {
        Err("the key must not be empty".to_string())
    } else {
        Ok(key)
    }
}

fn size_of(key: &str, value: &Value) -> usize {
    key.len() + serde_json::to_string(value).map_or(0, |s| s.len())
}

/// The `store` provider over one [`Store`]: give every agent of a run the same one.
///
/// ```
/// use rlm_registry::providers::{Providers, StoreProvider};
///
/// let mut providers = Providers::builtin();
/// providers.register(StoreProvider::new(1 << 20))?;
/// assert!(providers.get("store_ref").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct StoreProvider {
    store: Store,
}

impl StoreProvider {
    /// A provider over a new store of at most `max_bytes`.
    pub fn new(max_bytes: usize) -> StoreProvider {
        StoreProvider::over(Store::new(max_bytes))
    }

    /// A provider over an existing store (shared with the host).
    pub fn over(store: Store) -> StoreProvider {
        StoreProvider { store }
    }

    /// The store it serves.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl Provider for StoreProvider {
    fn name(&self) -> &str {
        "store"
    }

    fn description(&self) -> &str {
        "Values shared by every agent of a run: a parent stores, a child reads."
    }

    fn functions(&self) -> Vec<HostFunction> {
        let (set, get, reference) = (self.store.clone(), self.store.clone(), self.store.clone());
        vec![
            HostFunction::typed(
                "store_set",
                "--- Stores a value under a key, shared with every agent of this run (child agents read it with store_get). nil removes the key.\n---@param key string The key (or a handle from store_ref)\n---@param value any A value JSON can carry: string, number, boolean, table of those, or nil",
                move |_, (key, value): (String, Value)| set.set(&key, value),
            )
            .effect(Effect::Memory),
            HostFunction::typed(
                "store_get",
                "--- Reads a value stored with store_set, by key or by a handle from store_ref.\n---@param key string The key or handle\n---@return any value The value, or nil if none is stored",
                move |_, (key,): (String,)| Ok::<_, String>(get.get(&key)),
            )
            .effect(Effect::Memory),
            HostFunction::typed(
                "store_ref",
                "--- Returns a handle to a stored value, to pass to a child agent (e.g. in rlm_query's prompt) instead of the value itself.\n---@param key string The key of a stored value\n---@return string handle The handle; store_get(handle) reads the value",
                move |_, (key,): (String,)| reference.reference(&key),
            )
            .effect(Effect::Memory),
        ]
    }
}
