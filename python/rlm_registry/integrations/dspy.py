"""DSPy's RLM running model-written Lua in this package's sandbox instead of Python under
Pyodide and Deno.

- `LuaInterpreter`: a DSPy `CodeInterpreter` (`start`, `execute(code, variables)`,
  `tools`, `shutdown`) whose code is Lua 5.4; `SUBMIT{field = value, ...}` (or
  `SUBMIT(value)` for one output) ends the run.
- `LuaRLM`: a `dspy.RLM` whose instructions, fences and examples are Lua, on
  `LuaInterpreter`.

>>> import dspy  # doctest: +SKIP
>>> from rlm_registry.integrations.dspy import LuaRLM  # doctest: +SKIP
>>> dspy.configure(lm=dspy.LM("openai/gpt-4.1-mini"))  # doctest: +SKIP
>>> rlm = LuaRLM("context, question -> answer", max_iters=10)  # doctest: +SKIP
>>> rlm(context=open("server.log").read(), question="Which service fails most?").answer  # doctest: +SKIP
'gateway'

Supported: `dspy` 3.4.1 (`pip install 'rlm-registry[dspy]'`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._support import CONTEXT, SandboxArgs, as_corpus, corpus_description, require, sandbox_args

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: The version of `dspy` this module is written and tested against.
SUPPORTED_VERSION = "3.4.1"

_dspy = require("dspy", "dspy", SUPPORTED_VERSION)

from dspy.adapters.utils import translate_field_type  # type: ignore[import-untyped]  # noqa: E402
from dspy.predict.rlm import RLM  # type: ignore[import-untyped]  # noqa: E402
from dspy.primitives.code_interpreter import (  # type: ignore[import-untyped]  # noqa: E402
    CodeExecutionError,
    CodeInterpreterError,
    FinalOutput,
)
from dspy.primitives.facade import is_reserved_sandbox_name  # type: ignore[import-untyped]  # noqa: E402
from dspy.primitives.prediction import Prediction  # type: ignore[import-untyped]  # noqa: E402
from dspy.primitives.repl_types import REPLHistory, REPLVariable  # type: ignore[import-untyped]  # noqa: E402

from .. import Environment, Registry, RlmRegistryError, split_thinking  # noqa: E402
from .._native import _resolved_prompt_mode  # noqa: E402

__all__ = ["SUPPORTED_VERSION", "LuaInterpreter", "LuaRLM", "SandboxArgs", "strip_code_fences"]

# The Python tools that the sandbox's own `llm_query` and `llm_query_batched` call.
_LLM_TOOLS = ("llm_query", "llm_query_batched")
# The Lua name of the host function behind SUBMIT.
_SUBMIT_TOOL = "_rlm_submit"
# The Lua name of the host function that calls a tool by its name: a tool given once the
# sandbox exists (its host functions are fixed when it is made) is a Lua function over it.
_TOOL_CALLER = "_rlm_tool"
# A tool given late, as a Lua function: its errors name it, not the caller underneath.
_LATE_TOOL_LUA = """
function {name}(...)
  local ok, result = pcall({caller}, "{name}", ...)
  if ok then return result end
  if type(result) == "string" then
    result = result:gsub("^{caller}: ", "{name}: ", 1)
  end
  error(result, 2)
end
"""
# Lua's reserved words, which cannot name a function.
_LUA_KEYWORDS = frozenset(
    "and break do else elseif end false for function goto if in local nil not or repeat "
    "return then true until while".split()
)
# SUBMIT ends the block where it is called, as DSPy's does; the error it raises for that
# is never shown, since the block's result is the submission.
_SUBMIT_LUA = f"""
function SUBMIT(...)
  {_SUBMIT_TOOL}(...)
  error("SUBMIT", 0)
