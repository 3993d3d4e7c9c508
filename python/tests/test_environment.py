"""Environment and ExecResult: construction, execution, REPL state, FINAL, hints,
context, call, close."""

import os
import tempfile
from pathlib import Path

import pytest

import rlm_registry
from rlm_registry import Environment, ExecResult, LuaError, Registry, RegistryError


def test_execute_returns_what_print_wrote_and_state_persists():
    env = Environment()
    first = env.execute("x = 40")
    assert isinstance(first, ExecResult)
    assert (first.stdout, first.error, first.final, first.limit) == ("", None, None, None)
    assert first.ok and first.seconds >= 0
    second = env.execute("x = x + 2 print('x is', x)")
    assert second.stdout == "x is\t42\n"


def test_the_baked_library_works_on_the_context():
    env = Environment("alpha beta\ngamma\n")
    result = env.execute("print(line_count(context), word_count(context))")
    assert result.stdout == "2\t3\n"


def test_a_lua_error_is_in_the_result_with_the_output_before_it():
    env = Environment()
    result = env.execute("print('before') error('boom')")
    assert result.stdout == "before\n"
    assert result.error == "input:1: boom"
    assert result.limit is None and not result.ok
    assert env.execute("print('still here')").stdout == "still here\n"


def test_python_written_as_lua_gets_the_lua_hint_back():
    env = Environment("some text")
    result = env.execute("print(len(context))")
    assert result.error.startswith("input:1: attempt to call a nil value (global 'len')")
    assert result.hint == "Lua writes `len(x)` as `#x`: `print(#context)`."
    assert result.error.endswith("\nhint: " + result.hint)
    assert env.execute("if 1 != 2 then end").hint == "Lua writes not-equal as `~=`: `if 1 ~= 2 then end`."


def test_an_elif_in_the_line_is_quoted_as_elseif_and_else_if_is_left_alone():
    env = Environment()
    one_line = env.execute("if x == 1 then print('a') elif x == 2 then print('b') end")
    assert one_line.hint == (
        "Lua writes `elseif`, one word: `if x == 1 then print('a') elseif x == 2 then print('b') end`."
    )
    lines = env.execute("x = 2\nif x == 1 then\n  print('a')\nelif x == 2 then\n  print('b')\nend")
    assert lines.hint == "Lua writes `elseif`, one word: `elseif x == 2 then`."
    nested = env.execute("x = 2 if x == 1 then print('a') else if x == 2 then print(y + 1) end end")
    assert nested.error.startswith("input:1: attempt to perform arithmetic on a nil value (global 'y')")
    assert nested.hint is None


def test_in_on_text_is_quoted_as_a_plain_find_and_on_a_table_keeps_the_table_rule():
    env = Environment("an ERROR here")
    # What the session holds is known when the hint is made: `context` and `s` are text.
    assert env.execute('if "ERROR" in context then print(1) end').hint == (
        "Lua finds text in a string with `s:find(x, 1, true)`: "
        '`if context:find("ERROR", 1, true) then print(1) end`.'
    )
    env.execute('s = "abc"')
    assert env.execute('if "z" not in s then print(s) end').hint == (
        "Lua finds text in a string with `s:find(x, 1, true)`: "
        '`if not s:find("z", 1, true) then print(s) end`.'
    )
    env.execute("seen = {}")
    assert env.execute('if "a" in seen then end').hint == (
        "Lua's `in` belongs to `for`: test a key with `t[x] ~= nil`, a list with a loop."
    )
    unknown = env.execute('if "a" in other then end').hint
    assert "`s:find(x, 1, true)`" in unknown and "`t[x] ~= nil`" in unknown


def test_a_quoted_fix_for_none_joined_to_text_runs():
    env = Environment()
    result = env.execute('print("value: " .. None)')
    assert result.hint == 'Lua writes `None` as `nil`: `print("value: " .. tostring(nil))`.'
    fix = result.hint.split(": `", 1)[1].removesuffix("`.")
    assert env.execute(fix).stdout == "value: nil\n"


def test_final_and_final_var_are_reported_by_the_execution_that_gave_them():
    env = Environment()
    assert env.execute("FINAL(6 * 7)").final == "42"
    assert env.execute("x = 1").final is None
    assert env.execute("answer = 'from a variable' FINAL_VAR('answer')").final == "from a variable"
    failed = env.execute("FINAL_VAR('nothing_here')")
    assert failed.final is None and "no variable named 'nothing_here'" in failed.error


def test_code_may_be_bytes_that_are_not_utf8():
    env = Environment()
    result = env.execute(b"s = 'caf\xe9' print(#s, s)")
    assert result.stdout == "4\tcaf\\xe9\n"
    assert env["s"] == b"caf\xe9"


