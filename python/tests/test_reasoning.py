"""Reasoning models through Python: a reply's thinking (inline `<think>…</think>`, only
its closing tag, or a `reasoning_content` field) never runs and never goes back to the
model in `ask`; sub-calls through the sandbox's built-ins return the answer alone; a
reply cut at the token limit does not run its open block; `max_reply_tokens` and
`reasoning_effort` reach the request body; and `split_thinking`, the one rule."""

import json
from pathlib import Path

import pytest

from openai_server import Reply, ScriptedServer
from rlm_registry import Environment, LimitError, LuaError, RegistryError, ask, split_thinking

# The example: a draft inside the thinking, the real code after it.
QWEN_DRAFT = (
    "<think>\nI could try\n```lua\nprint('DRAFT RAN')\nFINAL('draft answer')\n```\n"
    "but better not.\n</think>\n```lua\nFINAL('real answer')\n```"
)


def lua(code: str) -> str:
    return f"```lua\n{code}\n```"



def events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text().splitlines()]


def outputs(trace: Path) -> str:
    """Every block's output in the trace's turns, joined."""
    return "\n".join(
        block.get("output", "") for event in events(trace) if event["event"] == "turn" for block in event["outputs"]
    )


def test_a_draft_inside_thinking_never_runs_and_the_real_answer_wins(tmp_path: Path):
    trace = tmp_path / "run.jsonl"
    with ScriptedServer([QWEN_DRAFT]) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url, trace=trace)
    assert answer.answer == "real answer"
    assert answer.turns == 1
    (turn,) = [event for event in events(trace) if event["event"] == "turn"]
    assert turn["code_blocks"] == ["FINAL('real answer')\n"]
    assert "DRAFT RAN" not in outputs(trace)
    # The trace keeps the reply as it came, thinking included.
    assert turn["reply"] == QWEN_DRAFT


def test_only_the_closing_tag_ends_thinking_too():
    reply = (
        "The template opened the tag.\n```lua\nprint('DRAFT RAN')\n```\n</think>\n\n"
        "```lua\nprint('REAL RAN')\n```\n"
    )
    with ScriptedServer([reply, lua("FINAL('done')")]) as server:
        assert ask("?", "x", model="m", base_url=server.base_url).answer == "done"
    feedback = server.turns()[1]["messages"][-1]["content"]
    assert "REAL RAN" in feedback
    assert "DRAFT RAN" not in feedback


def test_a_reasoning_field_holding_code_is_not_run_and_is_kept_in_the_trace(tmp_path: Path):
    reasoning = "```lua\nprint('FROM REASONING')\nFINAL('wrong')\n```"
    trace = tmp_path / "run.jsonl"
    reply = Reply(lua("FINAL('right')"), reasoning_content=reasoning, reasoning_tokens=7)
    with ScriptedServer([reply]) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url, trace=trace)
    assert answer.answer == "right"
    assert "FROM REASONING" not in outputs(trace)
    (turn,) = [event for event in events(trace) if event["event"] == "turn"]
    assert turn["reasoning"] == reasoning
    assert turn["reasoning_tokens"] == 7
    # Counted once: the reasoning tokens are part of the completion tokens.
    assert (answer.completion_tokens, answer.reasoning_tokens) == (10, 7)


def test_a_run_that_ends_without_an_answer_reports_its_reasoning_tokens_too():
    thinking = Reply(lua("print(1)"), reasoning_content="Hmm.", reasoning_tokens=3)
    with ScriptedServer([thinking] * 2) as server:
        with pytest.raises(LimitError) as caught:
            ask("?", "x", model="m", base_url=server.base_url, max_iterations=2)
    assert (caught.value.completion_tokens, caught.value.reasoning_tokens) == (20, 6)


def test_thinking_is_left_out_of_the_history_sent_back():
    first = "<think>\nLet me count the lines first.\n</think>\n\n" + lua("print(line_count(context))")
    with ScriptedServer([first, lua("FINAL('3')")]) as server:
        answer = ask("?", "a\nb\nc\n", model="m", base_url=server.base_url)
    assert answer.answer == "3"
    sent = server.turns()[1]["messages"]
    assistant = sent[-2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == lua("print(line_count(context))")
    assert not any("think>" in message["content"] for message in sent)


def test_sub_calls_on_a_thinking_sub_model_return_the_answer_alone():
    answers = {
        "Capital of France?": "<think>\nThe capital... FINAL('Lyon')?\n</think>\n\nParis",
        "a?": "<think>x</think>A",
        "b?": Reply("B", reasoning_content="thought apart", reasoning_tokens=5),
        "c?": "pondering</think>\nC",
    }
    code = (
        "x = llm_query('Capital of France?')\n"
        "ys = llm_query_batched({'a?', 'b?'})\n"
        "r = parallel_map({'c?'}, function(p) return llm_query(p) end)\n"
        "FINAL('[' .. x .. '][' .. ys[1] .. '][' .. ys[2] .. '][' .. r[1] .. ']')"
    )
    with ScriptedServer([lua(code)], sub_answer=answers.__getitem__) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url)
    assert answer.answer == "[Paris][A][B][C]"
    assert len(server.sub_calls()) == 4
    # The sub-call's thinking tokens count in the run's usage.
    assert answer.reasoning_tokens == 5


def test_a_sub_call_cut_while_thinking_is_an_error_not_an_empty_answer():
    code = "local ok, err = pcall(llm_query, 'long question')\nprint(ok, err)"
    cut = Reply("<think>\nFirst, consider every", finish_reason="length")
    with ScriptedServer([lua(code), lua("FINAL('done')")], sub_answer=lambda prompt: cut) as server:
        ask("?", "x", model="m", base_url=server.base_url)
    feedback = server.turns()[1]["messages"][-1]["content"]
    assert "false" in feedback
    assert "all thinking, with no answer: it was cut at the token limit while thinking" in feedback


