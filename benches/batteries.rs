//! The `json` and `csv` built-ins against Python's `json` and `csv` modules, side by side
//! in one run, on the same generated files: a JSON-lines log and the same records as CSV
//! (100 MB each, or `RLM_BENCH_BATTERIES_MB`).
//!
//! Each operation runs in a fresh process (this bench re-run as a child, or `python3`),
//! so that its peak memory can be measured: the growth of the process's peak resident
//! set (`VmHWM`, reset through `/proc/self/clear_refs` once the input is loaded) over its
//! size then. Linux only for the memory figures. Times are wall-clock, the best
//! of `RLM_BENCH_REPS` runs (default 3), the input's loading excluded.
//!
//! Run: `cargo bench --bench batteries` (`RLM_BENCH_BATTERIES_MB=10` for a quick run).

mod common;

use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

/// Set in a child process: the index of the operation to run.
const CHILD: &str = "RLM_BENCH_BATTERIES_CHILD";
/// Set in a child process: the input file.
const INPUT: &str = "RLM_BENCH_BATTERIES_INPUT";

/// One operation: its name, its input, the Lua doing it (over `context`) and the Python
/// doing the same (over `s`).
struct Operation {
    name: &'static str,
    input: Input,
    lua: &'static str,
    python: &'static str,
}

#[derive(Clone, Copy, PartialEq)]
enum Input {
    JsonLines,
    Csv,
}

const OPERATIONS: &[Operation] = &[
    Operation {
        name: "json.lines + field access",
        input: Input::JsonLines,
        lua: "local errors, total = 0, 0
              for r in json.lines(context) do
                total = total + r.latency_ms
                if r.level == 'ERROR' then errors = errors + 1 end
              end
              result = errors",
        python: "errors, total = 0, 0
for line in s.split('\\n'):
    if not line.strip(): continue
    r = json.loads(line)
    total += r['latency_ms']
    if r['level'] == 'ERROR': errors += 1
result = errors",
    },
    Operation {
        name: "json.decode (each line, kept)",
        input: Input::JsonLines,
        lua: "local records, n = {}, 0
              for line in context:gmatch('[^\\n]+') do n = n + 1; records[n] = json.decode(line) end
              result = n",
        python: "records = [json.loads(line) for line in s.split('\\n') if line]
result = len(records)",
    },
    Operation {
        name: "json.encode (each record of json.lines)",
        input: Input::JsonLines,
        lua: "local bytes = 0
              for r in json.lines(context) do bytes = bytes + #json.encode(r) end
              result = bytes",
        python: "bytes = 0
for line in s.split('\\n'):
    if not line.strip(): continue
    bytes += len(json.dumps(json.loads(line), separators=(',', ':')))
result = bytes",
    },
    Operation {
        name: "json.encode (all records, one document)",
        input: Input::JsonLines,
        lua: "local records, n = {}, 0
              for r in json.lines(context) do n = n + 1; records[n] = r end
              result = #json.encode(records)",
        python: "records = [json.loads(line) for line in s.split('\\n') if line]
result = len(json.dumps(records, separators=(',', ':')))",
    },
    Operation {
        name: "csv.parse (header) / csv.DictReader",
        input: Input::Csv,
        lua: "result = #csv.parse(context)",
        python: "result = len(list(csv.DictReader(io.StringIO(s))))",
    },
    Operation {
        name: "csv.parse {header = false} / csv.reader",
        input: Input::Csv,
        lua: "result = #csv.parse(context, {header = false})",
        python: "result = len(list(csv.reader(io.StringIO(s))))",
    },
    Operation {
        name: "csv.rows + field access / DictReader loop",
        input: Input::Csv,
        lua: "local errors = 0
              for r in csv.rows(context) do if r.level == 'ERROR' then errors = errors + 1 end end
              result = errors",
        python: "errors = 0
for r in csv.DictReader(io.StringIO(s)):
    if r['level'] == 'ERROR': errors += 1
result = errors",
    },
];

