//! Helpers of the tool tests (`tests/it/tool_*.rs`).

use rlm_registry::Registry;

/// `twice`, which is a tool, and `map_it`, which cannot be one: it takes a callback.
pub fn registry_with_callback() -> Registry {
    Registry::from_map([
        (
            "map_it",
            "--- Maps.\n---@param f fun(x: any): any The mapper\n---@return any\nfunction map_it(f) return f end",
        ),
        (
            "twice",
            "--- Doubles.\n---@param x number\n---@return number\nfunction twice(x) return 2 * x end",
        ),
    ])
    .unwrap()
}
