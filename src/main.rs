//! `rlm`: the command-line face of rlm-registry. See `rlm --help`.

// The commands' doc comments are clap's help text, read in a terminal, where a URL is
// shown as it is written.
#![allow(rustdoc::bare_urls)]

mod cli;

use std::process::ExitCode;

use rlm_registry::allocator;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() -> ExitCode {
    allocator::configure();
    cli::run()
}
