"""rlm_registry.integrations.dspy: DSPy's RLM running Lua in the sandbox, end to end
against the scripted server whose replies are Lua, and LuaInterpreter alone."""

from __future__ import annotations

import pytest

from openai_server import Reply, ScriptedServer
from optional import require_package

dspy = require_package("dspy")

from dspy.primitives.code_interpreter import (  # noqa: E402
    CodeExecutionError,
    CodeInterpreter,
    CodeInterpreterError,
    FinalOutput,
)

from rlm_registry import Registry  # noqa: E402
from rlm_registry.integrations.dspy import (  # noqa: E402
    LuaInterpreter,
    LuaRLM,
    strip_code_fences,
    submission,
)

LOG = "\n".join(
    ["INFO start", "ERROR gateway timeout", "INFO ok", "ERROR billing down", "ERROR gateway 502"]
)


def action(code: str, fence: str = "lua") -> str:
    """A reply to DSPy's action predictor, in its chat format."""
    return (
        "[[ ## reasoning ## ]]\nOne step at a time.\n\n"
        f"[[ ## code ## ]]\n```{fence}\n{code}\n```\n\n[[ ## completed ## ]]"
    )


@pytest.fixture
def scripted():
    """Runs DSPy against a scripted server: `scripted(replies, sub_answer)`."""
    servers = []

    def start(replies, sub_answer=lambda prompt: f"echo: {prompt}"):
        server = ScriptedServer(replies, sub_answer=sub_answer).__enter__()
        servers.append(server)
        lm = dspy.LM("openai/scripted-model", api_base=server.base_url, api_key="sk-test", cache=False)
        return server, lm

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def test_lua_rlm_answers_end_to_end_with_llm_query_reaching_the_server(scripted):
    server, lm = scripted(
        [
            action("errors = grep(context, 'ERROR')\nprint(#errors)"),
            action("verdict = llm_query('which service fails most? ' .. errors[1].text)\nprint(verdict)"),
            action("SUBMIT('gateway (' .. #errors .. ' errors; ' .. verdict .. ')')"),
        ],
        sub_answer=lambda prompt: "the gateway",
    )
    rlm = LuaRLM("context, question -> answer", max_iters=5)
    with dspy.context(lm=lm):
        prediction = rlm(context=LOG, question="Which service fails most often?")
    assert prediction.answer == "gateway (3 errors; the gateway)"
    assert [step["code"] for step in prediction.trajectory][0] == "errors = grep(context, 'ERROR')\nprint(#errors)"
    # llm_query's prompt reached the server (through dspy.context's LM, on the
    # sandbox's thread), and the model read its code's output.
    (sub_call,) = server.sub_calls()
    assert sub_call["messages"][-1]["content"] == "which service fails most? ERROR gateway timeout"
    turns = server.turns()
    assert len(turns) == 3
    assert "3" in turns[1]["messages"][-1]["content"]
    # The instructions are Lua's.
    system = turns[0]["messages"][0]["content"]
    assert "Lua 5.4 REPL" in system
    assert "SUBMIT(answer)" in system
    assert "```lua" in system
    assert "grep(" in system


def test_the_listing_is_chosen_as_rlm_ask_chooses(monkeypatch: pytest.MonkeyPatch, tmp_path):
    compact, full = Registry().prompt(compact=True), Registry().prompt(compact=False)
    monkeypatch.delenv("RLM_PROMPT_MODE", raising=False)
    assert LuaRLM("question -> answer")._library == compact
    config = tmp_path / "rlm.toml"
    config.write_text('[model]\nprompt_mode = "full"\n')
    assert LuaRLM("question -> answer", config=str(config))._library == full
    monkeypatch.setenv("RLM_PROMPT_MODE", "compact")
    assert LuaRLM("question -> answer", config=str(config))._library == compact, "the variable wins"
    assert LuaRLM("question -> answer", prompt_mode="full")._library == full, "the argument wins"
    with pytest.raises(ValueError, match="prompt_mode"):
        LuaRLM("question -> answer", prompt_mode="long")


def test_several_outputs_are_submitted_as_a_table(scripted):
    _, lm = scripted([action("SUBMIT{answer = 'gateway', count = #grep(context, 'ERROR')}")])
    rlm = LuaRLM("context -> answer, count: int", max_iters=2)
    with dspy.context(lm=lm):
        prediction = rlm(context=LOG)
    assert (prediction.answer, prediction.count) == ("gateway", 3)


