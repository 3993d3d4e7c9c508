//! A child process's peak memory, as the kernel counts it: for checks that a built-in
//! keeps to the memory limit in what it holds outside Lua, which the limit's own error
//! cannot show (it comes either way, before or after the memory is taken).
//!
//! The kernel's peak (`ru_maxrss`) of a process counts the resident memory of the process
//! that started it at the moment it was started, and this test binary holds the large
//! inputs of the other tests running beside it. So the command is started by a small
//! launcher (`python3`, a few MiB), which reports its child's peak.

use std::process::{Command, Stdio};

/// Starts the command given as arguments with its output discarded, waits for it, and
/// prints its exit code (or `signal`) and its peak resident set in KiB.
const LAUNCHER: &str = r#"
import resource, subprocess, sys
status = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(status if status >= 0 else "signal", peak)
"#;

/// Runs `command` to its end with its output discarded; its exit code (`None` when a
/// signal ended it) and its peak resident set in KiB (`ru_maxrss`).
pub fn exit_and_peak_kib(command: Command) -> (Option<i32>, u64) {
    let mut launcher = Command::new("python3");
    launcher
        .args(["-c", LAUNCHER])
        .arg(command.get_program())
        .args(command.get_args())
        .stderr(Stdio::inherit());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => launcher.env(key, value),
            None => launcher.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        launcher.current_dir(dir);
    }
    let out = launcher.output().expect("python3 starts");
    assert!(out.status.success(), "the launcher ran: {out:?}");
    let report = String::from_utf8(out.stdout).expect("the launcher prints text");
    let (status, peak) = report
        .trim()
        .split_once(' ')
        .expect("the launcher prints a status and a peak");
    (status.parse().ok(), peak.parse().expect("a peak in KiB"))
}