end
"""

# The step's output when its code field was all thinking: nothing ran.
_THINKING_ONLY = (
    "[Error] The code field was all thinking, and nothing inside thinking runs: close the "
    "thinking before the code field, then write the Lua in it."
)

EXECUTION_INSTRUCTIONS = (
    "Lua 5.4 (not Python) runs in a sandbox in the host process. State persists across "
    "executions; each has limits on time, memory and output that pcall cannot catch. There "
    "is no file system, process, network or `require`: `io`, `os.execute`, `load` of "
    "binary chunks and `debug` are absent."
)


class LuaInterpreter:
    """A DSPy `CodeInterpreter` running Lua 5.4 in this package's sandbox, with the
    registry's functions, `llm_query` and `llm_query_batched` (the `tools` of those
    names, which DSPy's RLM gives) and every other tool as a Lua function (positional
    arguments, crossing as JSON).

    `execute(code, variables)` sets each variable as a global (a `str` handed over
    once: the same object given again is not copied again; a `context` that is a
    `dict` of name -> `str` or a `list` of `str` becomes a corpus, a list of documents
    `{name, text, kind, bytes}`), runs the code and returns
    what it printed (or `None`); `SUBMIT` makes it return `FinalOutput`. A Lua error
    or a limit raises `CodeExecutionError` with the message the model reads (hint
    included); the interpreter stays usable.

    >>> from rlm_registry.integrations.dspy import LuaInterpreter  # doctest: +SKIP
    >>> repl = LuaInterpreter(output_fields=[{"name": "answer"}])  # doctest: +SKIP
    >>> repl.execute("print(#text)", variables={"text": "hello"})  # doctest: +SKIP
    '5\\n'
    >>> repl.execute("SUBMIT(text:upper())")  # doctest: +SKIP
    FinalOutput({'answer': 'HELLO'})
    """

    execution_instructions = EXECUTION_INSTRUCTIONS

    def __init__(
        self,
        tools: dict[str, Callable[..., Any]] | None = None,
        output_fields: list[dict] | None = None,
        **sandbox: Unpack[SandboxArgs],
    ) -> None:
        self._tools: dict[str, Callable[..., Any]] = dict(tools or {})
        #: The outputs SUBMIT takes: DSPy's RLM sets it (`[{"name": ..., "type": ...}]`).
        self.output_fields = output_fields
        # DSPy's RLM sets it to False after it changes the tools.
        self._tools_registered = False
        self._sandbox = sandbox_args(sandbox)
        self.env: Environment | None = None
        self._installed: set[str] = set()
        self._executed = False
        self._ended = False
        self._given: dict[str, Any] = {}
        self._submitted: dict[str, Any] | None = None
        self._caller_context = contextvars.copy_context()

    @property
    def tools(self) -> dict[str, Callable[..., Any]]:
        """The host functions the code may call, by name (DSPy updates this dict)."""
        return self._tools

    def start(self) -> None:
        """Creates the sandbox, if it is not there yet (idempotent)."""
        if self._ended:
            raise CodeInterpreterError("the LuaInterpreter was shut down; create a new one")
        if self.env is not None:
            return
        names = {name for name in self._tools if _is_installable(name)}
        tools = {
            name: _held_weakly(self, functools.partial(LuaInterpreter._call_tool, name=name), like=self._tools[name])
            for name in names
        }
        tools[_SUBMIT_TOOL] = _held_weakly(self, LuaInterpreter._submit)
        tools[_TOOL_CALLER] = _held_weakly(self, LuaInterpreter._call_tool_named)
        env = Environment(llm=_held_weakly(self, LuaInterpreter._llm_query), tools=tools, **self._sandbox)
        defined = env.execute(_SUBMIT_LUA)
        if not defined.ok:
            env.close()
            raise CodeInterpreterError(f"LuaInterpreter could not define SUBMIT: {defined.error}")
        self.env, self._installed, self._given = env, names, {}
        self._tools_registered = True

    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        """Runs `code` (Lua) after setting `variables` as globals; returns the printed
        output (`None` when nothing was printed) or `FinalOutput` after `SUBMIT`."""
        self._refresh_tools()
        self.start()
        env = self.env
        assert env is not None
        self._caller_context = contextvars.copy_context()
        for name, value in (variables or {}).items():
            self._give(env, name, value)
        self._executed = True
        self._submitted = None
        result = env.execute(code)
        if self._submitted is not None:
            submitted, self._submitted = self._submitted, None
            return FinalOutput(submitted)
        if result.error is not None:
            printed = f"{result.stdout}\n" if result.stdout else ""
            raise CodeExecutionError(printed + result.error)
        return result.stdout or None

    def shutdown(self) -> None:
        """Closes the sandbox and frees its memory; the interpreter cannot be used again."""
        self._ended = True
        if self.env is not None:
            self.env.close()
            self.env = None

    def __enter__(self) -> LuaInterpreter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _refresh_tools(self) -> None:
        """Tools added since the sandbox was made, as DSPy's RLM adds them (it updates
        `tools` and sets `_tools_registered` to False): a sandbox no code has run in yet
        is made again with them (each a documented host function, which `help` knows);
        one with state keeps it, and each new tool becomes a Lua function calling it by
        name. A tool given again under a name already there needs nothing: tools are
        looked up by name when called."""
        if self._tools_registered or self.env is None:
            return
        added = {name for name in self._tools if _is_installable(name)} - self._installed
        if added and not self._executed:
            self.env.close()
            self.env = None
            return
        for name in sorted(added):
            if not (name.isidentifier() and name.isascii()) or name in _LUA_KEYWORDS:
                raise CodeInterpreterError(f"the tool `{name}` cannot be a Lua function: its name is not a Lua name")
            defined = self.env.execute(_LATE_TOOL_LUA.format(name=name, caller=_TOOL_CALLER))
            if not defined.ok:
                raise CodeInterpreterError(f"LuaInterpreter could not install the tool `{name}`: {defined.error}")
            self._installed.add(name)
        self._tools_registered = True

    def _give(self, env: Environment, name: str, value: Any) -> None:
        # DSPy passes the inputs again on every execute: a str seen before is not copied
        # into the sandbox again (a str cannot change; a list or dict can).
        if isinstance(value, (str, bytes)) and self._given.get(name) is value:
            return
        documents = as_corpus(value) if name == CONTEXT else None
        try:
            if documents is not None:
                env.set_context(documents)
            else:
                env[name] = value
        except (TypeError, ValueError, OverflowError, RlmRegistryError) as error:
            raise CodeInterpreterError(f"the variable `{name}` cannot cross into Lua: {error}") from error
        self._given[name] = value

    def _in_caller_context(self, function: Callable[..., Any], *args: Any) -> Any:
        # The sandbox calls from its own threads: DSPy's settings (`dspy.context(lm=...)`)
        # and usage tracking live in context variables of the thread that called execute.
        return self._caller_context.copy().run(function, *args)

    def _llm_query(self, prompt: str) -> str:
        tool = self._tools.get("llm_query")
        if tool is None:
            raise RuntimeError("no llm_query tool: give LuaInterpreter tools={'llm_query': ...}")
        return self._in_caller_context(tool, prompt)

    def _call_tool(self, *args: Any, name: str) -> Any:
        # Looked up when called: DSPy gives fresh tools for each run.
        tool = self._tools.get(name)
        if tool is None:
            raise RuntimeError(f"the tool `{name}` was taken away")
        return self._in_caller_context(_call_by_name, tool, args)

    def _call_tool_named(self, name: str, *args: Any) -> Any:
        """The host side of a tool given after the sandbox was made."""
        return self._call_tool(*args, name=name)

    def _submit(self, *values: Any) -> None:
        """SUBMIT's host side: the outputs by name, or a Lua error saying how to write
        them."""
        self._submitted = submission(values, [field["name"] for field in self.output_fields or []])


def _held_weakly(
    interpreter: LuaInterpreter,
    method: Callable[..., Any],
    like: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """`method` of `interpreter` as a callable for the sandbox, which holds it without
    holding the interpreter: the interpreter holds the sandbox, and a cycle through
    Rust is one Python's collector cannot see. `like` gives it a tool's signature and
    docstring, which the sandbox documents for `help`."""
    owner = weakref.ref(interpreter)

    def call(*args: Any) -> Any:
        live = owner()
        if live is None:
            raise RuntimeError("the LuaInterpreter is gone")
        return method(live, *args)

    if like is not None:
        functools.update_wrapper(call, like)
    return call


def _call_by_name(tool: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Calls `tool` with the Lua arguments bound to its parameters' names, since DSPy's
    tool wrappers take keywords only (carrying the function's signature); positionally
    when the signature has positional-only parameters or `*args`, or none at all."""
    try:
        signature = inspect.signature(tool)
        bound = signature.bind(*args)
    except (TypeError, ValueError):
        return tool(*args)
    by_position = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)
    if any(parameter.kind in by_position for parameter in signature.parameters.values()):
        return tool(*args)
    return tool(**bound.arguments)


