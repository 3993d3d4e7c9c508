//! The registry: the set of documented Lua functions an environment offers.
//!
//! A [`Registry`] comes from one of three places, all with the same content for the same
//! Lua: [`Registry::from_paths`] (directories at run time), [`Registry::from_map`] (name
//! → source, for tests) and `Registry::baked()` (compiled in by `build.rs`, a `static`
//! with no file I/O and no parsing at run time).
//!
//! Precedence: inputs load in order and a later definition of a name wins. The
//! environment must behave as if every file had run, in load order, into one global
//! table; so besides the winning [`Function`]s the registry keeps every file as a
//! [`Chunk`], and each function knows its chunk. Running a winner's chunk while keeping
//! only the globals that chunk wins gives exactly those semantics: private helpers keep
//! working, and a call to an overridden name reaches the winner.
//!
//! ```
//! use rlm_registry::Registry;
//!
//! let registry = Registry::from_map([(
//!     "shout",
//!     "--- Upper-cases text.\n---@param s string\n---@return string\nfunction shout(s) return s:upper() end",
//! )])?;
//! assert_eq!(registry.get("shout").unwrap().signature(), "shout(s)");
//! assert!(registry.system_prompt().contains("function shout(s) end"));
//! # Ok::<(), rlm_registry::LoadError>(())
//! ```

pub mod index;
pub(crate) mod load;
mod prompt;
mod sources;

use crate::spec::{FunctionSpec, Origin, ToolCell};
use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use crate::conventions::{Code, Diagnostic, Function, Severity, Text, render};
pub use sources::{Source, source_matches};

/// A loaded set of registry functions. Cheap to query; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    /// Winning definitions, sorted by name.
    pub(crate) functions: Cow<'static, [Function]>,
    /// Every file, in load order.
    pub(crate) chunks: Cow<'static, [Chunk]>,
    pub(crate) overrides: Cow<'static, [Override]>,
    pub(crate) prompt: Text,
    /// The search index: baked by the code generator, or built at load.
    pub(crate) search: IndexCell,
    /// Each function's tool form, by function index, made on first use.
    pub(crate) tools: ToolCells,
}

/// One [`ToolCell`] per function, allocated the first time a tool form is asked for.
/// Ignored by `==` and `Debug`, like the index: it is derived from the functions.
#[derive(Clone, Default)]
pub(crate) struct ToolCells(std::sync::OnceLock<Box<[ToolCell]>>);

impl ToolCells {
    pub(crate) const fn new() -> Self {
        ToolCells(std::sync::OnceLock::new())
    }

    fn get(&self, index: usize, len: usize) -> Option<&ToolCell> {
        self.0
            .get_or_init(|| (0..len).map(|_| ToolCell::new()).collect())
            .get(index)
    }
}

impl PartialEq for ToolCells {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ToolCells {}

impl std::fmt::Debug for ToolCells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolCells")
    }
}

/// The search index: baked (generated registries) or built once on demand. Ignored by
/// `==` and `Debug`: it is derived from the functions.
#[derive(Clone, Default)]
pub(crate) struct IndexCell {
    pub(crate) baked: Option<&'static index::Index>,
    pub(crate) built: std::sync::OnceLock<std::sync::Arc<index::Index>>,
}

impl IndexCell {
    pub(crate) const fn new(baked: Option<&'static index::Index>) -> Self {
        IndexCell {
            baked,
            built: std::sync::OnceLock::new(),
        }
    }
}

impl PartialEq for IndexCell {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for IndexCell {}

impl fmt::Debug for IndexCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexCell")
    }
}

impl Registry {
    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    pub const fn __from_static(
        functions: &'static [Function],
        chunks: &'static [Chunk],
        overrides: &'static [Override],
        prompt: &'static str,
        index: Option<&'static index::Index>,
    ) -> Self {
        Registry {
            functions: Cow::Borrowed(functions),
            chunks: Cow::Borrowed(chunks),
            overrides: Cow::Borrowed(overrides),
            prompt: Cow::Borrowed(prompt),
            search: IndexCell::new(index),
            tools: ToolCells::new(),
        }
    }

    /// A registry with no functions.
    pub const fn empty() -> Self {
        Registry::__from_static(&[], &[], &[], "", None)
    }

    /// Loads directories in priority order: every `.lua` file under each, recursively, in
    /// sorted path order; a later definition of a name wins (reported by
    /// [`Registry::notes`]). A path may also be a single `.lua` file.
    ///
    /// Fails with every diagnostic of every file if any file breaks a convention.
    ///
    /// ```no_run
    /// let registry = rlm_registry::Registry::from_paths(["lua/text", "my_lua"])?;
    /// # Ok::<(), rlm_registry::LoadError>(())
    /// ```
    pub fn from_paths<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Registry, LoadError> {
        Registry::layer_paths(None, paths)
    }