/// Deterministic records, about `bytes` bytes of each format: JSON lines and CSV.
fn generate(bytes: usize) -> (String, String) {
    let mut next = common::generator();
    let users = ["alice", "bob", "carol", "dave", "erin", "frank"];
    let paths = ["/api/v1/items", "/api/v1/users", "/login", "/health"];
    let mut json = String::with_capacity(bytes + 300);
    let mut csv = String::with_capacity(bytes + 300);
    csv.push_str("id,time,level,user,path,status,latency_ms,message\n");
    let mut id = 0u64;
    while json.len() < bytes || csv.len() < bytes {
        id += 1;
        let level = match next(100) {
            0..=1 => "ERROR",
            2..=9 => "WARN",
            _ => "INFO",
        };
        let user = users[next(users.len() as u64) as usize];
        let path = paths[next(paths.len() as u64) as usize];
        let status = [200, 200, 200, 404, 500][next(5) as usize];
        let latency = next(100_000) as f64 / 100.0;
        let time = format!(
            "2024-05-{:02}T{:02}:{:02}:{:02}Z",
            1 + id / 86_400 % 28,
            id / 3600 % 24,
            id / 60 % 60,
            id % 60
        );
        let message = format!("request {} handled, \"ok\"", next(1_000_000));
        if json.len() < bytes {
            json.push_str(&format!(
                "{{\"id\": {id}, \"time\": \"{time}\", \"level\": \"{level}\", \"user\": \"{user}\", \"path\": \"{path}\", \"status\": {status}, \"latency_ms\": {latency}, \"tags\": [\"web\", \"{user}\"], \"message\": \"request handled \\\"ok\\\"\"}}\n"
            ));
        }
        if csv.len() < bytes {
            csv.push_str(&format!(
                "{id},{time},{level},{user},{path},{status},{latency},\"{}\"\n",
                message.replace('"', "\"\"")
            ));
        }
    }
    (json, csv)
}

/// A `/proc/self/status` field in bytes (Linux), 0 elsewhere.
fn status_bytes(field: &str) -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let rest = line.strip_prefix(field)?.strip_prefix(':')?;
                rest.trim().trim_end_matches(" kB").parse::<usize>().ok()
            })
        })
        .map_or(0, |kb| kb * 1024)
}

/// Resets the process's peak resident set to its current size (writing 5 to
/// `/proc/self/clear_refs`, Linux) and returns that size: the peak measured after it is the
/// operation's, not the input's loading (which briefly holds the text twice).
fn reset_peak() -> usize {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_bytes("VmRSS")
}

/// The child: runs one operation in the sandbox and prints `seconds peak_bytes`. The
/// peak is the first run's: a later run starts beside the garbage of the one before,
/// which Lua's collector frees at its own pace, where Python frees it at once.
fn child(index: usize, input: &str, reps: usize) {
    let operation = &OPERATIONS[index];
    let text = std::fs::read_to_string(input).expect("input");
    let env = common::sandbox(&text);
    drop(text);
    let baseline = reset_peak();
    let mut best = Duration::MAX;
    let mut peak = None;
    for _ in 0..reps.max(1) {
        let started = Instant::now();
        if let Err(e) = env.execute(operation.lua) {
            panic!("{}: {e}", operation.name);
        }
        best = best.min(started.elapsed());
        peak.get_or_insert_with(|| status_bytes("VmHWM").saturating_sub(baseline));
        env.execute("result = nil").expect("reset");
    }
    let peak = peak.unwrap_or_default();
    println!("{} {peak}", best.as_secs_f64());
}

