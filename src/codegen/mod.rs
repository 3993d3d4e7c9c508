//! Baking registries at build time, prost-build style (feature `build`).
//!
//! In `build.rs`, name the directories to bake; [`Builder::compile`] validates them with
//! the same conventions as [`Registry::from_paths`](crate::Registry::from_paths), fails
//! the build with rustc-style diagnostics (all of them at once) on any violation, and
//! otherwise writes formatted Rust defining a `static REGISTRY` into `OUT_DIR`, with its
//! functions, its system prompt and its search index all computed here. It also
//! tells Cargo to rerun the step when a `.lua` file is added, edited or removed, and not
//! otherwise.
//!
//! ```no_run
//! // build.rs of a crate that depends on rlm-registry with feature "build"
//! // (as a build-dependency) and without it (as a normal dependency):
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     rlm_registry::codegen::Builder::new().dir("lua/mine").dir("lua/overrides").compile()?;
//!     Ok(())
//! }
//! ```
//!
//! ```
//! // src/main.rs (or src/lib.rs) of that crate:
//! rlm_registry::include_registry!(); // a `static REGISTRY: rlm_registry::Registry`
//!
//! fn main() {
//!     print!("{}", REGISTRY.system_prompt());
//! }
//! ```

mod index;

use std::fmt;
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use quote::quote;

use crate::conventions::{Function, Param, Return};
use crate::registry::{Chunk, LoadError, Override, Registry};

/// Configures and runs the code generator. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Builder {
    dirs: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
    file_name: String,
    cargo_directives: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder with no directories, writing `rlm_registry.rs` into `$OUT_DIR`.
    pub fn new() -> Self {
        Builder {
            dirs: Vec::new(),
            out_dir: None,
            file_name: "rlm_registry".to_string(),
            cargo_directives: true,
        }
    }

    /// Adds a directory; directories load in the order added, and later ones win.
    /// Relative paths are relative to the build script's working directory (the crate
    /// root), and stay relative in file names and diagnostics.
    pub fn dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.dirs.push(dir.as_ref().to_path_buf());
        self
    }

    /// Writes into `dir` instead of `$OUT_DIR`.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Names the output `NAME.rs` (default `rlm_registry`), for
    /// `include_registry!("NAME")`. Use it to bake several registries in one crate.
    pub fn file_name(mut self, name: impl Into<String>) -> Self {
        self.file_name = name.into();
        self
    }

    /// Whether to print `cargo:rerun-if-changed` lines (default true; turn off outside
    /// build scripts).
    pub fn cargo_directives(mut self, emit: bool) -> Self {
        self.cargo_directives = emit;
        self
    }

    /// Validates the directories and returns the generated, formatted Rust source,
    /// without writing anything.
    pub fn generate(&self) -> Result<String, LoadError> {
        let registry = Registry::from_paths(&self.dirs)?;
        Ok(generate_source(&registry, &self.dirs, &self.file_name))
    }

    /// Validates, generates and writes `OUT_DIR/NAME.rs`. On a violation, prints every
    /// diagnostic rustc-style to stderr (where Cargo shows it) and returns an error, so
    /// `compile()?` or `compile().unwrap()` in `main` fails the build.
    pub fn compile(self) -> Result<PathBuf, Error> {
        if self.cargo_directives {
            for dir in &self.dirs {
                println!("cargo:rerun-if-changed={}", dir.display());
            }
        }
        let source = self.generate().map_err(|error| {
            eprintln!("{}", error.render(false));
            Error::Violations(error)
        })?;
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(Error::NoOutDir)?,
        };
        let path = out_dir.join(format!("{}.rs", self.file_name));
        write_if_changed(&path, &source).map_err(|e| Error::Io(path.clone(), e))?;
        Ok(path)
    }
}

/// Rewriting identical output would make Cargo recompile the crate for nothing.
fn write_if_changed(path: &Path, contents: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    std::fs::write(path, contents)
}

