"""A sandboxed Lua REPL for Recursive Language Model agents, in process.

rlm_registry runs model-written Lua in a sandbox with time, memory and output limits,
beside a library of documented functions (the registry) made for very large contexts;
it also runs the whole RLM loop against any OpenAI-compatible server.

>>> from rlm_registry import Environment
>>> env = Environment("alpha\\nbeta\\ngamma\\n")
>>> env.execute("n = line_count(context)").ok
True
>>> env["n"]
3
>>> env.execute("while true do end").limit  # doctest: +SKIP
'time'

The reference is docs/python.md in the repository.
"""

from ._native import (
    Answer,
    BusyError,
    Diagnostic,
    Environment,
    ExecResult,
    InternalError,
    LimitError,
    LlmError,
    LuaError,
    RegistryError,
    Registry,
    RlmRegistryError,
    __version__,
    ask,
    check,
    system_prompt,
)

__all__ = [
    "Answer",
    "BusyError",
    "Diagnostic",
    "Environment",
    "ExecResult",
    "InternalError",
    "LimitError",
    "LlmError",
    "LuaError",
    "RegistryError",
    "Registry",
    "RlmRegistryError",
    "__version__",
    "ask",
    "check",
    "system_prompt",
]
