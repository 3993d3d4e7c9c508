//! What the conventions extract from a Lua file: one [`Function`] per exposed definition.
//!
//! Every text field is a `Cow<'static, str>` so the same types describe both a registry
//! loaded at run time (owned strings) and one baked in by `build.rs` (borrowed from
//! `static` data, built with the `const fn` constructors the generated code calls).

use std::borrow::Cow;

/// Text that is either baked into the binary or loaded at run time.
pub type Text = Cow<'static, str>;

/// One exposed registry function: its documentation, usage and source.
///
/// ```
/// use rlm_registry::Registry;
///
/// let src = "--- Doubles a number.\n---@param x number The input\n---@return number\nfunction double(x) return 2 * x end";
/// let registry = Registry::from_map([("double", src)]).unwrap();
/// let f = registry.get("double").unwrap();
/// assert_eq!(f.description(), "Doubles a number.");
/// assert_eq!(f.params()[0].name(), "x");
/// assert_eq!(f.params()[0].ty(), "number");
/// assert_eq!(f.returns()[0].ty(), "number");
/// assert_eq!(f.signature(), "double(x)");
/// assert_eq!(f.line(), 4);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub(crate) name: Text,
    pub(crate) doc: Text,
    pub(crate) description: Text,
    pub(crate) params: Cow<'static, [Param]>,
    pub(crate) returns: Cow<'static, [Return]>,
    pub(crate) tags: Cow<'static, [Text]>,
    pub(crate) source: Text,
    pub(crate) file: Text,
    pub(crate) dir: Text,
    pub(crate) line: u32,
    pub(crate) chunk: u32,
}

impl Function {
    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub const fn __from_static(
        name: &'static str,
        doc: &'static str,
        description: &'static str,
        params: &'static [Param],
        returns: &'static [Return],
        tags: &'static [Text],
        source: &'static str,
        file: &'static str,
        dir: &'static str,
        line: u32,
        chunk: u32,
    ) -> Self {
        Function {
            name: Cow::Borrowed(name),
            doc: Cow::Borrowed(doc),
            description: Cow::Borrowed(description),
            params: Cow::Borrowed(params),
            returns: Cow::Borrowed(returns),
            tags: Cow::Borrowed(tags),
            source: Cow::Borrowed(source),
            file: Cow::Borrowed(file),
            dir: Cow::Borrowed(dir),
            line,
            chunk,
        }
    }

    /// The global name the function is exposed under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole doc comment, as written (indentation removed). This is what the model reads.
    pub fn doc(&self) -> &str {
        &self.doc
    }

    /// The description: the doc's text lines before the first `@` tag, comment markers removed.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The first sentence of the description, on one line.
    ///
    /// ```
    /// let src = "--- Splits text, e.g. logs, into\n--- lines. Keeps order.\n---@param s string\n---@return string[]\nfunction split(s) return {} end";
    /// let registry = rlm_registry::Registry::from_map([("split", src)]).unwrap();
    /// assert_eq!(registry.get("split").unwrap().summary(), "Splits text, e.g. logs, into lines.");
    /// ```
    pub fn summary(&self) -> String {
        let paragraph: Vec<&str> = self
            .description
            .lines()
            .map(str::trim)
            .take_while(|line| !line.is_empty())
            .collect();
        let paragraph = paragraph.join(" ");
        let sentence_end = paragraph
            .match_indices(". ")
            .map(|(i, _)| i)
            .find(|&i| paragraph[i + 2..].starts_with(|c: char| c.is_uppercase() || c == '`'));
        match sentence_end {
            Some(end) => paragraph[..=end].to_string(),
            None => paragraph,
        }
    }

    /// The doc comment followed by a stub declaration, `function name(a, b) end`: how
    /// the prompt, `help` and editor definition files declare a function.
    ///
    /// ```
    /// let src = "--- Adds.\n---@param a number\n---@param b number\n---@return number\nfunction add(a, b) return a + b end";
    /// let registry = rlm_registry::Registry::from_map([("add", src)]).unwrap();
    /// assert_eq!(
    ///     registry.get("add").unwrap().declaration(),
    ///     "--- Adds.\n---@param a number\n---@param b number\n---@return number\nfunction add(a, b) end"
    /// );
    /// ```
    pub fn declaration(&self) -> String {
        let params: Vec<&str> = self.params.iter().map(|p| p.name()).collect();
        format!(
            "{}\nfunction {}({}) end",
            self.doc,
            self.name,
            params.join(", ")
        )
    }

    /// Documented parameters, in the order of the definition.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Documented return values, in doc order.
    pub fn returns(&self) -> &[Return] {
        &self.returns
    }

