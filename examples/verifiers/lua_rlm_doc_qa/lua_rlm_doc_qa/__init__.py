"""A question over a document, answered by the RLM in the Lua sandbox, scored by exact
match. Exporting `LuaRLMHarness` makes it the taskset's default harness."""

from rlm_registry.integrations.verifiers import LuaRLMHarness

from .taskset import DocQATaskset

__all__ = ["DocQATaskset", "LuaRLMHarness"]
