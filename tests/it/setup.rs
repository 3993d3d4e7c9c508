//! A run's setup: each setting from the flag, else the environment variable, else
//! `rlm.toml`, else the default (`rlm_registry::setup`), and where it acts.

use std::collections::HashMap;
use std::time::Duration;

use rlm_registry::conventions::AnswerProtocol;
use rlm_registry::llm::DEFAULT_MAX_CONCURRENCY;
use rlm_registry::rlm::PromptMode;
use rlm_registry::setup::{
    CacheChoice, CacheLocation, Defaults, FileSettings, RunSettings, RunSetup, WindowSource,
};

use crate::support::cli::{llm_args, rlm_command, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::lua;

fn resolve(given: &RunSettings, file: &str, env: &[(&str, &str)]) -> RunSetup {
    let file = FileSettings::parse(file, "rlm.toml", "conf").unwrap();
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    RunSetup::resolve(
        given,
        &file,
        |name| env.get(name).cloned(),
        &Defaults::default(),
    )
    .unwrap()
}

const FILE: &str = "[model]\nname = \"file-model\"\nbase_url = \"http://file/v1\"\nconcurrency = 8\n\
    context_window = 16000\nanswer_protocol = \"answer\"\nprompt_mode = \"full\"\n\
    [cache]\npath = \"c.sqlite\"\nmax_mb = 7\n[budgets]\nmax_tokens = 900\nmax_llm_calls = 9\nmax_time = 60\n";

#[test]
fn the_file_gives_every_setting_when_nothing_else_does() {
    let setup = resolve(&RunSettings::default(), FILE, &[]);
    assert_eq!(setup.llm.model, "file-model");
    assert_eq!(setup.llm.base_url, "http://file/v1");
    assert_eq!(setup.llm.max_concurrency, 8);
    assert_eq!(setup.context_window, Some(16_000));
    assert_eq!(setup.window_source, WindowSource::File);
    assert_eq!(setup.answer_protocol, AnswerProtocol::Answer);
    assert_eq!(setup.prompt_mode, PromptMode::Full);
    // A relative cache file is relative to the configuration file's directory.
    let expected = CacheLocation::File(std::path::Path::new("conf").join("c.sqlite"));
    assert_eq!(setup.cache, Some((expected, 7 << 20)));
    assert_eq!(setup.budgets.total_tokens, Some(900));
    assert_eq!(setup.budgets.llm_calls, Some(9));
    assert_eq!(setup.budgets.wall_time, Some(Duration::from_secs(60)));
}

#[test]
fn a_variable_wins_over_the_file() {
    let env = [
        ("RLM_MODEL", "env-model"),
        ("OPENAI_BASE_URL", "http://env/v1"),
        ("RLM_LLM_CONCURRENCY", "3"),
        ("RLM_CONTEXT_WINDOW", "32k"),
        ("RLM_ANSWER_PROTOCOL", "final"),
        ("RLM_PROMPT_MODE", "compact"),
        ("RLM_CACHE", "redis://cache:6379/0"),
    ];
    let setup = resolve(&RunSettings::default(), FILE, &env);
    assert_eq!(setup.llm.model, "env-model");
    assert_eq!(setup.llm.base_url, "http://env/v1");
    assert_eq!(setup.llm.max_concurrency, 3);
    assert_eq!(setup.context_window, Some(32_000));
    assert_eq!(setup.window_source, WindowSource::Variable);
    assert_eq!(setup.answer_protocol, AnswerProtocol::Final);
    assert_eq!(setup.prompt_mode, PromptMode::Compact);
    // A URL is taken as written, never joined to a directory.
    assert_eq!(
        setup.cache.map(|(location, _)| location),
        Some(CacheLocation::Url("redis://cache:6379/0".into()))
    );
}

#[test]
fn a_flag_wins_over_the_variable_and_the_file() {
    let given = RunSettings {
        model: Some("flag-model".into()),
        llm_concurrency: Some(2),
        context_window: Some(4_096),
        answer_protocol: Some(AnswerProtocol::Final),
        prompt_mode: Some(PromptMode::Compact),
        cache: CacheChoice::Off,
        max_tokens: Some(50),
        ..RunSettings::default()
    };
    let env = [
        ("RLM_MODEL", "env-model"),
        ("RLM_LLM_CONCURRENCY", "3"),
        ("RLM_CONTEXT_WINDOW", "32k"),
        ("RLM_CACHE", "other.sqlite"),
    ];
    let setup = resolve(&given, FILE, &env);
    assert_eq!(setup.llm.model, "flag-model");
    assert_eq!(setup.llm.max_concurrency, 2);
    assert_eq!(setup.context_window, Some(4_096));
    assert_eq!(setup.window_source, WindowSource::Given);
    assert_eq!(setup.answer_protocol, AnswerProtocol::Final);
    assert_eq!(
        setup.cache, None,
        "--no-cache wins over the variable and the file"
    );
    assert_eq!(setup.budgets.total_tokens, Some(50));
    assert_eq!(
        setup.budgets.llm_calls,
        Some(9),
        "what the flags leave, the file gives"
    );
}

#[test]
fn the_defaults_come_last() {
    let setup = resolve(&RunSettings::default(), "", &[]);
    assert_eq!(setup.llm.max_concurrency, DEFAULT_MAX_CONCURRENCY);
    assert_eq!(setup.context_window, None);
    assert_eq!(setup.window_source, WindowSource::Unknown);
    assert_eq!(setup.prompt_mode, PromptMode::Compact);
    assert_eq!(setup.cache, None);
    let defaults = Defaults {
        context_window: Some(128_000),
        cache: Some(CacheLocation::File("out/cache.sqlite".into())),
    };
    let file = FileSettings::default();
    let setup = RunSetup::resolve(&RunSettings::default(), &file, |_| None, &defaults).unwrap();
    assert_eq!(setup.context_window, Some(128_000));
    assert_eq!(
        setup.window_source,
        WindowSource::Default,
        "the server, asked later, would come before it"
    );
    assert!(setup.cache.is_some());
}

#[test]
fn a_variable_that_does_not_parse_is_an_error_naming_it() {
    let file = FileSettings::default();
    for (name, value) in [
        ("RLM_LLM_CONCURRENCY", "0"),
        ("RLM_LLM_CONCURRENCY", "many"),
        ("RLM_CONTEXT_WINDOW", "big"),
        ("RLM_PROMPT_MODE", "short"),
        ("RLM_ANSWER_PROTOCOL", "FINAL"),
        ("RLM_TIMEOUT_SECS", "-1"),
    ] {
        let err = RunSetup::resolve(
            &RunSettings::default(),
            &file,
            |n| (n == name).then(|| value.to_string()),
            &Defaults::default(),
        )
        .unwrap_err();
        assert!(
            err.message.starts_with(&format!("{name}={value}: ")),
            "{name}: {err}"
        );
    }
}

#[test]
fn the_files_run_sections_are_checked_with_their_place() {
    let error = |text: &str| FileSettings::parse(text, "rlm.toml", ".").unwrap_err();
    let err = error("[model]\nanswer_protocol = \"FINAL\"\n");
    assert_eq!((err.line, err.column), (2, 19));
    assert!(
        err.message.contains("expected final or answer"),
        "{}",
        err.message
    );
    let err = error("[model]\ncontext_window = 0\n");
    assert_eq!((err.line, err.column), (2, 18));
    assert!(err.message.contains("context_window"), "{}", err.message);
    let err = error("[model]\nprompt_mode = \"short\"\n");
    assert!(
        err.message.contains("full, compact or auto"),
        "{}",
        err.message
    );
    let err = error("[budgets]\nmax_time = -1\n");
    assert!(err.message.contains("max_time"), "{}", err.message);
    let err = error("[model]\nwindow = 8192\n");
    assert!(
        err.message.contains("unknown field `window`"),
        "{}",
        err.message
    );
    // A section neither the run nor the providers know is refused.
    let err = error("[modle]\nname = \"x\"\n");
    assert!(err.message.contains("modle"), "{}", err.message);
    // The providers' sections are theirs, not an error here.
    assert!(FileSettings::parse("[serve]\nallow_origins = []\n", "rlm.toml", ".").is_ok());
}

#[test]
fn every_command_refuses_a_bad_run_section_of_rlm_toml() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rlm.toml");
    std::fs::write(&config, "[model]\nconcurrency = 0\n").unwrap();
    for args in [
        vec!["ask", "q"],
        vec!["eval", "--out", dir.path().to_str().unwrap()],
        vec!["serve"],
        vec!["exec", "print(1)"],
        vec!["prompt"],
        vec!["list"],
    ] {
        let out = rlm_command()
            .args(&args)
            .args(["--config", config.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("rlm.toml:2:15"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// A first reply whose code sends 40 sub-calls through `parallel_map`, then answers.
fn forty_sub_calls() -> OpenAiServer {
    OpenAiServer::start(
        vec![lua(
            "local items = {}\nfor i = 1, 40 do items[i] = 'item ' .. i end\n\
             local r = parallel_map(items, function(x) return llm_query(x) end)\n\
             FINAL(#r .. ' ' .. r[1] .. ' ' .. r[40])",
        )],
        Behavior::echo(Duration::from_millis(40)),
    )
}

#[test]
fn behind_a_cache_the_llm_concurrency_holds_and_the_order_too() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.sqlite");
    let server = forty_sub_calls();
    let out = rlm_command()
        .args(["ask", "Echo them.", "--quiet", "--llm-concurrency", "4"])
        .args(["--cache", cache.to_str().unwrap()])
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "40 echo: item 1 echo: item 40\n");
    assert_eq!(server.request_count(), 41);
    assert_eq!(server.max_in_flight(), 4, "at most 4 at once, and 4 were");
}

#[test]
fn the_variable_and_the_file_set_the_llm_concurrency_too() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rlm.toml");
    std::fs::write(&config, "[model]\nconcurrency = 3\n").unwrap();
    for (variable, expected) in [(None, 3), (Some("2"), 2)] {
        let server = forty_sub_calls();
        let mut command = rlm_command();
        command
            .args([
                "ask",
                "Echo them.",
                "--quiet",
                "--config",
                config.to_str().unwrap(),
            ])
            .args(llm_args(&server.base_url(), "test-model"));
        if let Some(value) = variable {
            command.env("RLM_LLM_CONCURRENCY", value);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(server.max_in_flight(), expected, "{variable:?}");
    }
}

#[test]
fn the_prompt_command_shows_the_mode_the_setup_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rlm.toml");
    std::fs::write(&config, "[model]\nprompt_mode = \"full\"\n").unwrap();
    let full = rlm_command()
        .args(["prompt", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let compact = rlm_command().args(["prompt"]).output().unwrap();
    assert_eq!(full.status.code(), Some(0), "{}", stderr(&full));
    assert!(
        stdout(&full).len() > 2 * stdout(&compact).len(),
        "[model] prompt_mode = \"full\" lists every function in full"
    );
    let env = rlm_command()
        .args(["prompt", "--config", config.to_str().unwrap()])
        .env("RLM_PROMPT_MODE", "compact")
        .output()
        .unwrap();
    assert_eq!(
        stdout(&env),
        stdout(&compact),
        "the variable wins over the file"
    );
}

#[test]
fn a_refusal_inside_a_run_names_the_runs_budget_and_its_flag() {
    // The sub-call's prompt alone is ~5,000 tokens: with its reply's reserve it cannot
    // fit what is left of 6,000 after the root's first turn (which the server reports
    // as 20 tokens).
    let server = OpenAiServer::start(
        vec![
            Behavior::reply_with_usage(
                "```lua\nprint(pcall(llm_query, string.rep('word ', 5000)))\n```",
                10,
                10,
            ),
            Behavior::reply_with_usage("```lua\nFINAL('done')\n```", 10, 10),
        ],
        Behavior::reply("FINAL('late')"),
    );
    let out = rlm_command()
        .args(["ask", "Q", "--quiet", "--max-tokens", "6000"])
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let second = &server.requests()[1].body;
    assert!(
        second.contains("llm_query: not sent: the run's token budget has"),
        "{second}"
    );
    assert!(second.contains("set by --max-tokens"), "{second}");
}

#[test]
fn the_choices_help_quotes_the_librarys_threshold() {
    let auto = PromptMode::CHOICES
        .iter()
        .find(|(name, _)| *name == "auto")
        .unwrap();
    let threshold = rlm_registry::rlm::AUTO_COMPACT_ABOVE_TOKENS;
    let shown = format!("{},{:03}", threshold / 1000, threshold % 1000);
    assert!(auto.1.contains(&shown), "{}", auto.1);
}

#[test]
fn a_cache_url_of_a_store_this_version_lacks_warns_once_and_the_run_goes_on() {
    let server = OpenAiServer::start(
        vec![lua("FINAL(llm_query('hi'))")],
        Behavior::echo(Duration::ZERO),
    );
    let out = rlm_command()
        .args(["ask", "Q", "--cache", "memcached://127.0.0.1:1/0"])
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "echo: hi\n");
    let err = stderr(&out);
    assert_eq!(err.matches("warning: the call cache").count(), 1, "{err}");
    assert!(err.contains("sqlite://PATH"), "the forms it takes: {err}");
    // A sqlite:// URL is a file like a path.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("c.sqlite").display());
    let server = OpenAiServer::start(
        vec![lua("FINAL(llm_query('hi'))")],
        Behavior::echo(Duration::ZERO),
    );
    let out = rlm_command()
        .args(["ask", "Q", "--quiet", "--cache", &url])
        .args(llm_args(&server.base_url(), "test-model"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("c.sqlite").is_file());
    let stats = rlm_command()
        .args(["cache", "stats", &url])
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0), "{}", stderr(&stats));
    assert!(stdout(&stats).contains("entries  2"), "{}", stdout(&stats));
}

#[test]
fn a_time_budget_that_is_not_a_positive_number_of_seconds_is_refused() {
    let file = FileSettings::default();
    for secs in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let given = RunSettings {
            max_time: Some(secs),
            ..RunSettings::default()
        };
        let err = RunSetup::resolve(&given, &file, |_| None, &Defaults::default()).unwrap_err();
        assert!(err.message.starts_with("max_time "), "{secs}: {err}");
    }
    let given = RunSettings {
        max_time: Some(1.5),
        ..RunSettings::default()
    };
    let setup = RunSetup::resolve(&given, &file, |_| None, &Defaults::default()).unwrap();
    assert_eq!(setup.budgets.wall_time, Some(Duration::from_millis(1_500)));
}

#[test]
fn the_cache_lease_comes_from_the_flag_else_the_file_else_two_minutes() {
    use rlm_registry::llm::DEFAULT_CACHE_LEASE;
    assert_eq!(DEFAULT_CACHE_LEASE, Duration::from_secs(120));
    let setup = resolve(&RunSettings::default(), "", &[]);
    assert_eq!(setup.cache_lease, DEFAULT_CACHE_LEASE);
    let file = "[cache]\npath = \"c.sqlite\"\nlease = 30\n";
    assert_eq!(
        resolve(&RunSettings::default(), file, &[]).cache_lease,
        Duration::from_secs(30)
    );
    let given = RunSettings {
        cache_lease: Some(2.5),
        ..RunSettings::default()
    };
    assert_eq!(
        resolve(&given, file, &[]).cache_lease,
        Duration::from_millis(2_500)
    );
    for secs in [0.0, -1.0, f64::NAN] {
        let given = RunSettings {
            cache_lease: Some(secs),
            ..RunSettings::default()
        };
        let err = RunSetup::resolve(
            &given,
            &FileSettings::default(),
            |_| None,
            &Defaults::default(),
        )
        .unwrap_err();
        assert!(err.message.contains("--cache-lease"), "{secs}: {err}");
    }
    let err = FileSettings::parse("[cache]\nlease = 0\n", "rlm.toml", ".").unwrap_err();
    assert_eq!((err.line, err.column), (2, 9));
    assert!(
        err.message
            .contains("[cache] lease must be a positive number of seconds"),
        "{}",
        err.message
    );
}
