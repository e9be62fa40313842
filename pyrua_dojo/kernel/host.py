"""The host side of a cell kernel: `KernelExecutor.run(code) -> CellResult`, like the in-process executor.

One kernel process per episode (`pyrua_dojo.kernel.main`), spawned at construction (so it starts while the
task card is built) and again whenever it had to be killed. The host:

- answers the kernel's requests: a call of a public method or property of a namespace object (`robo`) runs
  here, on the thread that called `run`, against the real object; arguments arrive as plain data only;
- enforces the deadline from outside: at the deadline it cancels the episode's token (a primitive running here
  stops), tells the kernel and sends SIGINT; after `interrupt_grace_s` it kills the kernel, starts a fresh one
  and tells the LLM plainly that the session was restarted and its variables are gone;
- forwards the end of the episode (an EpisodeFinished on the token) the same way: moves are answered with
  EpisodeFinished by the real `robo`, and a kernel still running at the end of the grace is killed;
- survives any kernel fault (segfault, out of memory, os._exit, a hang, garbage on the channel): the cell is
  reported, the fault recorded through `on_event`, and the episode goes on with a fresh kernel.

The kernel's text output is bounded again here; the cell status and `episode_finished` come from the host's
own view (its token), not from what the kernel claims.
"""

from __future__ import annotations

import functools
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

import calibration
import primitives
import pyrua_dojo
from primitives.errors import CancelToken, CellInterrupted, EpisodeFinished
from primitives.results import CapturedImage
from pyrua_dojo.runtime.cells import CellConfig, CellResult, ImageAttachment, OneCellAtATime, clip
from pyrua_dojo.kernel.channel import Channel, ChannelClosed, ProtocolError
from pyrua_dojo.kernel.confine import LAYERS, summary
from pyrua_dojo.kernel.proxy import describe

__all__ = ["KernelConfig", "KernelExecutor", "KernelStartError"]

EventSink = Callable[..., None]
_STATUSES = frozenset({"ok", "error", "syntax_error", "refused", "timeout", "episode_finished"})
_PROJECT_ROOT = Path(pyrua_dojo.__file__).resolve().parent.parent
_PACKAGES = tuple(str(Path(m.__file__).resolve().parent) for m in (pyrua_dojo, primitives, calibration))
_RESTARTED = ("the Python session was restarted: all variables, functions and imports from earlier cells are "
              "gone (files in the workspace remain); run the setup you need again")


class KernelStartError(RuntimeError):
    """The kernel process did not come up (it died or did not answer in time)."""


@dataclass(frozen=True)
class KernelConfig:
    """How kernels are started and confined. Layers can be turned off (tests, a host that forbids them)."""

    seccomp: bool = True
    landlock: bool = True
    address_space_bytes: int = 3 << 30  # RLIMIT_AS: a larger allocation fails with MemoryError
    open_files: int = 256
    file_size_bytes: int = 512 << 20
    start_timeout_s: float = 60.0  # generous: 20 kernels may start at once on a small machine
    kill_wait_s: float = 5.0  # after SIGKILL, how long to wait for the process to go

    def __post_init__(self) -> None:
        for name in ("address_space_bytes", "open_files", "file_size_bytes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive int")
        if not (self.start_timeout_s > 0 and math.isfinite(self.start_timeout_s)):
            raise ValueError("start_timeout_s must be a positive number")


@functools.lru_cache(maxsize=1)
def _libraries() -> dict[str, str | None]:
    """The C library and libseccomp as ctypes finds them (looked up once here, not in every kernel)."""
    import ctypes.util

    return {name: ctypes.util.find_library(name) for name in ("c", "seccomp")}


_host_protected = threading.Lock()
_protected = [False]


def _protect_host() -> None:
    """Make this process not dumpable: a kernel of the same user cannot read its memory or environment
    through /proc (/proc/PID/environ, /proc/PID/mem) even with the seccomp and Landlock layers off."""
    with _host_protected:
        if _protected[0] or not sys.platform.startswith("linux"):
            return
        import ctypes

        try:
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        except (OSError, AttributeError):
            return
        _protected[0] = True


