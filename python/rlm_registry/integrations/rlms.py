"""The reference RLM (`rlms` on PyPI, imported as `rlm`) running model-written Lua in
this package's sandbox instead of Python in the host process.

- `LuaREPL`: an environment of the reference's `BaseEnv` contract (`setup`,
  `load_context`, `execute_code -> REPLResult`, the persistence methods, and
  `append_compaction_entry`), whose `llm_query` and `llm_query_batched` reach the
  reference's LM handler over its socket, whose `rlm_query` runs the reference's child
  RLMs (its `subcall_fn`), and whose runs end with the reference's `answer` table
  (`answer.content`, then `answer.ready = true`) or with `FINAL(value)`.
- `LuaRLM`: the reference's `RLM` with `LuaREPL` as its environment (`"lua"`) and a
  system prompt written for Lua (compact by default, as `rlm ask`'s). Child RLMs at
  `max_depth > 1`, `compaction=True` and a `context_window` check work as with Python.
  Its `RLMLogger` logs and visualizer work unchanged.

>>> from rlm_registry.integrations.rlms import LuaRLM  # doctest: +SKIP
>>> rlm = LuaRLM(backend="openai", backend_kwargs={"model_name": "gpt-4.1-mini"})  # doctest: +SKIP
>>> rlm.completion(open("server.log").read(), root_prompt="Which service fails most?").response  # doctest: +SKIP
'gateway'

Supported: `rlms` 0.1.3 (`pip install 'rlm-registry[rlms]'`).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from ._support import (
    SandboxArgs,
    as_corpus,
    corpus_description,
    require,
    sandbox_args,
    take_sandbox_args,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: The version of `rlms` this module is written and tested against.
SUPPORTED_VERSION = "0.1.3"

require("rlm", "rlms", SUPPORTED_VERSION)

# Imported after the check that `rlms` is installed.
import rlm.core.rlm as _reference  # type: ignore[import-untyped]  # noqa: E402
from rlm.core.comms_utils import LMRequest, send_lm_request  # type: ignore[import-untyped]  # noqa: E402
from rlm.core.types import REPLResult, RLMChatCompletion  # type: ignore[import-untyped]  # noqa: E402
from rlm.environments.base_env import (  # type: ignore[import-untyped]  # noqa: E402
    NonIsolatedEnv,
    extract_tool_value,
    validate_custom_tools,
)

from .. import Environment, Registry, system_prompt  # noqa: E402
from .._native import _check_first_request  # noqa: E402

__all__ = ["ENVIRONMENT", "SUPPORTED_VERSION", "LuaREPL", "LuaRLM", "SandboxArgs", "lua_system_prompt"]

#: The name `LuaRLM` gives the reference for its environment (`environment="lua"`).
ENVIRONMENT = "lua"

_REARM_ANSWER = "if type(answer) == 'table' then rawset(answer, 'ready', false) end"

# Compaction's new messages, handed over under this name and appended to `history`;
# the flag says the code replaced `history`, which then gets the whole list again.
_NEW_HISTORY = "_rlm_history_new"
_HISTORY_LOST = "_rlm_history_lost"
_APPEND_HISTORY = f"""
local new = {_NEW_HISTORY}
{_NEW_HISTORY} = nil
if type(history) ~= "table" then {_HISTORY_LOST} = true return end
for i = 1, #new do history[#history + 1] = new[i] end
"""

# The globals the code set, with their Lua types, for `REPLResult.locals`: every name
# but those of the sandbox as it was made (standard library, built-ins) and the
# registry's functions, loaded into the globals when first called. The
# crate's `store_list` also counts and previews each value, which costs a turn time in
# proportion to the tables the code keeps; the reference lists names only.
_VARIABLES_FUNCTION = "_rlm_repl_variables"
_DEFINE_VARIABLES = f"""
local made_with = {{}}
for name in next, _G do made_with[name] = true end
made_with["{_VARIABLES_FUNCTION}"] = true
function {_VARIABLES_FUNCTION}()
  local listed = {{}}
  for name, value in next, _G do
    if type(name) == "string" and not made_with[name] then listed[name] = type(value) end
  end
  return listed
