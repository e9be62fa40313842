"""The relay: an OpenAI-compatible chat completions endpoint whose replies come from outside (an agent, a person).

Each relay owns a state directory, which is also its address for `pyrua-dojo relay show` / `relay reply`:

    relay.json                  the relay's state: url, answer timeout, "running" or "ended" and the outcome
    turns/NNNN.request.json     each request body, byte for byte as received
    turns/NNNN.answer.json      the answer to turn NNNN, created once (os.link), by `reply` or by the relay itself
                                when the turn closed unanswered (timeout, client gone, relay ended)
    turns/NNNN.response.json    the chat completion the relay sent back
    turns/NNNN.shown.txt        what `show` printed for the turn
    images/turnNNNN_KK.png      the request's images, as PNG
    transcript.jsonl            every event (request, shown, answer, response, closed, ended), appended as it happens
    transcript.md               what was shown and what was answered, turn by turn (written at each answer and at
                                the end)

A request waits until its answer file appears. A turn left unanswered for `answer_timeout_s` is answered with HTTP
408 ("no answer within N s"); the relay planner makes one attempt per reply, so the episode ends with status
`planner_error`. Usage figures are estimates (no tokenizer is installed: text ~ 4 characters per token, images
OpenAI's tile formula), stated in every response under `pyrua_relay.token_count`.
"""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from pyrua_dojo.runtime.atomic_files import create_once, write_atomic
from pyrua_dojo.runtime.images import image_size

__all__ = [
    "ANSWER_TIMEOUT_S",
    "TOKEN_COUNT",
    "Relay",
    "RelayDir",
    "create_once",
    "decode_data_url",
    "estimate_tokens",
    "write_atomic",
]

ANSWER_TIMEOUT_S = 1800.0
TOKEN_COUNT = "estimate: text = ceil(characters / 4); image = 85 + 170 per 512 px tile (OpenAI high detail); no tokenizer installed"
_POLL_S = 0.1


def _now() -> float:
    return time.time()