class _Kernel:
    """One kernel process and its channel."""

    def __init__(self, workspace: Path, config: KernelConfig, init: dict[str, Any]) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spec = {
            "fd": child.fileno(), "address_space": config.address_space_bytes, "open_files": config.open_files,
            "file_size": config.file_size_bytes, "seccomp": config.seccomp, "landlock": config.landlock,
            "packages": list(_PACKAGES), "list_only": [str(_PROJECT_ROOT)], "libraries": _libraries(),
        }
        boot = ("import sys; sys.path.insert(0, %r); from pyrua_dojo.kernel.main import main; main(sys.argv[1:])"
                % str(_PROJECT_ROOT))
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(workspace),
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "OPENCV_LOG_LEVEL": "ERROR", "PYTHONDONTWRITEBYTECODE": "1"}
        self.started = time.monotonic()
        log = open(workspace / "kernel.log", "ab")  # the kernel's own stderr (a crash report), in its workspace
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", boot, json.dumps(spec)],
                cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                pass_fds=(child.fileno(),), start_new_session=True, close_fds=True,
            )
        finally:
            child.close()
            log.close()
        self.chan = Channel(parent, trusted=False)
        self.chan.send_pickle(init)
        self.ready: dict[str, Any] | None = None
        self.start_s: float | None = None
        self.dead = False
        self._kernel_pid: int | None = None

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        if self.ready is not None:
            return self.ready
        end = time.monotonic() + timeout
        while True:
            try:
                message = self.chan.recv(timeout=0.1)
            except (ChannelClosed, ProtocolError) as exc:
                self.kill()
                raise KernelStartError(f"the kernel died while starting ({self.exit_text()}): {exc}") from None
            if message is not None:
                if not (isinstance(message, dict) and message.get("t") == "ready"):
                    self.kill()
                    raise KernelStartError("the kernel sent something else than 'ready'")
                self.ready = message
                self.start_s = time.monotonic() - self.started
                return message
            if time.monotonic() > end:
                self.kill()
                raise KernelStartError(f"the kernel did not start within {timeout:g} s")

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self, wait_s: float = 5.0) -> None:
        """SIGKILL the kernel and its process group; reap it."""
        self.dead = True
        for target in (lambda: os.killpg(self.proc.pid, signal.SIGKILL), lambda: self.proc.kill()):
            try:
                target()
            except (ProcessLookupError, PermissionError, OSError):
                pass
        try:
            self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            pass
        self.chan.close()

    def kernel_pid(self) -> int | None:
        """The kernel's pid here (the launcher's child, PID 1 of its own namespace); the launcher's without one."""
        if self._kernel_pid is None:
            pid = self.proc.pid
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                self._kernel_pid = int(children[0]) if children else pid
            except (OSError, ValueError):
                self._kernel_pid = pid
        return self._kernel_pid

    def threads(self) -> int | None:
        """How many threads the kernel process runs now (None if it cannot be read)."""
        pid = self.kernel_pid()
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            return None
        return None

    def exit_text(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"


@dataclass
class _Cell:
    index: int
    deadline_at: float
    grace_s: float
    before: BaseException | None
    done: threading.Event
    stopped_by: str | None = None  # "deadline", "finished", "interrupted"
    stop_exc: BaseException | None = None
    kill_at: float | None = None
    killed: bool = False


class KernelExecutor(OneCellAtATime):
    """Runs one episode's cells in a confined kernel process; `run(code) -> CellResult` like `CellExecutor`.

    namespace: host objects (`robo`) the cells reach through proxies: their public methods and properties.
    workspace: the kernel's working directory and the only directory it may write.
    cancel: the episode's token (deadline and episode end, shared with the primitives).
    drain_images: returns (and forgets) the images `robo.show(...)` captured; the kernel asks for them.
    on_event: `on_event(kind, **fields)` for the run directory (kernel start, restart, fault).
    """

    def __init__(
        self,
        namespace: Mapping[str, Any],
        *,
        workspace: Path,
        config: CellConfig = CellConfig(),
        cancel: CancelToken | None = None,
        drain_images: Callable[[], Sequence[CapturedImage]] | None = None,
        kernel: KernelConfig = KernelConfig(),
        on_event: EventSink | None = None,
    ) -> None:
        if not sys.platform.startswith("linux"):
            raise RuntimeError("cell kernels need Linux")
        for name in namespace:
            if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
                raise ValueError(f"namespace name {name!r} is not a plain identifier")
        if not isinstance(config, CellConfig):
            raise TypeError("config must be a CellConfig")
        self.config = config
        self.kernel_config = kernel
        self.workspace = Path(workspace)
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.workspace = self.workspace.resolve()
        self.cancel = cancel if cancel is not None else CancelToken()
        self._objects = dict(namespace)
        self._allowed = {}
        descriptions = {}
        for name, obj in self._objects.items():
            info = describe(obj)
            descriptions[name] = info
            self._allowed[name] = {**{m: "call" for m in info["methods"]}, **{p: "get" for p in info["properties"]}}
        self._drain = drain_images
        # The kernel's own executor gives up on a stuck cell thread a little before the host kills the kernel, so
        # that a cell blocked in native code is reported by the kernel rather than cut off.
        inner = replace(config, interrupt_grace_s=0.8 * config.interrupt_grace_s)
        self._init = {"objects": descriptions, "config": inner, "images": drain_images is not None}
        self._on_event = on_event
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._index = 0
        self._closed = False
        self._cell: _Cell | None = None
        self._spawning: threading.Thread | None = None
        self.restarts = 0
        self.start_times: list[float] = []
        self.layers: dict[str, Any] = {}
        _protect_host()
        self._kernel: _Kernel | None = self._spawn()

    # -- public API

    @property
    def cells_run(self) -> int:
        return self._index

    @property
    def pid(self) -> int | None:
        kernel = self._kernel
        return None if kernel is None else kernel.proc.pid

    def wait_ready(self) -> dict[str, Any]:
        """Block until the kernel is up; returns its layer report (also in `layers`)."""
        kernel = self._current()
        self._ready(kernel)
        return self.layers

    def interrupt(self, exc: BaseException) -> None:
        """Stop the running cell: cancel the token with `exc` (EpisodeFinished or CellInterrupted)."""
        if not isinstance(exc, (EpisodeFinished, CellInterrupted)):
            raise TypeError("interrupt() takes an EpisodeFinished or CellInterrupted")
        self.cancel.cancel(exc)

    def close(self) -> None:
        """Stop any running cell and end the kernel process."""
        if self._closed:
            return
        self._closed = True
        cell = self._cell
        if cell is not None:
            self.cancel.cancel(CellInterrupted("closed"))
        spawning = self._spawning
        if spawning is not None:
            spawning.join()
        with self._lock:
            kernel, self._kernel = self._kernel, None
        if kernel is not None:
            try:
                kernel.chan.send_data({"t": "exit"})
            except (ChannelClosed, ProtocolError, OSError):
                pass
            try:
                kernel.proc.wait(0.5)
            except subprocess.TimeoutExpired:
                pass
            kernel.kill(self.kernel_config.kill_wait_s)

    def __del__(self) -> None:
        kernel = getattr(self, "_kernel", None)
        if kernel is not None and kernel.proc.poll() is None:
            try:
                kernel.proc.kill()
            except OSError:
                pass

    # -- kernel life cycle

    def _event(self, kind: str, **fields: Any) -> None:
        if self._on_event is not None:
            try:
                self._on_event(kind, **fields)
            except Exception:  # noqa: BLE001 - recording must not break the episode
                pass

    def _spawn(self) -> _Kernel:
        return _Kernel(self.workspace, self.kernel_config, self._init)

    def _current(self) -> _Kernel:
        spawning = self._spawning
        if spawning is not None:
            spawning.join()
        with self._lock:
            if self._kernel is None or self._kernel.dead:
                self._kernel = self._spawn()
            return self._kernel

    def _respawn(self, old: _Kernel) -> None:
        try:
            fresh = self._spawn()
        except Exception:  # noqa: BLE001 - _current() tries again on the next cell
            return
        with self._lock:
            if self._kernel is old and not self._closed:
                self._kernel = fresh
                return
        fresh.kill(self.kernel_config.kill_wait_s)

    def _ready(self, kernel: _Kernel) -> None:
        first = kernel.ready is None
        ready = kernel.wait_ready(self.kernel_config.start_timeout_s)
        if first:
            layers = ready.get("layers")
            self.layers = layers if isinstance(layers, dict) else {}
            assert kernel.start_s is not None
            self.start_times.append(kernel.start_s)
            self._event("kernel_start", pid=kernel.proc.pid, start_s=round(kernel.start_s, 3),
                        layers={k: self.layers.get(k) for k in LAYERS}, summary=summary(self.layers))

    def _restart(self, kernel: _Kernel, why: str, index: int) -> None:
        kernel.kill(self.kernel_config.kill_wait_s)
        self.restarts += 1
        self._event("kernel_restart", cell=index, why=why, exit=kernel.exit_text(), restarts=self.restarts)
        if not self._closed:  # the fresh kernel starts in the background; the next cell waits for it if needed
            self._spawning = threading.Thread(target=self._respawn, args=(kernel,), name="kernel-respawn",
                                              daemon=True)
            self._spawning.start()

    # -- one cell

    def _run(self, code: str, deadline_s: float) -> CellResult:
        started = time.perf_counter()
        self._index += 1
        index = self._index
        self.cancel.clear()

        def result(status: str, **fields: Any) -> CellResult:
            base: dict[str, Any] = dict(stdout="", stderr="", stdout_chars=0, stderr_chars=0, value=None,
                                        exception=None, episode_finished=None, images=(), dropped_images=0,
                                        audit_flags=(), notes=())
            base.update(fields)
            return CellResult(index=index, code=code, status=status,  # type: ignore[arg-type]
                              elapsed_s=time.perf_counter() - started, **base)

        before = self.cancel.exception  # an end of the episode from now on stops this cell
        kernel = self._current()
        try:
            self._ready(kernel)
        except KernelStartError as exc:
            self._restart(kernel, f"start failed: {exc}", index)
            return result("error", exception=f"KernelError: {exc}",
                          notes=("the cell was not run; a fresh Python session is being started",))
        start_wait = time.perf_counter() - started
        cell = _Cell(index=index, deadline_at=time.monotonic() + deadline_s, grace_s=self.config.interrupt_grace_s,
                     before=before, done=threading.Event())
        self._cell = cell
        watchdog = threading.Thread(target=self._watch, args=(kernel, cell), name=f"kernel-watch-{index}",
                                    daemon=True)
        payload: dict[str, Any] | None = None
        fault: str | None = None
        try:
            kernel.chan.send_data({"t": "run", "code": code, "deadline_s": deadline_s})
            watchdog.start()
            payload, fault = self._serve(kernel, cell)
        except (ChannelClosed, ProtocolError, OSError) as exc:
            fault = f"the channel to the kernel failed: {exc}"
        finally:
            cell.done.set()
            self._cell = None
        if watchdog.is_alive():
            watchdog.join(1.0)
        notes: list[str] = []
        if start_wait > 0.5:
            notes.append(f"waited {start_wait:.1f} s for the Python session to start")
        token = self.cancel.exception
        finished = token.reason if isinstance(token, EpisodeFinished) else None
        if fault is not None or payload is None:
            return self._fault_result(kernel, cell, fault or "no result", index, deadline_s, finished, result,
                                      notes)
        res = self._build(payload, cell, deadline_s, finished, result, notes)
        abandoned = payload.get("abandoned")
        leftover = self._leftover_threads(kernel)
        if leftover:
            self._restart(kernel, f"the cell left {leftover} thread(s) running", index)
            res = replace(res, restarted=True, notes=(
                *res.notes, f"the cell left {leftover} thread(s) running after it ended; they were stopped",
                _RESTARTED))
        elif isinstance(abandoned, int) and abandoned > 0:  # a thread of the cell is still running in there
            self._restart(kernel, "a cell thread did not stop (blocked in native code)", index)
            kept = tuple(n for n in res.notes if "was abandoned" not in n)
            res = replace(res, restarted=True, notes=(*kept, "the cell did not stop (blocked in native code)",
                                                      _RESTARTED))
        return res

    def _serve(self, kernel: _Kernel, cell: _Cell) -> tuple[dict[str, Any] | None, str | None]:
        """Answer the kernel's requests until its result comes (or it dies, or the watchdog killed it)."""
        while True:
            if cell.killed:
                return None, "killed"
            try:
                message = kernel.chan.recv(timeout=0.1)
            except ChannelClosed:
                kernel.proc.poll()
                return None, "crashed"
            if message is None:
                if kernel.proc.poll() is not None:
                    return None, "crashed"
                continue
            if not isinstance(message, dict):
                raise ProtocolError("a kernel message must be a map")
            kind = message.get("t")
            if kind == "call":
                self._answer(kernel, message)
            elif kind == "result":
                cell_payload = message.get("cell")
                if not isinstance(cell_payload, dict):
                    raise ProtocolError("malformed result")
                return cell_payload, None
            else:
                raise ProtocolError(f"unexpected message {kind!r}")

    def _leftover_threads(self, kernel: _Kernel) -> int:
        """Threads besides the kernel's main one still running shortly after a cell (0 if none or unknown)."""
        end = time.monotonic() + 0.3  # the runner and the cell's thread are finishing as the result arrives
        while True:
            count = kernel.threads()
            if count is None or count <= 1:
                return 0
            if time.monotonic() > end:
                return count - 1
            time.sleep(0.005)

    def _watch(self, kernel: _Kernel, cell: _Cell) -> None:
        """Deadline and episode end, from outside: tell the kernel, SIGINT, and kill after the grace."""
        while not cell.done.is_set():
            now = time.monotonic()
            if cell.stopped_by is None:
                exc = self.cancel.exception
                if exc is not None and exc is not cell.before:
                    if isinstance(exc, EpisodeFinished):
                        self._stop(kernel, cell, "finished", exc, {"reason": exc.reason, "detail": exc.detail})
                    elif not (isinstance(exc, CellInterrupted) and exc.reason == "deadline"):
                        self._stop(kernel, cell, "interrupted", exc,
                                   {"reason": getattr(exc, "reason", "host")})
                if cell.stopped_by is None and now >= cell.deadline_at:
                    exc = CellInterrupted("deadline")
                    self.cancel.cancel(exc)
                    self._stop(kernel, cell, "deadline", exc, {})
                    kernel.signal(signal.SIGINT)
            elif cell.kill_at is not None and now >= cell.kill_at:
                cell.killed = True
                kernel.kill(self.kernel_config.kill_wait_s)
                return
            wait = cell.deadline_at - now if cell.stopped_by is None else (cell.kill_at or now) - now
            cell.done.wait(min(0.02, max(0.001, wait)))

    def _stop(self, kernel: _Kernel, cell: _Cell, kind: str, exc: BaseException, fields: dict[str, Any]) -> None:
        cell.stopped_by = kind
        cell.stop_exc = exc
        cell.kill_at = time.monotonic() + cell.grace_s
        try:
            kernel.chan.send_data({"t": "stop", "kind": kind, **fields})
        except (ChannelClosed, ProtocolError, OSError):
            pass

    def _answer(self, kernel: _Kernel, message: dict[str, Any]) -> None:
        """Run one request of the kernel against the real object and send the reply (pickled)."""
        ident = message.get("id")
        obj_name, member, kind = message.get("obj"), message.get("name"), message.get("kind")
        args, kwargs = message.get("args", []), message.get("kwargs", {})
        reply: dict[str, Any]
        try:
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise TypeError("malformed call")
            if obj_name == "" and member == "drain_images" and self._drain is not None:
                value: Any = [CapturedImage(i.source, i.step, np.asarray(i.image), i.label) for i in self._drain()]
            else:
                allowed = self._allowed.get(obj_name) if isinstance(obj_name, str) else None
                if allowed is None or not isinstance(member, str) or allowed.get(member) != kind:
                    raise AttributeError(f"{obj_name}.{member} is not available")
                target = getattr(self._objects[obj_name], member)
                value = target(*args, **kwargs) if kind == "call" else target
                _check_data(value, f"{obj_name}.{member}")
            reply = {"t": "reply", "id": ident, "ok": value}
        except EpisodeFinished as exc:
            reply = {"t": "reply", "id": ident, "error": ("EpisodeFinished", exc.reason, exc.detail)}
        except CellInterrupted as exc:
            reply = {"t": "reply", "id": ident, "error": ("CellInterrupted", exc.reason, None)}
        except Exception as exc:  # noqa: BLE001 - the primitive's error goes to the cell, as in-process
            name = type(exc).__name__
            text = str(exc) if type(exc).__module__ == "builtins" else f"{name}: {exc}"
            reply = {"t": "reply", "id": ident, "error": (name, text, None)}
        try:
            kernel.chan.send_pickle(reply)
        except (TypeError, AttributeError, ValueError) as exc:  # unpicklable value: say so instead
            kernel.chan.send_pickle({"t": "reply", "id": ident,
                                     "error": ("TypeError", f"result cannot be sent to the cell: {exc}", None)})

    # -- results

    def _fault_result(self, kernel: _Kernel, cell: _Cell, fault: str, index: int, deadline_s: float,
                      finished: str | None, result: Callable[..., CellResult], notes: list[str]) -> CellResult:
        if not kernel.dead:
            try:
                kernel.proc.wait(1.0)  # a crashed kernel is going: let it report how it ended
            except subprocess.TimeoutExpired:
                pass
            kernel.kill(self.kernel_config.kill_wait_s)
        how = kernel.exit_text()
        if cell.stopped_by == "deadline":
            why = f"deadline: the cell did not stop within {cell.grace_s:g} s of its {deadline_s:g} s deadline"
            exception = (f"CellInterrupted: the cell ran past its {deadline_s:g} s deadline and did not stop; "
                         f"the Python session was killed")
            status = "timeout"
        elif cell.stopped_by == "finished":
            why = "episode finished: the cell did not stop"
            exception = None
            status = "episode_finished"
        elif cell.stopped_by == "interrupted":
            why = "interrupted: the cell did not stop"
            exception = f"CellInterrupted: {getattr(cell.stop_exc, 'reason', 'host')}; the Python session was killed"
            status = "error"
        else:
            why = f"crash ({how})" if fault == "crashed" else fault
            exception = f"KernelCrash: the Python session running this cell died ({how})"
            status = "error"
        self._restart(kernel, why, index)
        return result(status, exception=exception, episode_finished=finished,
                      notes=(*notes, _RESTARTED), restarted=True)

    def _build(self, payload: dict[str, Any], cell: _Cell, deadline_s: float, finished: str | None,
               result: Callable[..., CellResult], notes: list[str]) -> CellResult:
        cfg = self.config
        status = payload.get("status")
        if status not in _STATUSES:
            status = "error"
        if cell.stopped_by == "deadline":
            status = "timeout"
        if status == "episode_finished" and finished is None:
            status = "error"  # only the host ends an episode
        if cell.stopped_by == "finished" or (finished is not None and status == "timeout"
                                             and cell.stopped_by != "deadline"):
            status = "episode_finished"

        def text(key: str, limit: int) -> str:
            value = payload.get(key)
            return clip(value, limit) if isinstance(value, str) else ""

        def count(key: str) -> int:
            value = payload.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

        out_limit = cfg.output_head_chars + cfg.output_tail_chars + 200
        exception = text("exception", cfg.traceback_max_chars + 200) or None
        if status == "episode_finished":
            exception = None
        value = text("value", cfg.value_max_chars + 200) or None if status == "ok" else None
        images: list[ImageAttachment] = []
        raw_images = payload.get("images")
        for item in raw_images if isinstance(raw_images, list) else []:
            image = _image(item)
            if image is not None and len(images) < cfg.max_images_per_cell:
                images.append(image)
        extra = [clip(n, 500) for n in payload.get("notes", []) if isinstance(n, str)][:10] \
            if isinstance(payload.get("notes"), list) else []
        flags = tuple(clip(f, 100) for f in payload.get("audit_flags", []) if isinstance(f, str))[:40] \
            if isinstance(payload.get("audit_flags"), list) else ()
        return result(
            status, stdout=text("stdout", out_limit), stderr=text("stderr", out_limit),
            stdout_chars=count("stdout_chars"), stderr_chars=count("stderr_chars"), value=value,
            exception=exception, episode_finished=finished, images=tuple(images),
            dropped_images=count("dropped_images"), audit_flags=flags, notes=(*notes, *extra),
        )


def _image(item: Any) -> ImageAttachment | None:
    if not isinstance(item, dict):
        return None
    data = item.get("data")
    mime = item.get("mime")
    if not isinstance(data, bytes) or mime not in ("image/jpeg", "image/png"):
        return None
    magic = b"\xff\xd8\xff" if mime == "image/jpeg" else b"\x89PNG\r\n\x1a\n"
    if not data.startswith(magic):
        return None
    width, height, step = item.get("width"), item.get("height"), item.get("step")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (width, height, step)):
        return None
    label, source = item.get("label"), item.get("source")
    return ImageAttachment(label=clip(label, 200) if isinstance(label, str) else "image",
                           source=clip(source, 80) if isinstance(source, str) else "display",
                           step=step, mime=mime, data=data, width=width, height=height)


_DATA_TYPES = (type(None), bool, int, float, str, bytes, np.generic)
_PLAIN = frozenset({type(None), bool, int, float, str})


def _check_data(value: Any, where: str, depth: int = 0) -> None:
    """Only data leaves the host: plain values, containers, numeric arrays, the result dataclasses."""
    if depth > 20:
        raise TypeError(f"{where}: value nested too deeply")
    if isinstance(value, _DATA_TYPES):
        return
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"{where}: object arrays cannot be sent to cells")
        return
    if isinstance(value, (list, tuple)):
        if all(type(item) in _PLAIN for item in value):  # the common case: a list of floats
            return
        for item in value:
            _check_data(item, where, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_data(key, where, depth + 1)
            _check_data(item, where, depth + 1)
        return
    if is_dataclass(value) and not isinstance(value, type) and type(value).__module__.startswith("primitives."):
        for spec in fields(value):
            _check_data(getattr(value, spec.name), where, depth + 1)
        return
    raise TypeError(f"{where} returned a {type(value).__name__}, which cannot be sent to cells")
