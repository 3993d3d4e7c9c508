//! Arbitrary bytes as a registry file: validation must never panic, abort or overflow
//! the stack, whatever the input. Results are ignored.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let source = String::from_utf8_lossy(data);
    let _ = rlm_registry::conventions::check_file("fuzz.lua", &source);
    let _ = rlm_registry::Registry::from_map([("f", source.as_ref())]);
});
