"""`python -m rlm_registry acp`: the RLM as an Agent Client Protocol agent on standard
input and output, the same agent as `rlm acp` (its Rust code is in the extension), so
that `pip install rlm-registry` alone gives editors and harnesses an agent to launch.

    python -m rlm_registry acp --model gpt-4.1-mini --context docs/

Its flags are named as `rlm acp`'s; each one left out is resolved as for `ask`: its
environment variable (`RLM_MODEL`, `RLM_BASE_URL`, ...), else `--config`'s rlm.toml,
else the default. The API key comes from `RLM_API_KEY` or `OPENAI_API_KEY` only, so
that it never shows in a process list.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from . import RlmRegistryError, serve_acp


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rlm_registry", description="The commands of the rlm_registry package."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    acp = commands.add_parser(
        "acp",
        help="serve the RLM as an Agent Client Protocol agent on stdin/stdout",
        description="Serves the RLM as an Agent Client Protocol agent (JSON-RPC 2.0 on "
        "stdin/stdout) until stdin ends: each session/prompt is a question, answered with "
        "the RLM loop over the session's context (--context, else the session's cwd).",
    )
    acp.add_argument("--model", metavar="MODEL", help="the model (default: RLM_MODEL, else [model] name, else gpt-4o-mini)")
    acp.add_argument(
        "--base-url",
        metavar="URL",
        help="the OpenAI-compatible server (default: RLM_BASE_URL, OPENAI_BASE_URL, [model] base_url); "
        "the key comes from RLM_API_KEY or OPENAI_API_KEY",
    )
    acp.add_argument("--max-iterations", type=_positive, metavar="N", help="root turns per prompt (default 10)")
    acp.add_argument("--max-depth", type=int, metavar="N", help="how deep rlm_query may nest agents (default 1)")
    acp.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="PATH",
        help="what every session studies, over the cwd the client sends (repeat it for several)",
    )
    acp.add_argument("--config", metavar="PATH", help="an rlm.toml: [model], [budgets], [cache], providers")
    acp.add_argument("--time-limit", type=float, metavar="SECONDS", help="seconds one code block may run (default 300)")
    acp.add_argument("--max-tokens", type=int, metavar="N", help="tokens one prompt's run may use")
    acp.add_argument("--max-llm-calls", type=int, metavar="N", help="model calls one prompt's run may make")
    acp.add_argument("--max-time", type=float, metavar="SECONDS", help="seconds one prompt's run may take")
    acp.add_argument("--max-cost", type=float, metavar="USD", help="US dollars one prompt's run may cost")
    acp.add_argument("--context-window", metavar="TOKENS", help="the model's context window (8k, 128k, 32768)")
    acp.add_argument("--llm-concurrency", type=_positive, metavar="N", help="requests sent at once (default 32)")
    acp.add_argument("--max-reply-tokens", metavar="TOKENS", help="the most tokens one reply may take (4096, 8k)")
    acp.add_argument("--reasoning-effort", choices=["low", "medium", "high"], help="sent as reasoning_effort")
    acp.add_argument(
        "--state-dir",
        metavar="DIR",
        help="keep every session in DIR, so that session/load can rebuild it later (loadSession)",
    )
    cache = acp.add_mutually_exclusive_group()
    cache.add_argument("--cache", metavar="PATH|URL", help="the call cache (default: RLM_CACHE, else [cache] path)")
    cache.add_argument(
        "--no-cache", dest="cache", action="store_false", default=None, help="no call cache, whatever RLM_CACHE or --config say"
    )
    return parser


def settings(arguments: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `serve_acp` the parsed `arguments` give (those left out
    are not passed, so that the environment and `--config` fill them)."""
    given = {name: value for name, value in vars(arguments).items() if name != "command"}
    return {name: value for name, value in given.items() if value is not None and value != []}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command `argv` (`sys.argv[1:]` by default); returns the exit status."""
    arguments = _parser().parse_args(argv)
    try:
        serve_acp(**settings(arguments))
    except KeyboardInterrupt:
        return 130
    except (RlmRegistryError, ValueError, OSError) as error:
        print(f"rlm acp: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
