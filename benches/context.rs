//! Work over a large context, side by side in one run: a deterministic server
//! log (100 MB, or `RLM_BENCH_CONTEXT_MB`) and, with their baselines,
//! - each `lua/text` and `lua/chunking` function in the sandbox against the same
//!   operation in Python (a `python3` subprocess timing itself, when there is one);
//! - each `string.*` operation in the sandbox against unsandboxed C Lua 5.4
//!   (`mlua::Lua::new()`) in this process;
//! - each `re` function against the `regex` crate called directly on the same bytes;
//! - `token_count` against tiktoken-rs (on the first 10 MB; identical counts asserted).
//!
//! Run: `cargo bench --bench context` (`RLM_BENCH_CONTEXT_MB=10` for a quick run). Each
//! figure is the best of `RLM_BENCH_REPS` runs (default 3), load time excluded.

mod common;

use std::hint::black_box;
use std::io::Write as _;
use std::time::{Duration, Instant};

use rlm_registry::environment::Environment;

/// A server log of about `bytes` bytes: timestamp, level (2% ERROR), service, message.
fn generate_log(bytes: usize) -> String {
    let mut next = common::generator();
    let users = [
        "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
    ];
    let paths = [
        "/api/v1/items",
        "/api/v1/users",
        "/login",
        "/static/app.js",
        "/health",
    ];
    let mut log = String::with_capacity(bytes + 200);
    let mut second = 0u64;
    while log.len() < bytes {
        second += next(3);
        let level = match next(100) {
            0..=1 => "ERROR",
            2..=9 => "WARN",
            _ => "INFO",
        };
        log.push_str(&format!(
            "2024-05-{:02}T{:02}:{:02}:{:02}Z,{level},service-{},request {} handled in {} ms user={} path={}\n",
            1 + (second / 86_400) % 28,
            (second / 3600) % 24,
            (second / 60) % 60,
            second % 60,
            next(20),
            next(1_000_000),
            next(500),
            users[next(users.len() as u64) as usize],
            paths[next(paths.len() as u64) as usize],
        ));
    }
    log
}

