//! The opt-in `shell` provider: `shell(command)` runs one allow-listed program with its
//! arguments split as words, never through a shell.
//!
//! What it refuses, and why: a model's command is untrusted text. There is no shell to
//! interpret it, so shell syntax could only mislead: unquoted `;`, `|`, `&`, `<`, `>`
//! and command substitution (`$(…)`, `` `…` ``, also inside double quotes) are refused
//! with an error saying so, before anything runs. Globs (`*`, `?`, `[`) and `$NAME` are
//! passed literally (nothing expands them). The program must be on the allow-list, by
//! plain name (resolved once, in a fixed `PATH`); it runs with a cleared environment,
//! standard input closed, in the files root if there is one, under a timeout bounded by
//! the execution's time limit (the whole process group is killed), and with its output
//! capped (the program is stopped once it has written more).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{HostFunction, Provider};

/// Where allow-listed programs are looked up, and the `PATH` they run with.
const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The `shell` provider's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellConfig {
    /// The programs that may run, by plain name (`wc`, `sort`).
    pub allow: Vec<String>,
    /// The working directory (the files root when the `files` provider is enabled).
    pub cwd: Option<PathBuf>,
    /// The most bytes kept of each of stdout and stderr (default 1 MiB).
    pub max_output_bytes: usize,
    /// The longest a command may run (default 10 s; never longer than the execution's
    /// time left).
    pub timeout: Duration,
}

impl ShellConfig {
    /// Settings allowing `allow`, with the default limits.
    pub fn new(allow: impl IntoIterator<Item = impl Into<String>>) -> ShellConfig {
        ShellConfig {
            allow: allow.into_iter().map(Into::into).collect(),
            cwd: None,
            max_output_bytes: 1 << 20,
            timeout: Duration::from_secs(10),
        }
    }
}

/// What a finished command gave.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShellOutput {
    /// The exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// Standard output, as text (invalid UTF-8 replaced).
    pub stdout: String,
    /// Standard error, as text.
    pub stderr: String,
    /// Whether output was cut at the cap (the program was then stopped).
    pub truncated: bool,
}

/// Runs allow-listed programs.
///
/// ```
/// use std::time::Duration;
/// use rlm_registry::providers::{Shell, ShellConfig};
///
/// let shell = Shell::new(ShellConfig::new(["echo"]))?;
/// assert_eq!(shell.run("echo 'a b' *", Duration::from_secs(5))?.stdout, "a b *\n");
/// assert!(shell.run("echo hi; rm -rf /", Duration::from_secs(5)).is_err());
/// assert!(shell.run("ls", Duration::from_secs(5)).is_err()); // not allowed
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug)]
pub struct Shell {
    config: ShellConfig,
    /// The allowed programs, resolved: `(name, absolute path)`.
    programs: Vec<(String, PathBuf)>,
}

impl Shell {
    /// Resolves every allowed program; an unknown one, or a name with a `/`, is an error.
    pub fn new(config: ShellConfig) -> Result<Shell, String> {
        let mut programs = Vec::new();
        for name in &config.allow {
            if name.is_empty() || name.contains('/') {
                return Err(format!(
                    "shell: allow-list entries are plain program names, not paths: `{name}`"
                ));
            }
            let path = SAFE_PATH
                .split(':')
                .map(|dir| Path::new(dir).join(name))
                .find(|candidate| candidate.is_file())
                .ok_or_else(|| {
                    format!("shell: allowed program `{name}` not found in {SAFE_PATH}")
                })?;
            programs.push((name.clone(), path));
        }
        Ok(Shell { config, programs })
    }

    /// Runs `command`, for at most `timeout` (and the configured timeout).
    pub fn run(&self, command: &str, timeout: Duration) -> Result<ShellOutput, String> {
        refuse_shell_syntax(command)?;
        let words =
            shell_words::split(command).map_err(|e| format!("cannot split the command: {e}"))?;
        let Some((program, args)) = words.split_first() else {
            return Err("empty command".to_string());
        };
        let Some((_, path)) = self.programs.iter().find(|(name, _)| name == program) else {
            return Err(format!(
                "`{program}` is not an allowed program (allowed: {})",
                self.config.allow.join(", ")
            ));
        };
        let timeout = timeout.min(self.config.timeout);
        let mut child = self.spawn(path, args)?;
        let collected = collect(&mut child, self.config.max_output_bytes, timeout);
        kill_group(&mut child);
        let status = child
            .wait()
            .map_err(|e| format!("cannot wait for `{program}`: {e}"))?;
        let (stdout, stderr, truncated, timed_out) = collected;
        if timed_out {
            return Err(format!(
                "`{program}` timed out after {:.1} s and was killed",
                timeout.as_secs_f64()
            ));
        }
        Ok(ShellOutput {
            code: if truncated { None } else { status.code() },
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            truncated,
        })
    }

