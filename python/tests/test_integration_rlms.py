"""rlm_registry.integrations.rlms: the reference RLM (`rlms`) running Lua in the sandbox,
end to end against the scripted server whose replies are Lua, and LuaREPL alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openai_server import Reply, ScriptedServer
from optional import require_package

require_package("rlm")

from rlm.core.types import RLMChatCompletion  # noqa: E402
from rlm.logger import RLMLogger  # noqa: E402

from rlm_registry.integrations.rlms import LuaREPL, LuaRLM, lua_system_prompt  # noqa: E402

LOG = "\n".join(
    ["INFO start", "ERROR gateway timeout", "INFO ok", "ERROR billing down", "ERROR gateway 502"]
)


def repl(code: str) -> str:
    return f"Let me look.\n```repl\n{code}\n```"


def lua_rlm(server: ScriptedServer, **kwargs: object) -> LuaRLM:
    return LuaRLM(
        backend="openai",
        backend_kwargs={
            "model_name": "scripted-model",
            "base_url": server.base_url,
            "api_key": "sk-test",
        },
        **kwargs,
    )


def test_lua_rlm_answers_end_to_end_and_its_log_reads_back(tmp_path: Path):
    replies = [
        repl("errors = grep(context, 'ERROR')\nprint(#errors)"),
        repl("verdict = llm_query('which service fails most? ' .. errors[1].text)\nprint(verdict)"),
        repl("answer.content = 'gateway (' .. #errors .. ' errors; ' .. verdict .. ')'\nanswer.ready = true"),
    ]
    with ScriptedServer(replies, sub_answer=lambda prompt: "the gateway") as server:
        rlm = lua_rlm(server, logger=RLMLogger(log_dir=str(tmp_path)), max_iterations=5)
        result = rlm.completion(LOG, root_prompt="Which service fails most often?")
    assert result.response == "gateway (3 errors; the gateway)"
    # The model read its code's output, and llm_query's prompt reached the server.
    turns = server.turns()
    assert len(turns) == 3
    assert "REPL output:\n\n3\n" in turns[1]["messages"][-2]["content"]
    (sub_call,) = server.sub_calls()
    assert sub_call["messages"][-1]["content"] == "which service fails most? ERROR gateway timeout"
    # The system prompt is Lua's, in the reference's protocol.
    system = turns[0]["messages"][0]["content"]
    assert "```repl" in system and "```lua" not in system
    assert 'answer["ready"] = true' in system
    assert "grep(" in system
    # The reference's log, read back as it reads it: a metadata line, then iterations
    # whose sub-calls are its own RLMChatCompletion.
    (log,) = tmp_path.glob("*.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines[0]["type"] == "metadata"
    assert lines[0]["environment_type"] == "lua"
    iterations = lines[1:]
    assert [entry["type"] for entry in iterations] == ["iteration"] * 3
    assert iterations[0]["code_blocks"][0]["result"]["stdout"] == "3\n"
    assert iterations[0]["code_blocks"][0]["result"]["locals"] == {
        "context": "string",
        "context_0": "string",
        "errors": "table",
    }
    (call,) = iterations[1]["code_blocks"][0]["result"]["rlm_calls"]
    assert RLMChatCompletion.from_dict(call).response == "the gateway"
    assert iterations[-1]["final_answer"] == result.response
    assert result.metadata["iterations"][-1]["final_answer"] == result.response
    # Sub-calls count in the usage, as the reference counts them.
    usage = result.usage_summary.model_usage_summaries["scripted-model"]
    assert usage.total_calls == 4


def test_python_written_by_habit_gets_the_lua_hint_back():
    replies = [repl("print(len(context))"), repl("FINAL(#context)")]
    with ScriptedServer(replies) as server:
        result = lua_rlm(server, max_iterations=3).completion("abc")
    assert result.response == "3"
    feedback = server.turns()[1]["messages"][-2]["content"]
    assert "attempt to call a nil value (global 'len')" in feedback
    assert "hint: Lua writes `len(x)` as `#x`" in feedback


def test_llm_query_batched_reaches_the_server_for_each_prompt():
    replies = [
        repl("got = llm_query_batched({'a', 'b', 'c'})\nFINAL(table.concat(got, ','))"),
    ]
    with ScriptedServer(replies, sub_answer=str.upper) as server:
        result = lua_rlm(server, max_iterations=2).completion("x")
    assert result.response == "A,B,C"
    assert sorted(r["messages"][-1]["content"] for r in server.sub_calls()) == ["a", "b", "c"]


def test_llm_query_on_a_thinking_sub_model_returns_the_answer_alone(tmp_path: Path):
    # The reference's LM handler makes the request with its own client, which keeps the
    # content (inline thinking included) and drops a `reasoning_content` field; the
    # sandbox's built-ins then return what follows the inline thinking, as in `ask`.
    answers = {
        "Capital of France?": "<think>\nThe capital... FINAL('Lyon')?\n</think>\n\nParis",
        "a?": "pondering</think>\nA",
        "b?": Reply("B", reasoning_content="thought apart", reasoning_tokens=5),
        "cut?": Reply("<think>\nFirst, consider every", finish_reason="length"),
    }
    code = (
        "x = llm_query('Capital of France?')\n"
        "ys = llm_query_batched({'a?', 'b?'})\n"
        "local ok, err = pcall(llm_query, 'cut?')\n"
        "FINAL('[' .. x .. '][' .. ys[1] .. '][' .. ys[2] .. '] ' .. tostring(ok) .. ': ' .. err)"
    )
    with ScriptedServer([repl(code)], sub_answer=answers.__getitem__) as server:
        rlm = lua_rlm(server, logger=RLMLogger(log_dir=str(tmp_path)), max_iterations=2)
        result = rlm.completion("x")
    # A reply that is all thinking is an error; the finish reason stays with the
    # reference's client, so the sandbox says the thinking never closed, not that the
    # reply was cut.
    assert result.response == (
        "[Paris][A][B] false: llm_query failed: the model's reply was all thinking, with no answer: "
        "its thinking never closed"
    )
    # The reference's own record of the calls keeps what its client returned: the
    # inline thinking, not the field.
    (log,) = tmp_path.glob("*.jsonl")
    (iteration,) = [json.loads(line) for line in log.read_text().splitlines()][1:]
    calls = iteration["code_blocks"][0]["result"]["rlm_calls"]
    assert {call["prompt"]: call["response"] for call in calls} == {
        "Capital of France?": answers["Capital of France?"],
        "a?": answers["a?"],
        "b?": "B",
        "cut?": "<think>\nFirst, consider every",
    }


def test_persistent_runs_keep_the_sandbox_and_number_the_contexts():
    replies = [
        repl("first = context\nFINAL(#context_0)"),
        repl("FINAL(first .. '+' .. context_1)"),
    ]
    with ScriptedServer(replies) as server:
        rlm = lua_rlm(server, max_iterations=2, persistent=True)
        assert rlm.completion("one").response == "3"
        assert rlm.completion("two").response == "one+two"
        rlm.close()


def test_the_prompt_is_a_template_of_the_reference():
    template = lua_system_prompt(max_iterations=4)
    # The reference fills the custom tools' section; the Lua braces survive.
    filled = template.format(custom_tools_section="\nTOOLS")
    assert filled.endswith("\nTOOLS\n")
    assert "{content" in filled or 'answer["content"]' in filled
    assert "Lua" in filled


def test_lua_rlm_refuses_another_environment():
    with pytest.raises(TypeError, match="LuaREPL"):
        LuaRLM(environment="local")


# LuaREPL alone


def test_context_str_dict_and_numbered():
    env = LuaREPL(context_payload="alpha\nbeta\n")
    assert env.execute_code("print(line_count(context), context_0 == context)").stdout == "2\ttrue\n"
    assert env.get_context_count() == 1
    assert env.add_context({"users": [{"name": "ada"}]}) == 1
    assert env.execute_code("print(context_1.users[1].name)").stdout == "ada\n"
    env.load_context(["x", "y"])
    assert env.execute_code("print(#context, context[2])").stdout == "2\ty\n"
    env.cleanup()


def test_the_answer_table_and_final_end_a_run():
    env = LuaREPL()
    assert env.execute_code("answer.content = 'draft'").final_answer is None
    assert env.execute_code("answer.ready = true").final_answer == "draft"
    # Once: a later block does not give the same answer again.
    assert env.execute_code("x = answer.content").final_answer is None
    assert env.execute_code("answer.ready = true").final_answer == "draft"
    assert env.execute_code("FINAL(6 * 7)").final_answer == "42"
    assert env.execute_code("answer = 'not a table'").stderr == ""


def test_errors_and_limits_are_in_stderr_and_the_repl_goes_on():
    env = LuaREPL(time_limit=0.3)
    failed = env.execute_code("print('before')\nerror('boom')")
    assert failed.stdout == "before\n"
    assert "boom" in failed.stderr
    assert "time" in env.execute_code("while true do end").stderr
    assert env.execute_code("print('after')").stderr == ""


def test_llm_query_without_a_handler_is_a_lua_error():
    env = LuaREPL()
    result = env.execute_code("llm_query('hi')")
    assert "no LM handler" in result.stderr
    assert result.rlm_calls == []


def test_custom_tools_are_functions_and_values():
    def double(x):
        """Doubles a number."""
        return 2 * x

    env = LuaREPL(custom_tools={"double": double, "LIMIT": {"tool": 7, "description": "a cap"}})
    assert env.execute_code("print(double(LIMIT))").stdout == "14\n"
    with pytest.raises(ValueError, match="reserved"):
        LuaREPL(custom_tools={"llm_query": double})


def test_setup_code_and_locals():
    env = LuaREPL(setup_code="greeting = 'hi'")
    result = env.execute_code("n = 3\nf = function() end")
    assert result.locals == {"f": "function", "greeting": "string", "n": "number"}


def test_a_cleaned_up_repl_refuses_work():
    env = LuaREPL()
    env.cleanup()
    with pytest.raises(ValueError, match="cleaned up"):
        env.execute_code("x = 1")
    env.setup()
    assert env.execute_code("print(1)").stdout == "1\n"


def test_a_repl_left_without_cleanup_is_collected():
    import gc
    import weakref

    env = LuaREPL(context_payload="x")
    env.execute_code("print(context)")
    gone = weakref.ref(env)
    del env
    gc.collect()
    # The sandbox holds the LM handler's client, not the environment.
    assert gone() is None


def test_locals_leave_out_the_registry_functions_and_survive_a_replaced_listing():
    env = LuaREPL(context_payload="a\nb\n")
    result = env.execute_code("lines = split(context, '\\n')")
    assert result.locals == {"context": "string", "context_0": "string", "lines": "table"}
    replaced = env.execute_code("_rlm_repl_variables = nil\nprint(#lines)")
    assert (replaced.stdout, replaced.stderr, replaced.locals) == ("3\n", "", {})


def test_the_sandbox_settings_reach_the_environment_and_the_rest_the_reference():
    repl = LuaREPL(time_limit=2.5, memory_limit_mb=64, output_limit=100, persistent=True)
    assert (repl.env.time_limit, repl.env.memory_limit_mb, repl.env.output_limit) == (2.5, 64, 100)
    assert repl.persistent
    # The prompt states the limit the sandbox was given.
    assert "time: 30 s per block" in lua_system_prompt()
    assert "time: 2 s per block" in lua_system_prompt(time_limit=2.5)
