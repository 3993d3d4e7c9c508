"""verifiers (the environment library prime-rl trains on) running this package's RLM as
an Agent Client Protocol agent, its model's code in the Lua sandbox.

- `LuaRLMHarness`: an `ACPHarness` that launches `python -m rlm_registry acp` in the
  rollout's runtime (the package is the agent: no other program to install), with the
  rollout's intercepting endpoint and secret as its model server (`RLM_BASE_URL`,
  `RLM_API_KEY`, `RLM_MODEL`), so that every model call of the run, the root's turns
  and every `llm_query`/`rlm_query` sub-call, passes through verifiers and lands in its
  trace. The call cache is off: a cached reply would be missing from the trace.
- `LuaRLMHarnessConfig`: its knobs (`--env.agent.harness.*`), named as the flags of
  `rlm acp`: `max_iterations`, `max_depth`, `context`, the budgets...

A harness is found by the module name of its id, and only top-level names are looked
up: a taskset selects this one by exporting `LuaRLMHarness` in its `__all__` (it is
then the taskset's default harness), as examples/verifiers/ in the repository does.

>>> from rlm_registry.integrations.verifiers import LuaRLMHarness  # doctest: +SKIP
>>> __all__ = ["DocQATaskset", "LuaRLMHarness"]  # in the taskset's module  # doctest: +SKIP

Since the model's code runs in the Lua sandbox (no files written, no processes, no
network), the harness runs on verifiers' subprocess runtime as on a container's.

Supported: `verifiers` 0.4.0 (`pip install 'rlm-registry[verifiers]'`).
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from ._support import require

#: The version of `verifiers` this module is written and tested against.
SUPPORTED_VERSION = "0.4.0"

require("verifiers.v1", "verifiers", SUPPORTED_VERSION)

# Imported after the check that `verifiers` is installed.
from pydantic import Field, NonNegativeInt, PositiveInt  # noqa: E402
from verifiers.v1.acp import ACPConfig, ACPHarness  # type: ignore[import-untyped]  # noqa: E402
from verifiers.v1.clients import ModelContext  # type: ignore[import-untyped]  # noqa: E402
from verifiers.v1.configs.harness import HarnessConfig  # type: ignore[import-untyped]  # noqa: E402
from verifiers.v1.errors import HarnessError  # type: ignore[import-untyped]  # noqa: E402
from verifiers.v1.runtimes import Runtime  # type: ignore[import-untyped]  # noqa: E402
from verifiers.v1.task import TaskData  # type: ignore[import-untyped]  # noqa: E402
from verifiers.v1.trace import Trace  # type: ignore[import-untyped]  # noqa: E402

__all__ = ["SUPPORTED_VERSION", "LuaRLMHarness", "LuaRLMHarnessConfig"]

# The runtime that runs programs on this machine, where this interpreter is the one
# that has the package.
_SUBPROCESS = "subprocess"


class LuaRLMHarnessConfig(HarnessConfig):  # type: ignore[misc]
    """The agent's settings, each passed as the `rlm acp` flag of its name; one left
    unset is resolved by the agent (its `RLM_*` variable in `env`, `config`'s rlm.toml,
    the default), as for `rlm ask`."""

    python: str | None = None
    """The Python interpreter, in the runtime, that has `rlm-registry` installed. `None`:
    this interpreter on the subprocess runtime, `python3` elsewhere."""
    context: list[str] = Field(default_factory=list)
    """What every session studies (`--context`), paths in the runtime; empty: the
    session's working directory, the runtime's work folder."""
    max_iterations: PositiveInt | None = None
    """Root turns per prompt (default 10)."""
    max_depth: NonNegativeInt | None = None
    """How deep `rlm_query` may nest agents (default 1)."""
    config: str | None = None
    """An rlm.toml in the runtime: `[model]`, `[budgets]`, providers."""
    time_limit: float | None = Field(None, gt=0)
    """Seconds one code block may run (default 300)."""
    max_tokens: PositiveInt | None = None
    """Tokens one prompt's run may use, all its agents and sub-calls together."""
    max_llm_calls: PositiveInt | None = None
    """Model calls one prompt's run may make."""
    max_time: float | None = Field(None, gt=0)
    """Seconds one prompt's run may take."""
    max_cost: float | None = Field(None, ge=0)
    """US dollars one prompt's run may cost."""
    context_window: PositiveInt | None = None
    """The model's context window in tokens: a request that would not fit is not sent."""
    llm_concurrency: PositiveInt | None = None
    """Requests sent to the model at once (default 32)."""
    max_reply_tokens: PositiveInt | None = None
    """The most tokens one reply may take."""
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    """Sent as `reasoning_effort`."""


# The settings passed as flags, in the order `rlm acp --help` lists them.
_FLAGS = (
    "max_iterations",
    "max_depth",
    "config",
    "time_limit",
    "max_tokens",
    "max_llm_calls",
    "max_time",
    "max_cost",
    "context_window",
    "llm_concurrency",
    "max_reply_tokens",
    "reasoning_effort",
)


class LuaRLMHarness(ACPHarness[LuaRLMHarnessConfig]):  # type: ignore[misc]
    """Runs each rollout's prompt through `python -m rlm_registry acp`, its model calls
    through the rollout's intercepting endpoint. The task's system prompt comes first
    in the first prompt, as verifiers' ACP runner sends it to every agent."""

    APPENDS_SYSTEM_PROMPT = True
    # MCP servers a client offers are not given to the model's code (the agent says
    # so in its capabilities).
    SUPPORTS_MCP = False
    # The model's code runs in the Lua sandbox, not in the runtime.
    NEEDS_CONTAINER = False

    def python(self, runtime: Runtime) -> str:
        """The interpreter that runs the agent in `runtime`."""
        if self.config.python is not None:
            return str(self.config.python)
        return sys.executable if runtime.type == _SUBPROCESS else "python3"

    def command(self, runtime: Runtime) -> list[str]:
        """The agent's command line in `runtime`: the settings as `rlm acp` flags, and
        no call cache."""
        command = [self.python(runtime), "-m", "rlm_registry", "acp", "--no-cache"]
        for name in _FLAGS:
            value = getattr(self.config, name)
            if value is not None:
                command += [f"--{name.replace('_', '-')}", str(value)]
        for path in self.config.context:
            command += ["--context", path]
        return command

    async def setup(self, runtime: Runtime) -> None:
        python = self.python(runtime)
        found = await runtime.run([python, "-c", "import rlm_registry"], self.config.resolved_env)
        if found.exit_code != 0:
            raise HarnessError(
                f"harness {self.config.id!r}: {python} in the runtime cannot import "
                "rlm_registry: install rlm-registry in the runtime's image, or set "
                f"`python` to an interpreter that has it ({found.stderr.strip()[-300:]})"
            )
        # verifiers' ACP runner (a uv script) is prepared by the base class.
        await super().setup(runtime)

    async def prepare_acp(
        self,
        ctx: ModelContext,
        trace: Trace,
        runtime: Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: TaskData,
    ) -> ACPConfig:
        system_prompt, prompt = self.resolve_prompt(data)
        env: dict[str, Any] = {
            **self.config.resolved_env,
            # The harness's own: the rollout's model server, over any the host has.
            "RLM_MODEL": ctx.model,
            "RLM_BASE_URL": endpoint,
            "RLM_API_KEY": secret,
        }
        return ACPConfig(
            env=env,
            command=self.command(runtime),
            prompt=prompt,
            system_prompt=system_prompt,
        )
