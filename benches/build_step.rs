//! Cost of the build step: validating and generating code for a large registry.
//!
//! `cargo bench --features build --bench build_step` writes 1,000 documented Lua
//! functions (20 files of 50) into a temporary directory, then measures:
//!
//! - `build_step/generate_1000_functions`: `codegen::Builder::generate` on that directory,
//!   i.e. what a `build.rs` pays: read, parse, validate, extract, render the prompt and
//!   the formatted Rust source;
//! - `build_step/from_paths_1000_functions`: `Registry::from_paths` on the same
//!   directory, the validation half of the above, to split the cost;
//! - `build_step/check_file_one_file`: `conventions::check_file` on one of those files
//!   (50 functions, about 6.8 KB), a per-file figure.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use rlm_registry::Registry;
use rlm_registry::codegen::Builder;
use rlm_registry::conventions::check_file;

const FILES: usize = 20;
const FUNCTIONS_PER_FILE: usize = 50;

/// One documented function (about 130 bytes): description, two `@param`s, a `@return`
/// and a two-line body.
fn write_function(out: &mut String, file: usize, index: usize) {
    writeln!(out, "--- Computes a*{index}+b.").unwrap();
    writeln!(out, "---@param a number").unwrap();
    writeln!(out, "---@param b number").unwrap();
    writeln!(out, "---@return number").unwrap();
    writeln!(out, "function f{file:02}_{index:02}(a, b)").unwrap();
    writeln!(out, "  local s = a * {index}").unwrap();
    writeln!(out, "  return s + b").unwrap();
    writeln!(out, "end").unwrap();
}

fn lua_file(file: usize) -> String {
    let mut out = String::new();
    for index in 0..FUNCTIONS_PER_FILE {
        write_function(&mut out, file, index);
    }
    out
}

/// Writes the generated files into `dir`; returns the first file's text and the total
/// number of bytes written.
fn write_registry(dir: &Path) -> (String, usize) {
    let mut total = 0;
    let mut first = String::new();
    for file in 0..FILES {
        let source = lua_file(file);
        total += source.len();
        std::fs::write(dir.join(format!("gen_{file:02}.lua")), &source).unwrap();
        if file == 0 {
            first = source;
        }
    }
    (first, total)
}

fn main() {
    let tmp = tempfile::TempDir::new().expect("a temporary directory");
    let (one_file, total_bytes) = write_registry(tmp.path());
    let builder = Builder::new().dir(tmp.path()).cargo_directives(false);

    // Sanity: the generated Lua is valid, so the benchmark measures the success path.
    let checked = check_file("gen_00.lua", &one_file);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    assert_eq!(checked.functions.len(), FUNCTIONS_PER_FILE);
    let generated = builder
        .generate()
        .expect("the generated Lua passes the conventions");
    println!(
        "generated Lua: {} functions in {FILES} files, {total_bytes} bytes ({:.1} KB); \
         one file: {} bytes; generated Rust: {} bytes",
        FILES * FUNCTIONS_PER_FILE,
        total_bytes as f64 / 1024.0,
        one_file.len(),
        generated.len()
    );

    let mut criterion = Criterion::default().configure_from_args();
    {
        let mut group = criterion.benchmark_group("build_step");
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(10));
        group.throughput(Throughput::Bytes(total_bytes as u64));
        group.bench_function("generate_1000_functions", |b| {
            b.iter(|| black_box(&builder).generate().unwrap().len())
        });
        // Validation alone (what `generate` does before generating), for the split.
        group.bench_function("from_paths_1000_functions", |b| {
            b.iter(|| Registry::from_paths([black_box(tmp.path())]).unwrap().len())
        });
        group
            .sample_size(50)
            .measurement_time(Duration::from_secs(5))
            .throughput(Throughput::Bytes(one_file.len() as u64));
        group.bench_function("check_file_one_file", |b| {
            b.iter(|| {
                check_file("gen_00.lua", black_box(&one_file))
                    .functions
                    .len()
            })
        });
        group.finish();
    }
    criterion.final_summary();
}
