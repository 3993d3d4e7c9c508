"""The reference RLM's compaction (`RLM(compaction=True)`) on the scripted run of
`tests/it/compaction.rs`: 12 turns, each printing about 8 KB, against a scripted
OpenAI-compatible server that enforces an 8,192-token window as llama.cpp does (a
request longer than that, counted with `o200k_base`, gets llama.cpp's context-length
error). The model is named `gpt-4`, which the reference takes to have an 8,192-token
window. Prints the requests, the summaries, the refused requests, the tokens read and
the wall time, for BENCHMARKS.md beside `cargo bench --bench compaction`.

    pip install './python[rlms]'
    python python/benches/reference_compaction.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import tiktoken
from rlm.core.rlm import RLM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from openai_server import ScriptedServer  # noqa: E402

WINDOW = 8192
TURNS = 12
ENCODING = tiktoken.get_encoding("o200k_base")
SUMMARY = (
    "Summary of my work so far. Each turn printed 550 numbered words; nothing in them "
    "needs keeping beyond the count in `n`. Still needed: go on printing until turn 12, "
    "then answer."
)
TURN = """```repl
try:
    n += 1
except NameError:
    n = 1
words = ["river", "stone", "quiet", "market", "copper", "lantern", "orchard", "harbor"]
print(" ".join(f"w{n}x{i} {words[i % 8]}" for i in range(1, 551)))
if n == 12:
    answer["content"] = f"{n} turns, history of {len(history)}"
    answer["ready"] = True
```"""


def tokens(messages: list[dict]) -> int:
    """The request's tokens, counted as the crate counts a chat: 4 a message, 3 more."""
    return sum(len(ENCODING.encode(str(m.get("content") or ""))) + 4 for m in messages) + 3


class WindowServer(ScriptedServer):
    """Answers summaries, turns and, past the window, llama.cpp's refusal."""

    def __init__(self) -> None:
        super().__init__([])
        self.summaries = 0
        self.refused = 0
        self.sizes: list[int] = []

    def _answer(self, request: dict) -> tuple[int, dict]:
        messages = request["messages"]
        size = tokens(messages)
        with self._lock:
            self.requests.append(request)
            self.sizes.append(size)
            if size > WINDOW:
                self.refused += 1
                return 400, {
                    "error": {
                        "code": 400,
                        "message": "the request exceeds the available context size. try increasing the context size or enable context shift",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": size,
                        "n_ctx": WINDOW,
                    }
                }
            if "Summarize your progress so far" in str(messages[-1].get("content")):
                self.summaries += 1
                content = SUMMARY
            else:
                content = TURN
        return 200, {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": request.get("model", "scripted"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": size, "completion_tokens": len(ENCODING.encode(content)), "total_tokens": size},
        }


def main() -> None:
    with WindowServer() as server:
        rlm = RLM(
            backend="openai",
            backend_kwargs={"model_name": "gpt-4", "base_url": server.base_url, "api_key": "scripted"},
            max_iterations=TURNS + 2,
            compaction=True,
        )
        started = time.perf_counter()
        try:
            answer = rlm.completion("Print your words each turn.").response
        except Exception as error:  # the run's failure is the figure
            answer = f"failed: {type(error).__name__}: {str(error)[:200]}"
        elapsed = time.perf_counter() - started
    print(f"answer: {answer}")
    print(f"requests: {len(server.requests)}, summaries: {server.summaries}, refused: {server.refused}")
    print(f"prompt tokens read: {sum(server.sizes)}, largest request: {max(server.sizes)}")
    print(f"wall time: {elapsed:.2f} s")


if __name__ == "__main__":
    main()
