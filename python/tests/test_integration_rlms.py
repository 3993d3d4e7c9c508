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

from rlm_registry import Environment, LlmError  # noqa: E402
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


def test_the_default_first_request_fits_a_small_model():
    with ScriptedServer([repl("FINAL('ok')")]) as server:
        result = lua_rlm(server, max_iterations=2).completion(LOG, root_prompt="Q?")
    assert result.response == "ok"
    system = server.turns()[0]["messages"][0]["content"]
    # Compact, as `rlm ask` and the DSPy integration: signatures and summaries.
    assert Environment().call("token_count", system) < 3000
    assert "fn_search" in system


def test_a_first_request_too_long_for_the_window_is_refused_unsent():
    with ScriptedServer([repl("FINAL('ok')")]) as server:
        rlm = lua_rlm(server, max_iterations=2, context_window=2048)
        with pytest.raises(LlmError, match="does not fit the model's context window") as refused:
            rlm.completion(LOG, root_prompt="Q?")
        assert server.requests == []
        assert "1,024 are kept for the reply" in str(refused.value)
        # With room enough, the same run goes on.
        result = lua_rlm(server, max_iterations=2, context_window=32768).completion(LOG)
    assert result.response == "ok"


def test_at_depth_2_rlm_query_runs_a_child_rlm_whose_final_comes_back(tmp_path: Path):
    replies = [
        # The root, turn 1: a child for the sub-task.
        repl("found = rlm_query('Count the error lines in: ' .. context)\nprint(found)"),
        # The child's own turns, with its own REPL.
        repl("n = 0\nfor _ in context:gmatch('ERROR') do n = n + 1 end\nprint(n)"),
        repl("FINAL(n .. ' errors')"),
        # The root, turn 2.
        repl("FINAL('child says ' .. found)"),
    ]
    with ScriptedServer(replies) as server:
        rlm = lua_rlm(server, max_iterations=4, max_depth=2, logger=RLMLogger(log_dir=str(tmp_path)))
        result = rlm.completion(LOG, root_prompt="How many errors?")
    assert result.response == "child says 3 errors"
    turns = server.turns()
    assert len(turns) == 4
    # The child's requests carry a system prompt of their own and its own conversation.
    child_first = turns[1]["messages"]
    assert child_first[0]["role"] == "system" and "```repl" in child_first[0]["content"]
    # The reference hands the child the prompt as its context, not as a message: its
    # conversation is its own, and its code counted the lines of the prompt.
    assert not any("How many errors?" in str(m["content"]) for m in child_first)
    assert "REPL output:\n\n3\n" in turns[2]["messages"][-2]["content"]
    # The root's own calls are its handler's; the child's are in its completion, which
    # the root's block lists (how the reference counts a child's usage and cost).
    assert result.usage_summary.model_usage_summaries["scripted-model"].total_calls == 2
    # The log reads back as the reference reads it: the child's completion is an
    # `rlm_calls` entry of the root's first block, with the child's own trajectory.
    (log,) = tmp_path.glob("*.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    (call,) = lines[1]["code_blocks"][0]["result"]["rlm_calls"]
    child = RLMChatCompletion.from_dict(call)
    assert child.response == "3 errors"
    assert child.usage_summary.model_usage_summaries["scripted-model"].total_calls == 2
    assert [it["final_answer"] for it in child.metadata["iterations"]][-1] == "3 errors"


def test_at_the_last_depth_rlm_query_is_a_plain_completion_as_the_reference_does():
    replies = [repl("print(rlm_query('say hi'))"), repl("FINAL('done')")]
    with ScriptedServer(replies, sub_answer=lambda prompt: "plain: " + prompt) as server:
        result = lua_rlm(server, max_iterations=3, max_depth=1).completion("x")
    assert result.response == "done"
    (sub_call,) = server.sub_calls()
    assert sub_call["messages"][-1]["content"] == "say hi"
    assert "plain: say hi" in server.turns()[1]["messages"][-2]["content"]


def test_rlm_query_batched_runs_child_rlms_at_most_max_concurrent_subcalls_at_once():
    # Each child answers at once with FINAL: its first turn's reply.
    replies = [repl("got = rlm_query_batched({'a', 'b', 'c'})\nprint(table.concat(got, ','))")]
    replies += [repl("FINAL('child')")] * 3
    replies += [repl("FINAL(table.concat(got, ','))")]
    with ScriptedServer(replies) as server:
        result = lua_rlm(
            server, max_iterations=3, max_depth=2, max_concurrent_subcalls=2
        ).completion("x")
    assert result.response == "child,child,child"
    assert len(server.turns()) == 5


def test_compaction_keeps_the_conversation_in_history_readable_from_lua():
    repl_env = LuaREPL(compaction=True)
    assert repl_env.execute_code("print(#history)").stdout == "0\n"
    repl_env.append_compaction_entry(
        [{"role": "assistant", "content": "turn 1"}, {"role": "user", "content": "output 1"}]
    )
    repl_env.append_compaction_entry({"type": "summary", "content": "so far: 3 errors"})
    out = repl_env.execute_code(
        "for i, m in ipairs(history) do print(i, m.role, m.content, m.type) end"
    ).stdout
    assert out.splitlines() == [
        "1\tassistant\tturn 1\tnil",
        "2\tuser\toutput 1\tnil",
        "3\tassistant\tso far: 3 errors\tsummary",
    ]
    # Code that replaced `history` gets the whole conversation back with the next entry.
    repl_env.execute_code("history = 'gone'")
    repl_env.append_compaction_entry([{"role": "user", "content": "more"}])
    assert repl_env.execute_code("print(#history, history[4].content)").stdout == "4\tmore\n"
    # Without compaction, entries are ignored, as the reference's.
    plain = LuaREPL()
    plain.append_compaction_entry({"type": "summary", "content": "x"})
    assert plain.execute_code("print(history)").stdout == "nil\n"


def test_lua_rlm_with_compaction_hands_it_to_its_repl():
    replies = [repl("print(type(history), #history)"), repl("FINAL('ok')")]
    with ScriptedServer(replies) as server:
        result = lua_rlm(server, max_iterations=3, compaction=True).completion("x")
    assert result.response == "ok"
    system = server.turns()[0]["messages"][0]["content"]
    assert "REPL variable `history`" in system
    # After turn 1 the reference appended the turn's messages to `history`.
    assert "REPL output:\n\ntable\t0\n" in server.turns()[1]["messages"][-2]["content"]


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
    env.load_context([[1, 2], [3]])
    assert env.execute_code("print(#context, context[2][1])").stdout == "2\t3\n"
    env.cleanup()


def test_a_dict_or_list_of_texts_is_a_corpus_and_other_contexts_stay():
    env = LuaREPL(context_payload={"a.md": "alpha", "b.md": b"beta"})
    listed = "for i, d in ipairs(context) do print(i, d.name, d.kind, d.text) end"
    assert env.execute_code(listed).stdout == "1\ta.md\ttext\talpha\n2\tb.md\ttext\tbeta\n"
    # Another corpus as context_1, named by position; `context` stays context_0.
    assert env.add_context(["x", "y"]) == 1
    assert env.execute_code("print(context_1[2].name, context_1[2].text, context[1].name)").stdout == (
        "1\ty\ta.md\n"
    )
    assert env.execute_code("print(context == context_0, _rlm_kept_context)").stdout == "true\tnil\n"
    env.cleanup()


def test_a_corpus_context_is_described_to_the_model():
    replies = [repl("answer.content = context[2].name .. ':' .. context[2].text\nanswer.ready = true")]
    with ScriptedServer(replies) as server:
        result = lua_rlm(server, max_iterations=2).completion(["first", "second"], root_prompt="Q?")
    assert result.response == "1:second"
    first_user = [m for m in server.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert "`context` is a corpus: a Lua list of 2 documents" in first_user
    assert "`0`, `1`" in first_user


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
