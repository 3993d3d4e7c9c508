"""Type stubs of the native module. Its `__all__`, the one list of the public names, is
what `rlm_registry` re-exports (stubtest checks it against the module's)."""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from os import PathLike
from types import TracebackType
from typing import Any, Literal, final

__version__: str

__all__ = [
    "Answer",
    "BusyError",
    "CheckpointError",
    "ContextError",
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
    "ask_async",
    "check",
    "serve_acp",
    "score",
    "split_thinking",
    "system_prompt",
]

_StrPath = str | PathLike[str]
_Text = str | bytes
_Context = _Text | list[_Text] | tuple[_Text, ...] | dict[str, _Text] | PathLike[str]
"""What the model studies: one text; chunks (a list, an array of strings in Lua);
documents by name (a dict, a corpus in Lua); or a path, gathered as `--context PATH`
gathers it (a file is its text, a folder a corpus)."""
_JSON = dict[str, "_JSON"] | list["_JSON"] | str | int | float | bool | None
"""A value as the Lua <-> JSON mapping carries it (a tuple is sent as a list)."""
_Value = _JSON | bytes
"""A global's value: JSON, or `bytes` for a Lua string that is not UTF-8."""

class RlmRegistryError(Exception):
    """The base class of every error rlm_registry raises."""

class RegistryError(RlmRegistryError):
    """A registry (or an rlm.toml) that does not load."""

    diagnostics: list[Diagnostic]
    """Every diagnostic of the files that were read (empty for an rlm.toml)."""

class LuaError(RlmRegistryError):
    """Lua failed outside `execute`: reading or setting a global, `call`; or `ask`
    gave up after the model's code failed turn after turn."""

    hint: str | None
    """The Lua way, when the code was Python written as Lua."""

class LimitError(RlmRegistryError):
    """A limit was hit outside `execute`, or a run hit its iteration cap or a budget."""

    kind: str
    """`"time"`, `"memory"`, `"output"`, `"recursion"`, `"llm_calls"`, `"token_budget"`,
    `"interrupted"`; for `ask`: `"iterations"`, `"tokens"`, `"llm_calls"`, `"wall_time"`."""

class LlmError(RlmRegistryError):
    """The model could not be reached, or answered with nothing the loop can use."""

class ContextError(RlmRegistryError):
    """A context path that cannot be read: missing, unreadable, a glob matching nothing."""

    path: str
    """The path, as given."""

class BusyError(RlmRegistryError):
    """The Environment is in use by another thread: one thread at a time may use it."""

class CheckpointError(RlmRegistryError):
    """A checkpoint that cannot be read (not one, or another format version) or restored
    (another context or registry, an environment that has run code)."""

class InternalError(RlmRegistryError):
    """A bug in rlm_registry (a Rust panic), caught before it could harm the interpreter.
    An Environment it happened in is closed."""

@final
class ExecResult:
    """What one `Environment.execute` did."""

    @property
    def stdout(self) -> str:
        """What `print` wrote, also before an error; bytes that are not UTF-8 as `\\xNN`."""
    @property
    def error(self) -> str | None:
        """The Lua error, or the limit's message, as the model reads it (hint included)."""
    @property
    def hint(self) -> str | None:
        """The hint alone: the Lua way for Python written as Lua, or "did you mean"."""
    @property
    def final(self) -> str | None:
        """What `FINAL(value)` or `FINAL_VAR(name)` gave in this execution."""
    @property
    def limit(self) -> str | None:
        """The limit that ended the execution: `"time"`, `"memory"`, `"output"`,
        `"recursion"`, `"llm_calls"`, `"token_budget"` or `"interrupted"`."""
    @property
    def seconds(self) -> float:
        """Wall time of the execution."""
    @property
    def ok(self) -> bool:
        """True when the execution ended without an error or a limit."""

