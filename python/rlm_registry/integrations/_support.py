"""What the integrations share: importing the package they build on, with an error that
says how to install it, and the sandbox's settings, declared here once."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from os import PathLike
from types import ModuleType
from typing import Any, TypedDict, cast

from .. import system_prompt


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


#: The global the library's text functions study, which a corpus becomes.
CONTEXT = "context"


def as_corpus(payload: Any) -> dict[str, str | bytes] | None:
    """The documents a context payload holds, by name, when it is a corpus: a `dict` of
    name -> `str`/`bytes`, or a `list`/`tuple` of `str`/`bytes`, named by position from
    "0" (the reference RLM's indices); `None` for anything else (one text, nested JSON,
    which stays a Lua table). In Lua a corpus is a list of documents `{name, text, kind,
    bytes}`, which the system prompt describes.

    >>> as_corpus({"a.md": "alpha"}), as_corpus(["x", "y"])
    ({'a.md': 'alpha'}, {'0': 'x', '1': 'y'})
    >>> as_corpus({"users": [{"name": "ada"}]}) is None, as_corpus("text") is None, as_corpus([]) is None
    (True, True, True)
    """
    if isinstance(payload, dict):
        documents = payload
    elif isinstance(payload, (list, tuple)):
        documents = {str(index): item for index, item in enumerate(payload)}
    else:
        return None
    texts = all(isinstance(text, (str, bytes)) for text in documents.values())
    if not documents or not texts or not all(isinstance(name, str) for name in documents):
        return None
    return documents


def corpus_description(documents: dict[str, str | bytes]) -> str:
    """What the system prompt says of a corpus of `documents` (under 250 tokens whatever
    their number), for the integrations whose prompt the host writes.

    >>> corpus_description({"a.md": "alpha"}).startswith("`context` is a corpus")
    True
    """
    prompt = system_prompt(documents)
    start = prompt.find(_CONTEXT_HEADING)
    if start == -1:
        return ""
    start += len(_CONTEXT_HEADING)
    end = prompt.find("\n## ", start)
    return prompt[start : end if end != -1 else len(prompt)].strip()


_CONTEXT_HEADING = "## The context\n"
