//! The registry compiled in from this crate's `lua/` directories by `build.rs`.

use crate::Registry;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/rlm_registry.rs"));
}

impl Registry {
    /// The registry baked in at compile time from this crate's `lua/` directories (one
    /// cargo feature per directory: `text`, `chunking`). A `static`: no file I/O and no
    /// parsing at run time, and the same content as `from_paths` on the same directories,
    /// with a byte-identical [`system_prompt`](Registry::system_prompt).
    ///
    /// ```
    /// let registry = rlm_registry::Registry::baked();
    /// # #[cfg(feature = "text")]
    /// assert!(registry.get("grep").is_some());
    /// assert!(registry.system_prompt().starts_with("## Registry functions"));
    /// ```
    pub fn baked() -> &'static Registry {
        &generated::REGISTRY
    }
}