def test_python_written_by_habit_gets_the_lua_hint_back(scripted):
    server, lm = scripted(
        [action("print(len(context))", fence="python"), action("SUBMIT(#context)")]
    )
    rlm = LuaRLM("context -> answer", max_iters=3)
    with dspy.context(lm=lm):
        prediction = rlm(context="abc")
    assert prediction.answer == "3"
    feedback = server.turns()[1]["messages"][-1]["content"]
    assert "attempt to call a nil value (global 'len')" in feedback
    assert "hint: Lua writes `len(x)` as `#x`" in feedback
    # The history shows the step's code as the Lua it ran as.
    assert "Code:\n```lua\nprint(len(context))\n```" in feedback
    assert "```python" not in feedback


def test_user_tools_are_lua_functions(scripted):
    def lookup(key: str, default: str = "none") -> str:
        """Looks a key up."""
        return {"a": "alpha"}.get(key, default)

    _, lm = scripted([action("SUBMIT(lookup('a') .. ',' .. lookup('b'))")])
    rlm = LuaRLM("question -> answer", max_iters=2, tools=[lookup])
    with dspy.context(lm=lm):
        assert rlm(question="?").answer == "alpha,none"


def test_llm_query_on_a_thinking_sub_model_returns_the_answer_alone(scripted):
    # DSPy's LM makes the request with its own client and gives its llm_query tool the
    # content, inline thinking included, without a `reasoning_content` field; the
    # sandbox's built-ins, which call that tool, return what follows the inline thinking.
    answers = {
        "Capital of France?": "<think>\nThe capital... FINAL('Lyon')?\n</think>\n\nParis",
        "a?": "pondering</think>\nA",
        "b?": Reply("B", reasoning_content="thought apart", reasoning_tokens=5),
    }
    code = (
        "x = llm_query('Capital of France?')\n"
        "ys = llm_query_batched({'a?', 'b?'})\n"
        "SUBMIT('[' .. x .. '][' .. ys[1] .. '][' .. ys[2] .. ']')"
    )
    server, lm = scripted([action(code)], sub_answer=answers.__getitem__)
    rlm = LuaRLM("question -> answer", max_iters=2)
    with dspy.context(lm=lm):
        assert rlm(question="?").answer == "[Paris][A][B]"
    assert len(server.sub_calls()) == 3


def test_thinking_in_the_code_field_never_runs(scripted):
    # Thinking right after the code field's header: the code after it runs, the draft
    # inside it does not.
    inline = (
        "[[ ## reasoning ## ]]\nPlan.\n\n[[ ## code ## ]]\n<think>\nmaybe\n```lua\nprint('DRAFT RAN')\n```\n"
        "</think>\n```lua\nprint('REAL RAN')\n```\n\n[[ ## completed ## ]]"
    )
    # Thinking that rehearses the fields: DSPy's adapter takes the first code field,
    # the draft, which ends at the closing tag; all of it is thinking.
    rehearsed = (
        "<think>\nI will answer with\n[[ ## reasoning ## ]]\ndraft\n[[ ## code ## ]]\n"
        "```lua\nprint('DRAFT RAN')\n```\n</think>\n" + action("print('REAL RAN')")
    )
    server, lm = scripted([inline, rehearsed, action("SUBMIT('done')")])
    rlm = LuaRLM("question -> answer", max_iters=3)
    with dspy.context(lm=lm):
        prediction = rlm(question="?")
    assert prediction.answer == "done"
    first, second, _ = prediction.trajectory
    assert (first["code"], first["output"]) == ("print('REAL RAN')", "REAL RAN\n")
    assert second["code"] == ""
    assert "The code field was all thinking" in second["output"]
    # Neither draft ran (the outputs above), nor went back to the model.
    assert not any("DRAFT RAN" in message["content"] for turn in server.turns()[1:] for message in turn["messages"])


# LuaInterpreter alone


def test_it_is_a_code_interpreter_with_persistent_state_and_variables():
    repl = LuaInterpreter()
    assert isinstance(repl, CodeInterpreter)
    assert repl.execute("print(#text)", variables={"text": "hello"}) == "5\n"
    assert repl.execute("x = 1") is None
    assert repl.execute("print(x + #items, nested.k)", variables={"items": [1, 2], "nested": {"k": "v"}}) == "3\tv\n"
    repl.shutdown()


def test_a_context_of_texts_is_a_corpus_and_other_variables_stay_tables():
    repl = LuaInterpreter()
    listed = "for i, d in ipairs(context) do print(i, d.name, d.text) end"
    assert repl.execute(listed, variables={"context": {"a.md": "alpha", "b.md": "beta"}}) == "1\ta.md\talpha\n2\tb.md\tbeta\n"
    assert repl.execute(listed, variables={"context": ["x", "y"]}) == "1\t0\tx\n2\t1\ty\n"
    # Another name, or a list that is not of texts, crosses as JSON, as before.
    assert repl.execute("print(words[2], #context)", variables={"words": ["p", "q"], "context": [[1], [2, 3]]}) == "q\t2\n"
    repl.shutdown()


