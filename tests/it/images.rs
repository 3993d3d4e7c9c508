//! Images to the model: `llm_query(p, {images = {…}})` and the other sub-calls send a
//! corpus's image documents, or images the code made, as OpenAI-compatible `image_url`
//! parts to the scripted server; bad images are errors the code reads; the trace keeps
//! each image's name and hash, not its bytes; the cache tells images apart.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rlm_registry::Registry;
use rlm_registry::corpus::{Corpus, Document, DocumentKind, Image};
use rlm_registry::environment::{Environment, EnvironmentBuilder};
use rlm_registry::llm::{Cached, CallCache, ImagePart};
use rlm_registry::rlm::{Context, Replay};
use serde_json::Value;

use crate::support::openai_server::{Behavior, OpenAiServer};
use crate::support::rlm_loop::{Shared, bodies, client, lua, messages, rlm, sha256_hex};

/// The fixture: a real 2×2 PNG.
fn png() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/images/dot.png");
    std::fs::read(path).expect("the PNG fixture")
}

fn image_document(name: &str, mime: &str, data: Vec<u8>) -> Document {
    let mut document = Document::text(name, "");
    document.kind = DocumentKind::Image;
    document.image = Some(Image {
        mime: mime.to_string(),
        data: data.into(),
    });
    document
}

/// `notes.md`, then `dot.png` (the fixture), then `scan.bmp` (a type no model reads).
fn corpus_with(png: Vec<u8>) -> Corpus {
    Corpus {
        documents: vec![
            Document::text("notes.md", "The dot is red."),
            image_document("dot.png", "image/png", png),
            image_document("scan.bmp", "image/bmp", vec![b'B', b'M']),
        ],
        skipped: 0,
    }
}

fn corpus() -> Corpus {
    corpus_with(png())
}

/// An environment whose sub-calls go to `server`, with the corpus as its context.
fn env_for(server: &OpenAiServer) -> Environment {
    with_corpus(builder().llm(Arc::new(client(server))))
}

fn builder() -> EnvironmentBuilder {
    Environment::builder(Registry::baked().clone())
}

/// The environment `builder` builds, with the corpus as its context.
fn with_corpus(builder: EnvironmentBuilder) -> Environment {
    let env = builder.build().unwrap();
    Context::Corpus(corpus()).load_into(&env).unwrap();
    env
}

/// The message of the error `code` raises.
fn error_of(env: &Environment, code: &str) -> String {
    env.execute(code).unwrap_err().to_string()
}

/// The first user message's content parts in a request body.
fn parts(body: &Value) -> Vec<Value> {
    let user = messages(body)
        .iter()
        .find(|m| m["role"] == "user")
        .expect("a user message");
    user["content"].as_array().expect("content parts").to_vec()
}

/// The MIME type and the decoded bytes of an `image_url` part's data URL.
fn decoded(part: &Value) -> (String, Vec<u8>) {
    assert_eq!(part["type"], "image_url");
    let url = part["image_url"]["url"].as_str().unwrap();
    let (head, data) = url
        .strip_prefix("data:")
        .and_then(|url| url.split_once(";base64,"))
        .expect("a base64 data URL");
    (head.to_string(), STANDARD.decode(data).unwrap())
}

#[test]
fn llm_query_sends_a_corpus_image_as_an_image_url_part_with_its_bytes() {
    let server = OpenAiServer::always(Behavior::reply("red"));
    let env = env_for(&server);
    let run = env
        .execute("print(llm_query('What colour is it?', {images = {context[2]}}))")
        .unwrap();
    assert_eq!(run.output, "red\n");
    let body = &bodies(&server)[0];
    let parts = parts(body);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(
        parts[0],
        serde_json::json!({"type": "text", "text": "What colour is it?"})
    );
    assert_eq!(decoded(&parts[1]), ("image/png".to_string(), png()));
}