def test_the_code_argument_must_be_text():
    env = Environment()
    with pytest.raises(TypeError):
        env.execute(42)
    with pytest.raises(ValueError, match="lone surrogate"):
        env.execute("print('\ud800')")


def test_context_as_str_bytes_or_none():
    assert Environment("héllo").execute("print(#context)").stdout == "6\n"
    assert Environment(b"\xff\x00").execute("print(#context, context:byte(1))").stdout == "2\t255\n"
    assert Environment().execute("print(context)").stdout == "nil\n"
    # A list is chunks, as `ask` takes it; other types are refused (tests/test_context.py).
    assert Environment(["a", "list"]).execute("print(#context, context[2])").stdout == "2\tlist\n"
    with pytest.raises(TypeError):
        Environment(42)


def test_set_context_replaces_or_removes_it():
    env = Environment("first")
    env.set_context("second one")
    assert env.execute("print(context)").stdout == "second one\n"
    env.set_context(b"\x00\x01")
    assert env.execute("print(#context)").stdout == "2\n"
    env.set_context(None)
    assert env.execute("print(context)").stdout == "nil\n"


def test_a_context_larger_than_the_memory_limit_loads_and_a_copy_of_it_is_refused():
    env = Environment("x" * (3 * 1024 * 1024), memory_limit_mb=2)
    assert env.execute("print(#context)").stdout == "3145728\n"
    result = env.execute("local copy = context:upper()")
    assert result.error is not None and result.error.startswith("memory limit exceeded")
    assert "besides the context" in result.error


def test_call_runs_a_function_with_json_arguments():
    env = Environment()
    assert env.call("word_count", "a b c") == 3
    assert env.call("lines", "x\ny") == ["x", "y"]
    env.execute("function pair(a, b) return {a = a, b = b} end")
    assert env.call("pair", [1, 2], {"k": None}) == {"a": [1, 2], "b": {"k": None}}
    with pytest.raises(LuaError, match="unknown function `no_such_function`"):
        env.call("no_such_function")
    with pytest.raises(TypeError, match=r"cannot encode a set \(at argument 2\)"):
        env.call("pair", 1, {1, 2})


def test_paths_add_functions_and_baked_false_leaves_the_library_out(tmp_path: Path):
    (tmp_path / "shout.lua").write_text(
        "--- Upper-cases a text.\n---@param s string The text\n---@return string\n"
        "function shout(s) return s:upper() end\n"
    )
    env = Environment(paths=[tmp_path])
    assert env.execute("print(shout('hi'), word_count('a b'))").stdout == "HI\t2\n"
    bare = Environment(paths=[str(tmp_path)], baked=False)
    assert bare.execute("print(shout('x'), word_count)").stdout == "X\tnil\n"


def test_a_shared_registry_is_used_as_it_is(tmp_path: Path):
    (tmp_path / "twice.lua").write_text(
        "--- Doubles a number.\n---@param n number\n---@return number\n"
        "function twice(n) return 2 * n end\n"
    )
    registry = Registry([tmp_path])
    assert Environment(registry=registry).execute("print(twice(21))").stdout == "42\n"
    with pytest.raises(ValueError, match="either `registry` or `paths`"):
        Environment(registry=registry, paths=[tmp_path])


def test_a_bad_registry_file_is_a_registry_error(tmp_path: Path):
    (tmp_path / "bad.lua").write_text("function undocumented() end\n")
    with pytest.raises(RegistryError) as caught:
        Environment(paths=[tmp_path])
    assert [d.code for d in caught.value.diagnostics] == ["E002"]
    assert "error[E002]" in str(caught.value)
    with pytest.raises(RegistryError, match="cannot read"):
        Environment(paths=[tmp_path / "missing"])


def test_config_enables_providers_and_a_bad_one_is_a_registry_error(tmp_path: Path):
    config = tmp_path / "rlm.toml"
    config.write_text("[providers.store]\nenabled = true\n")
    env = Environment(config=config)
    assert env.execute("store_set('k', 41) print(store_get('k') + 1)").stdout == "42\n"
    assert "store_set" in Environment().execute("store_set('k', 1)").error
    config.write_text("[providers.nope]\nenabled = true\n")
    with pytest.raises(RegistryError, match="nope"):
        Environment(config=config)
    with pytest.raises(RegistryError):
        Environment(config=tmp_path / "missing.toml")


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"time_limit": 0}, "time_limit must be a positive number"),
        ({"time_limit": float("nan")}, "time_limit must be a positive number"),
        ({"memory_limit_mb": 0}, "memory_limit_mb must be at least 1"),
        ({"output_limit": 0}, "output_limit must be at least 1 byte"),
    ],
)
def test_bad_limits_are_value_errors(arguments, message):
    with pytest.raises(ValueError, match=message):
        Environment(**arguments)