def submission(values: Sequence[Any], names: Sequence[str]) -> dict[str, Any]:
    """The outputs SUBMIT gave, by name: `SUBMIT{a = 1, b = 2}` (one table with every
    output), `SUBMIT(1, 2)` (in the outputs' order) or `SUBMIT(value)` for one output;
    without declared outputs, `{"output": value}` as DSPy's default SUBMIT gives.

    >>> submission([{"a": 1, "b": 2}], ["a", "b"])
    {'a': 1, 'b': 2}
    >>> submission([1, 2], ["a", "b"])
    {'a': 1, 'b': 2}
    >>> submission(["x"], ["answer"])
    {'answer': 'x'}
    """
    if not names:
        if len(values) != 1:
            raise ValueError("SUBMIT takes one value: SUBMIT(value)")
        return {"output": values[0]}
    form = _submit_form(names)
    if len(values) == 1 and isinstance(values[0], dict) and (len(names) > 1 or names[0] in values[0]):
        table = values[0]
        missing = [name for name in names if name not in table]
        if missing:
            raise ValueError(f"SUBMIT is missing {', '.join(missing)}: write {form}")
        return {name: table[name] for name in names}
    if len(values) == len(names):
        return dict(zip(names, values))
    raise ValueError(f"SUBMIT takes the outputs {', '.join(names)}: write {form}")