@final
class Environment:
    """One sandboxed Lua 5.4 state with the registry's functions, keeping its globals from
    one `execute` to the next (a REPL).

    `context` becomes the global `context`: a `str` or `bytes` as a string (handed over
    once, without a Python copy), a list as an array of strings (chunks), a `dict` of
    name -> `str`/`bytes` as a corpus (a list of documents `{name, text, kind,
    bytes}`), a `pathlib.Path` as `--context PATH` gathers it (a file's text; a folder's
    files as a corpus, `.gitignore` honoured). Another type is a `TypeError`; a path
    that cannot be read a `ContextError`.
    The functions are the baked library's, with `paths` layered on top (or only theirs
    with `baked=False`), or those of `registry`; `config` is an rlm.toml enabling
    providers. Each execution may run `time_limit` seconds, print `output_limit` bytes
    (1 MiB by default), and the state may use `memory_limit_mb` MiB besides the context
    (which does not count). `llm` is what `llm_query` and `llm_query_batched` call;
    without it they raise a Lua error. `tools` are Python functions the code may call by their names, their arguments and
    results crossing as JSON. `sub_agent(prompt, context)` runs a child agent for
    `rlm_query` and `rlm_query_batched` (concurrently, from several threads) and returns
    its answer; without it, `rlm_query` is a plain `llm` call.

    Any thread may use an environment, one at a time: a second one gets `BusyError`.
    The GIL is released while Lua runs. `close()` (or a `with` block) frees it at once.
    """

    def __new__(
        cls,
        context: _Context | None = None,
        *,
        paths: Sequence[_StrPath] = (),
        baked: bool = True,
        config: _StrPath | None = None,
        registry: Registry | None = None,
        time_limit: float = 30.0,
        memory_limit_mb: int = 512,
        output_limit: int | None = None,
        llm: Callable[[str], str] | None = None,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        sub_agent: Callable[[str, str | None], str] | None = None,
    ) -> Environment: ...
    def execute(self, code: str | bytes) -> ExecResult:
        """Runs Lua `code`; globals persist. Lua errors and limits are in the result."""
    def execute_async(self, code: str | bytes) -> Awaitable[ExecResult]:
        """`execute` as an awaitable (call it inside a running event loop): the same
        result and exceptions, run on the package's bounded thread pool
        (`RLM_ASYNC_THREADS`, default 64) rather than the caller's thread. A second call
        while one runs raises `BusyError` where it is awaited. Cancelling the awaiting
        task interrupts the execution; the environment is usable again once it has
        stopped (milliseconds)."""
    def _execute_then_call(self, code: str | bytes, name: str) -> tuple[ExecResult, _JSON]:
        """`execute(code)`, then `call(name)` in the same call (the GIL released once);
        the call's result, or `None` when it failed."""
    def __getitem__(self, name: str, /) -> _Value:
        """The Lua global `name` (`None` when unset); `TypeError` for a value that cannot
        cross (a function, a cycle), naming where it is."""
    def __setitem__(self, name: str, value: _Value | tuple[Any, ...], /) -> None:
        """Sets the Lua global `name`: a `str` or `bytes` as a Lua string of its bytes,
        anything else through the Lua <-> JSON mapping; `None` removes it."""
    def __delitem__(self, name: str, /) -> None:
        """Removes the Lua global `name`."""
    def set_context(self, context: _Context | None) -> None:
        """Sets the global `context` as the constructor does, or removes it."""
    def call(self, name: str, *args: _JSON | tuple[Any, ...]) -> _JSON:
        """Calls the global function `name` with `args` as JSON, under the limits."""
    def checkpoint(self) -> bytes:
        """The session so far as bytes: the journal of what ran (code, the values it read
        from outside the sandbox, its sub-calls' answers), the context by its SHA-256."""
    def restore(self, data: bytes) -> list[str]:
        """Rebuilds a checkpoint's session in this fresh environment (same registry and
        context), sending and touching nothing; `CheckpointError` when it cannot. Returns
        where a step asked for something else than recorded (usually nothing)."""
    def fork(self) -> Environment:
        """An independent copy of the session with the same globals."""
    def interrupt(self) -> None:
        """Stops the execution running now, from any thread (`limit == "interrupted"`)."""
    def close(self) -> None:
        """Ends the environment and frees its memory; later use raises `ValueError`."""
    @property
    def closed(self) -> bool: ...
    @property
    def time_limit(self) -> float: ...
    @property
    def memory_limit_mb(self) -> int: ...
    @property
    def output_limit(self) -> int: ...
    def __enter__(self) -> Environment: ...
    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

