"""What the integrations share: importing the package they build on, with an error that
says how to install it, and the sandbox's settings, declared here once."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from os import PathLike
from types import ModuleType
from typing import Any, TypedDict, cast


def require(module: str, package: str, version: str) -> ModuleType:
    """Imports `module` (of the PyPI package `package`), or raises an ImportError naming
    the pip command that installs the supported version.

    >>> require("json", "json", "1").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"rlm_registry.integrations.{package} needs the `{package}` package, version "
            f"{version}: pip install 'rlm-registry[{package}]' (or pip install '{package}=={version}')"
        ) from error


class SandboxArgs(TypedDict, total=False):
    """The sandbox's settings, which every integration takes as keywords and passes on
    to `Environment` (and to `Registry` and the system prompt where they need them)."""

    paths: Sequence[str | PathLike[str]]
    """Directories or `.lua` files layered on the baked registry."""
    baked: bool
    """Whether the baked registry is there under `paths` (only theirs when False)."""
    config: str | PathLike[str] | None
    """An rlm.toml enabling providers."""
    time_limit: float
    """Seconds one execution may run."""
    memory_limit_mb: int
    """MiB the Lua state may use."""
    output_limit: int | None
    """Bytes `print` may write per execution (1 MiB when None)."""


#: The settings' defaults: `Environment`'s.
SANDBOX_DEFAULTS: SandboxArgs = {
    "paths": (),
    "baked": True,
    "config": None,
    "time_limit": 30.0,
    "memory_limit_mb": 512,
    "output_limit": None,
}


def sandbox_args(given: Mapping[str, Any]) -> SandboxArgs:
    """Every setting: those `given`, the defaults for the rest; a name that is not one
    is a TypeError, as an unknown keyword argument is.

    >>> sandbox_args({"time_limit": 5.0})["time_limit"], sandbox_args({})["memory_limit_mb"]
    (5.0, 512)
    """
    unknown = sorted(set(given) - set(SANDBOX_DEFAULTS))
    if unknown:
        raise TypeError(f"unknown sandbox setting(s): {', '.join(unknown)} (known: {', '.join(SANDBOX_DEFAULTS)})")
    settings = dict(SANDBOX_DEFAULTS)
    settings.update(given)
    return cast(SandboxArgs, settings)


def take_sandbox_args(kwargs: dict[str, Any]) -> SandboxArgs:
    """The sandbox's settings taken out of `kwargs` (the rest stays), defaults filled in."""
    return sandbox_args({name: kwargs.pop(name) for name in SANDBOX_DEFAULTS if name in kwargs})