def _submit_form(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"SUBMIT({names[0]}) or SUBMIT{{{names[0]} = ...}}"
    return "SUBMIT{" + ", ".join(f"{name} = ..." for name in names) + "}"


def _is_installable(name: str) -> bool:
    # The llm tools are behind the sandbox's own functions; the dspy facade's are Python.
    return name not in _LLM_TOOLS and not is_reserved_sandbox_name(name)


def strip_code_fences(code: str) -> str:
    """The code of the first fenced block of `code` (whatever its language: Python by
    habit runs as Lua and gets Lua's hint back), or `code` when it has no fence.

    >>> strip_code_fences("Here:\\n```lua\\nprint(1)\\n```\\n")
    'print(1)'
    >>> strip_code_fences("print(2)")
    'print(2)'
    """
    text = code.strip()
    start = text.find("```")
    if start == -1:
        return text
    _, newline, rest = text[start + 3 :].partition("\n")
    if not newline:
        return text
    end = rest.find("```")
    return (rest if end == -1 else rest[:end]).strip()


ACTION_INSTRUCTIONS = """You are tasked with producing the following outputs given the inputs {inputs}:
{output_fields}

You have access to a Lua 5.4 REPL (Lua, not Python). Write Lua code and it will be executed. You will see the output, then write more code based on what you learned. This is an iterative process.
{interpreter_rules}
Available:
- Variables: {inputs} (your input data: a string stays a string, a list or dict is a Lua table)
- `llm_query(prompt)` - query a sub-LLM (~500K char capacity) for semantic analysis
- `llm_query_batched(prompts)` - query a table of prompts concurrently (much faster for multiple queries)
- `print(...)` - ALWAYS print to see results
- `{submit}` - submit the final outputs when done
- the library below, functions of plain Lua values: `help("name")` shows one's documentation, `fn_search("what you need")` finds one

Lua is not Python: `#s` is a length, tables count from 1, `..` joins strings, `~=` is not-equal, blocks close with `end`, `local` declares a variable, `string.find(s, text, 1, true)` finds plain text, comments start with `--`.

IMPORTANT: This is ITERATIVE. Each code block you write will execute, you'll see the output, then you decide what to do next. Do NOT try to solve everything in one step.

1. EXPLORE FIRST - Look at your data before processing it. Print samples, check types/lengths, understand the structure.
2. ITERATE - Write small code snippets, observe outputs, then decide next steps. State persists between iterations.
3. VERIFY BEFORE SUBMITTING - If results seem wrong (zeros, empty, unexpected), reconsider your approach.
4. USE llm_query FOR SEMANTICS - String matching finds WHERE things are; llm_query understands WHAT things mean.
5. MINIMIZE RETYPING (INPUTS & OUTPUTS) - When values are long, precise, or error-prone (IDs, numbers, code, quotes), re-access them via variables and parse/compute in code instead of retyping. Use small, targeted prints to sanity-check, but avoid manual copying when variables can carry the exact value.
6. SUBMIT ONLY AFTER SEEING OUTPUTS - SUBMIT ends the current run immediately. If you need to inspect printed output, run it in one step, review the result, then call SUBMIT in a later step.

For example, a first step:
```lua
print(type({first_input}), #{first_input})
print(string.sub({first_input}, 1, 500))
```
and, once the output has shown the answer, the last one:
```lua
{submit}
```

You have max {max_llm_calls} sub-LLM calls. When done, call {submit}."""


class LuaREPLHistory(REPLHistory):  # type: ignore[misc]
    """DSPy's REPL history as the model reads it, its code in ```lua blocks (DSPy's
    own shows every step's code as Python)."""

    def format(self) -> str:
        if not self.entries:
            return str(super().format())
        return "\n".join(
            entry.format(index=index, max_output_chars=self.max_output_chars).replace(
                f"```python\n{entry.code}\n```", f"```lua\n{entry.code}\n```", 1
            )
            for index, entry in enumerate(self.entries)
        )


def _lua_interpreter_factory(settings: SandboxArgs) -> Callable[[], LuaInterpreter]:
    def factory() -> LuaInterpreter:
        return LuaInterpreter(**settings)

    factory.execution_instructions = EXECUTION_INSTRUCTIONS  # type: ignore[attr-defined]
    return factory


class LuaRLM(RLM):
    """DSPy's `RLM` for Lua: its instructions, examples and fences are Lua, its code runs
    on `LuaInterpreter`, and the model ends with `SUBMIT{field = value, ...}`
    (`SUBMIT(value)` for a signature with one output). The instructions list the
    registry's functions: compact, or in full with `prompt_mode="full"`; when `None`,
    chosen as `rlm ask` chooses (`RLM_PROMPT_MODE`, else `[model] prompt_mode` of the
    `config` file, else compact).

    The arguments are `dspy.RLM`'s; after `*`, `prompt_mode` and the sandbox's settings
    (`SandboxArgs`: `paths`, `baked`, `config`, `time_limit`, `memory_limit_mb`,
    `output_limit`), as `Environment` takes them. DSPy's sandboxed sub-agents (`import dspy` in the REPL)
    are Python-only and not offered. A reasoning model's thinking in the code field
    never runs (`split_thinking`): a step runs the code after it, or nothing.

    >>> from rlm_registry.integrations.dspy import LuaRLM  # doctest: +SKIP
    >>> rlm = LuaRLM("context, question -> answer, confidence: float")  # doctest: +SKIP
    >>> prediction = rlm(context=text, question="How many orders failed?")  # doctest: +SKIP
    """

    def __init__(
        self,
        signature: Any,
        max_iters: int = 20,
        max_llm_calls: int = 50,
        max_output_chars: int = 10_000,
        verbose: bool = False,
        tools: list[Callable[..., Any]] | None = None,
        sub_lm: Any = None,
        interpreter_factory: Callable[[], Any] | None = None,
        *,
        prompt_mode: str | None = None,
        **sandbox: Unpack[SandboxArgs],
    ) -> None:
        if prompt_mode not in (None, "compact", "full"):
            raise ValueError(f'prompt_mode must be "compact" or "full", not {prompt_mode!r}')
        settings = sandbox_args(sandbox)
        # Chosen as `rlm ask` chooses it; "auto" lists compactly, as the instructions
        # of a DSPy signature are long already.
        chosen = _resolved_prompt_mode(prompt_mode, settings["config"])
        self._library = Registry(settings["paths"], settings["baked"]).prompt(compact=chosen != "full")
        if interpreter_factory is None:
            interpreter_factory = _lua_interpreter_factory(settings)
        super().__init__(
            signature,
            max_iters=max_iters,
            max_llm_calls=max_llm_calls,
            max_output_chars=max_output_chars,
            verbose=verbose,
            tools=tools,
            sub_lm=sub_lm,
            interpreter_factory=interpreter_factory,
        )

    def _build_signatures(self) -> tuple[Any, Any]:
        # The extract signature is DSPy's; the action signature is written for Lua.
        _, extract_sig = super()._build_signatures()
        inputs = list(self.signature.input_fields)
        names = list(self.signature.output_fields)
        output_fields = "\n".join(
            f"- {translate_field_type(name, field)}" for name, field in self.signature.output_fields.items()
        )
        task = f"{self.signature.instructions}\n\n" if self.signature.instructions else ""
        self._initial_sub_agent_rules = ""
        self._initial_interpreter_rules = self._format_interpreter_rules(
            self._initial_execution_instructions, ""
        )
        example = (
            f"SUBMIT({names[0]})" if len(names) == 1 else "SUBMIT{" + ", ".join(f"{n} = {n}" for n in names) + "}"
        )
        instructions = ACTION_INSTRUCTIONS.format(
            inputs=", ".join(f"`{name}`" for name in inputs),
            first_input=inputs[0] if inputs else "x",
            output_fields=output_fields,
            interpreter_rules=self._initial_interpreter_rules,
            submit=example,
            max_llm_calls=self.max_llm_calls,
        )
        tool_docs = self._format_tool_docs(self._user_tools)
        library = f"\n\nThe library (Lua functions, always available):\n{self._library}"
        action_sig = (
            _dspy.Signature({}, task + instructions + tool_docs + library)
            .append("variables_info", _dspy.InputField(desc="Metadata about the variables available in the REPL"), type_=str)
            .append("repl_history", _dspy.InputField(desc="Previous REPL code executions and their outputs"), type_=REPLHistory)
            .append("iteration", _dspy.InputField(desc="Current iteration number (1-indexed) out of max_iters"), type_=str)
            .append("reasoning", _dspy.OutputField(desc="Think step-by-step: what do you know? What remains? Plan your next action."), type_=str)
            .append("code", _dspy.OutputField(desc="Lua code to execute, in a markdown code block: ```lua\\n<code>\\n```"), type_=str)
        )
        return action_sig, extract_sig

    def _build_variables(self, **input_args: Any) -> list[REPLVariable]:
        # DSPy describes a `dict` or `list` as JSON; a `context` of texts is a corpus in
        # Lua (see `LuaInterpreter`), described as the system prompt describes one.
        variables: list[REPLVariable] = super()._build_variables(**input_args)
        documents = as_corpus(input_args.get(CONTEXT))
        if documents is None:
            return variables
        described = corpus_description(documents)
        return [
            variable.model_copy(
                update={"type_name": "corpus", "desc": f"{variable.desc}\n{described}".strip()}
            )
            if variable.name == CONTEXT
            else variable
            for variable in variables
        ]

    def _setup_facade(self, repl: Any, budget: Any, interpreter_factory: Any) -> str:
        # DSPy's sandboxed sub-agents are a Python shim: none in Lua.
        return ""

    def _execute_iteration(
        self,
        repl: Any,
        variables: list[REPLVariable],
        history: REPLHistory,
        iteration: int,
        input_args: dict[str, Any],
        output_field_names: list[str],
        interpreter_factory: Callable[[], Any],
        sub_agent_rules: str,
    ) -> Prediction | REPLHistory:
        action = self.generate_action(
            **self._action_inputs(variables, history, iteration, interpreter_factory, sub_agent_rules)
        )
        return self._run_action(repl, action, history, input_args, output_field_names)

    async def _aexecute_iteration(
        self,
        repl: Any,
        variables: list[REPLVariable],
        history: REPLHistory,
        iteration: int,
        input_args: dict[str, Any],
        output_field_names: list[str],
        interpreter_factory: Callable[[], Any],
        sub_agent_rules: str,
    ) -> Prediction | REPLHistory:
        action = await self.generate_action.acall(
            **self._action_inputs(variables, history, iteration, interpreter_factory, sub_agent_rules)
        )
        return self._run_action(repl, action, history, input_args, output_field_names)

    def _action_inputs(
        self,
        variables: list[REPLVariable],
        history: REPLHistory,
        iteration: int,
        interpreter_factory: Callable[[], Any],
        sub_agent_rules: str,
    ) -> dict[str, Any]:
        return {
            "signature": self._action_signature_for_current_factory(interpreter_factory, sub_agent_rules),
            "variables_info": [variable.format() for variable in variables],
            "repl_history": LuaREPLHistory(entries=list(history.entries), max_output_chars=history.max_output_chars),
            "iteration": f"{iteration + 1}/{self.max_iters}",
        }

    def _run_action(
        self,
        repl: Any,
        action: Any,
        history: REPLHistory,
        input_args: dict[str, Any],
        output_field_names: list[str],
    ) -> Prediction | REPLHistory:
        # A reasoning model's thinking never runs nor goes back in the history, by the
        # rule `ask` reads replies with: DSPy's adapter drops thinking before the first
        # field, but thinking that rehearses the fields ends inside the code field.
        thinking, answer = split_thinking(action.code)
        # DSPy's own fence stripping refuses a ```lua block; any fence is taken here.
        code = strip_code_fences(answer)
        if thinking is not None and not code:
            return self._process_execution_result(action, code, _THINKING_ONLY, history, output_field_names)
        result = self._execute_code(repl, code, input_args)
        return self._process_execution_result(action, code, result, history, output_field_names)
