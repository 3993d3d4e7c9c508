//! The library across documents: each text function given a corpus (a list of document
//! tables, or of strings) against the same function given each document's text, in the
//! sandbox (the Rust primitives) and in a bare Lua VM (the pure-Lua code); and
//! `doc_search`, the BM25 built-in over a corpus's documents.

use mlua::Lua;
use rlm_registry::Registry;
use rlm_registry::corpus::{Corpus, Document};
use rlm_registry::environment::{Environment, Limits};
use rlm_registry::rlm::Context;

/// A corpus in Lua, with every kind of line end, an empty document, a document without
/// text (an image) and a name that is not a path.
const CORPUS: &str = r#"
corpus = {
  {name = "a.md", kind = "text", text = "alpha ERROR one\nbeta\r\nERROR two\n"},
  {name = "b/c.txt", kind = "text", text = ""},
  {name = "pic.png", kind = "image", mime = "image/png"},
  {name = "d.log", kind = "text", text = "x\nERROR three é\n\nERROR\nlast line without end"},
  {name = "r7", kind = "text", text = "one\ntwo\nthree\nfour\nfive\nsix\nseven"},
}
strings = {"s ERROR 1\nplain", "", "ERROR\nERROR"}
-- The text a document contributes, as the library reads it.
function text_of(document)
  if type(document) == "string" then return document end
  return type(document.text) == "string" and document.text or ""
end
function same(a, b, what)
  local ja, jb = json.encode(a), json.encode(b)
  if ja ~= jb then error(what .. ": " .. ja .. " ~= " .. jb, 2) end
end
"#;

