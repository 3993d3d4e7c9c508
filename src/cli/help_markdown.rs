//! `rlm help-markdown` (hidden): the command-line reference, `docs/cli.md`, written from
//! the clap definitions that parse the arguments. Each command and flag is described once,
//! in its doc comment, and a test fails when the file and this output differ.
//!
//! Hand-written rather than `clap-markdown`: a few dozen lines over clap's own
//! introspection, with anchors the other documentation pages link to, and no dependency
//! in the shipped binary for a page only the repository needs.

use std::fmt::Write;

use clap::{Arg, Command};

/// The first lines of the page, before what the definitions say.
const HEADER: &str = "# Command-line reference\n\n\
<!-- Written by `rlm help-markdown` from the definitions of the commands; do not edit.\n     \
Regenerate with: RLM_BLESS=1 cargo test --all-features --test it cli_docs -->\n\n";

/// What every command takes without saying so.
const EVERY_COMMAND: &str = "Every command also takes `-h` (a summary) and `--help` (the text below); \
`rlm --version` prints the version.\n\n";

/// The reference for `root` and every visible subcommand, depth first, as Markdown.
pub(super) fn markdown(mut root: Command) -> String {
    // Propagates names and generated arguments, so usages read `rlm trace show …`.
    root.build();
    let commands = visible_commands(&root, root.get_name());
    let mut out = String::from(HEADER);
    push_paragraphs(&mut out, root.get_long_about().or(root.get_about()));
    out.push_str(EVERY_COMMAND);
    out.push_str("## Commands\n\n");
    for (path, command) in &commands {
        let summary = command.get_about().map(ToString::to_string);
        let _ = writeln!(
            out,
            "- [`{path}`](#{}): {}",
            anchor(path),
            sentence(summary.as_deref().unwrap_or_default())
        );
    }
    out.push('\n');
    for (path, command) in &commands {
        push_command(&mut out, path, command);
    }
    out
}

/// Every subcommand under `command`, with its full name (`rlm trace show`), parents
/// before children; hidden ones and clap's generated `help` left out.
fn visible_commands<'a>(command: &'a Command, path: &str) -> Vec<(String, &'a Command)> {
    let mut found = Vec::new();
    for sub in command.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let sub_path = format!("{path} {}", sub.get_name());
        let children = visible_commands(sub, &sub_path);
        found.push((sub_path, sub));
        found.extend(children);
    }
    found
}

fn push_command(out: &mut String, path: &str, command: &Command) {
    let _ = write!(out, "## `{path}`\n\n");
    push_paragraphs(out, command.get_long_about().or(command.get_about()));
    let usage = command.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage:").trim();
    let _ = write!(out, "```text\n{usage}\n```\n\n");
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) = command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set() && !is_generated(arg))
        .partition(|arg| arg.is_positional());
    push_arguments(out, "Arguments", &positionals);
    push_arguments(out, "Options", &options);
}

/// `--help` and `--version`, which clap adds to every command.
fn is_generated(arg: &Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version")
}

fn push_arguments(out: &mut String, title: &str, args: &[&Arg]) {
    if args.is_empty() {
        return;
    }
    let _ = write!(out, "**{title}:**\n\n");
    for arg in args {
        push_argument(out, arg);
    }
    out.push('\n');
}

/// One argument as a list item: its syntax, its help, then what clap knows beside it
/// (required, repeatable, default, possible values).
fn push_argument(out: &mut String, arg: &Arg) {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string);
    let mut text = sentence(help.as_deref().unwrap_or_default());
    let takes_values = arg.get_num_args().is_some_and(|n| n.takes_values());
    if arg.is_required_set() && !arg.is_positional() {
        text.push_str(" Required.");
    }
    if matches!(arg.get_action(), clap::ArgAction::Append) {
        text.push_str(" Repeatable.");
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|value| format!("`{}`", value.to_string_lossy()))
        .collect();
    if takes_values && !defaults.is_empty() && !arg.is_hide_default_value_set() {
        let _ = write!(text, " Default: {}.", defaults.join(", "));
    }
    let _ = writeln!(out, "- `{}`: {}", syntax(arg), indent(text.trim_start()));
    if takes_values && !arg.is_hide_possible_values_set() {
        for value in arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
        {
            match value.get_help() {
                Some(help) => {
                    let _ = writeln!(
                        out,
                        "  - `{}`: {}",
                        value.get_name(),
                        sentence(&help.to_string())
                    );
                }
                None => {
                    let _ = writeln!(out, "  - `{}`", value.get_name());
                }
            }
        }
    }
}

/// How the argument is written: `<FILE>`, `[QUERY]`, `-o, --out <FILE>`, `--http [<ADDR>]`.
fn syntax(arg: &Arg) -> String {
    let names = arg
        .get_value_names()
        .map(|names| names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .unwrap_or_else(|| vec![arg.get_id().as_str().to_uppercase()]);
    let value = names.join("> <");
    if arg.is_positional() {
        return if arg.is_required_set() {
            format!("<{value}>")
        } else {
            format!("[{value}]")
        };
    }
    let mut flag = match (arg.get_short(), arg.get_long()) {
        (Some(short), Some(long)) => format!("-{short}, --{long}"),
        (Some(short), None) => format!("-{short}"),
        (None, Some(long)) => format!("--{long}"),
        (None, None) => String::new(),
    };
    match arg.get_num_args() {
        Some(n) if n.takes_values() && n.min_values() == 0 => {
            let _ = write!(flag, " [<{value}>]");
        }
        Some(n) if n.takes_values() => {
            let _ = write!(flag, " <{value}>");
        }
        _ => {}
    }
    flag
}

/// A command's description, its paragraphs as clap keeps them (blank-line separated).
fn push_paragraphs(out: &mut String, text: Option<&clap::builder::StyledStr>) {
    if let Some(text) = text {
        let _ = write!(out, "{}\n\n", sentence(&text.to_string()));
    }
}

/// `text` ending as a sentence: clap drops the final period of a one-paragraph summary.
fn sentence(text: &str) -> String {
    let text = text.trim_end();
    match text.chars().last() {
        None => String::new(),
        Some('.' | '!' | '?' | ':') => text.to_string(),
        Some(_) => format!("{text}."),
    }
}

/// Later paragraphs of a list item's text, indented so they stay in the item.
fn indent(text: &str) -> String {
    text.replace("\n\n", "\n\n  ")
}

/// The anchor GitHub gives a heading of `path` in backquotes: lower case, spaces as
/// hyphens, other punctuation dropped.
fn anchor(path: &str) -> String {
    path.chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}
