//! Corpus formats end to end through `rlm exec --context`: a real HTML page and a real
//! PDF (checked in under `tests/fixtures/corpus/`) found by searching their text from
//! Lua, their scripts and styles not; a corrupt PDF warned of once while the run goes on;
//! an image kept as an image; a binary file skipped; replay refusing a changed image.

use std::path::{Path, PathBuf};

use crate::support::cli::{rlm_command, rlm_in, stderr, stdout};
use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::lua;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus")
}

/// `rlm exec CODE --context PATH`.
fn exec(code: &str, context: &Path) -> std::process::Output {
    rlm_command()
        .args(["exec", code, "--context"])
        .arg(context)
        .output()
        .expect("rlm runs")
}

/// Prints each needle and the documents whose text holds it, by `grep` (plain).
const FIND: &str = r#"
for _, d in ipairs(context) do
  print(d.name, d.kind, d.bytes, d.mime, d.error ~= nil, #d.text == (d.kind == "image" and 0 or d.bytes))
end
for _, needle in ipairs(NEEDLES) do
  local found = {}
  for _, d in ipairs(context) do
    if #grep(d.text, needle, 0, true) > 0 then found[#found + 1] = d.name end
  end
  print(needle, table.concat(found, ","))
end
"#;

#[test]
fn html_and_pdf_text_is_found_scripts_are_not_and_a_corrupt_pdf_is_warned_of_once() {
    let needles = [
        "Lindqvist Marine",
        "18,400 containers",
        "VHF channel 14",
        "£32 a night",
        "3 March\t06:42\t5.1 m",
        "chart datum <CD>",
        "scriptonlymarker",
        "styleonlymarker",
        "jsononlymarker",
        "commentonlymarker",
        "noscriptonlymarker",
        "templateonlymarker",
    ];
    let quoted: Vec<String> = needles.iter().map(|n| format!("{n:?}")).collect();
    let code = format!("NEEDLES = {{{}}}\n{FIND}", quoted.join(", "));
    let out = exec(&code, &fixtures());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let png = std::fs::metadata(fixtures().join("pixel.png"))
        .unwrap()
        .len();
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    let documents: Vec<String> = lines[..5]
        .iter()
        .map(|line| {
            // The text's size varies with the readers; whether `bytes` is it does not.
            let fields: Vec<&str> = line.split('\t').collect();
            match fields[1] {
                "html" | "pdf" if fields[4] == "false" => {
                    [fields[0], fields[1], "N", fields[3], fields[4], fields[5]].join("\t")
                }
                _ => line.clone(),
            }
        })
        .collect();
    assert_eq!(
        documents,
        [
            "corrupt.pdf\tpdf\t0\tnil\ttrue\ttrue".to_string(),
            "notes.txt\ttext\t12\tnil\tfalse\ttrue".to_string(),
            "page.html\thtml\tN\tnil\tfalse\ttrue".to_string(),
            format!("pixel.png\timage\t{png}\timage/png\tfalse\ttrue"),
            "report.pdf\tpdf\tN\tnil\tfalse\ttrue".to_string(),
        ],
        "data.bin is skipped: {lines:?}"
    );
    assert_eq!(
        &lines[5..],
        [
            "Lindqvist Marine\treport.pdf",
            "18,400 containers\treport.pdf",
            "VHF channel 14\tpage.html",
            "£32 a night\tpage.html",
            "3 March\t06:42\t5.1 m\tpage.html",
            "chart datum <CD>\tpage.html",
            "scriptonlymarker\t",
            "styleonlymarker\t",
            "jsononlymarker\t",
            "commentonlymarker\t",
            "noscriptonlymarker\t",
            "templateonlymarker\t",
        ]
    );
    let errors = stderr(&out);
    let warnings: Vec<&str> = errors
        .lines()
        .filter(|line| line.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{errors}");
    assert!(
        warnings[0].starts_with("warning: corrupt.pdf: cannot read its text (")
            && warnings[0].ends_with("); it is kept with an `error` field"),
        "{}",
        warnings[0]
    );
}

#[test]
fn a_page_a_pdf_or_an_image_alone_is_one_document_and_a_text_file_alone_a_string() {
    for (file, kind) in [
        ("page.html", "html"),
        ("report.pdf", "pdf"),
        ("pixel.png", "image"),
    ] {
        let path = fixtures().join(file);
        let out = exec(
            "print(type(context), #context, context[1].kind, context[1].name)",
            &path,
        );
        assert_eq!(
            stdout(&out),
            format!("table\t1\t{kind}\t{}\n", path.display()),
            "{}",
            stderr(&out)
        );
    }
    let out = exec(
        "print(type(context), context)",
        &fixtures().join("notes.txt"),
    );
    assert_eq!(stdout(&out), "string\tplain notes\n\n", "{}", stderr(&out));
}

#[test]
fn a_pdf_that_makes_the_reader_panic_is_one_warning_and_no_panic_message() {
    // A page whose `Tj` shows a number, not a string: pdf-extract panics on it.
    let pdf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/panicking.pdf");
    let out = exec("print(context[1].kind, context[1].error)", &pdf);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("pdf\tthe PDF reader failed: unexpected Tj operand"),
        "{}",
        stdout(&out)
    );
    let errors = stderr(&out);
    assert_eq!(errors.lines().count(), 1, "{errors}");
    assert!(
        errors.starts_with("warning: ") && !errors.contains("panicked"),
        "{errors}"
    );
}

#[test]
fn replay_refuses_a_corpus_whose_image_changed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("a.md"), "alpha\n").unwrap();
    let png = std::fs::read(fixtures().join("pixel.png")).unwrap();
    std::fs::write(docs.join("pixel.png"), &png).unwrap();
    let server = OpenAiServer::start(vec![lua("FINAL(#context)")], Behavior::status(500));
    let url = server.base_url();
    let ask = [
        "ask",
        "Q",
        "-q",
        "--context",
        "docs",
        "--trace",
        "run.jsonl",
    ];
    let out = rlm_in(
        dir.path(),
        &[&ask[..], &["--base-url", &url, "--model", "m"]].concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let replay = || rlm_in(dir.path(), &["replay", "run.jsonl", "--context", "docs"]);
    let out = replay();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        stdout(&out) + &stderr(&out)
    );
    // Same size, one byte different: only the image's bytes tell the corpora apart.
    let mut changed = png;
    let last = changed.len() - 1;
    changed[last] ^= 0xff;
    std::fs::write(docs.join("pixel.png"), changed).unwrap();
    let out = replay();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("the context is not the recorded one"),
        "{}",
        stderr(&out)
    );
}