end
"""


class _HandlerClient:
    """The reference's LM handler as this package's `llm` callable: each prompt is one
    request over the handler's socket, and each completion is kept for the `rlm_calls`
    of the block that made it (the reference's logs and usage read them there).

    It is not the environment itself, so the sandbox holding it makes no reference
    cycle through Rust, where Python's collector cannot see it."""

    def __init__(self, address: tuple[str, int] | None, depth: int) -> None:
        self.address = address
        self.depth = depth
        self._completions: list[RLMChatCompletion] = []
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        if self.address is None:
            raise RuntimeError("no LM handler: LuaREPL was given no lm_handler_address")
        response = send_lm_request(self.address, LMRequest(prompt=prompt, depth=self.depth))
        if not response.success or response.chat_completion is None:
            raise RuntimeError(response.error or "the LM handler gave no completion")
        # llm_query_batched calls from several threads at once.
        with self._lock:
            self._completions.append(response.chat_completion)
        return response.chat_completion.response

    def record(self, completion: RLMChatCompletion) -> None:
        """Keeps a child RLM's completion for the block's `rlm_calls`, as a sub-call's."""
        with self._lock:
            self._completions.append(completion)

    def take(self) -> list[RLMChatCompletion]:
        """The completions since the last `take`."""
        with self._lock:
            taken, self._completions = self._completions, []
        return taken


class LuaREPL(NonIsolatedEnv):
    """An environment for the reference RLM that runs the model's code as sandboxed Lua
    5.4 with this package's registry: time, memory and output limits per block, no
    file system, no process, no network but `llm_query`.

    The arguments before `*` are the reference's (`LocalREPL`'s). With `subcall_fn` (the
    reference's `RLM._subcall`, which `LuaRLM` hands over at `max_depth > 1`),
    `rlm_query` and `rlm_query_batched` run the reference's child RLMs, at most
    `max_concurrent_subcalls` at once, their completions in the block's `rlm_calls`;
    without it they are plain completions. With `compaction`, the Lua table `history`
    holds the conversation's messages (`{role, content}` tables, a summary as an
    assistant message with `type = "summary"`), which `append_compaction_entry` extends.
    Keywords also take the sandbox's settings
    (`SandboxArgs`: `paths`, `baked`, `config`, `time_limit`, `memory_limit_mb`,
    `output_limit`), as `Environment` takes them.

    >>> from rlm_registry.integrations.rlms import LuaREPL  # doctest: +SKIP
    >>> repl = LuaREPL(context_payload="alpha\\nbeta\\n")  # doctest: +SKIP
    >>> repl.execute_code("print(line_count(context))").stdout  # doctest: +SKIP
    '2\\n'
    >>> repl.execute_code("answer.content = 'two'  answer.ready = true").final_answer  # doctest: +SKIP
    'two'
    """

    def __init__(
        self,
        lm_handler_address: tuple[str, int] | None = None,
        context_payload: dict | list | str | None = None,
        setup_code: str | None = None,
        persistent: bool = False,
        depth: int = 1,
        subcall_fn: Callable[[str, str | None], RLMChatCompletion] | None = None,
        custom_tools: dict[str, Any] | None = None,
        custom_sub_tools: dict[str, Any] | None = None,
        compaction: bool = False,
        max_concurrent_subcalls: int = 4,
        **kwargs: Any,
    ) -> None:
        # The sandbox's settings (`SandboxArgs`); the reference's environments get the
        # other keywords.
        sandbox = take_sandbox_args(kwargs)
        super().__init__(
            persistent=persistent,
            depth=depth,
            max_concurrent_subcalls=max_concurrent_subcalls,
            **kwargs,
        )
        validate_custom_tools(custom_tools)
        self.subcall_fn = subcall_fn
        self.custom_tools = dict(custom_tools or {})
        self.custom_sub_tools = (
            custom_sub_tools if custom_sub_tools is not None else self.custom_tools
        )
        self.compaction = compaction
        # One registry for the sandboxes `setup` makes, and for telling the registry's
        # functions (loaded into the globals when first called) from the code's own.
        self._registry = Registry(sandbox["paths"], sandbox["baked"])
        self._sandbox: dict[str, Any] = {
            "registry": self._registry,
            "config": sandbox["config"],
            "time_limit": sandbox["time_limit"],
            "memory_limit_mb": sandbox["memory_limit_mb"],
            "output_limit": sandbox["output_limit"],
        }
        self._handler = _HandlerClient(lm_handler_address, depth)
        self._children = threading.BoundedSemaphore(max(1, max_concurrent_subcalls))
        # The conversation as compaction keeps it, to restore `history` if the code
        # replaced it.
        self._compaction_history: list[dict[str, Any]] = []
        self._context_count = 0
        self._history_count = 0
        self.env: Environment | None = None
        self.setup()
        if context_payload is not None:
            self.load_context(context_payload)
        if setup_code:
            self.execute_code(setup_code)

    @property
    def lm_handler_address(self) -> tuple[str, int] | None:
        """Where `llm_query` sends its requests: the reference's LM handler."""
        return self._handler.address

    @lm_handler_address.setter
    def lm_handler_address(self, address: tuple[str, int] | None) -> None:
        self._handler.address = address

    def setup(self) -> None:
        """Creates the sandbox (a fresh one if there was one): the registry loaded,
        `llm_query` wired to the LM handler, the custom tools' functions callable and
        their values set as globals."""
        self.cleanup()
        entries = {name: extract_tool_value(entry) for name, entry in self.custom_tools.items()}
        functions = {name: value for name, value in entries.items() if callable(value)}
        sub_agent = self._child if self.subcall_fn is not None else None
        self.env = Environment(
            llm=self._handler, tools=functions or None, sub_agent=sub_agent, **self._sandbox
        )
        self._run(_DEFINE_VARIABLES)
        if self.compaction:
            history: Any = list(self._compaction_history)
            self.env["history"] = history
        for name, value in entries.items():
            if name not in functions:
                self.env[name] = value

    def load_context(self, context_payload: dict | list | str) -> None:
        """Sets `context` (and `context_0`): a `str` as it is; a `dict` of name -> `str`
        or a `list` of `str` as a corpus, a list of documents `{name, text, kind,
        bytes}` (a list's named "0", "1", …); any other `dict` or `list` as a Lua
        table."""
        self.add_context(context_payload, 0)

    def add_context(
        self, context_payload: dict | list | str, context_index: int | None = None
    ) -> int:
        """Sets `context_N` (N = `context_index`, or the next one), as `load_context`
        sets it; `context` is `context_0`. A `str` or a corpus is handed over once,
        without a copy in Lua for the alias."""
        env = self._environment()
        index = self._context_count if context_index is None else context_index
        name = f"context_{index}"
        documents = as_corpus(context_payload)
        if documents is not None or isinstance(context_payload, (str, bytes)):
            # `set_context` is the one way in for a corpus: keep `context` as it was
            # when this is another one.
            if index != 0:
                self._run("_rlm_kept_context = context")
            env.set_context(context_payload if documents is None else documents)
            self._run(f"{name} = context")
            if index != 0:
                self._run("context = _rlm_kept_context\n_rlm_kept_context = nil")
        else:
            env[name] = context_payload
            if index == 0:
                self._run(f"context = {name}")
        self._context_count = max(self._context_count, index + 1)
        return index

    def get_context_count(self) -> int:
        """How many contexts were loaded."""
        return self._context_count

    def add_history(
        self, message_history: list[dict[str, Any]], history_index: int | None = None
    ) -> int:
        """Sets `history_N` to a copy of the messages (`history` is `history_0`)."""
        env = self._environment()
        index = self._history_count if history_index is None else history_index
        messages: Any = message_history
        env[f"history_{index}"] = messages
        if index == 0:
            self._run("history = history_0")
        self._history_count = max(self._history_count, index + 1)
        return index

    def get_history_count(self) -> int:
        """How many message histories were stored."""
        return self._history_count

    def append_compaction_entry(self, entry: list[dict[str, Any]] | dict[str, Any]) -> None:
        """Adds to `history` (with `compaction` on): a trajectory segment (a list of
        messages) message by message, a summary (`{"type": "summary", "content": …}`) as
        an assistant message with `type = "summary"`."""
        if not self.compaction:
            return
        messages: list[dict[str, Any]]
        if isinstance(entry, dict) and entry.get("type") == "summary":
            summary = entry.get("content", "")
            messages = [{"role": "assistant", "content": summary, "type": "summary"}]
        elif isinstance(entry, dict):
            messages = [entry]
        else:
            messages = list(entry)
        self._compaction_history.extend(messages)
        env = self._environment()
        # The Lua <-> JSON mapping takes any list of dicts; the stubs name JSON narrowly.
        handed: Any = messages
        env[_NEW_HISTORY] = handed
        result = env.execute(_APPEND_HISTORY)
        if result.error is not None or env[_HISTORY_LOST]:
            env[_HISTORY_LOST] = None
            whole: Any = list(self._compaction_history)
            env["history"] = whole

    def update_handler_address(self, address: tuple[str, int]) -> None:
        """Points `llm_query` at another LM handler (the reference's persistent runs)."""
        self._handler.address = address

    def execute_code(self, code: str) -> REPLResult:
        """Runs one block of Lua. The Lua error (with the hint for Python written as
        Lua) or the limit's message is `stderr`; `final_answer` is what `FINAL` gave or
        `answer.content` once `answer.ready` is true; `locals` names the globals the
        code set, with their Lua types (not their values, which stay in the sandbox)."""
        env = self._environment()
        # The execution and the listing of the globals in one call to the sandbox.
        result, listed = env._execute_then_call(code, _VARIABLES_FUNCTION)
        if result.final is not None:
            # One answer per `answer.ready = true`, as the reference's answer dict
            # signals once: a later block (the next completion of a persistent run)
            # does not end with the same answer again.
            self._run(_REARM_ANSWER)
        return REPLResult(
            stdout=result.stdout,
            stderr=result.error or "",
            locals=self._variables(listed),
            execution_time=result.seconds,
            rlm_calls=self._handler.take(),
            final_answer=result.final,
        )

    def _child(self, prompt: str, context: str | None) -> str:
        """`rlm_query` in the Lua code: a child RLM of the reference's (`subcall_fn`), the
        context (if given) before the prompt. Its completion joins the block's
        `rlm_calls`; an error is its answer, as the reference's `rlm_query` gives it."""
        assert self.subcall_fn is not None
        full_prompt = prompt if context is None else f"{context}\n\n{prompt}"
        with self._children:
            try:
                completion = self.subcall_fn(full_prompt, None)
            except Exception as error:  # noqa: BLE001 - the reference answers with it
                return f"Error: RLM query failed - {error}"
        self._handler.record(completion)
        return str(completion.response)

    def cleanup(self) -> None:
        """Closes the sandbox and frees its memory at once."""
        if self.env is not None:
            self.env.close()

    def __enter__(self) -> LuaREPL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def _environment(self) -> Environment:
        if self.env is None or self.env.closed:
            raise ValueError("the LuaREPL was cleaned up; call setup() for a new sandbox")
        return self.env

    def _run(self, code: str) -> None:
        """Runs code of the environment's own (never the model's), which must succeed."""
        result = self._environment().execute(code)
        if result.error is not None:
            raise RuntimeError(f"LuaREPL could not set up the sandbox: {result.error}")

    def _variables(self, listed: Any) -> dict[str, str]:
        # `None` when the code replaced the function: no listing rather than a failed turn.
        if not isinstance(listed, dict):
            return {}
        return {
            name: kind
            for name, kind in sorted(listed.items())
            if not (kind == "function" and name in self._registry)
        }


def lua_system_prompt(
    *,
    max_iterations: int = 30,
    prompt_mode: Literal["full", "compact", "auto"] | None = None,
    **sandbox: Unpack[SandboxArgs],
) -> str:
    """This package's system prompt, written for Lua, in the reference's protocol: code
    in ```repl blocks, the run ended with the `answer` table. `prompt_mode` is chosen as
    `rlm ask` chooses it when `None`: `RLM_PROMPT_MODE`, else `[model] prompt_mode` of
    the `config` file, else compact. It is a template for the
    reference's `RLM(custom_system_prompt=...)`, which fills `{custom_tools_section}`
    (so its literal braces are doubled). The context is not described: the reference
    does that in its first user message, for each completion.

    >>> from rlm_registry.integrations.rlms import lua_system_prompt  # doctest: +SKIP
    >>> "```repl" in lua_system_prompt()  # doctest: +SKIP
    True
    """
    settings = sandbox_args(sandbox)
    prompt = system_prompt(
        max_iterations=max_iterations,
        prompt_mode=prompt_mode,
        paths=settings["paths"],
        baked=settings["baked"],
        config=settings["config"],
        time_limit=settings["time_limit"],
        memory_limit_mb=settings["memory_limit_mb"],
        output_bytes=_REFERENCE_OUTPUT_CHARS,
        answer_protocol="answer",
    )
    prompt = _without_section(prompt, "The context")
    # The reference runs the code of ```repl blocks only.
    prompt = prompt.replace("```lua", "```repl")
    return prompt.replace("{", "{{").replace("}", "}}") + "{custom_tools_section}\n"


# The reference cuts each block's output at this many characters for the model.
_REFERENCE_OUTPUT_CHARS = 20_000


def _without_section(prompt: str, heading: str) -> str:
    start = prompt.find(f"## {heading}\n")
    if start == -1:
        return prompt
    end = prompt.find("\n## ", start)
    return prompt[:start] + (prompt[end + 1 :] if end != -1 else "")


class LuaRLM(_reference.RLM):
    """The reference's `RLM`, its model's code run as Lua by `LuaREPL`, with the system
    prompt of `lua_system_prompt` (unless `custom_system_prompt` is given).

    Every argument of the reference's `RLM` works as there, but `environment` (always
    `"lua"`); `environment_kwargs` go to `LuaREPL` (`paths`, `baked`, `config`,
    `time_limit`, `memory_limit_mb`, `output_limit`). `orchestrator` is off by default:
    the reference's addendum teaches Python. `prompt_mode` is chosen as `rlm ask` chooses
    it (compact unless `RLM_PROMPT_MODE` or `[model] prompt_mode` say otherwise). With
    `context_window` (tokens), a first request that does not fit it, with room for the
    reply, is refused before it is sent (`rlm_registry.LlmError`, the message `rlm ask`
    gives). At `max_depth > 1`, `rlm_query` in the Lua code runs the reference's child
    RLMs, each with its own `LuaREPL`; `compaction=True` keeps the conversation in the
    Lua table `history`. `RLMLogger` and the visualizer read its runs as any other
    (`environment_type` is `"lua"`).

    >>> from rlm_registry.integrations.rlms import LuaRLM  # doctest: +SKIP
    >>> rlm = LuaRLM(backend="openai", backend_kwargs={"model_name": "gpt-4.1-mini"})  # doctest: +SKIP
    >>> rlm.completion(text, root_prompt="How many orders failed?").response  # doctest: +SKIP
    '12'
    """

    def __init__(
        self,
        *args: Any,
        environment_kwargs: dict[str, Any] | None = None,
        custom_system_prompt: str | None = None,
        max_iterations: int = 30,
        orchestrator: bool = False,
        prompt_mode: Literal["full", "compact", "auto"] | None = None,
        context_window: int | None = None,
        **kwargs: Any,
    ) -> None:
        if "environment" in kwargs:
            raise TypeError("LuaRLM always runs LuaREPL: leave `environment` out")
        if context_window is not None and context_window < 1:
            raise ValueError("context_window must be a positive number of tokens")
        environment_kwargs = dict(environment_kwargs or {})
        # Children are the reference's own RLMs, built from these kwargs: they keep the
        # parent's choice of addendum (see `_spawn_with_lua_hooks`).
        environment_kwargs[_ORCHESTRATOR_KEY] = orchestrator
        sandbox = take_sandbox_args(dict(environment_kwargs))
        if custom_system_prompt is None:
            # The prompt states the limits the sandbox will have.
            custom_system_prompt = lua_system_prompt(
                max_iterations=max_iterations, prompt_mode=prompt_mode, **sandbox
            )
        self.context_window = context_window
        self.prompt_mode = prompt_mode
        self._config = sandbox.get("config")
        super().__init__(
            *args,
            environment=ENVIRONMENT,
            environment_kwargs=environment_kwargs,
            custom_system_prompt=custom_system_prompt,
            max_iterations=max_iterations,
            orchestrator=orchestrator,
            **kwargs,
        )

    def _setup_prompt(
        self, prompt: str | dict[str, Any], root_prompt: str | None = None
    ) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = super()._setup_prompt(prompt, root_prompt)
        documents = as_corpus(prompt)
        if documents is not None:
            # The reference says only "a list" or "a dict": say what Lua holds.
            first_user = next((m for m in messages if m.get("role") == "user"), None)
            if first_user is not None:
                first_user["content"] = f"{first_user['content']}\n\n{corpus_description(documents)}"
        if self.context_window is not None:
            _check_first_request(
                messages,
                self.context_window,
                prompt_mode=self.prompt_mode,
                config=self._config,
                agent="0" if self.depth == 0 else f"0 (depth {self.depth})",
            )
        return messages

    def _validate_persistent_environment_support(self) -> None:
        # LuaREPL has the persistence methods; the reference checks names it knows.
        if self.environment_type != ENVIRONMENT:
            super()._validate_persistent_environment_support()


# `LuaRLM`'s choice of addendum, carried to the reference's child RLMs in the
# environment's kwargs (and taken out before `LuaREPL` sees them).
_ORCHESTRATOR_KEY = "_lua_orchestrator"

# The RLM whose completion is making its environment, for `get_environment`.
_spawning: contextvars.ContextVar[Any] = contextvars.ContextVar("rlm_spawning", default=None)


def _lua_environment(environment_kwargs: dict[str, Any]) -> LuaREPL:
    """A `LuaREPL` for the RLM making it, with what the reference hands only to the
    environments it knows: its recursion hook at `max_depth > 1` (so `rlm_query` runs
    its child RLMs) and `compaction`."""
    kwargs = dict(environment_kwargs)
    orchestrator = kwargs.pop(_ORCHESTRATOR_KEY, None)
    rlm = _spawning.get()
    if rlm is not None:
        if orchestrator is not None:
            rlm.orchestrator = orchestrator
        if rlm.max_depth > 1:
            kwargs.setdefault("subcall_fn", rlm._subcall)
        if rlm.compaction:
            kwargs.setdefault("compaction", True)
    return LuaREPL(**kwargs)


def _register_environment() -> None:
    """Teaches the reference's `get_environment`, which `RLM` calls for each completion,
    the name `"lua"`, and lets it know which RLM asks (the reference passes its recursion
    hook and compaction only to environments it knows). Every other name goes to the
    reference's own, unchanged; the reference has no registry of environments to add one
    to."""
    original = _reference.get_environment
    if getattr(original, "_knows_lua", False):
        return

    def get_environment(environment: str, environment_kwargs: dict[str, Any]) -> Any:
        if environment == ENVIRONMENT:
            return _lua_environment(environment_kwargs)
        return original(environment, environment_kwargs)

    get_environment._knows_lua = True  # type: ignore[attr-defined]
    _reference.get_environment = get_environment

    spawn = _reference.RLM._spawn_completion_context

    @contextlib.contextmanager
    def _spawn_with_lua_hooks(self: Any, prompt: Any) -> Iterator[Any]:
        manager = spawn(self, prompt)
        token = _spawning.set(self)
        try:
            made = manager.__enter__()
        finally:
            _spawning.reset(token)
        try:
            yield made
        except BaseException as error:
            if not manager.__exit__(type(error), error, error.__traceback__):
                raise
        else:
            manager.__exit__(None, None, None)

    _reference.RLM._spawn_completion_context = _spawn_with_lua_hooks


_register_environment()