def test_lua_rlm_describes_a_corpus_context_to_the_model(scripted):
    server, lm = scripted([action("SUBMIT(#context .. ' ' .. context[2].name)")])
    rlm = LuaRLM("context, question -> answer", max_iters=3)
    with dspy.context(lm=lm):
        prediction = rlm(context={"notes.md": "n", "log.txt": "l"}, question="?")
    assert prediction.answer == "2 log.txt"
    prompt = "\n".join(m["content"] for m in server.turns()[0]["messages"])
    assert "Type: corpus" in prompt
    assert "`context` is a corpus: a Lua list of 2 documents" in prompt


def test_a_str_variable_given_again_is_not_copied_again():
    repl = LuaInterpreter()
    text = "x" * 1000
    repl.execute("text_copy = text", variables={"text": text})
    repl.execute("text = 'changed'")
    # The same object again: the sandbox keeps what the code made of it.
    assert repl.execute("print(text)", variables={"text": text}) == "changed\n"
    assert repl.execute("print(#text)", variables={"text": "y" * 3}) == "3\n"


def test_submit_forms():
    repl = LuaInterpreter(output_fields=[{"name": "answer"}, {"name": "count", "type": "int"}])
    assert repl.execute("SUBMIT{answer = 'a', count = 2}") == FinalOutput({"answer": "a", "count": 2})
    assert repl.execute("SUBMIT('b', 3)") == FinalOutput({"answer": "b", "count": 3})
    # SUBMIT ends the block.
    assert repl.execute("SUBMIT('c', 4)\nprint('after')") == FinalOutput({"answer": "c", "count": 4})
    with pytest.raises(CodeExecutionError, match=r"SUBMIT is missing count: write SUBMIT\{answer = \.\.\., count = \.\.\.\}"):
        repl.execute("SUBMIT{answer = 'a'}")
    with pytest.raises(CodeExecutionError, match="SUBMIT takes the outputs answer, count"):
        repl.execute("SUBMIT('only one')")
    single = LuaInterpreter(output_fields=[{"name": "answer"}])
    assert single.execute("SUBMIT(42)") == FinalOutput({"answer": 42})
    assert single.execute("SUBMIT{answer = {1, 2}}") == FinalOutput({"answer": [1, 2]})
    assert single.execute("SUBMIT({1, 2})") == FinalOutput({"answer": [1, 2]})
    assert LuaInterpreter().execute("SUBMIT('x')") == FinalOutput({"output": "x"})


def test_submission_rules():
    assert submission([{"a": 1, "b": 2, "extra": 3}], ["a", "b"]) == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="SUBMIT takes one value"):
        submission([1, 2], [])
    with pytest.raises(ValueError, match=r"SUBMIT\(answer\) or SUBMIT\{answer = \.\.\.\}"):
        submission([1, 2], ["answer"])


def test_errors_and_limits_raise_code_execution_error_and_the_interpreter_goes_on():
    repl = LuaInterpreter(time_limit=0.3)
    with pytest.raises(CodeExecutionError, match=r"(?s)before\n.*boom"):
        repl.execute("print('before')\nerror('boom')")
    with pytest.raises(CodeExecutionError, match="hint"):
        repl.execute("x = len('abc')")
    with pytest.raises(CodeExecutionError, match="time"):
        repl.execute("while true do end")
    with pytest.raises(CodeExecutionError):
        repl.execute("this is not lua")
    assert repl.execute("print('still here')") == "still here\n"


def test_tools_are_called_with_positional_lua_arguments():
    def keyword_tool(query: str, limit: int = 2) -> list:
        return [query] * limit

    # DSPy's RLM wraps tools in keyword-only callables carrying the original signature.
    def wrapped(**kwargs):
        return keyword_tool(**kwargs)

    import inspect

    wrapped.__signature__ = inspect.signature(keyword_tool)  # type: ignore[attr-defined]
    repl = LuaInterpreter(tools={"search": wrapped, "llm_query": lambda prompt: prompt.upper()})
    assert repl.execute("print(table.concat(search('q'), ','), #search('r', 3))") == "q,q\t3\n"
    assert repl.execute("print(llm_query('hi'))") == "HI\n"
    assert repl.execute("print(table.concat(llm_query_batched({'a', 'b'}), ','))") == "A,B\n"