    /// Capability tags written in the doc as `---@tag name` (several per line allowed,
    /// separated by spaces or commas), lower-cased, in doc order. Automatic tags derived
    /// from the name and description are added by search, see
    /// [`Registry::capabilities_of`](crate::Registry::capabilities_of).
    ///
    /// ```
    /// let src = "--- Posts a message to a channel.\n---@tag notification, http\n---@param m string\nfunction post(m) end";
    /// let registry = rlm_registry::Registry::from_map([("post", src)]).unwrap();
    /// assert_eq!(registry.get("post").unwrap().tags(), ["notification", "http"]);
    /// ```
    pub fn tags(&self) -> &[Text] {
        &self.tags
    }

    /// The definition's source text, from its first token to its final `end`.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The file it was loaded from, as named to the loader.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The registry directory it was loaded from, as named to the loader.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// 1-based line of the definition (not of its doc comment).
    pub fn line(&self) -> u32 {
        self.line
    }

    /// Index into [`Registry::chunks`](crate::Registry::chunks) of the file that defines it.
    pub fn chunk(&self) -> usize {
        self.chunk as usize
    }

    /// `name(a, b?, ...)`: the call shape, optional parameters marked with `?`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                if p.optional && p.name != "..." {
                    format!("{}?", p.name)
                } else {
                    p.name.to_string()
                }
            })
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }

    /// `name(a, b?)  -- Summary.`: the function in one line of Lua, as compact listings
    /// (the system prompt's, `rlm prompt --compact`) show it.
    ///
    /// ```
    /// let src = "--- Says hi. Politely.\n---@param name? string Who\nfunction hi(name) end";
    /// let registry = rlm_registry::Registry::from_map([("hi", src)]).unwrap();
    /// assert_eq!(registry.get("hi").unwrap().listing_line(), "hi(name?)  -- Says hi.");
    /// ```
    pub fn listing_line(&self) -> String {
        format!("{}  -- {}", self.signature(), self.summary())
    }
}

/// A documented parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub(crate) name: Text,
    pub(crate) ty: Text,
    pub(crate) optional: bool,
    pub(crate) description: Text,
}

impl Param {
    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    pub const fn __from_static(
        name: &'static str,
        ty: &'static str,
        optional: bool,
        description: &'static str,
    ) -> Self {
        Param {
            name: Cow::Borrowed(name),
            ty: Cow::Borrowed(ty),
            optional,
            description: Cow::Borrowed(description),
        }
    }

    /// The parameter's name (`...` for varargs), without a trailing `?`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The LuaLS type as written (`string`, `integer?`, `string[]`, …); `any` when the doc
    /// (LDoc `@param`) gives none.
    pub fn ty(&self) -> &str {
        &self.ty
    }

    /// Whether the parameter may be omitted (`name?`, `type?`, `type|nil`, LDoc `[opt]`).
    pub fn optional(&self) -> bool {
        self.optional
    }

    /// The parameter's description (may be empty).
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// A documented return value.
///
/// ```
/// use rlm_registry::Registry;
///
/// let src = "--- Splits a text into lines.\n---@param text string The text\n---@return string[] lines The lines, in order\nfunction split(text) return {} end";
/// let registry = Registry::from_map([("split", src)]).unwrap();
/// let ret = &registry.get("split").unwrap().returns()[0];
/// assert_eq!(ret.ty(), "string[]");
/// assert_eq!(ret.name(), Some("lines"));
/// assert_eq!(ret.description(), "The lines, in order");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Return {
    pub(crate) ty: Text,
    /// Empty when the doc names no value.
    pub(crate) name: Text,
    pub(crate) description: Text,
}

impl Return {
    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    pub const fn __from_static(
        ty: &'static str,
        name: &'static str,
        description: &'static str,
    ) -> Self {
        Return {
            ty: Cow::Borrowed(ty),
            name: Cow::Borrowed(name),
            description: Cow::Borrowed(description),
        }
    }

    /// The LuaLS type as written; `any` when the doc (LDoc `@return`) gives none.
    pub fn ty(&self) -> &str {
        &self.ty
    }

    /// The value's name, from LuaLS `---@return type name description`: the identifier
    /// right after the type. `None` when the doc gives no name: a type alone, a
    /// description marked with `#` or not starting with an identifier, or LDoc tags
    /// (`@treturn type description`, `-- @return description`).
    ///
    /// ```
    /// use rlm_registry::Registry;
    ///
    /// let named = "--- Counts words.\n---@param s string\n---@return integer count Number of words\nfunction words(s) return 0 end";
    /// let unnamed = "--- Counts lines.\n---@param s string\n---@return integer # Number of lines\nfunction lines(s) return 0 end";
    /// let registry = Registry::from_map([("words", named), ("lines", unnamed)]).unwrap();
    /// assert_eq!(registry.get("words").unwrap().returns()[0].name(), Some("count"));
    /// let lines = &registry.get("lines").unwrap().returns()[0];
    /// assert_eq!(lines.name(), None);
    /// assert_eq!(lines.description(), "Number of lines");
    /// ```
    pub fn name(&self) -> Option<&str> {
        Some(&*self.name).filter(|name| !name.is_empty())
    }

    /// The description (may be empty), without the name and without a leading `#`.
    pub fn description(&self) -> &str {
        &self.description
    }
}
