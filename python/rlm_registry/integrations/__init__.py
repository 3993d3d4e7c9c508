"""Integrations with other RLM systems, each importable only when its package is
installed (they build on the public API of `rlm_registry`)."""
