//! Programs some tests need from outside the crate: headless Chromium, `emmylua_check`,
//! `redis-server`, a Python with the MCP SDK and one with the ACP client. A developer
//! without one sees the test say it skipped;
//! CI sets `RLM_REQUIRE_TOOLS=1` (`.ci/run` installs them all), and there a missing one
//! fails the test, naming it and how to install it.

use std::process::Command;

/// The variable that makes a missing program a failure instead of a skip.
pub const REQUIRE: &str = "RLM_REQUIRE_TOOLS";

/// `found`, or, when the program is missing, a failure (with `RLM_REQUIRE_TOOLS=1`) or
/// a notice that the test skipped (without).
pub fn required<T>(tool: &str, install: &str, found: Option<T>) -> Option<T> {
    if found.is_some() {
        return found;
    }
    let required = std::env::var(REQUIRE).is_ok_and(|value| value == "1");
    assert!(
        !required,
        "{tool} is missing and {REQUIRE}=1 requires it: {install}"
    );
    eprintln!("skipped: {tool} is missing ({install}; with {REQUIRE}=1 this is a failure)");
    None
}

/// Headless Chromium under one of its usual names.
pub fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    required("headless Chromium", "apt-get install -y chromium", found)
}

/// The `emmylua_check` binary named by `RLM_EMMYLUA_CHECK`.
pub fn emmylua_check() -> Option<String> {
    let found = std::env::var("RLM_EMMYLUA_CHECK")
        .ok()
        .filter(|path| std::path::Path::new(path).is_file());
    required(
        "emmylua_check",
        "cargo install emmylua_check --locked --version 0.25.1 --root target/tools, then set RLM_EMMYLUA_CHECK=target/tools/bin/emmylua_check (.ci/run does both)",
        found,
    )
}

/// A Python interpreter with the `mcp` package, named by `RLM_MCP_PYTHON`.
pub fn python_with_mcp() -> Option<String> {
    let found = std::env::var("RLM_MCP_PYTHON").ok().filter(|python| {
        Command::new(python)
            .args(["-c", "import mcp"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    required(
        "a Python with the MCP SDK",
        "python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install mcp==2.3.0, then set RLM_MCP_PYTHON=target/mcp-venv/bin/python (.ci/run does both)",
        found,
    )
}

/// A Python interpreter with the ACP client (`agent-client-protocol`, module `acp`),
/// named by `RLM_ACP_PYTHON`.
pub fn python_with_acp() -> Option<String> {
    let found = std::env::var("RLM_ACP_PYTHON").ok().filter(|python| {
        Command::new(python)
            .args(["-c", "import acp"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    required(
        "a Python with the ACP client",
        "python3 -m venv target/acp-venv && target/acp-venv/bin/pip install agent-client-protocol==0.12.1, then set RLM_ACP_PYTHON=target/acp-venv/bin/python (.ci/run does both)",
        found,
    )
}

/// `redis-server` (Debian's package), for the Redis call cache's tests.
pub fn redis_server() -> Option<&'static str> {
    let found = Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some("redis-server");
    required(
        "redis-server",
        "apt-get install -y redis-server (.ci/run does it)",
        found,
    )
}
