//! The `shell` provider: shell syntax refused before anything runs (each injection test
//! asserts that its marker file was never created), globs and variables taken
//! literally, the allow-list, a cleared environment, timeouts and output caps.
#![cfg(unix)]

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, Limits};
use rlm_registry::providers::{Providers, Shell, ShellConfig, ShellProvider};

const LONG: Duration = Duration::from_secs(10);

fn shell_in(dir: &Path, allow: &[&str]) -> Shell {
    Shell::new(ShellConfig {
        cwd: Some(dir.to_path_buf()),
        ..ShellConfig::new(allow.iter().copied())
    })
    .unwrap()
}

#[test]
fn shell_syntax_is_refused_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path(), &["echo", "ls", "touch"]);
    let marker = dir.path().join("pwned");
    let attempts = [
        "echo hi; touch pwned",
        "echo hi && touch pwned",
        "echo hi || touch pwned",
        "echo hi | touch pwned",
        "echo $(touch pwned)",
        "echo `touch pwned`",
        "echo \"$(touch pwned)\"",
        "echo hi > pwned",
        "echo hi & touch pwned",
        "echo hi\ntouch pwned",
    ];
    for command in attempts {
        let error = shell.run(command, LONG).expect_err(command);
        assert!(
            error.contains("shell syntax is not supported"),
            "{command}: {error}"
        );
        assert!(!marker.exists(), "{command} ran something");
    }
}

#[test]
fn quoted_metacharacters_globs_and_variables_are_plain_arguments() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.txt"), "").unwrap();
    std::fs::write(dir.path().join("two.txt"), "").unwrap();
    let shell = shell_in(dir.path(), &["echo", "ls"]);
    let out = shell
        .run("echo 'a; b' \"c | d\" $HOME *.txt", LONG)
        .unwrap();
    assert_eq!(out.stdout, "a; b c | d $HOME *.txt\n");
    // `ls *` lists no files: the glob reaches ls as the literal name `*`.
    let out = shell.run("ls *", LONG).unwrap();
    assert!(!out.stdout.contains("one.txt"), "{out:?}");
    assert_ne!(out.code, Some(0));
}

#[test]
fn only_allowed_programs_run() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path(), &["echo"]);
    for command in [
        "touch pwned",
        "/usr/bin/touch pwned",
        "sh -c 'touch pwned'",
        "./touch pwned",
    ] {
        let error = shell.run(command, LONG).expect_err(command);
        assert!(
            error.contains("not an allowed program"),
            "{command}: {error}"
        );
    }
    assert!(!dir.path().join("pwned").exists());
    assert!(Shell::new(ShellConfig::new(["/bin/sh"])).is_err());
    assert!(Shell::new(ShellConfig::new(["no-such-program-here"])).is_err());
    assert!(shell.run("", LONG).is_err());
}

#[test]
fn the_environment_is_cleared_and_the_directory_is_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path(), &["env", "pwd"]);
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("RLM_TEST_SECRET", "leaked") };
    let env = shell.run("env", LONG).unwrap();
    assert!(!env.stdout.contains("leaked"), "{}", env.stdout);
    assert!(!env.stdout.contains("HOME="), "{}", env.stdout);
    let pwd = shell.run("pwd", LONG).unwrap();
    let expected = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(Path::new(pwd.stdout.trim()), expected);
}

#[test]
fn a_command_past_its_timeout_is_killed_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path(), &["sleep"]);
    // Not killed, it would sleep for an hour.
    let error = support::hang::finishes("a command past its timeout", move || {
        shell
            .run("sleep 3600", Duration::from_millis(200))
            .unwrap_err()
    });
    assert!(error.contains("timed out"), "{error}");
}

#[test]
fn huge_output_is_capped_and_the_program_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let shell = Shell::new(ShellConfig {
        max_output_bytes: 1000,
        ..ShellConfig::new(["yes", "seq"])
    })
    .unwrap();
    // Stopped only by its timeout, `yes` would run for an hour.
    let (shell, out) = support::hang::finishes("`yes` past the output cap", move || {
        let out = shell.run("yes", Duration::from_secs(3600)).unwrap();
        (shell, out)
    });
    assert!(out.truncated);
    assert_eq!(out.stdout.len(), 1000);
    let out = shell.run("seq 1 10", LONG).unwrap();
    assert!(!out.truncated);
    assert_eq!(out.code, Some(0));
    drop(dir);
}

#[test]
fn from_lua_the_timeout_is_bounded_by_the_execution_time_limit() {
    // Bounded by the shell's own timeout alone, `sleep 3600` would sleep for an hour.
    // On a watched thread: the environment is not `Send`, so it is made there.
    support::hang::finishes("`sleep 3600` from Lua", || {
        let mut providers = Providers::builtin();
        let config = ShellConfig {
            timeout: Duration::from_secs(3600),
            ..ShellConfig::new(["sleep", "echo"])
        };
        providers
            .register(ShellProvider::new(config).unwrap())
            .unwrap();
        let env = Environment::builder(Registry::baked().clone())
            .providers(Arc::new(providers))
            .limits(Limits {
                time: Duration::from_millis(300),
                ..Limits::default()
            })
            .build()
            .unwrap();
        let run = env
            .execute("local r = shell('echo hi') print(r.code, r.stdout)")
            .unwrap();
        assert_eq!(run.output, "0\thi\n\n");
        let error = env.execute("shell('sleep 3600')").unwrap_err();
        assert!(
            error.message().contains("timed out") || error.message().contains("time limit"),
            "{error}"
        );
        let error = env.execute("shell('echo a; echo b')").unwrap_err();
        assert!(error.message().contains("shell: shell syntax"), "{error}");
    });
}
