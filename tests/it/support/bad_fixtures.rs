//! The bad convention fixtures, `tests/fixtures/bad/E00x_*.lua`, each beside the report
//! its load renders, `E00x_*.stderr` (selene style): the cases of `tests/it/conventions.rs`
//! and of `rlm check` in `tests/it/cli.rs`. Adding a `.lua` and its `.stderr` adds a case.
//!
//! A fixture is loaded with `Registry::from_paths` under its relative path, so the
//! rendering names it as a user would (`tests/fixtures/bad/E002_missing_doc.lua`). E011 is
//! about `Registry::from_map` keys, so a fixture whose first line is
//! `-- from_map key: NAME` is loaded with `from_map([(NAME, whole file)])` instead.
//!
//! With `RLM_BLESS=1` in the environment, [`Case::check`] rewrites the `.stderr` file
//! from the current rendering instead of comparing.

use std::path::{Path, PathBuf};

use rlm_registry::{LoadError, Registry};

/// The directory of the bad fixtures, relative to the crate root (where tests run).
pub const DIR: &str = "tests/fixtures/bad";

const MAP_KEY_PREFIX: &str = "-- from_map key: ";

/// One bad fixture.
pub struct Case {
    /// `tests/fixtures/bad/E002_missing_doc.lua`
    pub lua: PathBuf,
    /// `tests/fixtures/bad/E002_missing_doc.stderr`
    pub stderr: PathBuf,
    /// The `from_map` key, for fixtures loaded with `from_map`.
    pub map_key: Option<String>,
}

/// Every `.lua` file of [`DIR`], in name order.
pub fn cases() -> Vec<Case> {
    let mut lua: Vec<PathBuf> = std::fs::read_dir(DIR)
        .expect("tests run in the crate root")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "lua"))
        .collect();
    lua.sort();
    lua.into_iter().map(Case::new).collect()
}

/// Every file name of [`DIR`], in name order.
pub fn file_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(DIR)
        .expect("tests run in the crate root")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

impl Case {
    fn new(lua: PathBuf) -> Self {
        let stderr = lua.with_extension("stderr");
        let map_key = std::fs::read(&lua).ok().and_then(|bytes| {
            let text = String::from_utf8_lossy(&bytes);
            let first = text.lines().next()?;
            Some(first.strip_prefix(MAP_KEY_PREFIX)?.trim().to_string())
        });
        Case {
            lua,
            stderr,
            map_key,
        }
    }

    /// `E002`: the code the file name starts with.
    pub fn code(&self) -> &str {
        let name = self.lua.file_name().unwrap().to_str().unwrap();
        name.split('_').next().unwrap()
    }

    /// The failed load of the fixture.
    pub fn load_error(&self) -> LoadError {
        let loaded = match &self.map_key {
            Some(key) => {
                let text = std::fs::read_to_string(&self.lua).unwrap();
                Registry::from_map([(key.as_str(), text.as_str())])
            }
            None => Registry::from_paths([&self.lua]),
        };
        match loaded {
            Ok(_) => panic!("{} must fail to load", self.lua.display()),
            Err(error) => error,
        }
    }

    /// The whole report, as `rlm check` prints it: the rendering and a final newline.
    pub fn rendered(&self) -> String {
        format!("{}\n", self.load_error().render(false))
    }

    /// Compares `actual` with the `.stderr` file (or rewrites it under `RLM_BLESS=1`);
    /// a mismatch is returned as a message naming the file, both texts and the fix.
    pub fn check(&self, actual: &str) -> Result<(), String> {
        if blessing() {
            std::fs::write(&self.stderr, actual).unwrap();
            return Ok(());
        }
        let expected = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        if expected == actual {
            return Ok(());
        }
        Err(format!(
            "{} differs from the rendering of {} (RLM_BLESS=1 rewrites it):\n\
             --- expected\n{expected}\n--- actual\n{actual}",
            self.stderr.display(),
            self.lua.display(),
        ))
    }
}

/// `RLM_BLESS=1`: rewrite the expected files instead of comparing.
pub fn blessing() -> bool {
    std::env::var_os("RLM_BLESS").is_some_and(|v| v == "1")
}

/// The path of `name` in [`DIR`].
pub fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}