def test_llm_query_returns_the_answer_after_the_tools_thinking():
    replies = {"q": "<think>\nmaybe SUBMIT(1)?\n</think>\n\nanswer", "r": "hmm</think>other", "s": "<think>cut"}
    repl = LuaInterpreter(tools={"llm_query": replies.__getitem__})
    assert repl.execute("print(llm_query('q'))") == "answer\n"
    assert repl.execute("print(table.concat(llm_query_batched({'q', 'r'}), ','))") == "answer,other\n"
    with pytest.raises(CodeExecutionError, match="the model's reply was all thinking, with no answer"):
        repl.execute("llm_query('s')")


def test_llm_query_without_the_tool_is_a_lua_error():
    with pytest.raises(CodeExecutionError, match="no llm_query tool"):
        LuaInterpreter().execute("llm_query('hi')")


def test_tools_added_before_the_first_execute_are_installed():
    repl = LuaInterpreter()
    repl.start()
    repl.tools["late"] = lambda: "here"
    repl._tools_registered = False
    assert repl.execute("print(late())") == "here\n"


def test_tools_added_between_calls_join_the_running_sandbox_as_dspy_gives_them():
    # DSPy's RLM gives a running interpreter fresh tools before each call: it updates
    # `tools` and sets `_tools_registered` to False. The state stays; the tools work.
    repl = LuaInterpreter(tools={"first": lambda: "one"})
    assert repl.execute("kept = first()") is None
    repl.tools.update({"first": lambda: "fresh one", "later": lambda word="": f"later {word}"})
    repl._tools_registered = False
    assert repl.execute("print(kept, first(), later('on'), later())") == "one\tfresh one\tlater on\tlater \n"

    def broken():
        raise ValueError("no luck")

    repl.tools["broken"] = broken
    repl._tools_registered = False
    # The error names the tool the code called.
    with pytest.raises(CodeExecutionError, match="broken: ValueError: no luck"):
        repl.execute("broken()")
    # Without the flag reset a tool is not installed yet, as in DSPy's interpreter.
    repl.tools["unregistered"] = lambda: "x"
    with pytest.raises(CodeExecutionError, match="unregistered"):
        repl.execute("unregistered()")
    assert repl.execute("print(kept)") == "one\n"


def test_a_tool_added_late_whose_name_lua_cannot_hold_is_refused():
    repl = LuaInterpreter()
    repl.execute("x = 1")
    repl.tools["end"] = lambda: None
    repl._tools_registered = False
    with pytest.raises(CodeInterpreterError, match="`end` cannot be a Lua function"):
        repl.execute("print(x)")


def test_a_variable_that_cannot_cross_is_an_interpreter_error():
    with pytest.raises(CodeInterpreterError, match="`bad` cannot cross into Lua"):
        LuaInterpreter().execute("x = 1", variables={"bad": object()})
    with pytest.raises(CodeInterpreterError, match="`huge` cannot cross into Lua"):
        LuaInterpreter(memory_limit_mb=8).execute("x = 1", variables={"huge": "x" * (16 << 20)})


def test_a_shut_down_interpreter_refuses_work():
    repl = LuaInterpreter()
    repl.execute("x = 1")
    repl.shutdown()
    with pytest.raises(CodeInterpreterError, match="shut down"):
        repl.execute("print(x)")


def test_strip_code_fences_takes_any_language():
    assert strip_code_fences("```lua\nprint(1)\n```") == "print(1)"
    assert strip_code_fences("text\n```python\nprint(2)\n```\nmore") == "print(2)"
    assert strip_code_fences("```\nprint(3)") == "print(3)"
    assert strip_code_fences("  print(4)  ") == "print(4)"


def test_an_interpreter_left_without_shutdown_is_collected():
    import gc
    import weakref

    repl = LuaInterpreter(tools={"llm_query": lambda prompt: prompt, "echo": lambda x: x})
    assert repl.execute("print(echo(llm_query('hi')))") == "hi\n"
    gone = weakref.ref(repl)
    del repl
    gc.collect()
    # The sandbox holds the interpreter's callables, not the interpreter.
    assert gone() is None


def test_the_sandbox_settings_reach_the_environment_and_a_misspelt_one_is_refused():
    repl = LuaInterpreter(time_limit=2.5, memory_limit_mb=64, output_limit=100)
    repl.start()
    assert (repl.env.time_limit, repl.env.memory_limit_mb, repl.env.output_limit) == (2.5, 64, 100)
    with pytest.raises(TypeError, match="unknown sandbox setting.*time_limt"):
        LuaInterpreter(time_limt=2.5)  # type: ignore[call-arg]
