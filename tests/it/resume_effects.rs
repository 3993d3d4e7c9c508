//! What a resumed run rebuilds besides the conversation: the clock and random numbers its
//! earlier blocks read (their journals), effects not done again (a host function with an
//! external effect, a store write), and a run killed past a compaction. As in
//! `resume.rs`, the first run talks to one scripted server and the resumed run to another.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rlm_registry::Registry;
use rlm_registry::providers::{Effect, HostFunction, Provider, Providers, StoreProvider};
use rlm_registry::rlm::trajectory::Record;
use rlm_registry::rlm::{Resume, Rlm};

use crate::compaction::{WINDOW, model};
use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{client, lua};

fn rlm_with(server: &OpenAiServer, providers: Arc<Providers>) -> Rlm {
    Rlm::new(Arc::new(client(server)), Registry::baked().clone(), 10).providers(providers)
}

/// Runs `first` (a script the server answers, then it is gone) traced in `dir`, then
/// resumes it against a server holding `rest`: the answer and the resumed run's requests.
fn interrupted_then_resumed(
    dir: &Path,
    (first, rest): (Vec<Behavior>, Vec<Behavior>),
    providers: impl Fn() -> Arc<Providers>,
) -> (String, usize) {
    let trace = dir.join("run.jsonl");
    let gone = OpenAiServer::start(first, Behavior::Drop);
    let report = rlm_with(&gone, providers())
        .trace_file(&trace)
        .unwrap()
        .run_report("Q", None, None);
    assert!(report.result.is_err(), "the server went away");
    let server = OpenAiServer::start(rest, Behavior::status(500));
    let report = Resume::from_file(&trace)
        .unwrap()
        .run(rlm_with(&server, providers()), None, None)
        .unwrap();
    (report.result.unwrap(), server.request_count())
}

#[test]
fn the_clock_and_random_numbers_of_earlier_turns_are_the_recorded_ones_after_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let first = vec![
        lua(
            "seen = string.format('%d %d %.9f', os.time(), math.random(1, 1e9), os.clock())\nprint(seen)",
        ),
        lua("print('two')"),
    ];
    let rest = vec![lua("FINAL(seen)")];
    let (answer, requests) =
        interrupted_then_resumed(dir.path(), (first, rest), || Arc::new(Providers::builtin()));
    let trace = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    let printed = trace
        .lines()
        .filter_map(|line| serde_json::from_str::<Record>(line).ok())
        .find_map(|record| match record {
            Record::Turn(turn) if turn.turn == 1 => Some(turn.outputs[0].output.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        format!("{answer}\n"),
        printed,
        "turn 1 ran again with its values"
    );
    assert_eq!(requests, 1);
}

/// A host function with an external effect, counting its calls.
struct Bell(Arc<AtomicUsize>);

impl Provider for Bell {
    fn name(&self) -> &str {
        "bell"
    }
    fn description(&self) -> &str {
        "Rings a bell."
    }
    fn functions(&self) -> Vec<HostFunction> {
        let rung = Arc::clone(&self.0);
        vec![
            HostFunction::typed(
                "ring",
                "--- Rings the bell.\n---@return integer n The rings so far",
                move |_, (): ()| Ok::<_, String>(rung.fetch_add(1, Ordering::SeqCst) + 1),
            )
            .effect(Effect::External),
        ]
    }
}

#[test]
fn an_external_effect_of_an_earlier_turn_is_not_done_again_by_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let rung = Arc::new(AtomicUsize::new(0));
    let providers = || {
        let mut providers = Providers::builtin();
        providers.register(Bell(Arc::clone(&rung))).unwrap();
        Arc::new(providers)
    };
    let first = vec![lua("n = ring()"), lua("print(n)")];
    let rest = vec![lua("FINAL(n .. ' then ' .. ring())")];
    let (answer, _) = interrupted_then_resumed(dir.path(), (first, rest), providers);
    assert_eq!(answer, "1 then 2", "turn 1's ring was given back, not rung");
    assert_eq!(rung.load(Ordering::SeqCst), 2, "one ring per run");
}

#[test]
fn a_store_written_before_the_interruption_is_rebuilt_by_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let providers = || {
        let mut providers = Providers::builtin();
        providers.register(StoreProvider::new(1 << 20)).unwrap();
        Arc::new(providers)
    };
    let first = vec![lua("store_set('k', 'kept')"), lua("print('two')")];
    let rest = vec![lua("FINAL(store_get('k'))")];
    let (answer, requests) = interrupted_then_resumed(dir.path(), (first, rest), providers);
    assert_eq!(answer, "kept");
    assert_eq!(requests, 1);
}

/// The requests whose answers a trace holds: turns and summaries with a reply, and the
/// reply lines of a turn cut short.
fn answered_on_file(trace: &str) -> usize {
    let records: Vec<Record> = trace
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let turns: Vec<u32> = records
        .iter()
        .filter_map(|r| match r {
            Record::Turn(turn) if turn.reply.is_some() => Some(turn.turn),
            _ => None,
        })
        .collect();
    let summaries = records
        .iter()
        .filter(|r| matches!(r, Record::Compaction(c) if c.reply.is_some()))
        .count();
    let cut = records
        .iter()
        .filter(|r| matches!(r, Record::Reply(reply) if !turns.contains(&reply.turn)))
        .count();
    turns.len() + summaries + cut
}

#[test]
fn a_run_killed_past_a_compaction_resumes_with_the_answer_of_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.jsonl");
    let slow = OpenAiServer::always(
        model(12)
            .after(Duration::from_millis(150))
            .within_window(WINDOW),
    );
    let ask = |server: &OpenAiServer| {
        let mut command = rlm_command();
        command
            .args(["ask", "Print your words each turn.", "-q", "--trace"])
            .arg(&trace)
            .args([
                "--max-iterations",
                "12",
                "--context-window",
                &WINDOW.to_string(),
            ])
            .args(llm_args(&server.base_url(), "scripted"));
        command
    };
    let mut child = ask(&slow)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Past the second compaction (after turn 4), into turn 6.
    while !std::fs::read_to_string(&trace)
        .is_ok_and(|text| text.contains(r#""event":"turn","agent":"0","depth":0,"turn":5,"#))
    {
        assert!(Instant::now() < deadline, "the run never got there");
        std::thread::sleep(Duration::from_millis(10));
    }
    Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(!child.wait().unwrap().success());
    let on_file = std::fs::read_to_string(&trace).unwrap();
    assert!(on_file.contains(r#""event":"compaction""#), "{on_file}");

    let server = OpenAiServer::always(model(12).within_window(WINDOW));
    let out = rlm_command()
        .args(["ask", "-q", "--resume"])
        .arg(&trace)
        .args(["--base-url", &server.base_url()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "11 outputs, 34 messages, system first, user last\n",
        "as an uninterrupted run answers"
    );
    assert_eq!(
        server.request_count(),
        12 + 5 - answered_on_file(&on_file),
        "no answered request asked again"
    );
    for request in server.requests() {
        assert!(request.prompt_tokens() <= WINDOW, "no request was refused");
    }
    let whole = std::fs::read_to_string(&trace).unwrap();
    let compactions = whole.matches(r#""event":"compaction""#).count();
    assert_eq!(compactions, 5, "each compaction on file once");
}
