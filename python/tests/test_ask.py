"""ask: the whole RLM loop end to end against a scripted OpenAI-compatible server, whose
replies are Lua; and system_prompt."""

import json
from pathlib import Path

import pytest

from openai_server import ScriptedServer
from rlm_registry import LimitError, LlmError, LuaError, Registry, RegistryError, ask, system_prompt

LOG = "\n".join(
    ["INFO start", "ERROR gateway timeout", "INFO ok", "ERROR billing down", "ERROR gateway 502"]
)


def lua(code: str) -> str:
    return f"```lua\n{code}\n```"



def test_a_question_is_answered_end_to_end_with_llm_query_reaching_the_server(tmp_path: Path):
    replies = [
        lua("errors = grep(context, 'ERROR')\nprint(#errors)"),
        lua("verdict = llm_query('which service fails most? ' .. errors[1].text)\nprint(verdict)"),
        lua("FINAL('gateway (' .. #errors .. ' errors; ' .. verdict .. ')')"),
    ]
    trace = tmp_path / "run.jsonl"
    with ScriptedServer(replies, sub_answer=lambda prompt: "the gateway") as server:
        answer = ask(
            "Which service fails most often?",
            LOG,
            model="scripted-model",
            base_url=server.base_url,
            api_key="sk-test",
            trace=trace,
        )
    assert answer.answer == "gateway (3 errors; the gateway)"
    assert str(answer) == answer.answer
    assert answer.turns == 3
    assert answer.llm_calls == 4
    assert (answer.prompt_tokens, answer.completion_tokens) == (400, 40)
    assert answer.seconds > 0
    assert answer.trace == str(trace)
    # The model read what its code printed, and llm_query's prompt reached the server.
    assert server.turns()[1]["messages"][-1]["content"].startswith("Output of block 1:\n3")
    (sub_call,) = server.sub_calls()
    assert sub_call["messages"][-1]["content"] == "which service fails most? ERROR gateway timeout"
    assert all(request["model"] == "scripted-model" for request in server.requests)
    # The trace is the crate's JSONL: a start line, then per turn a reply line when the
    # reply arrives, a call line per answered sub-call, and the turn line.
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert events[0]["event"] == "start"
    kinds = [e["event"] for e in events[1:]]
    assert kinds == ["reply", "turn", "reply", "call", "turn", "reply", "turn"]
    assert events[-1]["final"] == answer.answer


def test_python_written_by_habit_gets_the_lua_hint_back():
    replies = [lua("print(len(context))"), lua("FINAL(#context)")]
    with ScriptedServer(replies) as server:
        answer = ask("How long is it?", "abc", model="m", base_url=server.base_url)
    assert answer.answer == "3"
    feedback = server.turns()[1]["messages"][-1]["content"]
    assert "attempt to call a nil value (global 'len')" in feedback
    assert "Hint: Lua writes `len(x)` as `#x`: `print(#context)`." in feedback


def test_context_may_be_bytes_or_a_list_of_chunks():
    with ScriptedServer([lua("FINAL(#context .. ' ' .. context[2])")]) as server:
        answer = ask("?", ["first", b"second"], model="m", base_url=server.base_url)
    assert answer.answer == "2 second"
    with ScriptedServer([lua("FINAL(#context)")]) as server:
        assert ask("?", b"\xff\xfe", model="m", base_url=server.base_url).answer == "2"
    with ScriptedServer([lua("FINAL(tostring(context))")]) as server:
        assert ask("?", model="m", base_url=server.base_url).answer == "nil"


def test_the_server_and_model_come_from_the_environment_variables(monkeypatch):
    with ScriptedServer([lua("FINAL('from env')")]) as server:
        monkeypatch.setenv("RLM_BASE_URL", server.base_url)
        monkeypatch.setenv("RLM_MODEL", "env-model")
        assert ask("?", "x").answer == "from env"
    assert server.requests[0]["model"] == "env-model"


def test_the_trace_in_the_reference_format(tmp_path: Path):
    trace = tmp_path / "run.jsonl"
    with ScriptedServer([lua("FINAL('done')")]) as server:
        ask("?", "x", model="m", base_url=server.base_url, trace=trace, trace_format="rlm")
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert lines[0]["type"] == "metadata"
    assert lines[1]["type"] == "iteration" and lines[1]["final_answer"] == "done"


