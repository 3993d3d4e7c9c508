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

# Every public name of the native module, and its `__all__`: the extension derives it
# from what it exports, and the stubs (`_native.pyi`, re-exported by `__init__.pyi`)
# hold the one written list, which stubtest checks against it.
from ._native import *  # noqa: F403
from ._native import __all__