/// Why [`Builder::compile`] failed.
#[derive(Debug)]
pub enum Error {
    /// The Lua broke the conventions; the full report has been printed to stderr.
    Violations(LoadError),
    /// Neither `out_dir` was set nor `OUT_DIR` (not running as a build script?).
    NoOutDir,
    /// Writing the generated file failed.
    Io(PathBuf, std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Violations(error) => write!(f, "{error}"),
            Error::NoOutDir => {
                f.write_str("OUT_DIR is not set; call Builder::out_dir outside build scripts")
            }
            Error::Io(path, error) => write!(f, "cannot write {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for Error {}

/// The generated file: `pub static REGISTRY` plus, in a hidden module, one `static` per
/// array it points to. (Arrays of types with destructors cannot be promoted to `'static`
/// inline, but named statics are never dropped.)
pub(crate) fn generate_source(registry: &Registry, dirs: &[PathBuf], file_name: &str) -> String {
    let module = quote::format_ident!("__rlm_registry_{}", sanitize(file_name));
    let mut arrays = Vec::new();
    let functions: Vec<TokenStream> = registry
        .functions()
        .iter()
        .enumerate()
        .map(|(i, f)| function_tokens(f, i, &mut arrays))
        .collect();
    let chunks = registry.chunks().iter().map(chunk_tokens);
    let overrides = registry.overrides().iter().map(override_tokens);
    let (n_functions, n_chunks, n_overrides) = (
        functions.len(),
        registry.chunks().len(),
        registry.overrides().len(),
    );
    let prompt = registry.system_prompt();
    let search_index = index::index_tokens(
        &crate::registry::index::Index::build(registry.functions()),
        &mut arrays,
    );
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let doc = format!(
        " The registry baked from {} by rlm-registry's code generator: {} functions.",
        dirs.join(", "),
        registry.len()
    );
    let tokens = quote! {
        #[doc = #doc]
        pub static REGISTRY: ::rlm_registry::Registry = ::rlm_registry::Registry::__from_static(
            &#module::FUNCTIONS,
            &#module::CHUNKS,
            &#module::OVERRIDES,
            #prompt,
            Some(&#module::INDEX),
        );

        #[doc(hidden)]
        // Scores are data, not constants: one may well be ln 2.
        #[allow(non_snake_case, clippy::approx_constant, clippy::excessive_precision)]
        mod #module {
            pub(super) static FUNCTIONS: [::rlm_registry::Function; #n_functions] = [#(#functions),*];
            pub(super) static CHUNKS: [::rlm_registry::Chunk; #n_chunks] = [#(#chunks),*];
            pub(super) static OVERRIDES: [::rlm_registry::Override; #n_overrides] = [#(#overrides),*];
            pub(super) static INDEX: ::rlm_registry::registry::index::Index = #search_index;
            #(#arrays)*
        }
    };
    let header = "// @generated by rlm-registry's code generator. Do not edit.\n";
    // quote! output always parses; should it ever not, unformatted Rust still compiles.
    let body = match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        Err(_) => tokens.to_string(),
    };
    format!("{header}{body}")
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A function's constructor call; its parameter and return arrays go into `arrays` as
/// `PARAMS_i` / `RETURNS_i` statics.
fn function_tokens(f: &Function, index: usize, arrays: &mut Vec<TokenStream>) -> TokenStream {
    let (name, doc, description, source, file, dir) = (
        f.name(),
        f.doc(),
        f.description(),
        f.source(),
        f.file(),
        f.dir(),
    );
    let params = static_array(
        arrays,
        &format!("PARAMS_{index}"),
        quote!(::rlm_registry::Param),
        f.params().iter().map(param_tokens).collect(),
    );
    let returns = static_array(
        arrays,
        &format!("RETURNS_{index}"),
        quote!(::rlm_registry::Return),
        f.returns().iter().map(return_tokens).collect(),
    );
    let tags = static_array(
        arrays,
        &format!("TAGS_{index}"),
        quote!(::std::borrow::Cow<'static, str>),
        texts(f.tags()),
    );
    let (line, chunk) = (f.line(), f.chunk() as u32);
    quote! {
        ::rlm_registry::Function::__from_static(
            #name, #doc, #description, #params, #returns, #tags, #source, #file, #dir, #line, #chunk
        )
    }
}

/// `&[]` for no elements, otherwise a reference to a new static in the hidden module.
fn static_array(
    arrays: &mut Vec<TokenStream>,
    name: &str,
    ty: TokenStream,
    elements: Vec<TokenStream>,
) -> TokenStream {
    if elements.is_empty() {
        return quote!(&[]);
    }
    let ident = quote::format_ident!("{name}");
    let len = elements.len();
    arrays.push(quote! { pub(super) static #ident: [#ty; #len] = [#(#elements),*]; });
    quote!(&#ident)
}

/// `Cow::Borrowed("…")` for each text: the element of every baked text array.
fn texts(values: &[crate::conventions::Text]) -> Vec<TokenStream> {
    values
        .iter()
        .map(|t| {
            let t: &str = t;
            quote!(::std::borrow::Cow::Borrowed(#t))
        })
        .collect()
}

fn param_tokens(p: &Param) -> TokenStream {
    let (name, ty, optional, description) = (p.name(), p.ty(), p.optional(), p.description());
    quote! { ::rlm_registry::Param::__from_static(#name, #ty, #optional, #description) }
}

fn return_tokens(r: &Return) -> TokenStream {
    let (ty, name, description) = (r.ty(), r.name().unwrap_or(""), r.description());
    quote! { ::rlm_registry::Return::__from_static(#ty, #name, #description) }
}

fn chunk_tokens(c: &Chunk) -> TokenStream {
    let (file, dir, source) = (c.file(), c.dir(), c.source());
    quote! { ::rlm_registry::Chunk::__from_static(#file, #dir, #source) }
}

fn override_tokens(o: &Override) -> TokenStream {
    let name = o.name();
    let (winner_file, winner_line) = o.winner();
    let (overridden_file, overridden_line) = o.overridden();
    quote! {
        ::rlm_registry::Override::__from_static(#name, #winner_file, #winner_line, #overridden_file, #overridden_line)
    }
}
