"""Checkpoints, restore and forks of an Environment: the session's journal as bytes,
rebuilt in another environment or another process with the same globals, the clock and
random values the recorded ones; bad checkpoints refused with `CheckpointError`."""

import json
import subprocess
import sys

import pytest

from rlm_registry import CheckpointError, Environment


def test_a_restored_environment_has_the_globals_and_the_recorded_clock_and_random_values() -> None:
    env = Environment("a\nb\n")
    env.execute("t = os.time() r = math.random(1000000) n = line_count(context)")
    env["given"] = {"k": [1, 2]}
    data = env.checkpoint()
    assert isinstance(data, bytes)
    restored = Environment("a\nb\n")
    assert restored.restore(data) == []
    for name in ["t", "r", "n", "given"]:
        assert restored[name] == env[name]
    after = "print(math.random(1000000))"
    assert restored.execute(after).stdout == env.execute(after).stdout


def test_a_fork_is_independent() -> None:
    env = Environment("x")
    env.execute("counter = 1")
    fork = env.fork()
    fork.execute("counter = counter + 1")
    assert (env["counter"], fork["counter"]) == (1, 2)
    assert fork.execute("print(context)").stdout == "x\n"


def test_a_checkpoint_written_by_one_process_is_restored_in_another(tmp_path) -> None:
    path = tmp_path / "checkpoint.bin"
    writer = (
        "from rlm_registry import Environment\n"
        "env = Environment('ctx')\n"
        "env.execute('seen = {os.time(), math.random(1000)} label = \"from the writer\"')\n"
        f"open({str(path)!r}, 'wb').write(env.checkpoint())\n"
        "print(env['seen'])\n"
    )
    written = subprocess.run([sys.executable, "-c", writer], capture_output=True, text=True, check=True)
    env = Environment("ctx")
    assert env.restore(path.read_bytes()) == []
    assert env["label"] == "from the writer"
    assert str(env["seen"]) == written.stdout.strip()


def test_a_bad_checkpoint_is_refused_with_a_clear_error() -> None:
    with pytest.raises(CheckpointError, match="not a checkpoint this version reads"):
        Environment().restore(b"garbage")
    env = Environment("one context")
    env.execute("x = 1")
    data = env.checkpoint()
    other_version = json.loads(data)
    other_version["version"] = 99
    with pytest.raises(CheckpointError, match="it is version 99"):
        Environment("one context").restore(json.dumps(other_version).encode())
    with pytest.raises(CheckpointError, match="another context"):
        Environment("another context").restore(data)
    used = Environment("one context")
    used.execute("y = 2")
    with pytest.raises(CheckpointError, match="fresh environment"):
        used.restore(data)