def test_a_reply_cut_inside_a_block_does_not_run_it_and_the_feedback_says_so():
    cut = Reply(
        "```lua\nprint('FIRST')\n```\n```lua\nprint('HALF')\nfor i = 1, 10 do\n  x = ",
        finish_reason="length",
    )
    with ScriptedServer([cut, lua("FINAL('done')")]) as server:
        assert ask("?", "x", model="m", base_url=server.base_url).answer == "done"
    feedback = server.turns()[1]["messages"][-1]["content"]
    assert "FIRST" in feedback
    assert "HALF" not in feedback
    assert "cut off at the token limit inside a ```lua block, so that block did not run" in feedback


_SUB_CALL = lua("print(llm_query('hi'))\nFINAL('ok')")


def test_the_reply_limit_and_the_reasoning_effort_are_in_every_request_body():
    with ScriptedServer([_SUB_CALL]) as server:
        ask("?", "x", model="m", base_url=server.base_url, max_reply_tokens=2048, reasoning_effort="low")
    assert len(server.requests) == 2, "the root turn and its sub-call"
    for body in server.requests:
        assert (body["max_tokens"], body["reasoning_effort"]) == (2048, "low")
    # Unset: neither is sent, and the server keeps its own.
    with ScriptedServer([lua("FINAL('ok')")]) as server:
        ask("?", "x", model="m", base_url=server.base_url)
    assert "max_tokens" not in server.requests[0]
    assert "reasoning_effort" not in server.requests[0]


def test_the_argument_wins_over_the_variable_which_wins_over_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "rlm.toml"
    config.write_text('[model]\nmax_reply_tokens = 512\nreasoning_effort = "medium"\n')

    def sent(**arguments: object) -> tuple[int, str]:
        with ScriptedServer([lua("FINAL('ok')")]) as server:
            ask("?", "x", model="m", base_url=server.base_url, config=config, **arguments)
        return server.requests[0]["max_tokens"], server.requests[0]["reasoning_effort"]

    assert sent() == (512, "medium")
    monkeypatch.setenv("RLM_MAX_REPLY_TOKENS", "8k")
    monkeypatch.setenv("RLM_REASONING_EFFORT", "high")
    assert sent() == (8000, "high")
    assert sent(max_reply_tokens=100, reasoning_effort="low") == (100, "low")


def test_bad_reply_limits_and_efforts_are_refused_before_any_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    unreachable = "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match="reasoning_effort: `extreme` is not a reasoning effort.*low, medium, high"):
        ask("?", "x", model="m", base_url=unreachable, reasoning_effort="extreme")
    with pytest.raises(ValueError, match="max_reply_tokens: a reply needs at least 1 token"):
        ask("?", "x", model="m", base_url=unreachable, max_reply_tokens=0)
    with pytest.raises(ValueError, match="max_reply_tokens: at most 4294967295 tokens"):
        ask("?", "x", model="m", base_url=unreachable, max_reply_tokens=2**32)
    config = tmp_path / "rlm.toml"
    config.write_text('[model]\nreasoning_effort = "extreme"\n')
    with pytest.raises(RegistryError, match="reasoning effort"):
        ask("?", "x", model="m", base_url=unreachable, config=config)
    monkeypatch.setenv("RLM_REASONING_EFFORT", "extreme")
    with pytest.raises(ValueError, match="RLM_REASONING_EFFORT"):
        ask("?", "x", model="m", base_url=unreachable)


# The sandbox's built-ins, whatever model answers them: here a Python callable, as the
# integrations give theirs.


def test_the_environments_sub_calls_return_the_answer_after_the_thinking():
    def model(prompt: str) -> str:
        return {"q": "<think>\nmaybe FINAL(1)?\n</think>\n\nanswer", "r": "hmm</think>other"}.get(prompt, prompt)

    with Environment(llm=model) as env:
        assert env.execute("print(llm_query('q'))").stdout == "answer\n"
        assert env.execute("print(table.concat(llm_query_batched({'q', 'r', 'plain'}), ','))").stdout == (
            "answer,other,plain\n"
        )
        # Without a child agent rlm_query is a plain sub-call: the same rule.
        assert env.execute("print(rlm_query('r'))").stdout == "other\n"


def test_a_reply_that_is_all_thinking_is_an_error_in_the_environment():
    with Environment(llm=lambda prompt: "<think>\nstill going") as env:
        result = env.execute("x = llm_query('q')")
        assert result.error is not None
        assert "llm_query failed: the model's reply was all thinking, with no answer: its thinking never closed" in (
            result.error
        )
        with pytest.raises(LuaError, match="all thinking"):
            env.call("llm_query", "q")


def test_split_thinking_is_the_loops_rule():
    assert split_thinking(QWEN_DRAFT) == (
        "\nI could try\n```lua\nprint('DRAFT RAN')\nFINAL('draft answer')\n```\nbut better not.\n",
        "```lua\nFINAL('real answer')\n```",
    )
    assert split_thinking("I should count.\n</think>\n42") == ("I should count.\n", "42")
    # A closing tag inside a code block is the code's.
    code = "```lua\nprint('</think>')\n```"
    assert split_thinking(code) == (None, code)
    # Cut while thinking: all thinking, no answer.
    assert split_thinking("<think>Let me see") == ("Let me see", "")
    assert split_thinking("42") == (None, "42")
