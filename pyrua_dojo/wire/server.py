"""`PolicyServer`: serve any XPolicyLab-style Model over XPolicyLab's websocket protocol.

The model is any object with some of XPolicyLab's Model methods: `update_obs(obs)` +
`get_action()` (or `infer(obs)`), `reset()`, and optionally `update_obs_batch`,
`get_action_batch`, `prepare_case(meta)`, `on_trial_end(result)`. Plain methods run in a worker
thread (`asyncio.to_thread`) so pings are answered while the model thinks; `async def` methods
are awaited on the server's loop.

Semantics follow XPolicyLab's server (commit 7198143, plus the CALL message of later commits):

- every frame is handled in its own task; replies on one connection are serialised;
- one lock across all connections serialises every model call; HELLO and HEARTBEAT bypass it;
- INFER -> `update_obs(obs)` then `get_action()` in one worker thread (or `infer(obs)`); reply
  `{"actions": result, "latency_ms": ...}`, or the model's own mapping if it has "actions";
- CALL (newer clients: per-step `update_obs`, the batch methods, custom methods) ->
  `getattr(model, func_name)(obs)` or `()`; reply `{"ok": True, "result": ..., "latency_ms": ...}`;
- RESET -> `reset()`; PREPARE_CASE -> `prepare_case(meta)`; TRIAL_END -> `on_trial_end(payload)`;
  CLOSE closes that connection; a reply copies the request's ids and step;
- failures answer an ERROR frame with the request's id (`infer_failed`, `call_failed`,
  `reset_failed`, `internal`, `invalid_frame`, `unknown_message_type`); an undecodable frame is
  logged and dropped (the sender times out).

Improvements over upstream 7198143: model tracebacks are logged here (logger `pyrua_dojo.wire.server`);
a return value that cannot be encoded gets an `internal` ERROR instead of no reply; a request
re-sent with the *same* `message_id` (newer clients) is answered from a replay cache (or joins
the still-running call) instead of running the model twice. A re-send with a *new* id, as
XPolicyLab 7198143 and our `PolicyClient` do after a reconnect, does reach the model twice.

Example:

    with PolicyServer(model, host="127.0.0.1", port=0) as server:   # background thread
        client = ModelClient(server.url, evaluation_id="run", trial_id="t")
        ...
    PolicyServer(model, port=19000).run()                            # foreground, until SIGINT/SIGTERM
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any
from uuid import uuid4

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from pyrua_dojo.wire.codec import ErrorCode, Frame, MessageType, WireError, decode_frame, encode_frame

__all__ = ["PolicyServer"]

logger = logging.getLogger(__name__)

_MODEL_TYPES = frozenset(
    {MessageType.RESET, MessageType.INFER, MessageType.CALL, MessageType.PREPARE_CASE, MessageType.TRIAL_END}
)
_FAILURE_CODE = {
    MessageType.RESET: ErrorCode.RESET_FAILED,
    MessageType.INFER: ErrorCode.INFER_FAILED,
    MessageType.CALL: ErrorCode.CALL_FAILED,
}
_OBS_METHODS = frozenset({"update_obs", "update_obs_batch", "infer"})


class _ModelFailed(Exception):
    """The model raised; carries the request-type specific error code."""

    def __init__(self, code: ErrorCode, exc: BaseException):
        super().__init__(str(exc))
        self.code = code
        self.exc = exc


def _ok_payload(result: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"ok": True}
    if result is not None:
        payload["result"] = result
    return payload


def _message_of(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class PolicyServer:
    """XPolicyLab-compatible websocket policy server around one model object."""

    def __init__(
        self,
        model: Any,
        host: str = "0.0.0.0",
        port: int = 19000,
        ping_interval_s: float | None = 20.0,
        ping_timeout_s: float | None = 20.0,
        *,
        name: str = "pyrua_dojo_policy_server",
        replay_cache_size: int = 256,
        replay_cache_bytes: int = 64 * 2**20,
        drain_timeout_s: float = 30.0,
    ):
        for label, value in (("ping_interval_s", ping_interval_s), ("ping_timeout_s", ping_timeout_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{label} must be positive or None (disabled), got {value!r}")
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in 0..65535 (0 = any free port), got {port!r}")
        self.model = model
        self.host = host
        self.ping_interval_s = ping_interval_s
        self.ping_timeout_s = ping_timeout_s
        self.name = name
        self.instance_id = uuid4().hex
        self._requested_port = port
        self._replay_cache_size = replay_cache_size
        self._replay_cache_bytes = replay_cache_bytes
        self._replay_bytes = 0
        self._drain_timeout_s = drain_timeout_s
        # Per-run state, created on the serving loop by start().
        self._server: Server | None = None
        self._model_lock: asyncio.Lock | None = None
        self._stopped: asyncio.Event | None = None
        self._replies: OrderedDict[str, tuple[MessageType, bytes]] = OrderedDict()
        self._running: dict[str, tuple[MessageType, asyncio.Task[bytes]]] = {}
        self._responders: set[asyncio.Task[None]] = set()
        # Background-thread mode.
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -----------------------------------------------------------------------------------------
    # lifecycle

    @property
    def port(self) -> int:
        """The bound port (the real one when constructed with port=0), else the requested one."""
        if self._server is not None:
            for sock in self._server.sockets:
                return int(sock.getsockname()[1])
        return self._requested_port

    @property
    def url(self) -> str:
        """A URL a local client can connect to (wildcard hosts map to loopback)."""
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(self.host, self.host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"ws://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and start accepting connections on the running loop."""
        if self._server is not None:
            return
        self._model_lock = asyncio.Lock()
        self._stopped = asyncio.Event()
        self._server = await serve(
            self._handle_connection,
            self.host,
            self._requested_port,
            max_size=None,
            compression=None,  # multi-MB raw images: deflate costs CPU and delays pongs
            ping_interval=self.ping_interval_s,
            ping_timeout=self.ping_timeout_s,
        )
        logger.info("policy server %s listening on %s", self.name, self.url)

    async def stop(self) -> None:
        """Close all connections, then wait (bounded) for model calls still running."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close(close_connections=True)
        closed = asyncio.ensure_future(server.wait_closed())
        while not closed.done():  # handlers end once their responders do
            for task in list(self._responders):
                task.cancel()  # responders only wait for shielded model calls; those keep running
            await asyncio.wait([closed], timeout=0.05)
        running = [task for _, task in self._running.values()]
        if running:
            _, still = await asyncio.wait(running, timeout=self._drain_timeout_s)
            if still:
                logger.warning(
                    "%d model call(s) still running after %gs; abandoning", len(still), self._drain_timeout_s
                )
        if self._stopped is not None:
            self._stopped.set()
        logger.info("policy server %s stopped", self.name)

    async def serve_forever(self) -> None:
        """Start (if needed) and serve until `stop()`."""
        await self.start()
        assert self._stopped is not None
        await self._stopped.wait()

    def run(self) -> None:
        """Serve in the foreground until SIGINT or SIGTERM, then shut down cleanly."""

        async def main() -> None:
            await self.start()
            loop = asyncio.get_running_loop()
            if threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, lambda: asyncio.ensure_future(self.stop()))
            try:
                await self.serve_forever()
            finally:
                await self.stop()

        asyncio.run(main())

    def start_background(self, timeout_s: float = 30.0) -> PolicyServer:
        """Serve from a daemon thread with its own loop; returns once listening."""
        if self._thread is not None:
            raise RuntimeError("server already running in a background thread")
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # noqa: BLE001 - reported to start_background's caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_until_complete(self._stopped.wait())  # type: ignore[union-attr]
            finally:
                _cancel_leftovers(loop)
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=main, name=f"{self.name}-loop", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            raise TimeoutError(f"policy server did not start within {timeout_s:g}s")
        if failure:
            self._thread.join()
            self._thread = self._loop = None
            raise failure[0]
        return self

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Stop a server started with `start_background` and join its thread (idempotent)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # loop already gone
                future = asyncio.run_coroutine_threadsafe(self.stop(), loop)
                future.result(timeout_s)
        thread.join(timeout_s)
        self._thread = self._loop = None

    def __enter__(self) -> PolicyServer:
        return self.start_background()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # -----------------------------------------------------------------------------------------
    # connections

    async def _handle_connection(self, ws: ServerConnection) -> None:
        peer = ws.remote_address
        logger.info("client connected: %s", peer)
        send_lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()
        try:
            async for raw in ws:
                if isinstance(raw, str):
                    logger.debug("ignoring text frame from %s", peer)
                    continue
                try:
                    frame = decode_frame(raw)
                except WireError as exc:
                    logger.error("dropping invalid frame from %s (%d bytes): %s", peer, len(raw), exc)
                    continue
                task = asyncio.create_task(self._respond(ws, send_lock, frame))
                tasks.add(task)
                self._responders.add(task)
                task.add_done_callback(tasks.discard)
                task.add_done_callback(self._responders.discard)
        except ConnectionClosed:
            pass
        finally:
            if tasks:  # a reply to a dropped connection is undeliverable, but the call finishes
                await asyncio.wait(tasks)
            logger.info("client disconnected: %s (%s)", peer, ws.close_reason or ws.close_code)

    async def _respond(self, ws: ServerConnection, send_lock: asyncio.Lock, frame: Frame) -> None:
        try:
            if frame.message_type is MessageType.CLOSE:
                logger.info("client %s asked to close: %s", ws.remote_address, frame.payload.get("reason", ""))
                await ws.close()
                return
            if frame.message_type in _MODEL_TYPES:
                data = await self._execute_once(frame)
            else:
                data = self._encode_reply(frame, self._answer_without_model(frame))
            async with send_lock:
                await ws.send(data)
        except ConnectionClosed:
            logger.warning(
                "reply to %s %s undeliverable: connection closed", frame.message_type.value, frame.message_id
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("failed to answer %s %s", frame.message_type.value, frame.message_id)

    def _answer_without_model(self, frame: Frame) -> Frame:
        if frame.message_type is MessageType.HELLO:
            return frame.reply(
                MessageType.HELLO_ACK, {"ok": True, "server": self.name, "server_instance_id": self.instance_id}
            )
        if frame.message_type is MessageType.HEARTBEAT:
            return frame.reply(MessageType.HEARTBEAT_ACK, {"ok": True})
        return frame.error(
            ErrorCode.UNKNOWN_MESSAGE_TYPE, f"unsupported request type: {frame.message_type.value}"
        )

    def _encode_reply(self, request: Frame, reply: Frame) -> bytes:
        try:
            return encode_frame(reply)
        except WireError as exc:
            logger.error(
                "reply to %s %s cannot be encoded: %s", request.message_type.value, request.message_id, exc.message
            )
            return encode_frame(request.error(ErrorCode.INTERNAL, f"reply is not encodable: {exc.message}"))

    # -----------------------------------------------------------------------------------------
    # model calls: exactly once per message_id

    async def _execute_once(self, frame: Frame) -> bytes:
        key = frame.message_id
        done, running = self._replies.get(key), self._running.get(key)
        seen = done or running
        if seen is not None and seen[0] is not frame.message_type:
            logger.error("message_id %s reused for %s after %s", key, frame.message_type.value, seen[0].value)
            return encode_frame(
                frame.error(ErrorCode.INVALID_FRAME, f"message_id already used for a {seen[0].value} request")
            )
        if done is not None:
            logger.info("duplicate %s %s: replaying the cached reply", frame.message_type.value, key)
            self._replies.move_to_end(key)
            return done[1]
        if running is not None:
            logger.info("duplicate %s %s: joining the running call", frame.message_type.value, key)
            return await asyncio.shield(running[1])
        task = asyncio.create_task(self._execute(frame))
        self._running[key] = (frame.message_type, task)
        task.add_done_callback(lambda _t: self._running.pop(key, None))
        return await asyncio.shield(task)

    async def _execute(self, frame: Frame) -> bytes:
        try:
            reply = await self._dispatch(frame)
        except WireError as exc:
            reply = frame.error(exc.code, exc.message, exc.details)
        except _ModelFailed as failure:
            logger.error(
                "model failed on %s %s (trial %s, step %s)",
                frame.message_type.value,
                frame.message_id,
                frame.trial_id,
                frame.step,
                exc_info=failure.exc,
            )
            reply = frame.error(failure.code, _message_of(failure.exc))
        except Exception as exc:
            logger.exception("policy server failed on %s %s", frame.message_type.value, frame.message_id)
            reply = frame.error(ErrorCode.INTERNAL, _message_of(exc))
        data = self._encode_reply(frame, reply)
        self._remember(frame, data)
        return data

    def _remember(self, frame: Frame, data: bytes) -> None:
        """Keep the reply for a same-id re-send, within a count and a byte budget."""
        if len(data) > self._replay_cache_bytes:
            return
        self._replies[frame.message_id] = (frame.message_type, data)
        self._replay_bytes += len(data)
        while len(self._replies) > self._replay_cache_size or self._replay_bytes > self._replay_cache_bytes:
            _, (_, old) = self._replies.popitem(last=False)
            self._replay_bytes -= len(old)

    async def _dispatch(self, frame: Frame) -> Frame:
        kind = frame.message_type
        if kind is MessageType.INFER:
            return await self._infer(frame)
        if kind is MessageType.CALL:
            return await self._call(frame)
        if kind is MessageType.RESET:
            reset = getattr(self.model, "reset", None)
            if not callable(reset):
                raise WireError(ErrorCode.RESET_FAILED, "model.reset is not callable")
            return frame.reply(MessageType.RESET_RESULT, _ok_payload(await self._model_call(kind, reset)))
        if kind is MessageType.PREPARE_CASE:
            meta = dict(frame.payload)
            if frame.action_case_id is not None:
                meta.setdefault("action_case_id", frame.action_case_id)
            hook = getattr(self.model, "prepare_case", None)
            result = await self._model_call(kind, hook, meta) if callable(hook) else None
            return frame.reply(MessageType.PREPARE_CASE_ACK, _ok_payload(result))
        if kind is MessageType.TRIAL_END:
            hook = getattr(self.model, "on_trial_end", None)
            result = await self._model_call(kind, hook, dict(frame.payload)) if callable(hook) else None
            return frame.reply(MessageType.TRIAL_END_ACK, _ok_payload(result))
        raise WireError(ErrorCode.UNKNOWN_MESSAGE_TYPE, f"unsupported request type: {kind.value}")

    async def _infer(self, frame: Frame) -> Frame:
        observation = frame.payload.get("observation")
        if observation is None:
            raise WireError(ErrorCode.INVALID_FRAME, "infer payload missing observation")
        update_obs = getattr(self.model, "update_obs", None)
        get_action = getattr(self.model, "get_action", None)
        infer = getattr(self.model, "infer", None)
        start = time.perf_counter()
        if callable(update_obs) and callable(get_action):
            if inspect.iscoroutinefunction(update_obs) or inspect.iscoroutinefunction(get_action):

                async def pair() -> Any:
                    await _invoke(update_obs, observation)
                    return await _invoke(get_action)

                result = await self._model_call(MessageType.INFER, pair)
            else:

                def pair_in_thread() -> Any:  # one worker thread for both halves, as upstream
                    update_obs(observation)
                    return get_action()

                result = await self._model_call(MessageType.INFER, pair_in_thread)
        elif callable(infer):
            result = await self._model_call(MessageType.INFER, infer, observation)
        else:
            raise WireError(
                ErrorCode.INFER_FAILED, "model must implement update_obs()/get_action() or infer(observation)"
            )
        latency_ms = (time.perf_counter() - start) * 1000.0
        if isinstance(result, Mapping) and "actions" in result:
            payload = dict(result)
            payload.setdefault("latency_ms", latency_ms)
        else:
            payload = {"actions": result, "latency_ms": latency_ms}
        return frame.reply(MessageType.INFER_RESULT, payload)

    async def _call(self, frame: Frame) -> Frame:
        func_name = frame.payload.get("func_name")
        if not isinstance(func_name, str) or not func_name or func_name.startswith("_"):
            raise WireError(ErrorCode.INVALID_FRAME, f"call payload has invalid func_name: {func_name!r}")
        method = getattr(self.model, func_name, None)
        if not callable(method):
            raise WireError(ErrorCode.INVALID_FRAME, f"no model method named {func_name!r}")
        obs = frame.payload.get("obs")
        if obs is None and func_name in _OBS_METHODS:
            raise WireError(ErrorCode.INVALID_FRAME, f"{func_name} payload missing obs")
        start = time.perf_counter()
        args = () if obs is None else (obs,)
        result = await self._model_call(MessageType.CALL, method, *args)
        payload = _ok_payload(result)
        payload["latency_ms"] = (time.perf_counter() - start) * 1000.0
        return frame.reply(MessageType.CALL_RESULT, payload)

    async def _model_call(self, kind: MessageType, fn: Callable[..., Any], *args: Any) -> Any:
        assert self._model_lock is not None
        async with self._model_lock:
            try:
                return await _invoke(fn, *args)
            except Exception as exc:
                raise _ModelFailed(_FAILURE_CODE.get(kind, ErrorCode.INTERNAL), exc) from exc


async def _invoke(fn: Callable[..., Any], *args: Any) -> Any:
    """Await coroutine functions on the loop; run plain ones in a worker thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
