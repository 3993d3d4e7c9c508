"""The type stubs: they match the module (mypy's stubtest), and a type checker checks
code that uses the package with them."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy checks the stubs (pip install mypy)")


def run(arguments: list[str], directory: Path) -> subprocess.CompletedProcess:
    # Run outside the source tree, so that the installed package is the one checked.
    return subprocess.run(
        [sys.executable, "-m", *arguments], capture_output=True, text=True, cwd=directory, timeout=300
    )


def test_the_stubs_match_the_module(tmp_path: Path):
    # The integrations are Python, their own type information, and subclass untyped
    # classes of the packages they integrate with, which stubtest cannot compare.
    allowlist = tmp_path / "allowlist.txt"
    allowlist.write_text("rlm_registry\\.integrations\\..*\n")
    result = run(["mypy.stubtest", "rlm_registry", "--allowlist", str(allowlist)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_type_checker_checks_code_using_the_package(tmp_path: Path):
    good = tmp_path / "good.py"
    good.write_text(
        "from rlm_registry import Environment, ExecResult, Registry, ask, check\n"
        "env = Environment('text', time_limit=2.5, llm=lambda prompt: prompt)\n"
        "result: ExecResult = env.execute('print(1)')\n"
        "limit: str | None = result.limit\n"
        "env['x'] = {'a': [1, 2.5, None]}\n"
        "value = env['x']\n"
        "names = [f['name'] for f in Registry(['lua']).functions()]\n"
        "codes = [d.code for d in check(['lua'])]\n"
    )
    result = run(["mypy", "--strict", str(good)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from rlm_registry import Environment\n"
        "Environment(time_limit='5')\n"
        "Environment().execute(42)\n"
    )
    result = run(["mypy", str(bad)], tmp_path)
    assert result.returncode == 1
    assert 'Argument "time_limit" to "Environment" has incompatible type "str"' in result.stdout
    assert 'Argument 1 to "execute" of "Environment" has incompatible type "int"' in result.stdout
