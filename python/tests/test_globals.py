"""env["name"] and env["name"] = value: Python values through the crate's one
Lua <-> JSON mapping, and what cannot cross."""

import math

import pytest

from rlm_registry import Environment, LimitError, LuaError


@pytest.fixture
def env():
    return Environment()


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**63 - 1,
        -(2**63),
        1.5,
        2.0,
        "text",
        "héllo ✓",
        "",
        [1, "two", 3.0, None, [True]],
        {"a": {"b": [1, 2]}, "odd key": "x", "": 0},
        {"empty list": [], "empty dict": {}},
    ],
)
def test_values_round_trip(env, value):
    env["x"] = value
    assert env["x"] == value
    # And Lua sees the same value as json.decode of its JSON would make.
    assert env.execute("y = x").ok
    assert env["y"] == value


def test_lua_values_read_as_python_values(env):
    env.execute(
        "t = {n = 1, f = 2.5, s = 'x', list = {1, 2}, empty = {}, arr = json.array(),"
        " null = json.null, yes = true, big = math.maxinteger}"
    )
    assert env["t"] == {
        "n": 1,
        "f": 2.5,
        "s": "x",
        "list": [1, 2],
        "empty": {},
        "arr": [],
        "null": None,
        "yes": True,
        "big": 2**63 - 1,
    }
    assert env["unset"] is None
    assert type(env["t"]["n"]) is int and type(env["t"]["f"]) is float


def test_a_tuple_is_sent_as_a_list(env):
    env["t"] = (1, (2, 3))
    assert env["t"] == [1, [2, 3]]


def test_a_str_or_bytes_as_the_whole_value_is_a_lua_string_of_its_bytes(env):
    env["s"] = "é"
    assert env.execute("print(#s)").stdout == "2\n"
    env["b"] = b"\xff\x00a"
    assert env.execute("print(#b, b:byte(1), b:byte(2))").stdout == "3\t255\t0\n"
    env["ba"] = bytearray(b"xy")
    assert env["ba"] == "xy"


def test_a_lua_string_that_is_not_utf8_reads_as_bytes_and_one_that_is_as_str(env):
    env.execute("raw = 'caf' .. string.char(0xe9)  text = 'caf' .. string.char(0xc3, 0xa9)")
    assert env["raw"] == b"caf\xe9"
    assert env["text"] == "café"


def test_bytes_inside_a_value_must_be_utf8(env):
    env["x"] = {"ok": b"fine"}
    assert env["x"] == {"ok": "fine"}
    with pytest.raises(TypeError, match=r"the string at x\.bad\[2\] is not valid UTF-8 \(byte 1\)"):
        env["x"] = {"bad": [b"a", b"\xff"]}


def test_a_lua_string_inside_a_table_that_is_not_utf8_is_refused_naming_it(env):
    env.execute("t = {name = 'caf' .. string.char(0xe9)}")
    with pytest.raises(TypeError, match=r"^the string at t\.name is not valid UTF-8 \(byte 4\)$"):
        env["t"]


def test_integers_beyond_64_bits_become_floats_and_huge_ones_overflow(env):
    env["big"] = 2**63
    assert env.execute("print(math.type(big), big == 2^63)").stdout == "float\ttrue\n"
    assert env["big"] == float(2**63)
    env["neg"] = -(2**64)
    assert env["neg"] == -float(2**64)
    with pytest.raises(OverflowError, match=r"too large.*\(at x\.n\)"):
        env["x"] = {"n": 10**400}


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_cannot_cross(env, number):
    with pytest.raises(TypeError, match=r"is not a JSON number \(at x\[1\]\)"):
        env["x"] = [number]


def test_lua_nan_and_functions_cannot_cross_naming_where(env):
    env.execute("a = {0/0}  f = {g = {print}}")
    with pytest.raises(TypeError, match=r"is not a JSON number \(at a\[1\]\)"):
        env["a"]
    with pytest.raises(TypeError, match=r"^cannot encode a function \(at f\.g\[1\]\)$"):
        env["f"]
    with pytest.raises(TypeError, match=r"cannot encode a function \(at print\)"):
        env["print"]


def test_python_values_that_cannot_cross_are_type_errors_naming_where(env):
    with pytest.raises(TypeError, match=r"^cannot encode a set \(at x\.s\)$"):
        env["x"] = {"s": {1, 2}}
    with pytest.raises(TypeError, match=r"cannot encode a function \(at x\[2\]\)"):
        env["x"] = [1, lambda: 0]
    with pytest.raises(TypeError, match=r"the dict at x has key 1: JSON keys are strings"):
        env["x"] = {1: "one"}
    with pytest.raises(TypeError, match=r"lone surrogate"):
        env["x"] = ["\ud800"]


def test_cycles_are_refused_both_ways(env):
    loop = []
    loop.append(loop)
    with pytest.raises(TypeError, match=r"^cycle: the list at x\[1\] contains itself$"):
        env["x"] = loop
    mapping = {}
    mapping["self"] = {"again": mapping}
    with pytest.raises(TypeError, match=r"cycle: the dict at x\.self\.again contains itself"):
        env["x"] = mapping
    env.execute("t = {} t.me = t")
    with pytest.raises(TypeError, match=r"cycle: the table at t\.me contains itself"):
        env["t"]


def test_a_value_met_twice_is_not_a_cycle(env):
    shared = [1]
    env["x"] = [shared, shared]
    assert env["x"] == [[1], [1]]


def test_nesting_deeper_than_the_mapping_allows_is_refused(env):
    deep = 0
    for _ in range(100):
        deep = [deep]
    env["ok"] = deep
    with pytest.raises(TypeError, match=r"nested deeper than 100 levels \(at x" + r"\[1\]" * 100 + r"\)"):
        env["x"] = [deep]
    env.execute("d = 0 for i = 1, 101 do d = {d} end")
    with pytest.raises(TypeError, match="nested deeper than 100 levels"):
        env["d"]


def test_tables_json_cannot_hold_are_refused(env):
    env.execute("mixed = {1, 2, k = 3}  sparse = {[1] = 1, [3] = 3}")
    with pytest.raises(TypeError, match="mixed"):
        env["mixed"]
    with pytest.raises(TypeError, match="sparse array"):
        env["sparse"]


def test_none_and_del_remove_a_global(env):
    env["x"] = 1
    env["x"] = None
    assert env.execute("print(x)").stdout == "nil\n"
    env["y"] = 2
    del env["y"]
    assert env["y"] is None
    env["z"] = {"inside": None}
    assert env.execute("print(z.inside == json.null)").stdout == "true\n"


def test_a_built_in_cannot_be_assigned(env):
    with pytest.raises(LuaError, match="cannot assign to built-in 'print'"):
        env["print"] = 1
    assert env.execute("print('intact')").stdout == "intact\n"


def test_reading_a_registry_function_loads_it_and_refuses_it(env):
    with pytest.raises(TypeError, match=r"cannot encode a function \(at word_count\)"):
        env["word_count"]


def test_names_must_be_str(env):
    with pytest.raises(TypeError):
        env[1]
    with pytest.raises(TypeError):
        env[b"x"] = 1


def test_a_value_too_large_for_the_memory_limit_is_a_limit_error():
    env = Environment(memory_limit_mb=4)
    with pytest.raises(LimitError) as caught:
        env["big"] = "x" * (8 * 1024 * 1024)
    assert caught.value.kind == "memory"
    assert env.execute("print(big)").stdout == "nil\n"
