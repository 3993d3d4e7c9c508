//! `lua/collections` over a million elements, side by side in one run: each operation in
//! the sandbox (where `sort_by` sorts in Rust), the same library's pure-Lua code in a bare
//! C Lua 5.4 state, and the same operation in Python (`collections.Counter`,
//! `sorted(key=...)`; a `python3` subprocess timing itself, when there is one).
//!
//! The data is one generated text of `user<n> <ms>` lines (20,000 distinct users) that
//! both sides parse, outside the timings, into a list of strings (`words`) and a list of
//! records (`rows`: Lua tables, Python dicts).
//!
//! Run: `cargo bench --bench collections` (`RLM_BENCH_ELEMENTS=100000` for a quick run).
//! Each figure is the best of `RLM_BENCH_REPS` runs (default 3). Peak memory is the
//! process's high-water mark (VmHWM) after the sandbox runs, and Python's maximum RSS.

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::environment::Environment;

/// `count` lines `user<n> <ms>`, deterministic.
fn generate(count: usize) -> String {
    let mut next = common::generator();
    let mut text = String::with_capacity(count * 20);
    for _ in 0..count {
        text.push_str(&format!("user{} {}\n", next(20_000), next(100_000)));
    }
    text
}

/// Each operation in Lua and the same in Python.
const OPERATIONS: &[(&str, &str)] = &[
    ("count(words)", "Counter(words)"),
    (
        "count_by(rows, \"user\")",
        "Counter(r['user'] for r in rows)",
    ),
    (
        "count_by(words, function(w) return w:sub(1, 6) end)",
        "Counter(w[:6] for w in words)",
    ),
    (
        "most_common(count(words), 10)",
        "Counter(words).most_common(10)",
    ),
    (
        "group_by(rows, \"user\")",
        "g = defaultdict(list)\nfor r in rows: g[r['user']].append(r)",
    ),
    (
        "sort_by(rows, \"ms\")",
        "sorted(rows, key=lambda r: r['ms'])",
    ),
    (
        "sort_by(rows, function(r) return r.ms end, true)",
        "sorted(rows, key=lambda r: r['ms'], reverse=True)",
    ),
    ("sort_by(words)", "sorted(words)"),
    (
        "sort_by(rows, function(r) return {r.user, r.ms} end)",
        "sorted(rows, key=lambda r: (r['user'], r['ms']))",
    ),
];

/// Parses `context` into the globals `words` and `rows`.
const LOAD_LUA: &str = r#"
words, rows = {}, {}
for user, ms in string.gmatch(context, "(%S+) (%d+)\n") do
  words[#words + 1] = user
  rows[#rows + 1] = { user = user, ms = tonumber(ms) }
end
"#;

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

/// The statement that runs `operation` and keeps its result until the next run.
fn statement(operation: &str) -> String {
    format!("bench_result = nil\nbench_result = {operation}")
}

fn sandbox(text: &str) -> Environment {
    let env = common::sandbox(text);
    env.execute(LOAD_LUA).expect("data");
    env.execute("local _ = count, count_by, most_common, group_by, sort_by")
        .expect("library");
    env
}

/// A bare C Lua state with the baked library loaded (its pure-Lua code: no Rust).
fn bare_lua(text: &str) -> mlua::Lua {
    let lua = mlua::Lua::new();
    for chunk in Registry::baked().chunks() {
        lua.load(chunk.source())
            .set_name(chunk.file())
            .exec()
            .expect("library chunk");
    }
    lua.globals()
        .set("context", lua.create_string(text).expect("string"))
        .expect("context");
    lua.load(LOAD_LUA).exec().expect("data");
    lua
}

/// Python timing each operation itself (best of `reps`, seconds, one line each), then
/// its maximum resident set in KiB.
fn python_times(text: &str, reps: usize) -> Option<(Vec<f64>, u64)> {
    let mut script = String::from(
        "import sys, time, resource\nfrom collections import Counter, defaultdict\n\
         words, rows = [], []\n\
         for line in sys.stdin.read().splitlines():\n    user, ms = line.split(' ')\n    words.append(user)\n    rows.append({'user': user, 'ms': int(ms)})\n",
    );
    for (_, python) in OPERATIONS {
        let body = python.replace('\n', "\n    ");
        script.push_str(&format!(
            "best = float('inf')\nfor _ in range({reps}):\n    result = None\n    t0 = time.perf_counter()\n    {}\n    best = min(best, time.perf_counter() - t0)\nprint(best)\n",
            if body.contains('\n') { body } else { format!("result = {body}") }
        ));
    }
    script.push_str("print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n");
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(text.as_bytes()).ok()?;
    let output = child.wait_with_output().ok()?;
    if !output.status.success() {
        return None;
    }
    let out = String::from_utf8_lossy(&output.stdout);
    let mut values: Vec<&str> = out.lines().collect();
    let rss = values.pop()?.trim().parse().ok()?;
    let times = values
        .iter()
        .map(|v| v.trim().parse().ok())
        .collect::<Option<Vec<f64>>>()?;
    Some((times, rss))
}

/// This process's peak resident set (VmHWM) in KiB, where /proc tells it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo test --benches` runs this without `--bench`: a quick smoke run then.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let elements = common::setting("RLM_BENCH_ELEMENTS", if smoke { 10_000 } else { 1_000_000 });
    let reps = common::setting("RLM_BENCH_REPS", if smoke { 1 } else { 3 });
    let text = generate(elements);
    let python = python_times(&text, reps);

    let env = sandbox(&text);
    let sandboxed: Vec<Duration> = OPERATIONS
        .iter()
        .map(|(lua, _)| {
            let code = statement(lua);
            best_of(reps, || {
                env.execute(&code).unwrap_or_else(|e| panic!("{lua}: {e}"));
            })
        })
        .collect();
    let sandbox_peak = peak_rss_kib();
    drop(env);

    let bare = bare_lua(&text);
    let pure: Vec<Duration> = OPERATIONS
        .iter()
        .map(|(lua, _)| {
            let code = statement(lua);
            best_of(reps, || {
                bare.load(&code)
                    .exec()
                    .unwrap_or_else(|e| panic!("{lua}: {e}"));
            })
        })
        .collect();

    println!("\n### lua/collections, {elements} elements (best of {reps})\n");
    println!("| operation | rlm sandbox | pure Lua (bare VM) | Python | Python / rlm |");
    println!("|---|---|---|---|---|");
    for (i, (lua, python_code)) in OPERATIONS.iter().enumerate() {
        let (python_time, ratio) = match &python {
            Some((times, _)) => {
                let seconds = times[i];
                (
                    format!("{:.1} ms", seconds * 1000.0),
                    format!("{:.2}x", seconds / sandboxed[i].as_secs_f64()),
                )
            }
            None => ("-".into(), "-".into()),
        };
        println!(
            "| `{lua}` vs `{}` | {} | {} | {python_time} | {ratio} |",
            python_code.replace('\n', "; "),
            ms(sandboxed[i]),
            ms(pure[i]),
        );
    }
    let mib = |kib: u64| format!("{:.0} MiB", kib as f64 / 1024.0);
    println!(
        "\nPeak memory: rlm process {} (the data, parsed into the sandbox, and every result); Python {}.",
        sandbox_peak.map_or("-".into(), mib),
        python.as_ref().map_or("-".into(), |(_, rss)| mib(*rss)),
    );
}
