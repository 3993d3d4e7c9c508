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
    warn_without_fixed_hash_seed();
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

/// `.cargo/config.toml` fixes Lua's string hash seed through `HOST_CFLAGS` and
/// `TARGET_CFLAGS`, so that `pairs` order is the same on re-execution; a variable of the
/// same name set by the user replaces ours, and the seed is then the per-state one.
fn warn_without_fixed_hash_seed() {
    const VARIABLES: [&str; 3] = ["HOST_CFLAGS", "TARGET_CFLAGS", "CFLAGS"];
    for variable in VARIABLES {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    let fixed = VARIABLES.iter().any(|variable| {
        std::env::var(variable).is_ok_and(|flags| flags.contains("-Dluai_makeseed"))
    });
    if std::env::var_os("CARGO_FEATURE_RUNTIME").is_some() && !fixed {
        println!(
            "cargo:warning=Lua's string hash seed is not fixed (HOST_CFLAGS/TARGET_CFLAGS lack -Dluai_makeseed(L)=…, see .cargo/config.toml): `pairs` order may differ when a run is resumed or replayed"
        );
    }
}