/// Runs one operation in a child process of this bench: (time, peak bytes). The child
/// is told the number of runs, since it is started without `--bench` and would
/// otherwise take a smoke run's one: a single first run, which on a virtual machine
/// mostly measures how fast fresh memory is handed over.
fn ours(index: usize, input: &std::path::Path, reps: usize) -> (Duration, usize) {
    let exe = std::env::current_exe().expect("current exe");
    let output = Command::new(exe)
        .env("RLM_BENCH_REPS", reps.to_string())
        .env(CHILD, index.to_string())
        .env(INPUT, input)
        .output()
        .expect("child");
    assert!(
        output.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_measure(&String::from_utf8_lossy(&output.stdout)).expect("child output")
}

/// Runs the Python of one operation in `python3`: (time, peak bytes), `None` without it.
fn python(
    operation: &Operation,
    input: &std::path::Path,
    reps: usize,
) -> Option<(Duration, usize)> {
    let body: String = operation
        .python
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let script = format!(
        "import csv, io, json, sys, time, gc
def status(field):
    for line in open('/proc/self/status'):
        if line.startswith(field + ':'): return int(line.split()[1]) * 1024
    return 0
s = open(sys.argv[1], encoding='utf-8').read()
gc.collect()
try:
    open('/proc/self/clear_refs', 'w').write('5')
except OSError:
    pass
baseline = status('VmRSS')
best = None
def run():
{body}    return result
for _ in range({reps}):
    t0 = time.perf_counter()
    run()
    t = time.perf_counter() - t0
    best = t if best is None else min(best, t)
    gc.collect()
peak = status('VmHWM') - baseline
print(best, max(peak, 0))
"
    );
    let stdout = common::python(&script, &[input.as_ref()])?;
    parse_measure(&stdout)
}

fn parse_measure(text: &str) -> Option<(Duration, usize)> {
    let mut parts = text.split_whitespace();
    let seconds: f64 = parts.next()?.parse().ok()?;
    let peak: usize = parts.next()?.parse().ok()?;
    Some((Duration::from_secs_f64(seconds), peak))
}

fn write_temp(text: &str, suffix: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new()
        .suffix(suffix)
        .tempfile()
        .expect("temp file");
    file.write_all(text.as_bytes()).expect("write");
    file
}

fn main() {
    // `cargo test --benches` runs this without `--bench`: a quick smoke run then.
    let smoke = !std::env::args().any(|arg| arg == "--bench");
    let reps = common::setting("RLM_BENCH_REPS", if smoke { 1 } else { 3 });
    if let Ok(index) = std::env::var(CHILD) {
        let input = std::env::var(INPUT).expect("input");
        child(index.parse().expect("index"), &input, reps);
        return;
    }
    let mb = common::setting("RLM_BENCH_BATTERIES_MB", if smoke { 1 } else { 100 });
    let (json, csv) = generate(mb << 20);
    println!(
        "\n### json and csv against Python ({} MB of JSON lines, {} MB of CSV; best of {reps})\n",
        json.len() >> 20,
        csv.len() >> 20
    );
    let json_file = write_temp(&json, ".jsonl");
    let csv_file = write_temp(&csv, ".csv");
    drop((json, csv));
    println!("| operation | rlm | peak | Python | peak | Python / rlm |");
    println!("|---|---|---|---|---|---|");
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let mib = |b: usize| format!("{:.0} MiB", b as f64 / (1 << 20) as f64);
    for (i, operation) in OPERATIONS.iter().enumerate() {
        let input = match operation.input {
            Input::JsonLines => json_file.path(),
            Input::Csv => csv_file.path(),
        };
        let (time, peak) = ours(i, input, reps);
        let line = match python(operation, input, reps) {
            Some((p_time, p_peak)) => format!(
                "| {} | {} | {} | {} | {} | {:.2}x |",
                operation.name,
                ms(time),
                mib(peak),
                ms(p_time),
                mib(p_peak),
                p_time.as_secs_f64() / time.as_secs_f64()
            ),
            None => format!(
                "| {} | {} | {} | - | - | - |",
                operation.name,
                ms(time),
                mib(peak)
            ),
        };
        println!("{line}");
    }
}