    fn spawn(&self, path: &Path, args: &[String]) -> Result<Child, String> {
        let mut command = Command::new(path);
        command
            .args(args)
            .env_clear()
            .env("PATH", SAFE_PATH)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &self.config.cwd {
            command.current_dir(cwd);
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command
            .spawn()
            .map_err(|e| format!("cannot run `{}`: {e}", path.display()))
    }
}

/// Shell syntax outside single quotes that a shell would interpret: refused.
fn refuse_shell_syntax(command: &str) -> Result<(), String> {
    let refuse = |what: &str| {
        Err(format!(
            "shell syntax is not supported ({what}): the command runs one program with its arguments, without a shell; make separate calls and combine the results in Lua"
        ))
    };
    let mut chars = command.chars().peekable();
    let (mut single, mut double) = (false, false);
    while let Some(c) = chars.next() {
        match c {
            '\\' if !single => {
                chars.next();
            }
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ if single => {}
            '`' => return refuse("backticks"),
            '$' if matches!(chars.peek(), Some('(')) => return refuse("`$(…)`"),
            _ if double => {}
            ';' => return refuse("`;`"),
            '|' => return refuse("pipes"),
            '&' => return refuse("`&`"),
            '<' | '>' => return refuse("redirection"),
            '\n' => return refuse("a newline"),
            _ => {}
        }
    }
    Ok(())
}

/// Reads both pipes until the program ends, the cap is passed, or the time is up:
/// `(stdout, stderr, truncated, timed_out)`.
fn collect(child: &mut Child, cap: usize, timeout: Duration) -> (Vec<u8>, Vec<u8>, bool, bool) {
    let readers = [
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    ];
    let over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handles: Vec<_> = readers
        .into_iter()
        .map(|reader| {
            let over = Arc::clone(&over);
            std::thread::spawn(move || read_capped(reader, cap, &over))
        })
        .collect();
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    loop {
        if over.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    // Stopping the group closes the pipes, so the readers finish.
    kill_group(child);
    let mut outputs = handles.into_iter().map(|h| h.join().unwrap_or_default());
    let stdout = outputs.next().unwrap_or_default();
    let stderr = outputs.next().unwrap_or_default();
    let truncated = over.load(std::sync::atomic::Ordering::Relaxed);
    (stdout, stderr, truncated, timed_out)
}

/// Reads at most `cap` bytes; flags `over` when there is more.
fn read_capped(
    reader: Option<Box<dyn Read + Send>>,
    cap: usize,
    over: &std::sync::atomic::AtomicBool,
) -> Vec<u8> {
    let Some(reader) = reader else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut limited = reader.take(cap as u64 + 1);
    let _ = limited.read_to_end(&mut kept);
    if kept.len() > cap {
        kept.truncate(cap);
        over.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    kept
}

/// Kills the program and anything it started (its process group).
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the process group we created
        // with `process_group(0)`; it touches no memory.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// The `shell` provider.
#[derive(Clone, Debug)]
pub struct ShellProvider {
    shell: Arc<Shell>,
}

impl ShellProvider {
    /// A provider over `config`; an allowed program that cannot be found is an error.
    pub fn new(config: ShellConfig) -> Result<ShellProvider, String> {
        Ok(ShellProvider {
            shell: Arc::new(Shell::new(config)?),
        })
    }
}

impl Provider for ShellProvider {
    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> &str {
        "Allow-listed programs with arguments, never through a shell."
    }

    fn functions(&self) -> Vec<HostFunction> {
        let shell = Arc::clone(&self.shell);
        let allowed = self.shell.config.allow.join(", ");
        let doc = format!(
            "--- Runs one allowed program ({allowed}) with arguments split as words, like a shell would split them, but without a shell: no pipes, `;`, `&&`, redirection, `$( )` or globbing. Bounded by a timeout and an output cap.\n---@param command string The program and its arguments, e.g. \"wc -l notes.txt\"\n---@return table result {{code = exit code, stdout = text, stderr = text, truncated = true if the output was cut}}"
        );
        vec![HostFunction::typed(
            "shell",
            doc,
            move |call, (command,): (String,)| shell.run(&command, call.time_left()),
        )]
    }
}