/// A bare Lua VM with the library's chunks, in order, and `json.encode` as the sandbox
/// has it (enough of it for the comparisons).
fn bare_lua() -> Lua {
    let lua = Lua::new();
    for chunk in Registry::baked().chunks() {
        lua.load(chunk.source())
            .set_name(chunk.file())
            .exec()
            .unwrap_or_else(|e| panic!("loading {}: {e}", chunk.file()));
    }
    lua.load(
        r#"
        local function encode(v)
          if type(v) == "table" then
            local keys = {}
            for k in pairs(v) do keys[#keys + 1] = k end
            table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
            local out = {}
            for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. "=" .. encode(v[k]) end
            return "{" .. table.concat(out, ",") .. "}"
          end
          return string.format("%q", v)
        end
        json = {encode = encode}
        "#,
    )
    .exec()
    .unwrap_or_else(|e| panic!("{e}"));
    lua
}

/// Runs `code` after [`CORPUS`] in the sandbox and in a bare VM; returns the output in
/// the sandbox, and panics if the bare VM's differs or either fails.
fn both(code: &str) -> String {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    let sandbox = env
        .execute(&format!("{CORPUS}\n{code}"))
        .unwrap_or_else(|e| panic!("sandbox: {e}"))
        .output;
    let lua = bare_lua();
    let printed = lua.create_table().unwrap();
    let sink = printed.clone();
    let print = lua
        .create_function(move |_, args: mlua::Variadic<mlua::Value>| {
            let words: Vec<String> = args
                .iter()
                .map(|v| v.to_string().unwrap_or_default())
                .collect();
            sink.raw_push(words.join("\t"))
        })
        .unwrap();
    lua.globals().set("print", print).unwrap();
    lua.load(format!("{CORPUS}\n{code}"))
        .exec()
        .unwrap_or_else(|e| panic!("bare VM: {e}"));
    let bare: Vec<String> = printed.sequence_values().map(Result::unwrap).collect();
    let bare = bare.iter().map(|l| format!("{l}\n")).collect::<String>();
    assert_eq!(sandbox, bare, "the sandbox and the bare VM differ");
    sandbox
}

/// An environment whose `context` is `code`'s value.
fn env_with(code: &str) -> Environment {
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    env.execute(&format!("{CORPUS}\ncontext = {code}")).unwrap();
    env
}

fn run(env: &Environment, code: &str) -> String {
    env.execute(code)
        .unwrap_or_else(|e| panic!("{code}: {e}"))
        .output
}

fn error_of(env: &Environment, code: &str) -> String {
    match env.execute(code) {
        Ok(run) => panic!("{code} did not fail: {}", run.output),
        Err(error) => error.to_string(),
    }
}

#[test]
fn counts_over_a_corpus_are_the_totals_of_its_documents() {
    let out = both(
        r#"
        for _, c in ipairs({corpus, strings}) do
          for _, f in ipairs({"line_count", "word_count", "char_count"}) do
            local sum = 0
            for _, d in ipairs(c) do sum = sum + _G[f](text_of(d)) end
            same(_G[f](c), sum, f)
          end
        end
        print(line_count(corpus), word_count(corpus), char_count(corpus), line_count(strings))
        "#,
    );
    assert_eq!(out, "15\t22\t109\t4\n");
}

#[test]
fn grep_over_a_corpus_is_grep_of_each_document_with_doc_and_name() {
    let out = both(
        r#"
        for _, c in ipairs({corpus, strings}) do
          for _, search in ipairs({{"ERROR", 0, true}, {"ERROR %a+", 1, false}, {"e$", 2, nil}, {"", 0, true}}) do
            local expected = {}
            for i, d in ipairs(c) do
              for _, m in ipairs(grep(text_of(d), search[1], search[2], search[3])) do
                m.doc, m.name = i, type(d) == "table" and d.name or nil
                expected[#expected + 1] = m
              end
            end
            same(grep(c, search[1], search[2], search[3]), expected, search[1])
          end
        end
        local hits = grep(corpus, "ERROR")
        for _, m in ipairs(hits) do print(m.doc, m.name, m.line, m.text) end
        print(grep(strings, "ERROR")[3].doc, grep(strings, "ERROR")[3].name)
        "#,
    );
    assert_eq!(
        out,
        "1\ta.md\t1\talpha ERROR one\n1\ta.md\t3\tERROR two\n4\td.log\t2\tERROR three é\n4\td.log\t4\tERROR\n3\tnil\n"
    );
}

#[test]
fn grep_text_over_a_corpus_names_each_line_and_sets_documents_apart() {
    let out = both(
        r#"
        print(grep_text(corpus, "ERROR", 1))
        print(grep_text(strings, "ERROR"))
        print(grep_text(corpus, "nowhere") == "")
        "#,
    );
    assert_eq!(
        out,
        "a.md:1: alpha ERROR one\na.md-2- beta\na.md:3: ERROR two\n--\n\
         d.log-1- x\nd.log:2: ERROR three é\nd.log-3- \nd.log:4: ERROR\nd.log-5- last line without end\n\
         1:1: s ERROR 1\n--\n3:1: ERROR\n3:2: ERROR\ntrue\n"
    );
}

#[test]
fn the_single_text_forms_are_unchanged() {
    let out = both(
        r#"
        print(grep_text("a\nERROR\nb\nc\nERROR", "ERROR", 0))
        print(#grep("x\nERROR", "ERROR")[1].before, grep("x\nERROR", "ERROR")[1].doc)
        print(table.concat(find_all("abcabc", "bc"), ","))
        print(select('#', chunk_by_lines("a\nb\nc", 2)), select('#', chunk_by_size("abcdefgh", 4)))
        print(line_count("a\nb\n"), word_count("a b"), #lines("a\nb"))
        "#,
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..3], ["2: ERROR", "--", "5: ERROR"]);
    assert_eq!(lines[3], "0\tnil");
    assert_eq!(lines[4], "2,5");
    assert_eq!(lines[5], "1\t1");
    assert_eq!(lines[6], "2\t2\t2");
}

#[test]
fn find_all_over_a_corpus_gives_doc_name_position_and_line() {
    let out = both(
        r#"
        for _, c in ipairs({corpus, strings}) do
          local expected = {}
          for i, d in ipairs(c) do
            for _, p in ipairs(find_all(text_of(d), "ERROR")) do
              local line = line_count(text_of(d):sub(1, p))
              expected[#expected + 1] = {doc = i, name = type(d) == "table" and d.name or nil, pos = p, line = line}
            end
          end
          same(find_all(c, "ERROR"), expected, "find_all")
        end
        local found = find_all(corpus, "ERROR")
        print(#found, found[3].doc, found[3].name, found[3].pos, found[3].line)
        "#,
    );
    assert_eq!(out, "4\t4\td.log\t3\t2\n");
}

#[test]
fn chunks_of_a_corpus_never_cross_a_document_and_say_where_they_come_from() {
    let out = both(
        r#"
        local cases = {
          {chunk_by_lines, {2}}, {chunk_by_lines, {3, 1}},
          {chunk_by_size, {8}}, {chunk_by_size, {6, 2}},
          {chunk_by_separator, {"\n"}}, {chunk_by_separator, {"\n", 12}},
        }
        for n, case in ipairs(cases) do
          for _, c in ipairs({corpus, strings}) do
            local f, args = case[1], case[2]
            local chunks, where = f(c, table.unpack(args))
            local expected, expected_where = {}, {}
            for i, d in ipairs(c) do
              for _, chunk in ipairs(f(text_of(d), table.unpack(args))) do
                expected[#expected + 1] = chunk
                expected_where[#expected_where + 1] = {doc = i, name = type(d) == "table" and d.name or nil}
              end
            end
            same(chunks, expected, "chunks " .. n)
            same(where, expected_where, "where " .. n)
            -- Equal to the chunks of each document on its own: none crosses two.
          end
        end
        local chunks, where = chunk_by_lines(corpus, 4)
        print(#chunks, where[1].name, where[#where].name, chunks[#chunks])
        "#,
    );
    assert_eq!(out, "5\ta.md\tr7\tfive\nsix\nseven\n");
}

#[test]
fn lines_of_a_corpus_are_every_documents_lines_in_order() {
    let out = both(
        r#"
        local expected = {}
        for _, d in ipairs(corpus) do
          for _, l in ipairs(lines(text_of(d))) do expected[#expected + 1] = l end
        end
        same(lines(corpus), expected, "lines")
        print(#lines(corpus) == line_count(corpus), lines(strings)[3])
        "#,
    );
    assert_eq!(out, "true\tERROR\n");
}

#[test]
fn functions_of_one_text_refuse_a_corpus_saying_how_to_take_a_document() {
    let env = env_with("corpus");
    for call in [
        "head(context, 2)",
        "tail(context)",
        "line_range(context, 1, 2)",
    ] {
        let error = error_of(&env, call);
        let name = call.split('(').next().unwrap();
        assert!(
            error.contains(&format!("{name}: takes one text, not a corpus"))
                && error.contains("context[i].text"),
            "{error}"
        );
    }
    let error = error_of(&env, "grep({{text = 'a'}, 42}, 'a')");
    assert!(
        error.contains("grep: document 2 is a number, not a document table or a string"),
        "{error}"
    );
    // A bad pattern over a corpus blames the caller's line, as over one text.
    let error = error_of(&env, "grep(context, '[')");
    assert!(error.contains("input:1: malformed pattern"), "{error}");
}

#[test]
fn doc_search_ranks_the_relevant_document_first() {
    let env = env_with(
        r#"{
          {name = "budget.md", text = "Budgets limit the tokens a run may spend."},
          {name = "cache.md", text = "The call cache keeps answers; cached answers are reused between runs."},
          {name = "window.md", text = "The context window is the model's limit."},
          {name = "pic.png", kind = "image"},
        }"#,
    );
    let out = run(
        &env,
        "for _, h in ipairs(doc_search('caching answers')) do print(h.doc, h.name, h.score > 0) end",
    );
    assert_eq!(out, "2\tcache.md\ttrue\n");
    let out = run(
        &env,
        "local h = doc_search('limit'); print(#h, h[1].score >= h[2].score, type(h[1].score))",
    );
    assert_eq!(out, "2\ttrue\tnumber\n");
    assert_eq!(
        run(&env, "print(#doc_search('unicorn'), #doc_search(''))"),
        "0\t0\n"
    );
}

#[test]
fn doc_search_keeps_document_order_among_ties_and_honours_k() {
    let env = env_with(r#"{"same words", "other", "same words", "same words", "same words"}"#);
    let order = |k: &str| {
        run(
            &env,
            &format!(
                "local out = {{}} for _, h in ipairs(doc_search('same'{k})) do out[#out + 1] = h.doc end print(table.concat(out, ' '))"
            ),
        )
    };
    assert_eq!(order(""), "1 3 4 5\n");
    assert_eq!(order(", 2"), "1 3\n");
    assert_eq!(order(", 1"), "1\n");
    assert_eq!(order(", 100"), "1 3 4 5\n");
    // Names are nil for a list of strings.
    assert_eq!(run(&env, "print(doc_search('other')[1].name)"), "nil\n");
    let many: String = (1..=15).map(|i| format!("'w {i}', ")).collect();
    let env = env_with(&format!("{{{many}}}"));
    assert_eq!(run(&env, "print(#doc_search('w'))"), "10\n");
}

#[test]
fn doc_search_refuses_bad_arguments_with_clear_errors() {
    let env = env_with(r#"{"a text"}"#);
    for (call, expected) in [
        ("doc_search(42)", "doc_search: query must be a string"),
        ("doc_search()", "doc_search: query must be a string"),
        (
            "doc_search('a', 0)",
            "doc_search: k must be a positive integer, got 0",
        ),
        (
            "doc_search('a', -3)",
            "doc_search: k must be a positive integer, got -3",
        ),
        (
            "doc_search('a', 1.5)",
            "doc_search: k must be a positive integer, got 1.5",
        ),
        (
            "doc_search('a', 'ten')",
            "doc_search: k must be a positive integer, got a string",
        ),
        (
            "doc_search('a', 1, {'x', true})",
            "doc_search: document 2 is a boolean, not a document table or a string",
        ),
        (
            "doc_search('a', 1, 'one text')",
            "doc_search: the corpus given is one text, not a corpus",
        ),
    ] {
        let error = error_of(&env, call);
        assert!(error.contains(expected), "{call}: {error}");
    }
    let text = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    text.set_context("one long text").unwrap();
    let error = error_of(&text, "doc_search('long')");
    assert!(
        error.contains("context is one text, not a corpus") && error.contains("grep(context"),
        "{error}"
    );
    let bare = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    assert!(error_of(&bare, "doc_search('x')").contains("context is nil"));
}

#[test]
fn doc_search_follows_a_context_replaced_or_changed_between_calls() {
    let env = env_with(r#"{"apple pie", "banana bread"}"#);
    assert_eq!(run(&env, "print(doc_search('banana')[1].doc)"), "2\n");
    run(&env, "context = {'banana split', 'cherry', 'apple'}");
    assert_eq!(
        run(
            &env,
            "print(doc_search('banana')[1].doc, #doc_search('apple'))"
        ),
        "1\t1\n"
    );
    run(&env, "context[2] = 'banana cherry'");
    assert_eq!(run(&env, "print(#doc_search('banana'))"), "2\n");
    run(&env, "context[4] = 'durian'");
    assert_eq!(run(&env, "print(doc_search('durian')[1].doc)"), "4\n");
    // A corpus given as an argument is searched instead of `context`.
    assert_eq!(
        run(
            &env,
            "print(doc_search('fig', 5, {'no', 'fig tree'})[1].doc)"
        ),
        "2\n"
    );
    assert_eq!(run(&env, "print(doc_search('durian')[1].doc)"), "4\n");
}

#[test]
fn a_corpus_loaded_as_the_context_is_searched_by_the_library_and_doc_search() {
    let corpus = Corpus {
        documents: vec![
            Document::text("guides/setup.md", "Install.\nSet the cache path.\n"),
            Document::text("notes.txt", "The window is small.\nThe cache is SQLite.\n"),
        ],
        skipped: 0,
    };
    let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
    Context::Corpus(corpus).load_into(&env).unwrap();
    let out = run(
        &env,
        "print(grep_text(context, 'cache')) print(line_count(context), doc_search('sqlite cache')[1].name)",
    );
    assert_eq!(
        out,
        "guides/setup.md:2: Set the cache path.\n--\nnotes.txt:2: The cache is SQLite.\n4\tnotes.txt\n"
    );
}

#[test]
fn doc_search_builds_its_index_under_the_memory_and_time_limits() {
    use crate::support::sandbox::is_limit;
    use rlm_registry::environment::{ExecError, LimitKind};
    // Every word distinct: the index holds far more than the limit allows.
    let documents = (0..4)
        .map(|d| {
            let text: String = (0..400_000).map(|i| format!("w{d}x{i} ")).collect();
            Document::text(format!("{d}.txt"), text)
        })
        .collect();
    let limits = Limits {
        memory_bytes: 64 * 1024 * 1024,
        ..Limits::default()
    };
    let env = Environment::new(Registry::baked().clone(), limits).unwrap();
    Context::Corpus(Corpus {
        documents,
        skipped: 0,
    })
    .load_into(&env)
    .unwrap();
    let failure = env.execute("print(pcall(doc_search, 'w1x5'))").unwrap_err();
    assert!(is_limit(&failure, LimitKind::Memory), "{failure:?}");
    // The environment goes on, and a corpus that fits is searched.
    assert_eq!(
        run(&env, "print(doc_search('b', 1, {'a', 'b'})[1].doc)"),
        "2\n"
    );
    let limits = Limits {
        time: std::time::Duration::from_millis(300),
        ..Limits::default()
    };
    let env = Environment::new(Registry::baked().clone(), limits).unwrap();
    let text: String = (0..500_000).map(|i| format!("word{} ", i % 1000)).collect();
    // 64 MB: longer than the limit to index even in an optimised build.
    let documents = (0..16)
        .map(|d| Document::text(format!("{d}.txt"), text.as_str()))
        .collect();
    Context::Corpus(Corpus {
        documents,
        skipped: 0,
    })
    .load_into(&env)
    .unwrap();
    let failure = env.execute("doc_search('word5')").unwrap_err();
    assert!(
        matches!(
            failure,
            ExecError::Limit {
                kind: LimitKind::Time,
                ..
            }
        ),
        "{failure:?}"
    );
}

#[test]
fn the_library_over_a_corpus_does_not_depend_on_a_global_the_code_may_replace() {
    let env = env_with("corpus");
    run(&env, "doc_list = 'my own variable'");
    assert_eq!(
        run(
            &env,
            "print(line_count(context), word_count(context), #grep(context, 'ERROR'), #find_all(context, 'ERROR'), #chunk_by_lines(context, 2), #lines(context))"
        ),
        "15\t22\t4\t4\t9\t15\n"
    );
}
