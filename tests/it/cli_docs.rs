//! `docs/cli.md` is what `rlm help-markdown` writes from the definitions that parse the
//! arguments, so each command and flag is described once, in its doc comment. A help text
//! changed without the page, or the page edited by hand, fails here;
//! `RLM_BLESS=1 cargo test --all-features --test it cli_docs` rewrites the page.

use std::path::Path;

use crate::support::bad_fixtures::blessing;
use crate::support::cli::{rlm, stderr, stdout};

const PAGE: &str = "docs/cli.md";

/// What the binary generates now.
fn generated() -> String {
    let out = rlm(&["help-markdown"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn docs_cli_md_is_what_the_binary_generates() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE);
    let actual = generated();
    if blessing() {
        std::fs::write(&page, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&page).unwrap_or_default();
    if expected == actual {
        return;
    }
    let first_difference = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    panic!(
        "{PAGE} differs from what `rlm help-markdown` writes (first at line {}):\n\
         --- {PAGE}\n{}\n--- generated\n{}\n\
         Regenerate it with: RLM_BLESS=1 cargo test --all-features --test it cli_docs",
        first_difference + 1,
        expected
            .lines()
            .nth(first_difference)
            .unwrap_or("(end of file)"),
        actual
            .lines()
            .nth(first_difference)
            .unwrap_or("(end of file)"),
    );
}

/// The commands `rlm [PARENT] --help` lists, clap's own `help` left out.
fn subcommands(parent: &[&str]) -> Vec<String> {
    let mut args = parent.to_vec();
    args.push("--help");
    let help = stdout(&rlm(&args));
    help.lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags `rlm COMMAND --help` shows, clap's `--help` and `--version` left out.
/// An option's line is indented by at most 6 spaces (`  -q, --quiet`, `      --path <DIR>`);
/// its help text, below it, by more.
fn long_flags(command: &[&str]) -> Vec<String> {
    let mut args = command.to_vec();
    args.push("--help");
    let out = rlm(&args);
    assert_eq!(out.status.code(), Some(0), "{command:?}: {}", stderr(&out));
    stdout(&out)
        .lines()
        .filter(|line| line.len() - line.trim_start().len() <= 6)
        .filter_map(|line| {
            let (_, flag) = line.split_once("--")?;
            let name: String = flag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            line.trim_start().starts_with('-').then_some(name)
        })
        .filter(|name| !name.is_empty() && name != "help" && name != "version")
        .collect()
}

/// The section of `page` under the heading of `path` (`rlm trace show`).
fn section<'a>(page: &'a str, path: &str) -> &'a str {
    let heading = format!("\n## `{path}`\n");
    let start = page
        .find(&heading)
        .unwrap_or_else(|| panic!("{PAGE} has no section for `{path}`"));
    let rest = &page[start + heading.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The long flags a section documents: the names in its items' syntax
/// (`- `-q, --quiet`: …`, `- `--format <FORMAT>`: …`).
fn documented_flags(section: &str) -> Vec<String> {
    section
        .lines()
        .filter_map(|line| line.strip_prefix("- `")?.split_once("`: "))
        .flat_map(|(syntax, _)| syntax.split([' ', ',']))
        .filter_map(|word| word.strip_prefix("--"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_and_every_flag_of_the_help_is_in_the_page() {
    let page = generated();
    let mut commands: Vec<Vec<String>> = Vec::new();
    for top in subcommands(&[]) {
        let nested = subcommands(&[top.as_str()]);
        commands.push(vec![top.clone()]);
        commands.extend(nested.into_iter().map(|sub| vec![top.clone(), sub]));
    }
    assert!(commands.len() >= 19, "{commands:?}");
    for command in &commands {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let path = format!("rlm {}", args.join(" "));
        let section = section(&page, &path);
        assert!(
            page.contains(&format!("- [`{path}`](#")),
            "{path} is not in the index"
        );
        let documented = documented_flags(section);
        for flag in long_flags(&args) {
            assert!(
                documented.contains(&flag),
                "`--{flag}` of `{path}` is not in its section:\n{section}"
            );
        }
    }
}

#[test]
fn the_page_shows_defaults_and_possible_values_and_leaves_out_hidden_commands() {
    let page = generated();
    let check = section(&page, "rlm check");
    assert!(
        check.contains("- `--format <FORMAT>`: Output format. Default: `human`."),
        "{check}"
    );
    assert!(check.contains("  - `json`"), "{check}");
    assert!(
        check.contains("```text\nrlm check [OPTIONS]\n```"),
        "{check}"
    );
    let ask = section(&page, "rlm ask");
    assert!(
        ask.contains("- `[QUESTION]`: The question (none with --resume: it is in the trace)."),
        "{ask}"
    );
    assert!(
        ask.contains("  - `compact`: Signatures and one-line summaries"),
        "{ask}"
    );
    let serve = section(&page, "rlm serve");
    assert!(serve.contains("- `--http [<ADDR>]`:"), "{serve}");
    assert!(serve.contains("--memory-limit <MIB>"), "{serve}");
    assert!(serve.contains("Repeatable."), "--allow-origin: {serve}");
    let export = section(&page, "rlm trace export");
    assert!(
        export.contains("- `--format <FORMAT>`: The log format. Required."),
        "{export}"
    );
    assert!(
        !page.contains("## `rlm help-markdown`") && !page.contains("[`rlm help-markdown`]"),
        "a hidden command is listed"
    );
    assert!(!page.contains("--help`:"), "clap's own flags are listed");
}

#[test]
fn rlm_meta_help_names_the_files_it_writes() {
    let page = generated();
    let meta = section(&page, "rlm meta");
    assert!(meta.contains("`rlm-meta/rlm.lua`"), "{meta}");
    let dir = tempfile::tempdir().unwrap();
    let out = rlm(&["meta", "--out", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("rlm-meta/rlm.lua").is_file());
    assert!(dir.path().join(".luarc.json").is_file());
}