def decode_data_url(url: str) -> tuple[str, bytes] | None:
    """(mime, bytes) of a base64 data URL; None for anything else."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, payload = url[5:].split(";base64,", 1)
    try:
        return head, base64.b64decode(payload, validate=True)
    except ValueError:
        return None


def estimate_tokens(messages: Any, tools: Any = None) -> int:
    """The stated estimate of a request's prompt tokens (see TOKEN_COUNT)."""
    chars = 0
    tokens = 0

    def walk(x: Any) -> None:
        nonlocal chars, tokens
        if isinstance(x, dict):
            if x.get("type") == "image_url":
                url = (x.get("image_url") or {}).get("url", "")
                decoded = decode_data_url(url) if isinstance(url, str) else None
                size = image_size(decoded[1]) if decoded else None
                if size is None:
                    tokens += 85
                else:
                    w, h = size
                    scale = min(1.0, 2048 / max(w, h))
                    w, h = w * scale, h * scale
                    scale = min(1.0, 768 / min(w, h))
                    w, h = w * scale, h * scale
                    tokens += 85 + 170 * (-(-int(w) // 512)) * (-(-int(h) // 512))
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str):
            chars += len(x)

    walk(messages)
    if tools:
        chars += len(json.dumps(tools))
    return tokens + -(-chars // 4)


@dataclass(frozen=True)
class RelayDir:
    """A relay's state directory (see the module docstring): the paths and the small reads both sides share."""

    path: Path

    @property
    def state_file(self) -> Path:
        return self.path / "relay.json"

    @property
    def turns(self) -> Path:
        return self.path / "turns"

    @property
    def images(self) -> Path:
        return self.path / "images"

    def request_file(self, turn: int) -> Path:
        return self.turns / f"{turn:04d}.request.json"

    def answer_file(self, turn: int) -> Path:
        return self.turns / f"{turn:04d}.answer.json"

    def response_file(self, turn: int) -> Path:
        return self.turns / f"{turn:04d}.response.json"

    def shown_file(self, turn: int) -> Path:
        return self.turns / f"{turn:04d}.shown.txt"

    def state(self) -> dict[str, Any]:
        """relay.json; ValueError when this is not a relay directory."""
        try:
            return json.loads(self.state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"{self.path} is not a relay state directory (no relay.json)") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{self.state_file}: unreadable ({exc})") from None

    def request_turns(self) -> list[int]:
        if not self.turns.is_dir():
            return []
        return sorted(int(p.name[:4]) for p in self.turns.glob("[0-9][0-9][0-9][0-9].request.json"))

    def request(self, turn: int) -> dict[str, Any]:
        return json.loads(self.request_file(turn).read_bytes())

    def answer(self, turn: int) -> dict[str, Any] | None:
        try:
            return json.loads(self.answer_file(turn).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def log(self, event: str, **fields: Any) -> None:
        """Append one event to transcript.jsonl (one write per line, O_APPEND: safe across processes)."""
        line = json.dumps({"event": event, "at": round(_now(), 3), **fields}, ensure_ascii=False) + "\n"
        fd = os.open(self.path / "transcript.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def write_transcript_md(self) -> Path:
        """transcript.md: each turn's shown text (or, if never shown, a note) and its answer."""
        out = [f"# Relay transcript ({self.path})", "", f"Token figures in responses: {TOKEN_COUNT}.", ""]
        for turn in self.request_turns():
            out.append(f"## Turn {turn}")
            out.append("")
            shown = self.shown_file(turn)
            if shown.is_file():
                out += ["### Shown", "", "```text", shown.read_text(encoding="utf-8").rstrip(), "```", ""]
            else:
                out += ["(never shown with `relay show`)", ""]
            answer = self.answer(turn)
            out.append("### Answer")
            out.append("")
            if answer is None:
                out.append("(none)")
            elif answer.get("closed"):
                out.append(f"closed without an answer: {answer['closed']} ({answer.get('detail', '')})")
            else:
                for call in answer.get("tool_calls", []):
                    args = json.loads(call["arguments"])
                    if call["name"] == "python":
                        out += ["python:", "", "```python", args["code"].rstrip(), "```"]
                    else:
                        out.append(f"{call['name']}: {json.dumps(args, ensure_ascii=False)}")
                if answer.get("content"):
                    out.append(f"text: {answer['content']}")
            out.append("")
        try:
            state = self.state()
        except ValueError:
            state = {}
        if state.get("state") == "ended":
            out += ["## Episode ended", "", "```json", json.dumps(state.get("outcome"), indent=2), "```", ""]
        path = self.path / "transcript.md"
        write_atomic(path, "\n".join(out).encode("utf-8"))
        return path


class Relay:
    """The relay's HTTP server (a thread) over one state directory. One conversation at a time is what it is made
    for (one episode), but any number of requests may wait: turns are numbered in arrival order."""

    def __init__(
        self,
        state_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        answer_timeout_s: float = ANSWER_TIMEOUT_S,
        model: str = "relay",
        label: str | None = None,
    ) -> None:
        if not answer_timeout_s > 0:
            raise ValueError(f"answer_timeout_s must be positive, got {answer_timeout_s!r}")
        self.dir = RelayDir(Path(state_dir).resolve())
        if self.dir.state_file.exists():
            raise ValueError(f"{self.dir.path} already holds a relay (relay.json); give a fresh directory")
        self.dir.turns.mkdir(parents=True, exist_ok=True)
        self.dir.images.mkdir(parents=True, exist_ok=True)
        self.answer_timeout_s = float(answer_timeout_s)
        self.model = model
        self.label = label
        self._lock = threading.Lock()
        self._turns = 0
        self._ended = threading.Event()
        self._state: dict[str, Any] = {}
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                relay._get(self)

            def do_POST(self) -> None:  # noqa: N802
                relay._post(self)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="pyrua-relay", daemon=True)

    # -- life cycle -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL for OpenAI clients (…/v1)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> Relay:
        self._state = {
            "schema": "pyrua-dojo-relay-v1",
            "url": self.url,
            "pid": os.getpid(),
            "label": self.label,
            "model": self.model,
            "answer_timeout_s": self.answer_timeout_s,
            "token_count": TOKEN_COUNT,
            "started_at": _now(),
            "state": "running",
            "outcome": None,
            "run_dir": None,
        }
        self._save_state()
        self.dir.log("started", url=self.url, label=self.label, answer_timeout_s=self.answer_timeout_s)
        self._thread.start()
        return self

    def update(self, **fields: Any) -> None:
        """Add facts to relay.json (e.g. the episode's run directory once it exists)."""
        with self._lock:
            self._state.update(fields)
            self._save_state()

    def end(self, outcome: Mapping[str, Any]) -> None:
        """The episode is over: record how, close waiting turns, stop serving. Idempotent (the first outcome stays)."""
        with self._lock:
            if self._ended.is_set():
                return
            self._ended.set()
            self._state.update(state="ended", ended_at=_now(), outcome=dict(outcome))
            self._save_state()
        self.dir.log("ended", outcome=dict(outcome))
        self._httpd.shutdown()
        self._httpd.server_close()
        self.dir.write_transcript_md()

    def _save_state(self) -> None:
        write_atomic(self.dir.state_file, (json.dumps(self._state, indent=2) + "\n").encode("utf-8"))

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.end({"status": "relay_stopped", "detail": "the relay was stopped"})

    # -- HTTP -------------------------------------------------------------------------------------------------

    def _get(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/models"):
            self._send(h, 200, {"object": "list", "data": [
                {"id": self.model, "object": "model", "created": int(self._state.get("started_at", 0)),
                 "owned_by": "pyrua-dojo-relay"}]})
            return
        self._send(h, 404, {"error": {"message": f"no such endpoint: GET {h.path}", "type": "invalid_request_error"}})

    def _post(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length)
        if not h.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions"):
            self._send(h, 404, {"error": {"message": f"no such endpoint: POST {h.path}", "type": "invalid_request_error"}})
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._send(h, 400, {"error": {"message": f"the request body is not JSON ({exc})", "type": "invalid_request_error"}})
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            self._send(h, 400, {"error": {"message": "the request needs a non-empty `messages` list", "type": "invalid_request_error"}})
            return
        if body.get("stream"):
            self._send(h, 400, {"error": {"message": "the relay does not stream; send stream: false", "type": "invalid_request_error"}})
            return
        if body.get("n") not in (None, 1):
            self._send(h, 400, {"error": {"message": "the relay answers one choice (n = 1)", "type": "invalid_request_error"}})
            return
        if self._ended.is_set():
            self._send(h, 503, {"error": {"message": "the relay has ended", "type": "server_error"}})
            return
        with self._lock:
            self._turns += 1
            turn = self._turns
        write_atomic(self.dir.request_file(turn), raw)
        self.dir.log("request", turn=turn, bytes=len(raw), messages=len(body["messages"]),
                     tools=[t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)])
        answer = self._wait(h, turn)
        if answer is None:
            return
        if answer.get("closed"):
            if answer["closed"] == "timeout":
                self._send(h, 408, {"error": {"message": answer["detail"], "type": "timeout", "code": "relay_answer_timeout"}})
            else:
                self._send(h, 503, {"error": {"message": answer["detail"], "type": "server_error"}})
            return
        response = self._completion(turn, body, answer)
        data = json.dumps(response).encode("utf-8")
        write_atomic(self.dir.response_file(turn), data)
        self.dir.log("response", turn=turn, usage=response["usage"])
        self._send_raw(h, 200, data)
        self.dir.write_transcript_md()

    def _wait(self, h: BaseHTTPRequestHandler, turn: int) -> dict[str, Any] | None:
        """Block until turn `turn` is answered or closed. None when the client went away (nothing to send)."""
        deadline = time.monotonic() + self.answer_timeout_s
        sock = h.connection
        while True:
            answer = self.dir.answer(turn)
            if answer is not None:
                return answer
            closed: tuple[str, str] | None = None
            if self._ended.is_set():
                closed = ("ended", "the relay ended before this turn was answered")
            elif time.monotonic() >= deadline:
                closed = ("timeout", f"no answer within {self.answer_timeout_s:g} s (relay answer timeout)")
            elif _client_gone(sock):
                closed = ("abandoned", "the client closed the connection before an answer was given")
            if closed is not None:
                record = {"turn": turn, "closed": closed[0], "detail": closed[1], "at": _now()}
                if create_once(self.dir.answer_file(turn), json.dumps(record).encode("utf-8")):
                    self.dir.log("closed", turn=turn, why=closed[0], detail=closed[1])
                    if closed[0] == "abandoned":
                        return None
                continue  # either ours now, or an answer won the race: read it back
            time.sleep(_POLL_S)

    def _completion(self, turn: int, body: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
        calls = [
            {"id": f"call_{turn}_{k}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for k, c in enumerate(answer.get("tool_calls", []), start=1)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": answer.get("content")}
        if calls:
            message["tool_calls"] = calls
        prompt_tokens = estimate_tokens(body.get("messages"), body.get("tools"))
        completion_tokens = -(-len(json.dumps(calls) + (answer.get("content") or "")) // 4)
        return {
            "id": f"chatcmpl-relay-{turn}",
            "object": "chat.completion",
            "created": int(_now()),
            "model": str(body.get("model") or self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "pyrua_relay": {"turn": turn, "token_count": TOKEN_COUNT, "answered_by": answer.get("by")},
        }

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: Mapping[str, Any]) -> None:
        Relay._send_raw(h, status, json.dumps(payload).encode("utf-8"))

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except OSError:
            pass


def _client_gone(sock: socket.socket) -> bool:
    """True once the peer has closed the connection (readable with nothing to read)."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
        if not ready:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