def test_bad_argument_types_are_type_errors():
    with pytest.raises(TypeError):
        Environment(time_limit="5")
    with pytest.raises(OverflowError):
        Environment(memory_limit_mb=-1)
    with pytest.raises(TypeError):
        Environment(paths="lua")  # a str is not a list of paths
    with pytest.raises(TypeError, match="llm must be a callable"):
        Environment(llm="gpt")


def test_limits_are_readable():
    env = Environment(time_limit=2.5, memory_limit_mb=64, output_limit=100)
    assert (env.time_limit, env.memory_limit_mb, env.output_limit) == (2.5, 64, 100)
    assert Environment().output_limit == 1024 * 1024
    assert "time_limit=2.5" in repr(env)


def test_llm_query_calls_the_python_callable():
    prompts = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return prompt.upper()

    env = Environment(llm=llm)
    assert env.execute("print(llm_query('hello'))").stdout == "HELLO\n"
    result = env.execute("print(table.concat(llm_query_batched({'a', 'b', 'c'}), ','))")
    assert result.stdout == "A,B,C\n"
    assert sorted(prompts) == ["a", "b", "c", "hello"]


def test_without_llm_llm_query_is_a_clear_lua_error():
    result = Environment().execute("llm_query('hi')")
    assert "llm_query is not available: no LLM is configured" in result.error


def test_a_failing_llm_callable_is_an_error_the_model_reads():
    def broken(prompt: str) -> str:
        raise RuntimeError("quota exceeded")

    env = Environment(llm=broken)
    result = env.execute("llm_query('hi')")
    assert "llm_query failed: the llm callable raised RuntimeError: quota exceeded" in result.error
    assert env.execute("print(pcall(llm_query, 'x'))").stdout.startswith("false\t")
    batched = env.execute("print(llm_query_batched({'a'})[1])")
    assert batched.stdout.startswith("error: the llm callable raised RuntimeError")

    wrong = Environment(llm=lambda prompt: 42)
    assert "the llm callable returned a int, not a str" in wrong.execute("llm_query('x')").error


def test_close_frees_the_environment_and_later_use_is_a_value_error():
    with Environment("ctx") as env:
        assert env.execute("print(#context)").stdout == "3\n"
    assert env.closed
    assert "closed" in repr(env)
    with pytest.raises(ValueError, match="closed"):
        env.execute("print(1)")
    with pytest.raises(ValueError, match="closed"):
        env["x"]
    env.close()  # twice is nothing


def test_two_environments_share_nothing():
    one, two = Environment(), Environment()
    one.execute("shared = 1")
    assert two["shared"] is None


def test_the_sandbox_refuses_the_host():
    env = Environment()
    for code in ["io.open('/etc/passwd')", "os.execute('true')", "require('os')", "string.dump(print)"]:
        assert env.execute(code).error is not None, code
    assert env.execute("print(io, package, debug, dofile, loadfile)").stdout == "nil\tnil\tnil\tnil\tnil\n"


def test_the_package_exports_its_version_and_names():
    assert rlm_registry.__version__
    for name in rlm_registry.__all__:
        assert hasattr(rlm_registry, name), name
    assert Environment.__module__ == "rlm_registry"
    assert Environment.__doc__


def test_stubs_and_marker_ship_with_the_package():
    package = Path(rlm_registry.__file__).parent
    assert (package / "py.typed").is_file()
    assert (package / "_native.pyi").is_file()
    assert (package / "integrations" / "__init__.py").is_file()


def test_the_environment_works_from_a_directory_without_rlm_toml():
    # No rlm.toml is read from the current directory: only `config` enables providers.
    with tempfile.TemporaryDirectory() as directory:
        Path(directory, "rlm.toml").write_text("[providers.store]\nenabled = true\n")
        previous = os.getcwd()
        os.chdir(directory)
        try:
            assert "store_set" in Environment().execute("store_set('k', 1)").error
        finally:
            os.chdir(previous)


def test_execute_then_call_runs_the_code_then_the_function_in_one_call():
    env = Environment()
    env.execute("function count() local n = 0 for _ in pairs(seen or {}) do n = n + 1 end return n end")
    result, called = env._execute_then_call("seen = {a = 1, b = 2} print('ran')", "count")
    assert (result.stdout, result.ok, called) == ("ran\n", True, 2)
    # After a failed block the function still reports on the state the block left.
    result, called = env._execute_then_call("seen.c = 3 error('boom')", "count")
    assert "boom" in result.error and called == 3
    # A function that is not there (the code replaced it) gives None, not an error.
    result, called = env._execute_then_call("count = nil", "count")
    assert result.ok and called is None
