"""A scripted OpenAI-compatible chat completions server for the tests, on 127.0.0.1.

The loop's own turns (requests with a system message) get the next of `replies`, the
model's Lua; any other request (an `llm_query` from the model's code) gets
`sub_answer(prompt)`, after `sub_delay` seconds; `max_in_flight` is the most of those
answered at once. A reply is the message's content, or a `Reply` for what a reasoning
model or a cut reply adds to it. Every request body is kept for the tests to read.
A `GET /v1/models` (a client asking the model's window) is answered with `models` when
given, else 404, and kept in `gets`, apart from the chat requests.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """A reply as a reasoning model's server sends it: the thinking apart in
    `reasoning_content` (as vLLM's reasoning parsers do), the tokens spent on it in
    `usage.completion_tokens_details.reasoning_tokens` (of the 10 completion tokens),
    and `finish_reason` (`"length"`: cut at the token limit)."""

    content: str
    reasoning_content: str | None = None
    reasoning_tokens: int | None = None
    finish_reason: str = "stop"


class ScriptedServer:
    def __init__(
        self,
        replies: list[str | Reply],
        sub_answer: Callable[[str], str | Reply] = lambda prompt: f"echo: {prompt}",
        status: int = 200,
        sub_delay: float = 0.0,
        models: dict | None = None,
    ) -> None:
        self.replies = list(replies)
        self.models = models
        self.gets: list[str] = []
        self.sub_delay = sub_delay
        self.in_flight = 0
        self.max_in_flight = 0
        self.sub_answer = sub_answer
        self.status = status
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def turns(self) -> list[dict]:
        """The requests of the loop's own turns, in order."""
        return [r for r in self.requests if r["messages"][0]["role"] == "system"]

    def sub_calls(self) -> list[dict]:
        """The requests made by `llm_query` in the model's code."""
        return [r for r in self.requests if r["messages"][0]["role"] != "system"]

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, request: dict) -> tuple[int, dict]:
        with self._lock:
            self.requests.append(request)
            if self.status != 200:
                return self.status, {"error": {"message": "scripted failure"}}
            messages = request["messages"]
            if messages[0]["role"] == "system":
                reply = self.replies.pop(0) if self.replies else "I have nothing to add."
            else:
                reply = self.sub_answer(messages[-1]["content"])
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if messages[0]["role"] != "system":
            # Held while others arrive, so that `max_in_flight` counts what was sent at once.
            time.sleep(self.sub_delay)
            with self._lock:
                self.in_flight -= 1
        if isinstance(reply, str):
            reply = Reply(reply)
        message = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        usage: dict = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        if reply.reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
        return 200, {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            # Required by OpenAI's schema, which strict clients (verifiers') check.
            "created": int(time.time()),
            "model": request.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": usage,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length))
                status, body = server._answer(request)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                server.gets.append(self.path)
                found = self.path == "/v1/models" and server.models is not None
                data = json.dumps(server.models if found else {"error": "not found"}).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