    /// Loads `paths` on top of this registry (their definitions win), as `rlm --path` does
    /// on top of the baked registry.
    ///
    /// ```no_run
    /// let registry = rlm_registry::Registry::baked().with_paths(["my_lua"])?;
    /// # Ok::<(), rlm_registry::LoadError>(())
    /// ```
    pub fn with_paths<P: AsRef<Path>>(
        &self,
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Registry, LoadError> {
        Registry::layer_paths(Some(self), paths)
    }

    fn layer_paths<P: AsRef<Path>>(
        base: Option<&Registry>,
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Registry, LoadError> {
        let mut diagnostics = Vec::new();
        let inputs = load::read_paths(paths, &mut diagnostics);
        load::load(base, inputs, diagnostics, |_, _, _| None)
    }

    /// Loads definitions from a map of function name → definition source (each a small
    /// file defining exactly that function), in key order. A key that does not match the
    /// function its source defines is an E011.
    ///
    /// ```
    /// let err = rlm_registry::Registry::from_map([("a", "--- B.\nfunction b() end")]).unwrap_err();
    /// assert_eq!(err.diagnostics()[0].code.as_str(), "E011");
    /// ```
    pub fn from_map<K: AsRef<str>, V: AsRef<str>>(
        map: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Registry, LoadError> {
        let (keys, inputs): (Vec<String>, Vec<load::Input>) =
            load::map_inputs(map).into_iter().unzip();
        load::load(None, inputs, Vec::new(), |index, input, functions| {
            load::check_map_key(&keys[index], input, functions)
        })
    }

    /// Every function as name → definition, sorted by name.
    pub fn iter_functions(&self) -> impl ExactSizeIterator<Item = (&str, &Function)> {
        self.functions.iter().map(|f| (f.name(), f))
    }

    /// Every function, sorted by name.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The function exposed under `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Function> {
        self.position(name).map(|i| &self.functions[i])
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.functions.binary_search_by(|f| f.name().cmp(name)).ok()
    }

    /// The function `name` with its one description ([`FunctionSpec`]): origin its
    /// directory, tool form kept by this registry.
    ///
    /// ```
    /// let registry = rlm_registry::Registry::baked();
    /// # #[cfg(feature = "text")]
    /// assert_eq!(registry.spec("word_count").unwrap().json()["source"], "registry");
    /// ```
    pub fn spec(&self, name: &str) -> Option<FunctionSpec<'_>> {
        self.position(name).and_then(|i| self.spec_at(i))
    }

    /// Every function with its [`FunctionSpec`], in name order.
    pub fn specs(&self) -> impl Iterator<Item = FunctionSpec<'_>> {
        (0..self.functions.len()).filter_map(|i| self.spec_at(i))
    }

    fn spec_at(&self, index: usize) -> Option<FunctionSpec<'_>> {
        let function = self.functions.get(index)?;
        let tool = self.tools.get(index, self.functions.len())?;
        let origin = Origin::Registry {
            dir: function.dir(),
        };
        Some(FunctionSpec::new(function, origin, tool))
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether there are no functions.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// Every loaded file, in load order. [`Function::chunk`] indexes into this.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// Every definition replaced by a later one, in load order.
    pub fn overrides(&self) -> &[Override] {
        &self.overrides
    }

    /// The overrides as N001 notes, as `rlm check` prints them.
    pub fn notes(&self) -> Vec<Diagnostic> {
        self.overrides.iter().map(|o| o.note(self)).collect()
    }

    /// The prompt addendum declaring every function with its documentation.
    /// Deterministic; for the baked registry a precomputed `&'static str`.
    pub fn system_prompt(&self) -> &str {
        &self.prompt
    }

    /// The compact prompt addendum (what the default prompt mode sends): one line of Lua
    /// per function, signature and summary ([`Function::listing_line`]), and a pointer to
    /// `help` and `fn_search`, instead of every full doc. Empty for an empty registry, like
    /// [`Registry::system_prompt`].
    ///
    /// ```
    /// let registry = rlm_registry::Registry::from_map([("hi", "--- Says hi.\nfunction hi() end")]).unwrap();
    /// assert!(registry.compact_prompt().contains("\nhi()  -- Says hi.\n"));
    /// ```
    pub fn compact_prompt(&self) -> String {
        prompt::render_compact(self.functions())
    }

    /// The full text of a loaded file, by its name as in [`Function::file`].
    pub fn source_of(&self, file: &str) -> Option<&str> {
        self.chunks
            .iter()
            .find(|c| c.file == file)
            .map(|c| c.source())
    }
}

/// Iterating a registry visits its functions, sorted by name.
///
/// ```
/// let registry = rlm_registry::Registry::baked();
/// assert_eq!(registry.into_iter().count(), registry.len());
/// ```
impl<'a> IntoIterator for &'a Registry {
    type Item = &'a Function;
    type IntoIter = std::slice::Iter<'a, Function>;

