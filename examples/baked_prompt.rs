//! Prints the length of the baked registry's system prompt. Used to check that the
//! baked registry opens no file at start-up (see BENCHMARKS.md):
//!
//! ```text
//! cargo build --release --example baked_prompt
//! strace -f -e trace=open,openat,stat,statx,newfstatat ./target/release/examples/baked_prompt
//! ```

fn main() {
    println!("{}", rlm_registry::Registry::baked().system_prompt().len());
}