def test_the_iteration_cap_is_a_limit_error():
    with ScriptedServer([lua("print(1)")] * 5) as server:
        with pytest.raises(LimitError, match="iteration limit reached") as caught:
            ask("?", "x", model="m", base_url=server.base_url, max_iterations=2)
    assert caught.value.kind == "iterations"
    assert caught.value.turns == 2


def test_a_token_budget_is_a_limit_error():
    with ScriptedServer([lua("print(1)")] * 5) as server:
        with pytest.raises(LimitError) as caught:
            ask("?", "x", model="m", base_url=server.base_url, max_tokens=150)
    assert caught.value.kind == "tokens"


def test_code_failing_turn_after_turn_is_a_lua_error():
    with ScriptedServer([lua("error('broken')")] * 5) as server:
        with pytest.raises(LuaError, match="gave up after 3 turns in a row with errors"):
            ask("?", "x", model="m", base_url=server.base_url)


def test_a_server_that_refuses_is_an_llm_error():
    with ScriptedServer([], status=400) as server:
        with pytest.raises(LlmError, match="HTTP 400"):
            ask("?", "x", model="m", base_url=server.base_url)


def test_a_reply_without_code_twice_is_an_llm_error():
    with ScriptedServer(["Let me think.", "Still thinking."]) as server:
        with pytest.raises(LlmError, match="without code or a final answer twice"):
            ask("?", "x", model="m", base_url=server.base_url)


