"""The `context` of `ask`, `system_prompt` and `Environment`: a `pathlib.Path` gathered as
`--context PATH` gathers it (a file is its text, a folder a corpus), a `dict` of name ->
`str`/`bytes` as a corpus of documents, and what they took before (`str`, `bytes`, a list
of chunks); anything else a `TypeError` naming what is taken."""

from pathlib import Path

import pytest

from openai_server import ScriptedServer
from rlm_registry import ContextError, Environment, RlmRegistryError, ask, system_prompt

LIST = "for i, d in ipairs(context) do print(i, d.name, d.kind, d.bytes, d.text) end"


def folder(root: Path) -> Path:
    """A folder of two documents, a hidden file and an ignored one."""
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("alpha")
    (docs / "sub" / "b.txt").write_text("beta")
    (docs / ".hidden.md").write_text("hidden")
    (docs / "build.log").write_text("ignored")
    (docs / ".gitignore").write_text("*.log\n")
    return docs


def test_a_path_to_a_file_is_its_text(tmp_path: Path):
    log = tmp_path / "server.log"
    log.write_text("ERROR one\nINFO two\n")
    env = Environment(log)
    assert env.execute("print(type(context), line_count(context))").stdout == "string\t2\n"


def test_a_path_to_a_folder_is_a_corpus_honouring_gitignore_and_hidden_files(tmp_path: Path):
    env = Environment(folder(tmp_path))
    assert env.execute(LIST).stdout == "1\ta.md\ttext\t5\talpha\n2\tsub/b.txt\ttext\t4\tbeta\n"


def test_a_dict_is_a_corpus_of_str_and_bytes_in_dict_order():
    env = Environment({"z.md": "zed", "a.bin": b"\xff\x00", "m.txt": ""})
    assert env.execute(LIST.replace(", d.text", "")).stdout == (
        "1\tz.md\ttext\t3\n2\ta.bin\ttext\t2\n3\tm.txt\ttext\t0\n"
    )
    assert env.execute("print(context[2].text:byte(1))").stdout == "255\n"


def test_set_context_takes_the_same_as_the_constructor(tmp_path: Path):
    env = Environment("text")
    env.set_context(folder(tmp_path))
    assert env.execute("print(#context, context[1].name)").stdout == "2\ta.md\n"
    env.set_context({"only": "one"})
    assert env.execute("print(#context, context[1].text)").stdout == "1\tone\n"
    env.set_context(["chunk a", b"chunk b"])
    assert env.execute("print(#context, context[2])").stdout == "2\tchunk b\n"
    env.set_context(None)
    assert env.execute("print(context)").stdout == "nil\n"


def test_other_types_are_a_type_error_naming_those_taken():
    for bad in (42, 3.5, {1, 2}, object()):
        with pytest.raises(TypeError, match=r"str, bytes, a list .* a dict .* pathlib\.Path"):
            Environment(bad)
    with pytest.raises(TypeError, match=r"context\['doc'\] must be str or bytes, not int"):
        Environment({"doc": 3})
    with pytest.raises(TypeError, match="document's name must be a str"):
        Environment({1: "x"})
    with pytest.raises(TypeError, match=r"context\[1\] must be str or bytes, not NoneType"):
        Environment(["a", None])
    with pytest.raises(TypeError, match="pathlib.Path"):
        ask("?", 42, model="m", base_url="http://127.0.0.1:9")


def test_a_missing_path_is_a_context_error_naming_it(tmp_path: Path):
    missing = tmp_path / "no" / "such"
    for attempt in (
        lambda: Environment(missing),
        lambda: Environment().set_context(missing),
        lambda: system_prompt(missing),
        lambda: ask("?", missing, model="m", base_url="http://127.0.0.1:9"),
    ):
        with pytest.raises(ContextError) as caught:
            attempt()
        assert str(missing) in str(caught.value)
        assert caught.value.path == str(missing)
        assert isinstance(caught.value, RlmRegistryError)
    # `-` is standard input to the command line; Python passes text itself.
    with pytest.raises(ContextError, match="standard input is not read from Python"):
        Environment(Path("-"))


def test_ask_studies_a_folder_and_the_prompt_describes_a_corpus(tmp_path: Path):
    docs = folder(tmp_path)
    with ScriptedServer(["```lua\nFINAL(#context .. ' ' .. context[2].name)\n```"]) as server:
        answer = ask("?", docs, model="m", base_url=server.base_url)
    assert answer.answer == "2 sub/b.txt"
    system = server.requests[0]["messages"][0]["content"]
    assert "`context` is a corpus: a Lua list of 2 documents" in system
    assert "`a.md`, `sub/b.txt`" in system
    assert "a Lua list of 2 documents" in system_prompt({"a": "x", "b": "y"})
    assert "is a corpus" not in system_prompt("one text")
