"""The packages the integrations build on: a test module that needs one is skipped when
it is missing, except under RLM_REQUIRE_TOOLS=1 (CI), where that is a failure."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require_package(module: str) -> ModuleType:
    if os.environ.get("RLM_REQUIRE_TOOLS") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)


def require_program(name: str) -> str:
    """The path of program `name` on `PATH`: a skip when it is missing, except under
    RLM_REQUIRE_TOOLS=1 (CI), where that is a failure."""
    import shutil

    path = shutil.which(name)
    if path is None:
        message = f"`{name}` is not on PATH"
        if os.environ.get("RLM_REQUIRE_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path