#[test]
fn a_prompt_without_images_is_still_a_plain_string() {
    let server = OpenAiServer::always(Behavior::reply("ok"));
    let env = env_for(&server);
    env.execute("llm_query('Just text')").unwrap();
    assert_eq!(messages(&bodies(&server)[0])[0]["content"], "Just text");
}

#[test]
fn an_image_the_code_makes_is_sent_with_its_mime_type_and_bytes() {
    let server = OpenAiServer::always(Behavior::reply("a jpeg"));
    let env = env_for(&server);
    env.execute(
        r"print(llm_query('And this?', {images = {{mime = 'image/jpeg', data = '\255\216\255\0'}, context[2]}}))",
    )
    .unwrap();
    let parts = parts(&bodies(&server)[0]);
    assert_eq!(parts.len(), 3);
    assert_eq!(
        decoded(&parts[1]),
        ("image/jpeg".to_string(), vec![255, 216, 255, 0])
    );
    assert_eq!(decoded(&parts[2]).1, png(), "in the order given");
}

#[test]
fn llm_query_batched_sends_the_images_with_every_prompt() {
    let server = OpenAiServer::always(Behavior::echo(std::time::Duration::ZERO));
    let env = env_for(&server);
    let run = env
        .execute(
            "print(table.concat(llm_query_batched({'one', 'two'}, {images = {context[2]}}), ','))",
        )
        .unwrap();
    assert_eq!(run.output, "echo: one,echo: two\n");
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 2);
    for body in &bodies {
        assert_eq!(decoded(&parts(body)[1]).1, png());
    }
}

#[test]
fn parallel_map_sub_calls_carry_their_images() {
    let server = OpenAiServer::always(Behavior::echo(std::time::Duration::ZERO));
    let env = env_for(&server);
    let run = env
        .execute(
            "local r = parallel_map({context[2]}, function(image) return llm_query('look', {images = {image}}) end)
             print(r[1])",
        )
        .unwrap();
    assert_eq!(run.output, "echo: look\n");
    assert_eq!(decoded(&parts(&bodies(&server)[0])[1]).1, png());
}

#[test]
fn rlm_query_without_child_agents_sends_its_images() {
    let server = OpenAiServer::always(Behavior::reply("seen"));
    let env = env_for(&server);
    env.execute("print(rlm_query('Look', 'ctx', {images = {context[2]}}))")
        .unwrap();
    let parts = parts(&bodies(&server)[0]);
    assert!(parts[0]["text"].as_str().unwrap().starts_with("Look"));
    assert_eq!(decoded(&parts[1]).1, png());
}

#[test]
fn rlm_query_batched_without_child_agents_sends_the_images_with_every_prompt() {
    let server = OpenAiServer::always(Behavior::echo(std::time::Duration::ZERO));
    let env = env_for(&server);
    let run = env
        .execute("print(table.concat(rlm_query_batched({'x', 'y'}, {images = {context[2]}}), ','))")
        .unwrap();
    assert_eq!(run.output, "echo: x,echo: y\n");
    for body in &bodies(&server) {
        assert_eq!(decoded(&parts(body)[1]).1, png());
    }
}

