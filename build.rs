//! Bakes this crate's `lua/` directories into `Registry::baked()`.
//!
//! The conventions, the function spec, the loader and the generator are the library's
//! own modules, included by path (no stub module), so the build validates exactly as `Registry::from_paths` does at run time.

#![allow(dead_code, unused_imports)]

#[path = "src/codegen/mod.rs"]
mod codegen;
#[path = "src/conventions/mod.rs"]
mod conventions;
#[path = "src/registry/mod.rs"]
mod registry;
#[path = "src/spec/mod.rs"]
mod spec;

/// Library directories in load order, each behind the cargo feature of the same name.
const LIBRARY_DIRS: &[(&str, &str)] = &[
    ("TEXT", "lua/text"),
    ("CHUNKING", "lua/chunking"),
    ("RECURSIVE", "lua/recursive"),
    ("COLLECTIONS", "lua/collections"),
    ("STATISTICS", "lua/statistics"),
    ("STRINGS", "lua/strings"),
    ("TIME", "lua/time"),
];

fn main() {
    for shared in [
        "build.rs",
        "src/codegen",
        "src/conventions",
        "src/registry",
        "src/spec",
    ] {
        println!("cargo:rerun-if-changed={shared}");
    }
    let builder = LIBRARY_DIRS
        .iter()
        .filter(|(feature, _)| std::env::var_os(format!("CARGO_FEATURE_{feature}")).is_some())
        .fold(codegen::Builder::new(), |builder, (_, dir)| {
            builder.dir(dir)
        });
    if builder.compile().is_err() {
        // The diagnostics are already on stderr, where Cargo shows them.
        std::process::exit(1);
    }
}
