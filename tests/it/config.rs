//! `rlm.toml`: a good file, every kind of error at its exact line and column, and the
//! command line reading it (`--config`, or `rlm.toml` in the current directory).

use crate::support;

use rlm_registry::providers::Config;

/// A directory with a `data/` folder, kept for the whole test (the files root).
fn base() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    dir
}

fn parse(text: &str) -> Result<Config, rlm_registry::providers::ConfigError> {
    Config::parse(text, "rlm.toml", base().path())
}

fn error_at(text: &str) -> (usize, usize, String) {
    let error = parse(text).expect_err(text);
    (error.line, error.column, error.message)
}

#[test]
fn the_default_enables_no_opt_in_provider() {
    let config = parse("").unwrap();
    assert_eq!(config, Config::default());
    let providers = config.providers().unwrap();
    for opt_in in ["store_set", "read_file", "shell"] {
        assert!(providers.get(opt_in).is_none(), "{opt_in}");
    }
    assert!(providers.get("llm_query").is_some());
}

#[test]
fn a_good_file_enables_and_configures_providers() {
    let base = base();
    let config = Config::parse(
        "# comment\n[providers.files]\nenabled = true\nroot = \"data\"\nwritable = true\nmax_file_bytes = 100\n\n[providers.shell]\nenabled = true\nallow = [\"wc\", \"sort\"]\ntimeout_ms = 500\nmax_output_bytes = 10\n\n[providers.store]\nenabled = true\nmax_bytes = 64\n\n[providers.user]\nenabled = false\n",
        "rlm.toml",
        base.path(),
    )
    .unwrap();
    let files = config.files.clone().unwrap();
    assert!(files.root.ends_with("data") && files.writable && files.max_file_bytes == 100);
    let shell = config.shell.clone().unwrap();
    assert_eq!(shell.allow, ["wc", "sort"]);
    assert_eq!(shell.timeout.as_millis(), 500);
    assert_eq!(shell.cwd.as_deref(), Some(files.root.as_path()));
    assert_eq!(config.store, Some(64));
    assert_eq!(config.disabled, ["user"]);
    let providers = config.providers().unwrap();
    for name in ["read_file", "write_file", "shell", "store_get"] {
        assert!(providers.get(name).is_some(), "{name}");
    }
    assert!(providers.get("ask_user").is_none(), "user is disabled");
    // A section present but not enabled stays off.
    let off = parse("[providers.shell]\nallow = [\"wc\"]\n").unwrap();
    assert!(off.shell.is_none());
}

#[test]
fn an_unknown_provider_is_an_error_at_its_name() {
    let (line, column, message) = error_at("\n[providers.shel]\nenabled = true\n");
    assert_eq!((line, column), (2, 12));
    assert!(message.contains("unknown field `shel`"), "{message}");
}

#[test]
fn an_unknown_key_is_an_error_at_the_key() {
    let (line, column, message) =
        error_at("[providers.files]\nenabled = true\nroot = \"data\"\nwriteable = true\n");
    assert_eq!((line, column), (4, 1));
    assert!(message.contains("writeable"), "{message}");
    let (line, column, _) = error_at("[server]\nport = 1\n");
    assert_eq!((line, column), (1, 2));
}

#[test]
fn a_wrong_type_is_an_error_at_the_value() {
    let (line, column, message) = error_at("[providers.shell]\nenabled = true\nallow = \"wc\"\n");
    assert_eq!((line, column), (3, 9));
    assert!(
        message.contains("sequence") || message.contains("array"),
        "{message}"
    );
    let (line, column, _) = error_at("[providers.files]\nenabled = 1\n");
    assert_eq!((line, column), (2, 11));
}

#[test]
fn the_core_provider_cannot_be_disabled() {
    let (line, column, message) = error_at("[providers.core]\nenabled = false\n");
    assert_eq!((line, column), (2, 11));
    assert!(
        message.contains("core provider cannot be disabled"),
        "{message}"
    );
}

#[test]
fn invalid_values_are_errors_at_their_position() {
    let (line, column, message) = error_at("[providers.files]\nenabled = true\n");
    assert_eq!((line, column), (1, 1));
    assert!(message.contains("no `root`"), "{message}");
    let (line, column, message) =
        error_at("[providers.files]\nenabled = true\nroot = \"missing\"\n");
    assert_eq!((line, column), (3, 8));
    assert!(message.contains("not a directory"), "{message}");
    let (line, column, message) =
        error_at("[providers.shell]\nenabled = true\nallow = [\"wc\", \"/bin/sh\"]\n");
    assert_eq!((line, column), (3, 16));
    assert!(message.contains("plain program names"), "{message}");
    let (_, _, message) = error_at("[providers.shell]\nenabled = true\nallow = []\n");
    assert!(message.contains("lists no program"), "{message}");
    let (_, _, message) = error_at("[providers.files\n");
    assert!(!message.is_empty());
}

#[cfg(feature = "cli")]
#[test]
fn the_command_line_reads_the_config_and_reports_errors_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/n.txt"), "one two").unwrap();
    std::fs::write(
        dir.path().join("rlm.toml"),
        "[providers.files]\nenabled = true\nroot = \"data\"\n",
    )
    .unwrap();
    let rlm = |args: &[&str]| support::cli::rlm_in(dir.path(), args);
    // rlm.toml in the current directory is read by default.
    let out = rlm(&["exec", "print(word_count(read_file('n.txt')))"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&rlm(&["list"]).stdout).to_string();
    assert!(listed.contains("read_file(path)"), "{listed}");
    // --config names another file; its errors exit 2 with file:line:col.
    std::fs::write(
        dir.path().join("bad.toml"),
        "[providers.files]\nenabled = \"yes\"\n",
    )
    .unwrap();
    for command in [
        "exec",
        "run",
        "ask",
        "list",
        "prompt",
        "tools",
        "search",
        "providers",
        "meta",
    ] {
        let mut args = vec![command];
        match command {
            "exec" | "ask" | "search" => args.push("x"),
            "run" => args.push("-"),
            _ => {}
        }
        args.extend(["--config", "bad.toml"]);
        let out = rlm(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("bad.toml:2:11"), "{command}: {stderr}");
    }
}
