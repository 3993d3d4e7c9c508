"""tools=: Python callables the Lua code can call, documented from their signatures,
their arguments and results crossing by the Lua <-> JSON mapping."""

import pytest

from rlm_registry import Environment, RegistryError


def lookup(key, default="unknown"):
    """Looks a key up in the host's table."""
    return {"a": 1, "b": [2, 3]}.get(key, default)


def test_a_tool_is_called_with_lua_values_and_returns_lua_values():
    seen = []

    def record(value, *rest):
        seen.append((value, rest))
        return {"got": value, "rest": list(rest)}

    env = Environment(tools={"lookup": lookup, "record": record})
    assert env.execute("print(lookup('a'), lookup('b')[2], lookup('zzz'))").stdout == "1\t3\tunknown\n"
    result = env.execute("r = record({x = 1, list = {1, 2}}, 'more', true)")
    assert result.ok, result.error
    assert env["r"] == {"got": {"x": 1, "list": [1, 2]}, "rest": ["more", True]}
    assert seen == [({"x": 1, "list": [1, 2]}, ("more", True))]


def test_omitted_arguments_take_the_python_defaults():
    env = Environment(tools={"lookup": lookup})
    assert env.execute("print(lookup('nope', nil))").stdout == "unknown\n"
    assert env.execute("print(lookup('nope', 'given'))").stdout == "given\n"


def test_a_tool_is_documented_for_help_from_its_docstring_and_signature():
    env = Environment(tools={"lookup": lookup})
    shown = env.execute("print(help('lookup'))").stdout
    assert "Looks a key up in the host's table." in shown
    assert "key" in shown and "default" in shown


def test_a_failing_tool_is_a_lua_error_the_code_can_catch():
    def broken(x):
        raise ValueError(f"bad {x}")

    env = Environment(tools={"broken": broken, "opaque": lambda: object()})
    result = env.execute("broken(7)")
    assert "broken: ValueError: bad 7" in result.error
    assert env.execute("print(pcall(broken, 1))").stdout.startswith("false\t")
    assert "cannot encode a object (at result)" in env.execute("opaque()").error


def test_tools_are_called_on_the_environment_thread_with_the_limits_running():
    import time

    env = Environment(time_limit=0.5, tools={"nap": lambda: time.sleep(0.05)})
    assert env.execute("for i = 1, 3 do nap() end print('done')").stdout == "done\n"
    assert env.execute("while true do nap() end").limit == "time"


def test_bad_tools_are_refused():
    with pytest.raises(TypeError, match="must be a callable"):
        Environment(tools={"x": 42})
    with pytest.raises(TypeError, match="every name must be a str"):
        Environment(tools={1: lookup})
    with pytest.raises(RegistryError, match="print"):
        Environment(tools={"print": lookup})
    with pytest.raises(RegistryError):
        Environment(tools={"not a name": lookup})


def test_a_parameter_named_like_a_lua_keyword_is_renamed_in_the_doc():
    def f(end, then=None):
        return [end, then]

    env = Environment(tools={"f": f})
    assert env.execute("print(json.encode(f(1, 2)))").stdout == "[1,2]\n"
    assert "arg1" in env.execute("print(help('f'))").stdout