@final
class Diagnostic:
    """One finding of the conventions' checker."""

    @property
    def code(self) -> str:
        """`E001`..., or `N001` for a note."""
    @property
    def severity(self) -> Literal["error", "warning", "note"]: ...
    @property
    def message(self) -> str: ...
    @property
    def help(self) -> str | None:
        """How to fix it, when the checker knows."""
    @property
    def file(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def column(self) -> int: ...
    @property
    def rendered(self) -> str:
        """The rustc-style report: header, `--> file:line:col`, the source line, a caret."""

@final
class Registry:
    """Documented Lua functions: the registry baked into the package, with `paths`
    (directories or `.lua` files) layered on top, or only theirs with `baked=False`.
    Raises `RegistryError` when a file breaks the conventions."""

    def __new__(cls, paths: Sequence[_StrPath] = (), baked: bool = True) -> Registry: ...
    def functions(self) -> list[dict[str, Any]]:
        """Every function, sorted by name: `name`, `signature`, `summary`, `description`,
        `params`, `returns`, `source` (its Lua text), `file`, `line`, `dir`, `tool`..."""
    def prompt(self, compact: bool = False) -> str:
        """The registry's part of the system prompt, in full or compact."""
    def search(self, query: str, k: int = 5) -> list[dict[str, Any]]:
        """The `k` best matches for `query`, best first: `name`, `signature`, `summary`,
        `score`, `confidence`, `match_reason`, `signals`..."""
    def __len__(self) -> int: ...
    def __contains__(self, name: object, /) -> bool: ...

@final
class Answer:
    """A run's answer and what it took."""

    @property
    def answer(self) -> str:
        """What `FINAL` or `FINAL_VAR` gave; with a `schema`, the answer's JSON text."""
    @property
    def value(self) -> Any:
        """With a `schema`, the answer as Python values (it matched the schema)."""
    @property
    def turns(self) -> int:
        """The root agent's turns, the last included."""
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int:
        """A reasoning model's thinking included."""
    @property
    def reasoning_tokens(self) -> int:
        """Of `completion_tokens`, those a reasoning model spent thinking, where the
        server reported them (`completion_tokens_details.reasoning_tokens`); else 0."""
    @property
    def llm_calls(self) -> int:
        """Model calls: the agents' turns and every sub-call."""
    @property
    def seconds(self) -> float: ...
    @property
    def cost(self) -> float | None:
        """What the run cost in US dollars, where known (the server's `usage.cost`, else
        the model's price in `config`'s `[prices]`); else `None`."""
    @property
    def trace(self) -> str | None:
        """The trace file written, if one was asked for."""

def check(paths: Sequence[_StrPath]) -> list[Diagnostic]:
    """Checks the `.lua` files under `paths` against the conventions: every diagnostic,
    errors and notes; an empty list when all is well."""

def ask(
    question: str | None = None,
    context: _Context | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    max_iterations: int | None = None,
    max_depth: int | None = None,
    trace: _StrPath | None = None,
    trace_format: Literal["events", "rlm"] = "events",
    paths: Sequence[_StrPath] = (),
    baked: bool = True,
    registry: Registry | None = None,
    config: _StrPath | None = None,
    time_limit: float | None = None,
    memory_limit_mb: int | None = None,
    output_bytes: int | None = None,
    max_tokens: int | None = None,
    max_llm_calls: int | None = None,
    max_time: float | None = None,
    max_cost: float | None = None,
    prompt_mode: Literal["full", "compact", "auto"] | None = None,
    context_window: int | str | None = None,
    compact_at: float | Literal["off"] | None = None,
    answer_protocol: Literal["final", "answer"] | None = None,
    llm_concurrency: int | None = None,
    max_reply_tokens: int | str | None = None,
    reasoning_effort: Literal["low", "medium", "high"] | None = None,
    schema: Mapping[str, Any] | str | None = None,
    verbose: bool = False,
    resume: _StrPath | None = None,
    force: bool = False,
    cache: _StrPath | Literal[False] | None = None,
) -> Answer:
    """Answers `question` about `context` (as `Environment` takes it: a text, chunks, a
    `dict` of documents or a `pathlib.Path`) with the RLM loop, as `rlm ask` does, its
    settings resolved as `rlm ask` resolves them: an argument, else its environment
    variable (`RLM_MODEL`, `RLM_BASE_URL` or `OPENAI_BASE_URL`, `RLM_API_KEY` or
    `OPENAI_API_KEY`, `RLM_LLM_CONCURRENCY`, `RLM_MAX_REPLY_TOKENS`,
    `RLM_REASONING_EFFORT`, `RLM_CONTEXT_WINDOW`, `RLM_PROMPT_MODE`,
    `RLM_ANSWER_PROTOCOL`, `RLM_CACHE`), else `config`'s `[model]`, `[cache]` and
    `[budgets]`, else the default. `llm_concurrency` caps the requests sent at once
    (default 32). `max_reply_tokens` is sent with every request as `max_tokens` (or
    `max_completion_tokens` to a server that asks for it), `reasoning_effort` as
    `reasoning_effort`; neither is sent unless set. A reasoning model's thinking never
    runs and never goes back to it; the trace keeps it. Both token counts take an int or
    the text the command line takes (`"8k"`, `"128k"`). `context_window` refuses a
    request that would not fit; `compact_at` (`RLM_COMPACT_AT`, default 0.85; `"off"`
    or 0: never) is the share of it at which the conversation is summarised and
    restarted, every message kept in the Lua table `history`; `answer_protocol` chooses how the prompt teaches
    the model to end (both ways always work); `schema`, a JSON Schema (a dict or JSON
    text), types the answer (`Answer.value`). `max_cost` caps the run's spending in US
    dollars (`RLM_MAX_COST`, `[budgets] max_cost`): the server's `usage.cost`, else the
    model's price in `config`'s `[prices]`. Ctrl-C cancels the run and raises
    `KeyboardInterrupt` within a second, its trace ending with the last whole turn.
    `max_iterations` (default 10), `max_depth` (1), `time_limit` (300.0 seconds),
    `memory_limit_mb` (512) and `output_bytes` (10000) are those of `rlm ask`.
    `resume=TRACE` (no question: it is in the trace) goes on with the run a trace
    records, as `rlm ask --resume` does: its question, model, limits, budgets and context
    from the trace (an argument given again overrides), earlier turns rebuilt from the
    record with no request sent, then on live, appending to the same trace; a finished
    run's answer is returned with nothing sent. A changed context or registry raises
    `ValueError` unless `force=True`.
    `cache` is where the call cache lives: a file, or a server's URL
    (`redis://host:port/db`) that a fleet of workers shares, identical requests in flight
    at once sent once; `False` for none whatever `RLM_CACHE` or `config` say; `None` (the
    default) resolves it as `rlm ask` does.
    Raises `LimitError`, `LlmError` or `LuaError` when the run ends without an answer."""

def ask_async(
    question: str | None = None,
    context: _Context | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    max_iterations: int | None = None,
    max_depth: int | None = None,
    trace: _StrPath | None = None,
    trace_format: Literal["events", "rlm"] = "events",
    paths: Sequence[_StrPath] = (),
    baked: bool = True,
    registry: Registry | None = None,
    config: _StrPath | None = None,
    time_limit: float | None = None,
    memory_limit_mb: int | None = None,
    output_bytes: int | None = None,
    max_tokens: int | None = None,
    max_llm_calls: int | None = None,
    max_time: float | None = None,
    max_cost: float | None = None,
    prompt_mode: Literal["full", "compact", "auto"] | None = None,
    context_window: int | str | None = None,
    compact_at: float | Literal["off"] | None = None,
    answer_protocol: Literal["final", "answer"] | None = None,
    llm_concurrency: int | None = None,
    max_reply_tokens: int | str | None = None,
    reasoning_effort: Literal["low", "medium", "high"] | None = None,
    schema: Mapping[str, Any] | str | None = None,
    verbose: bool = False,
    resume: _StrPath | None = None,
    force: bool = False,
    cache: _StrPath | Literal[False] | None = None,
) -> Awaitable[Answer]:
    """`ask` as an awaitable (call it inside a running event loop): the same arguments,
    answer and exceptions. The arguments are checked when it is called; the server asked
    its window, the trace created and the run go on the package's bounded thread pool (`RLM_ASYNC_THREADS`, default 64),
    so many runs gathered on one event loop go on side by side. Cancelling the awaiting
    task cancels the run, which stops at its next safe point."""

def serve_acp(
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    max_iterations: int | None = None,
    max_depth: int | None = None,
    context: Sequence[_StrPath] = (),
    config: _StrPath | None = None,
    time_limit: float | None = None,
    max_tokens: int | None = None,
    max_llm_calls: int | None = None,
    max_time: float | None = None,
    max_cost: float | None = None,
    context_window: int | str | None = None,
    llm_concurrency: int | None = None,
    max_reply_tokens: int | str | None = None,
    reasoning_effort: Literal["low", "medium", "high"] | None = None,
    cache: _StrPath | Literal[False] | None = None,
    state_dir: _StrPath | None = None,
) -> None:
    """Serves the RLM as an Agent Client Protocol agent (JSON-RPC 2.0) on the process's
    standard input and output until standard input ends: `python -m rlm_registry acp`.
    Each `session/prompt` is a question, answered by the RLM loop over `context` (paths
    gathered as `--context` gathers them), else over the `cwd` the client sends; limits
    and budgets apply per prompt. The settings are resolved as `ask` resolves them
    (arguments, then `RLM_*` variables, then `config`'s rlm.toml); the model's settings
    are checked before the first message is read. `cache` is where the call cache lives
    (a file, or a server's URL), `False` for none whatever `RLM_CACHE` or `config` say,
    `None` to resolve it as `rlm ask` does. `state_dir` keeps every session in that
    folder (made if missing), so that `session/load` rebuilds it later with no model
    request (`loadSession` is advertised then). The GIL is released while it serves;
    Ctrl-C raises `KeyboardInterrupt`."""

def system_prompt(
    context: _Context | None = None,
    *,
    max_iterations: int = 10,
    max_depth: int = 1,
    paths: Sequence[_StrPath] = (),
    baked: bool = True,
    registry: Registry | None = None,
    config: _StrPath | None = None,
    time_limit: float = 300.0,
    memory_limit_mb: int = 512,
    output_bytes: int = 10000,
    prompt_mode: Literal["full", "compact", "auto"] | None = None,
    context_window: int | str | None = None,
    answer_protocol: Literal["final", "answer"] | None = None,
    schema: Mapping[str, Any] | str | None = None,
) -> str:
    """The system prompt `ask` starts from for `context`; `answer_protocol="answer"`
    teaches the reference RLM's `answer` table instead of `FINAL`."""

def score(
    answer: str, expected: str, scorer: Literal["exact", "contains", "numeric", "f1_set"] = "exact"
) -> float:
    """The score in `[0, 1]` of `answer` against `expected`, as `rlm eval` scores a task
    (`exact`: equal after normalising case, whitespace, quotes and a final period;
    `contains`; `numeric`: `0.75^|error|` on the first number; `f1_set`). `judge`, which
    asks a model, a name that is no scorer, and a `numeric` expected answer that is no
    number raise `ValueError`."""

def split_thinking(reply: str) -> tuple[str | None, str]:
    """`reply` split at the end of a reasoning model's inline thinking, as `ask` and the
    sandbox's sub-calls split it: `(thinking, answer)`. Thinking opens the reply with
    `<think>` (or `<thinking>`, `<reasoning>`) and ends at its closing tag, or, when
    the chat template opened it, ends at the first closing tag outside a fenced code
    block. `thinking` is `None` when there is none; `answer` is `""` when the reply is
    all thinking (cut before the closing tag)."""

def _panic_for_tests() -> None:
    """For the package's tests: a Rust panic, which comes out as `InternalError`."""

def _environment_new_in_rust(count: int) -> float:
    """For the package's benchmarks: mean seconds to create (and drop) an environment in
    Rust, on this thread."""
def _check_first_request(
    messages: Sequence[Mapping[str, Any]],
    context_window: int,
    *,
    prompt_mode: Literal["full", "compact", "auto"] | None = None,
    config: _StrPath | None = None,
    agent: str = "0",
) -> None:
    """Raises `LlmError` with `rlm ask`'s message when the chat `messages` and the room
    kept for the reply do not fit `context_window` tokens (for `LuaRLM`)."""

def _resolved_prompt_mode(
    prompt_mode: str | None = None,
    config: _StrPath | None = None,
) -> Literal["full", "compact", "auto"]:
    """The prompt mode a run would use: the argument, else `RLM_PROMPT_MODE`, else
    `config`'s `[model] prompt_mode`, else compact (for the integrations)."""