#[test]
fn a_child_agent_sees_its_images_with_its_task_on_every_turn() {
    let server = OpenAiServer::start(
        vec![
            lua("print(rlm_query('What is in the picture?', {images = {context[2]}}))"),
            lua("print('thinking')"),
            lua("FINAL('a red dot')"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let trace = Shared::default();
    let answer = rlm(&server, 5)
        .trace(trace.clone())
        .run("Q", Some(Context::Corpus(corpus())))
        .unwrap();
    assert_eq!(answer.text, "done");
    let starts: Vec<Value> = trace
        .events()
        .into_iter()
        .filter(|e| e["event"] == "start")
        .collect();
    assert!(starts[0].get("images").is_none(), "the root saw none");
    assert_eq!(starts[1]["agent"], "0.1");
    assert_eq!(starts[1]["images"][0]["name"], "dot.png");
    assert_eq!(starts[1]["images"][0]["sha256"], sha256_hex(&png()));
    let bodies = bodies(&server);
    assert!(
        messages(&bodies[0])
            .iter()
            .all(|m| m["content"].is_string() || m["content"].is_null()),
        "the root was given no images"
    );
    for child_turn in &bodies[1..3] {
        let parts = parts(child_turn);
        let task = parts[0]["text"].as_str().unwrap();
        assert!(task.starts_with("What is in the picture?"), "{task}");
        assert_eq!(decoded(&parts[1]).1, png());
    }
}

#[test]
fn bad_images_are_errors_naming_the_entry_and_nothing_is_sent() {
    let server = OpenAiServer::always(Behavior::reply("never"));
    let env = env_for(&server);
    let too_many = format!("{{{}}}", vec!["context[2]"; 17].join(", "));
    let cases = [
        (
            "{images = {context[1]}}",
            "opts.images[1] is the text document \"notes.md\", not an image",
        ),
        (
            "{images = {{kind = 'image', name = 'gone.png'}}}",
            "opts.images[1] names no image of the context (\"gone.png\")",
        ),
        (
            "{images = {context[3]}}",
            "opts.images[1] (\"scan.bmp\"): the MIME type \"image/bmp\" is not one a vision model reads",
        ),
        (
            "{images = {{mime = 'image/tiff', data = 'II*'}}}",
            "the MIME type \"image/tiff\" is not one a vision model reads",
        ),
        (
            "{images = {{mime = 'image/png', data = ''}}}",
            "opts.images[1] the image has no bytes",
        ),
        ("{images = {{data = 'x'}}}", "has data but no mime"),
        (
            "{images = {{mime = 'image/png', data = {}}}}",
            "has data that is not a string",
        ),
        (
            "{images = {42}}",
            "opts.images[1] must be an image document of the context (context[i]) or {mime = \"image/png\", data = <bytes>}, got number",
        ),
        (
            "{images = {context[2], {}}}",
            "opts.images[2] must be an image document",
        ),
        (
            "{images = 'dot.png'}",
            "opts.images must be a list of images, got string",
        ),
        (
            "{images = context[2]}",
            "opts.images is one image, not a list of them",
        ),
        (
            &format!("{{images = {too_many}}}"),
            "opts.images holds 17 images; a call sends at most 16",
        ),
        (
            "{images = {{mime = 'image/png', data = string.rep('x', 20 * 1024 * 1024 + 1)}}}",
            "more than the 20971520 an image may have",
        ),
        (
            "{imgs = {}}",
            "unknown option `imgs` (the options are: cache, images)",
        ),
    ];
    for (options, expected) in cases {
        let error = error_of(&env, &format!("llm_query('?', {options})"));
        assert!(error.contains("llm_query: "), "{options}: {error}");
        assert!(error.contains(expected), "{options}: {error}");
    }
    let error = error_of(&env, "llm_query_batched({'?'}, {images = {context[1]}})");
    assert!(
        error.contains("llm_query_batched: opts.images[1] is the text document"),
        "{error}"
    );
    let error = error_of(&env, "rlm_query('?', {images = {42}})");
    assert!(
        error.contains("rlm_query: opts.images[1] must be"),
        "{error}"
    );
    assert_eq!(server.request_count(), 0);
    assert_eq!(
        env.execute("print('still works')").unwrap().output,
        "still works\n"
    );
}

#[test]
fn the_window_check_counts_each_image() {
    let server = OpenAiServer::always(Behavior::reply("fits"));
    let env = with_corpus(
        builder()
            .llm(Arc::new(client(&server)))
            .context_window(1_500),
    );
    assert_eq!(
        env.execute("print(llm_query('hi'))").unwrap().output,
        "fits\n"
    );
    let error = error_of(&env, "llm_query('hi', {images = {context[2]}})");
    assert!(
        error.contains("does not fit the model's context window"),
        "{error}"
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn the_trace_lists_each_image_by_name_and_hash_and_replay_checks_them() {
    let script = || {
        vec![
            lua("print(llm_query('Colour?', {images = {context[2]}}))"),
            Behavior::reply("red"),
            lua("FINAL('red')"),
        ]
    };
    let server = OpenAiServer::start(script(), Behavior::status(500));
    let trace = Shared::default();
    rlm(&server, 5)
        .trace(trace.clone())
        .run("Q", Some(Context::Corpus(corpus())))
        .unwrap();
    let text = trace.text();
    let encoded = STANDARD.encode(png());
    assert!(!text.contains(&encoded), "the trace holds no image bytes");
    let events = trace.events();
    let call = events
        .iter()
        .find_map(|e| e["outputs"][0]["sub_calls"].get(0))
        .expect("a sub-call");
    assert_eq!(
        call["images"],
        serde_json::json!([{
            "name": "dot.png",
            "mime": "image/png",
            "bytes": png().len(),
            "sha256": sha256_hex(&png()),
        }])
    );
    assert_eq!(call["messages"][0]["content"], "Colour?");
    let parsed = rlm_registry::trace::Trace::parse(&text).unwrap();
    let shown = rlm_registry::trace::show_turn(&parsed, "0", 1).unwrap();
    let line = format!(
        "image sent with sub-call 1: dot.png (image/png, 75 bytes, sha256 {}…)",
        &sha256_hex(&png())[..12]
    );
    assert!(shown.contains(&line), "{shown}");
    let page = rlm_registry::trace::html(&parsed, "run");
    assert!(page.contains(&line), "the page lists the image too");

    let replay = Replay::from_jsonl(&text)
        .unwrap()
        .context(Context::Corpus(corpus()));
    assert!(
        replay.run().unwrap().is_identical(),
        "same images, same run"
    );

    let mut other = png();
    other[20] ^= 1;
    let report = Replay::from_jsonl(&text)
        .unwrap()
        .context(Context::Corpus(corpus_with(other)))
        .force(true)
        .run()
        .unwrap();
    let divergence = report.divergence.expect("another image diverges");
    assert_eq!(divergence.what, "sub-call 1 was sent other images");
}

#[test]
fn the_cache_tells_two_images_apart() {
    let replies = ["first", "second", "third"].map(Behavior::reply).to_vec();
    let server = OpenAiServer::start(replies, Behavior::status(500));
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    let env = with_corpus(builder().llm(Arc::new(Cached::new(client(&server), cache))));
    let run = |code: &str| env.execute(code).unwrap().output;
    let inline = r"{mime = 'image/png', data = '\137PNG'}";
    assert_eq!(
        run(&format!(
            "print(llm_query('Same?', {{images = {{context[2]}}}}), llm_query('Same?', {{images = {{context[2]}}}}), llm_query('Same?', {{images = {{{inline}}}}}), llm_query('Same?'))"
        )),
        "first\tfirst\tsecond\tthird\n"
    );
    assert_eq!(server.request_count(), 3);
}

#[test]
fn an_image_is_hashed_once_and_its_record_never_holds_its_bytes() {
    let image = ImagePart::new(Some("dot.png".into()), "image/png", png()).unwrap();
    let record = image.clone().record();
    assert_eq!(record.sha256, sha256_hex(&png()));
    assert_eq!(record.bytes, png().len() as u64);
    let json = serde_json::to_string(&record).unwrap();
    assert!(!json.contains(&STANDARD.encode(png())));
}

#[test]
fn help_describes_the_images_option_of_every_sub_call() {
    let env = builder().build().unwrap();
    for name in [
        "llm_query",
        "llm_query_batched",
        "rlm_query",
        "rlm_query_batched",
    ] {
        let help = env
            .execute(&format!("print(help('{name}'))"))
            .unwrap()
            .output;
        assert!(help.contains("images:"), "{name}: {help}");
    }
    let help = env.execute("print(help('llm_query'))").unwrap().output;
    assert!(help.contains("at most 16, each at most 20 MiB"), "{help}");
}