    fn into_iter(self) -> Self::IntoIter {
        self.functions.iter()
    }
}

/// One loaded file: its name, its directory and its full text. The environment runs a
/// chunk to define the functions it wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub(crate) file: Text,
    pub(crate) dir: Text,
    pub(crate) source: Text,
}

impl Chunk {
    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    pub const fn __from_static(
        file: &'static str,
        dir: &'static str,
        source: &'static str,
    ) -> Self {
        Chunk {
            file: Cow::Borrowed(file),
            dir: Cow::Borrowed(dir),
            source: Cow::Borrowed(source),
        }
    }

    /// The file, as named to the loader.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The registry directory the file was found in.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The file's full Lua source.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// A definition replaced by a later one with the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    pub(crate) name: Text,
    pub(crate) winner_file: Text,
    pub(crate) winner_line: u32,
    pub(crate) overridden_file: Text,
    pub(crate) overridden_line: u32,
}

impl Override {
    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    pub const fn __from_static(
        name: &'static str,
        winner_file: &'static str,
        winner_line: u32,
        overridden_file: &'static str,
        overridden_line: u32,
    ) -> Self {
        Override {
            name: Cow::Borrowed(name),
            winner_file: Cow::Borrowed(winner_file),
            winner_line,
            overridden_file: Cow::Borrowed(overridden_file),
            overridden_line,
        }
    }

    /// The function name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the winning definition is: file and 1-based line.
    pub fn winner(&self) -> (&str, u32) {
        (&self.winner_file, self.winner_line)
    }

    /// Where the replaced definition is: file and 1-based line.
    pub fn overridden(&self) -> (&str, u32) {
        (&self.overridden_file, self.overridden_line)
    }

    fn note(&self, registry: &Registry) -> Diagnostic {
        let source = registry.source_of(&self.winner_file).unwrap_or("");
        let start = line_start(source, self.winner_line);
        let end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        Diagnostic::at(
            Code::Override,
            &self.winner_file,
            source,
            start..end,
            format!(
                "`{}` overrides the definition at {}:{}",
                self.name, self.overridden_file, self.overridden_line
            ),
        )
        .with_help(
            "directories load in order and the later definition wins; rename one to keep both",
        )
    }
}

fn line_start(source: &str, line: u32) -> usize {
    let skip = line.saturating_sub(1) as usize;
    if skip == 0 {
        return 0;
    }
    source
        .match_indices('\n')
        .nth(skip - 1)
        .map_or(source.len(), |(i, _)| i + 1)
}

/// A failed load: every diagnostic of every input (errors and notes), in load order.
///
/// `Display` prints one line per diagnostic; [`LoadError::render`] gives the full
/// rustc-style report with source snippets.
#[derive(Clone, Debug)]
pub struct LoadError {
    diagnostics: Vec<Diagnostic>,
    /// What loaded despite the errors, for listing and for source snippets.
    partial: Box<Registry>,
}

impl LoadError {
    pub(crate) fn new(diagnostics: Vec<Diagnostic>, partial: Registry) -> Self {
        LoadError {
            diagnostics,
            partial: Box::new(partial),
        }
    }

    /// Every diagnostic, errors and notes, in load order and by position within a file.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Only the errors.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
    }

    /// The functions that were extracted despite the errors (may be incomplete).
    pub fn functions(&self) -> &[Function] {
        self.partial.functions()
    }

    /// The text of a file the load read, by its name as in [`Diagnostic::file`]: to
    /// render one diagnostic at a time with [`conventions::render`](crate::conventions::render).
    ///
    /// ```
    /// use rlm_registry::conventions::render;
    ///
    /// let err = rlm_registry::Registry::from_map([("f", "function f() end")]).unwrap_err();
    /// let first = &err.diagnostics()[..1];
    /// let text = render(first, |file| err.source_of(file), false);
    /// assert!(text.starts_with("error[E002]"));
    /// assert!(text.contains("function f() end"));
    /// ```
    pub fn source_of(&self, file: &str) -> Option<&str> {
        self.partial.source_of(file)
    }

    /// The rustc-style report: `error[E004]: …`, `--> file:line:col`, the source line
    /// with a caret, and `= help: …`, for every diagnostic, then a summary line.
    pub fn render(&self, color: bool) -> String {
        let mut out = render(
            &self.diagnostics,
            |file| self.partial.source_of(file),
            color,
        );
        out.push_str(&self.summary());
        out
    }

    fn summary(&self) -> String {
        let errors = self.errors().count();
        let files: std::collections::BTreeSet<&str> =
            self.errors().map(|d| d.file.as_str()).collect();
        format!(
            "error: {errors} convention violation{} in {} file{}",
            plural(errors),
            files.len(),
            plural(files.len())
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for diagnostic in &self.diagnostics {
            writeln!(f, "{diagnostic}")?;
        }
        f.write_str(&self.summary())
    }
}

impl std::error::Error for LoadError {}