fn best_of(reps: usize, mut run: impl FnMut()) -> Duration {
    (0..reps.max(1))
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// One row: what was timed, our time, the baselines' (if measured).
struct Row {
    operation: String,
    ours: Duration,
    baselines: Vec<Option<Duration>>,
}

fn print_table(title: &str, baselines: &[&str], rows: &[Row]) {
    println!("\n### {title}\n");
    let mut header = "| operation | rlm |".to_string();
    for name in baselines {
        header.push_str(&format!(" {name} | {name} / rlm |"));
    }
    println!("{header}");
    println!("|---|---|{}", "---|---|".repeat(baselines.len()));
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
    for row in rows {
        let mut line = format!("| `{}` | {} |", row.operation, ms(row.ours));
        for baseline in &row.baselines {
            match baseline {
                Some(b) => line.push_str(&format!(
                    " {} | {:.2}x |",
                    ms(*b),
                    b.as_secs_f64() / row.ours.as_secs_f64()
                )),
                None => line.push_str(" - | - |"),
            }
        }
        println!("{line}");
    }
}

/// `code` wrapped to time itself with `os.clock` (CPU time of the operation alone, no
/// compilation or call overhead), leaving the seconds in the global `bench_elapsed`.
fn timed(code: &str) -> String {
    format!("local bench_t0 = os.clock()\n{code}\nbench_elapsed = os.clock() - bench_t0")
}

fn sandbox(log: &str) -> Environment {
    let env = common::sandbox(log);
    // Load the library functions once, outside the timings.
    env.execute("local _ = line_count, grep, word_count, chunk_by_lines, chunk_by_size, chunk_by_separator, find_all, lines, line_range")
        .expect("library");
    env
}

fn time_sandbox(env: &Environment, reps: usize, code: &str) -> Duration {
    let timed = timed(code);
    (0..reps.max(1))
        .map(|_| {
            if let Err(e) = env.execute(&timed) {
                panic!("{code}: {e}");
            }
            let seconds = env.execute("print(bench_elapsed)").expect("elapsed").output;
            Duration::from_secs_f64(seconds.trim().parse().unwrap_or(f64::NAN))
        })
        .min()
        .unwrap_or_default()
}

/// The same timing in a plain C Lua state.
fn time_c_lua(lua: &mlua::Lua, reps: usize, code: &str) -> Duration {
    let timed = timed(code);
    (0..reps.max(1))
        .map(|_| {
            lua.load(&timed).exec().expect("C Lua");
            Duration::from_secs_f64(lua.globals().get::<f64>("bench_elapsed").expect("elapsed"))
        })
        .min()
        .unwrap_or_default()
}

/// Stock C Lua 5.4 with `context` set; with `hooked`, the same instruction-count hook as
/// the sandbox's (every 1,000 instructions), which alone slows Lua's VM loop.
fn c_lua(log: &str, hooked: bool) -> mlua::Lua {
    let lua = mlua::Lua::new();
    lua.globals()
        .set("context", lua.create_string(log).expect("string"))
        .expect("context");
    if hooked {
        let triggers = mlua::HookTriggers::new().every_nth_instruction(1_000);
        lua.set_hook(triggers, |_, _| Ok(mlua::VmState::Continue))
            .expect("hook");
    }
    lua
}

/// The library functions and the Python code doing the same.
const LIBRARY: &[(&str, &str)] = &[
    (
        "line_count(context)",
        "s.count('\\n') + (0 if s.endswith('\\n') else 1)",
    ),
    ("lines(context)", "s.splitlines()"),
    (
        "grep(context, ',ERROR,', 0, true)",
        "[(i + 1, l) for i, l in enumerate(s.split('\\n')) if ',ERROR,' in l]",
    ),
    (
        "grep(context, ',ERROR,', 2, true)",
        "ls = s.split('\\n'); [(i + 1, l, ls[max(0, i - 2):i], ls[i + 1:i + 3]) for i, l in enumerate(ls) if ',ERROR,' in l]",
    ),
    (
        "grep(context, 'user=dave path=/login')",
        "[(i + 1, l) for i, l in enumerate(s.split('\\n')) if 'user=dave path=/login' in l]",
    ),
    (
        "grep(context, 'ERROR,service%-1%d,', 0)",
        "r = re.compile(r'ERROR,service-1\\d,'); [(i + 1, l) for i, l in enumerate(s.split('\\n')) if r.search(l)]",
    ),
    (
        "grep(context, [[ERROR,service-1\\d,]], 0, 'regex')",
        "r = re.compile(r'ERROR,service-1\\d,'); [(i + 1, l) for i, l in enumerate(s.split('\\n')) if r.search(l)]",
    ),
    // Low (1%) and high (~38-40%) densities of matching lines, for each way of matching.
    (
        "grep(context, ',ERROR,service-1', 0, true)",
        "[(i + 1, l) for i, l in enumerate(s.split('\\n')) if ',ERROR,service-1' in l]",
    ),
    (
        "grep(context, 'path=/api/', 0, true)",
        "[(i + 1, l) for i, l in enumerate(s.split('\\n')) if 'path=/api/' in l]",
    ),
    (
        "grep(context, 'handled in %d+ ms user=[a-c]')",
        "r = re.compile(r'handled in \\d+ ms user=[a-c]'); [(i + 1, l) for i, l in enumerate(s.split('\\n')) if r.search(l)]",
    ),
    (
        "grep(context, '%d+ ms user=[a-c]')",
        "r = re.compile(r'\\d+ ms user=[a-c]'); [(i + 1, l) for i, l in enumerate(s.split('\\n')) if r.search(l)]",
    ),
    (
        // A level-1 long bracket: `[a-c]]]` would close a level-0 one early.
        "grep(context, [=[handled in \\d+ ms user=[a-c]]=], 0, 'regex')",
        "r = re.compile(r'handled in \\d+ ms user=[a-c]'); [(i + 1, l) for i, l in enumerate(s.split('\\n')) if r.search(l)]",
    ),
    (
        "find_all(context, ',ERROR,')",
        "out = []\ni = s.find(',ERROR,')\nwhile i >= 0:\n    out.append(i + 1); i = s.find(',ERROR,', i + 1)",
    ),
    ("word_count(context)", "len(s.split())"),
    (
        "chunk_by_lines(context, 1000)",
        "ls = s.splitlines(); ['\\n'.join(ls[i:i + 1000]) for i in range(0, len(ls), 1000)]",
    ),
    (
        "chunk_by_size(context, 1000000)",
        "[b[i:i + 1000000] for i in range(0, len(b), 1000000)]",
    ),
    (
        "chunk_by_separator(context, '\\n', 1000000)",
        "out = []; cur = []; size = -1\nfor p in s.split('\\n'):\n    if not p: continue\n    if cur and size + 1 + len(p) <= 1000000: cur.append(p); size += 1 + len(p)\n    else:\n        if cur: out.append('\\n'.join(cur))\n        cur = [p]; size = len(p)\nif cur: out.append('\\n'.join(cur))",
    ),
    (
        "line_range(context, 700000, 700010)",
        "'\\n'.join(s.split('\\n')[699999:700010])",
    ),
];

/// Python timing each entry of [`LIBRARY`] itself; `None` without `python3`.
fn python_times(log_path: &std::path::Path, reps: usize) -> Option<Vec<Duration>> {
    let mut script = format!(
        "import re, time\nb = open({:?}, 'rb').read()\ns = b.decode('utf-8')\n",
        log_path.display().to_string()
    );
    for (_, python) in LIBRARY {
        let body: String = python.lines().map(|l| format!("        {l}\n")).collect();
        script.push_str(&format!(
            "best = 1e9\nfor _ in range({reps}):\n    t = time.perf_counter()\n    if True:\n{body}    best = min(best, time.perf_counter() - t)\nprint(best)\n"
        ));
    }
    let text = common::python(&script, &[])?;
    let times: Vec<Duration> = text
        .lines()
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .map(Duration::from_secs_f64)
        .collect();
    (times.len() == LIBRARY.len()).then_some(times)
}

/// String operations, timed in the sandbox and in stock C Lua 5.4.
const STRING_OPS: &[&str] = &[
    "local n, at = 0, 1 while true do local f = string.find(context, '\\n', at, true) if not f then break end n = n + 1 at = f + 1 end",
    "local n = 0 for line in context:gmatch('[^\\n]+') do if line:find(',ERROR,', 1, true) then n = n + 1 end end",
    "local s, k = context:gsub('\\n', '')",
    "local n = 0 for w in context:gmatch('%a+') do n = n + 1 end",
    "local n = 0 for ms in context:gmatch('(%d+) ms') do n = n + 1 end",
    "local s = string.find(context, 'user=zed%d+')",
    "local n = 0 for line in context:gmatch('[^\\n]+') do if line:match('^%d+%-05%-02') then n = n + 1 end end",
    "local s, k = context:gsub('ERROR', 'E')",
    "local t = {} for i = 1, 200000 do t[i] = context:sub(i * 100, i * 100 + 50) end local s = table.concat(t):upper()",
];

/// The same work as one `re` call, with the `regex` crate.
type DirectCall<'a> = Box<dyn Fn() + 'a>;

/// `re` calls and the same work with the `regex` crate.
fn re_rows(env: &Environment, log: &str, reps: usize) -> Vec<Row> {
    use regex::bytes::Regex;
    let bytes = log.as_bytes();
    let errors = Regex::new(r"ERROR,service-\d+").unwrap();
    let durations = Regex::new(r"(\d+) ms").unwrap();
    let digits = Regex::new(r"\d+").unwrap();
    let newline = Regex::new("\n").unwrap();
    let missing = Regex::new(r"user=zed\d+").unwrap();
    let cases: Vec<(&str, DirectCall)> = vec![
        (
            "re.count(context, [[ERROR,service-\\d+]])",
            Box::new(|| {
                black_box(errors.find_iter(bytes).count());
            }),
        ),
        (
            "re.find_all(context, [[(\\d+) ms]])",
            Box::new(|| {
                let all: Vec<&[u8]> = durations
                    .captures_iter(bytes)
                    .filter_map(|c| c.get(1).map(|m| m.as_bytes()))
                    .collect();
                black_box(all);
            }),
        ),
        (
            "re.gsub(context, [[\\d+]], 'N')",
            Box::new(|| {
                black_box(digits.replace_all(bytes, &b"N"[..]));
            }),
        ),
        (
            "re.split(context, '\\n')",
            Box::new(|| {
                black_box(newline.split(bytes).collect::<Vec<_>>());
            }),
        ),
        (
            "re.find(context, [[user=zed\\d+]])",
            Box::new(|| {
                black_box(missing.find(bytes));
            }),
        ),
    ];
    cases
        .into_iter()
        .map(|(code, direct)| Row {
            operation: code.to_string(),
            ours: time_sandbox(env, reps, &format!("local r = {{ {code} }}")),
            baselines: vec![Some(best_of(reps, &*direct))],
        })
        .collect()
}

fn token_row(env: &Environment, log: &str, reps: usize) -> Row {
    let prefix = &log[..log.len().min(10 << 20)];
    let reference = tiktoken_rs::o200k_base().expect("o200k_base");
    let ours = rlm_registry::tokens::count(prefix);
    assert_eq!(
        ours,
        reference.encode_ordinary(prefix).len(),
        "token counts must be identical"
    );
    let code = format!("local n = token_count(context:sub(1, {}))", prefix.len());
    Row {
        operation: format!("token_count (first {} MB)", prefix.len() >> 20),
        ours: time_sandbox(env, reps, &code),
        baselines: vec![Some(best_of(reps, || {
            black_box(reference.encode_ordinary(prefix).len());
        }))],
    }
}

fn main() {
    // `cargo test --benches` runs this without `--bench`: a quick smoke run then.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let megabytes = common::setting("RLM_BENCH_CONTEXT_MB", if smoke { 1 } else { 100 });
    let reps = common::setting("RLM_BENCH_REPS", if smoke { 1 } else { 3 });
    let log = generate_log(megabytes << 20);
    println!(
        "context: {} bytes, {} lines; best of {reps}",
        log.len(),
        log.lines().count()
    );
    let env = sandbox(&log);

    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(log.as_bytes()).expect("write log");
    let python = python_times(file.path(), reps);
    let library: Vec<Row> = LIBRARY
        .iter()
        .enumerate()
        .map(|(i, (code, _))| Row {
            operation: code.to_string(),
            ours: time_sandbox(&env, reps, &format!("local r = {code}")),
            baselines: vec![python.as_ref().map(|times| times[i])],
        })
        .collect();
    print_table("Library functions vs Python 3", &["Python"], &library);

    let (plain, hooked) = (c_lua(&log, false), c_lua(&log, true));
    let strings: Vec<Row> = STRING_OPS
        .iter()
        .map(|code| Row {
            operation: code.to_string(),
            ours: time_sandbox(&env, reps, code),
            baselines: vec![
                Some(time_c_lua(&plain, reps, code)),
                Some(time_c_lua(&hooked, reps, code)),
            ],
        })
        .collect();
    print_table(
        "string.* in the sandbox vs C Lua 5.4",
        &["C Lua", "C Lua + hook"],
        &strings,
    );
    drop((plain, hooked));

    print_table(
        "re vs the regex crate",
        &["regex"],
        &re_rows(&env, &log, reps),
    );
    print_table(
        "token_count vs tiktoken-rs",
        &["tiktoken-rs"],
        &[token_row(&env, &log, reps)],
    );
}