def test_bad_arguments_are_refused_before_any_call(tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    with pytest.raises(ValueError, match="time_limit"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", time_limit=-1)
    with pytest.raises(ValueError, match="prompt_mode"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", prompt_mode="tiny")
    with pytest.raises(ValueError, match="trace_format"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", trace=trace, trace_format="xml")
    assert not trace.exists()
    with pytest.raises(ValueError, match="max_time"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", max_time=0)
    with pytest.raises(LlmError, match="base URL"):
        ask("?", "x", model="m", base_url="not a url")
    with pytest.raises(OSError):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", trace="/nonexistent/dir/t.jsonl")
    with pytest.raises(TypeError):
        ask("?", 42, model="m")
    with pytest.raises(ValueError, match="answer_protocol"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", answer_protocol="done")
    with pytest.raises(ValueError, match="schema is not JSON"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", schema="{not json")
    with pytest.raises(ValueError, match="schema"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9/v1", schema={"type": 12})


COUNT_SCHEMA = {
    "type": "object",
    "properties": {"errors": {"type": "integer"}, "worst": {"type": "string"}},
    "required": ["errors", "worst"],
}


def test_a_typed_answer_is_checked_and_given_as_python_values():
    replies = [
        lua("FINAL({errors = 'three'})"),
        lua("FINAL({errors = #grep(context, 'ERROR'), worst = 'gateway'})"),
    ]
    with ScriptedServer(replies) as server:
        answer = ask("How many errors?", LOG, model="m", base_url=server.base_url, schema=COUNT_SCHEMA)
    assert answer.value == {"errors": 3, "worst": "gateway"}
    assert json.loads(answer.answer) == answer.value
    assert answer.turns == 2
    # The model read what was wrong with its first answer, with the path.
    feedback = server.turns()[1]["messages"][-1]["content"]
    assert "errors" in feedback and "integer" in feedback
    # The schema is in the prompt, given as JSON text too.
    assert '"worst"' in server.turns()[0]["messages"][0]["content"]


def test_an_answer_the_schema_never_accepts_is_a_limit_error():
    with ScriptedServer([lua("FINAL('just text')")] * 3) as server:
        with pytest.raises(LimitError) as caught:
            ask("?", "x", model="m", base_url=server.base_url, schema=json.dumps(COUNT_SCHEMA), max_iterations=3)
    assert caught.value.kind == "iterations"
    assert "object" in str(caught.value)


def test_a_plain_answer_has_no_value():
    with ScriptedServer([lua("FINAL(42)")]) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url)
    assert (answer.answer, answer.value) == ("42", None)


def test_the_answer_protocol_is_taught_and_both_ways_end_the_run():
    assert 'answer["ready"] = true' in system_prompt(answer_protocol="answer")
    replies = [lua("answer['content'] = 'from the table'\nanswer['ready'] = true")]
    with ScriptedServer(replies) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url, answer_protocol="answer")
    assert answer.answer == "from the table"
    with ScriptedServer([lua("FINAL('by FINAL')")]) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url, answer_protocol="answer")
    assert answer.answer == "by FINAL"


def test_a_window_too_small_is_refused_before_anything_is_sent():
    with ScriptedServer([lua("FINAL(1)")]) as server:
        with pytest.raises(LlmError, match="context window") as caught:
            ask("?", "x", model="m", base_url=server.base_url, context_window=1000)
        assert server.requests == []
    assert "compact" in str(caught.value) or "registry" in str(caught.value)


def test_token_counts_take_the_command_lines_text_as_well_as_an_int():
    with ScriptedServer([lua("FINAL(1)")]) as server:
        with pytest.raises(LlmError, match="the window is 1,000 tokens"):
            ask("?", "x", model="m", base_url=server.base_url, context_window="1k")
        answer = ask("?", "x", model="m", base_url=server.base_url, context_window="128k", max_reply_tokens="2k")
        assert answer.answer == "1"
        assert server.requests[0]["max_tokens"] == 2000
    with pytest.raises(ValueError, match="context_window: `lots` is not a number of tokens"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9", context_window="lots")
    with pytest.raises(ValueError, match="max_reply_tokens: a number of tokens"):
        ask("?", "x", model="m", base_url="http://127.0.0.1:9", max_reply_tokens=-5)


def test_without_a_window_the_one_the_server_reports_is_checked_and_an_argument_wins():
    models = {"object": "list", "data": [{"id": "m", "owned_by": "vllm", "max_model_len": 1000}]}
    with ScriptedServer([lua("FINAL(1)")], models=models) as server:
        with pytest.raises(LlmError, match="the window is 1,000 tokens"):
            ask("?", "x", model="m", base_url=server.base_url)
        assert server.requests == [] and server.gets == ["/v1/models"]
        answer = ask("?", "x", model="m", base_url=server.base_url, context_window=100_000)
        assert answer.answer == "1"
        assert server.gets == ["/v1/models"], "a window given: the server is not asked"


def test_system_prompt_documents_the_registry_and_the_context():
    prompt = system_prompt("a" * 1000, max_iterations=7)
    assert "word_count" in prompt
    assert "FINAL" in prompt
    # Compact is the default, as for `rlm ask`: the full listing is longer.
    full = system_prompt("a" * 1000, max_iterations=7, prompt_mode="full")
    assert len(prompt) < len(full) and "---@param" in full and "---@param" not in prompt
    own = system_prompt(registry=Registry([], baked=False))
    assert "word_count(" not in own


def test_system_prompt_teaches_the_answer_table_when_asked():
    taught = system_prompt(answer_protocol="answer")
    assert 'set `answer["ready"] = true`' in taught
    assert 'set `answer["ready"] = true`' not in system_prompt()
    with pytest.raises(ValueError, match="answer_protocol"):
        system_prompt(answer_protocol="submit")


def test_ask_ends_with_the_answer_table_under_either_protocol():
    replies = [lua("answer.content = 'from the table'\nanswer.ready = true")]
    with ScriptedServer(replies) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url, answer_protocol="answer")
    assert answer.answer == "from the table"
    assert "answer[\"ready\"]" in server.turns()[0]["messages"][0]["content"]


_FORTY_SUB_CALLS = lua(
    "local items = {}\nfor i = 1, 40 do items[i] = 'item ' .. i end\n"
    "local r = parallel_map(items, function(x) return llm_query(x) end)\n"
    "FINAL(#r .. ' ' .. r[40])"
)


def test_llm_concurrency_caps_the_requests_sent_at_once(monkeypatch: pytest.MonkeyPatch):
    with ScriptedServer([_FORTY_SUB_CALLS], sub_delay=0.03) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url, llm_concurrency=3)
    assert answer.answer == "40 echo: item 40"
    assert server.max_in_flight == 3
    # The variable gives it when the argument does not, as for `rlm ask`.
    monkeypatch.setenv("RLM_LLM_CONCURRENCY", "2")
    with ScriptedServer([_FORTY_SUB_CALLS], sub_delay=0.03) as server:
        ask("?", "x", model="m", base_url=server.base_url)
    assert server.max_in_flight == 2
    with pytest.raises(ValueError, match="llm_concurrency"):
        ask("?", "x", model="m", base_url=server.base_url, llm_concurrency=0)


def test_the_config_files_run_sections_and_variables_set_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "rlm.toml"
    config.write_text('[model]\nprompt_mode = "full"\nanswer_protocol = "answer"\n')
    full = system_prompt(config=config)
    assert 'answer["ready"] = true' in full
    assert len(full) > 2 * len(system_prompt())
    monkeypatch.setenv("RLM_PROMPT_MODE", "compact")
    assert len(system_prompt(config=config)) < len(full), "the variable wins over the file"
    assert len(system_prompt(config=config, prompt_mode="full")) == len(full), "the argument wins"
    config.write_text("[model]\nconcurrency = 0\n")
    with pytest.raises(RegistryError, match="concurrency"):
        system_prompt(config=config)


def test_a_table_given_to_final_is_its_json_with_sorted_keys():
    replies = [lua("FINAL({gamma = 3, alpha = 1, beta = {2, 3}})")]
    with ScriptedServer(replies) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url)
    assert answer.answer == '{"alpha":1,"beta":[2,3],"gamma":3}'


def test_final_of_a_function_or_a_cycle_is_an_error_the_model_reads_and_the_run_goes_on():
    replies = [
        lua("FINAL(print)"),
        lua("t = {}\nt.self = t\nFINAL(t)"),
        lua("FINAL('fixed')"),
    ]
    with ScriptedServer(replies) as server:
        answer = ask("?", "x", model="m", base_url=server.base_url)
    assert answer.answer == "fixed"
    first, second = (turn["messages"][-1]["content"] for turn in server.turns()[1:])
    assert "got a function" in first and "call it and pass its result" in first
    assert "refers to itself" in second and "pass a copy without the cycle" in second


def test_a_prompt_built_with_json_encode_is_the_same_text_in_every_run():
    code = "t = {}\nfor i = 1, 40 do t['k' .. i] = i end\nprint(llm_query(json.encode(t)))\nFINAL('ok')"
    prompts = []
    for _ in range(2):
        with ScriptedServer([lua(code)]) as server:
            ask("?", "x", model="m", base_url=server.base_url)
        (sub_call,) = server.sub_calls()
        prompts.append(sub_call["messages"][-1]["content"])
    assert prompts[0] == prompts[1]
    keys = list(json.loads(prompts[0]))
    assert keys == sorted(keys)


def _ask_twice_counting_requests(cache: object) -> tuple[int, int, str]:
    """Asks the same question of the same server twice with `cache` (the cache keys a
    request by its endpoint too): the requests the server saw each time, and the second
    answer."""
    with ScriptedServer([lua("FINAL(#context)")] * 2) as server:
        counts = []
        for _ in range(2):
            before = len(server.requests)
            answer = ask("How long?", "abcd", model="m", base_url=server.base_url,
                         api_key="k", cache=cache)
            counts.append(len(server.requests) - before)
    return counts[0], counts[1], answer.answer


def test_cache_given_as_a_file_answers_the_same_run_again_with_nothing_sent(tmp_path: Path):
    first, second, answer = _ask_twice_counting_requests(tmp_path / "answers.sqlite")
    assert (first, second, answer) == (1, 0, "4")


def test_cache_given_as_a_redis_url_answers_the_same_run_again_with_nothing_sent():
    from redis_server import redis_server

    with redis_server() as url:
        first, second, answer = _ask_twice_counting_requests(url)
    assert (first, second, answer) == (1, 0, "4")


def test_cache_false_sends_every_request_whatever_rlm_cache_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("RLM_CACHE", str(tmp_path / "from-the-environment.sqlite"))
    first, second, _ = _ask_twice_counting_requests(False)
    assert (first, second) == (1, 1)
    assert not (tmp_path / "from-the-environment.sqlite").exists()


def test_cache_true_is_refused_naming_what_to_give():
    with pytest.raises(ValueError, match="give where the cache lives, or False"):
        ask("q", "c", model="m", base_url="http://127.0.0.1:9/v1", cache=True)
