"""The cell executor: runs the LLM's `python(code)` cells in a persistent, restricted namespace.

Episodes run it inside their kernel process (`pyrua_dojo.kernel.main`), behind the kernel's OS confinement;
`pyrua_dojo.kernel.host.KernelExecutor` is what the policy server calls. One `CellExecutor` per episode. Each cell is checked and compiled by the sandbox (`pyrua_dojo.runtime.sandbox`), then
runs in its own worker thread under a deadline; variables, functions and imports persist across cells.
What the cell prints is captured per cell without redirecting the process-wide streams (many episodes share
a process): the cell's `print` writes to the cell's capture, and a thread-routing proxy, installed once on
`sys.stdout` / `sys.stderr`, sends writes from a cell's thread to that cell and every other write to the real
stream. Full output is appended to `stdout.log` / `stderr.log` in the workspace; the result keeps head + tail.

At the deadline the executor cancels the episode's token with `CellInterrupted("deadline")` (primitives
blocked in the bridge see it) and raises an interruption inside the cell's thread (so `while True: pass`
stops). A thread stuck in native code past the grace period is abandoned and reported; the next cell runs
on a fresh thread. `EpisodeFinished` ends the cell at once; the sandbox's rewrite makes every handler in
cell code re-raise it, so neither `except Exception`, `except BaseException` nor a bare `except` swallows it.
"""

from __future__ import annotations

import ctypes
import itertools
import linecache
import math
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import numpy as np

import primitives
from primitives.errors import CancelToken, CellInterrupted, EpisodeFinished
from primitives.results import CapturedImage
from pyrua_dojo.runtime.images import ImageAttachment, encode_image
from pyrua_dojo.runtime.sandbox import PreparedCode, Sandbox, SandboxRefusal

__all__ = [
    "CellConfig", "CellExecutor", "CellResult", "CellStatus", "ImageAttachment", "OneCellAtATime", "clip", "display",
]

CellStatus = Literal["ok", "error", "syntax_error", "refused", "timeout", "episode_finished"]

_POLL_S = 0.02  # how often a waiting executor looks at the cancel token and the deadline
_REINJECT_S = 0.1  # during the grace period the interruption is raised again this often
_PRIMITIVES_DIR = Path(primitives.__file__).resolve().parent


@dataclass(frozen=True)
class CellConfig:
    """How cells run and how their output is returned."""

    deadline_s: float = 120.0  # wall clock per cell; the cell is interrupted and reported as "timeout"
    output_head_chars: int = 4000  # stdout / stderr kept from the start ...
    output_tail_chars: int = 4000  # ... and from the end, with a note of how much was cut
    value_max_chars: int = 4000  # repr of the trailing expression
    traceback_max_chars: int = 4000
    image_format: Literal["jpeg", "png"] = "jpeg"
    jpeg_quality: int = 85
    image_max_side: int | None = 640  # downscale longer side to this many pixels (None: keep)
    max_images_per_cell: int = 4  # the most recent ones are kept; the result says how many were dropped
    extra_allowed_modules: tuple[str, ...] = ()
    interrupt_grace_s: float = 5.0  # after the deadline, how long the cell's thread gets to stop
    log_max_chars: int = 20_000_000  # per cell and stream in stdout.log / stderr.log
    primitive_paths: tuple[str, ...] = ()  # extra files / directories whose frames count as primitives (tracebacks)

    def __post_init__(self) -> None:
        if not (self.deadline_s > 0 and math.isfinite(self.deadline_s)):
            raise ValueError(f"deadline_s must be a positive number of seconds, got {self.deadline_s!r}")
        if not (self.interrupt_grace_s >= 0 and math.isfinite(self.interrupt_grace_s)):
            raise ValueError(f"interrupt_grace_s must be >= 0, got {self.interrupt_grace_s!r}")
        for name in ("output_head_chars", "output_tail_chars", "value_max_chars", "traceback_max_chars",
                     "max_images_per_cell", "log_max_chars"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an int >= 0, got {getattr(self, name)!r}")
        if self.image_format not in ("jpeg", "png"):
            raise ValueError(f"image_format must be 'jpeg' or 'png', got {self.image_format!r}")
        if not (isinstance(self.jpeg_quality, int) and 1 <= self.jpeg_quality <= 100):
            raise ValueError(f"jpeg_quality must be an int in 1..100, got {self.jpeg_quality!r}")
        if self.image_max_side is not None and (not isinstance(self.image_max_side, int)
                                                or self.image_max_side < 16):
            raise ValueError(f"image_max_side must be None or an int >= 16, got {self.image_max_side!r}")


_HEADLINES: dict[str, str] = {
    "ok": "cell {i}: ok ({t:.2f} s)",
    "error": "cell {i}: error ({t:.2f} s)",
    "syntax_error": "cell {i}: syntax error; the cell was not run",
    "refused": "cell {i}: refused by the sandbox; the cell was not run",
    "timeout": "cell {i}: timeout after {t:.1f} s; the cell was interrupted (variables assigned before remain)",
    "episode_finished": "cell {i}: episode finished ({t:.2f} s)",
}


@dataclass(frozen=True)
class CellResult:
    """What one cell did. `to_text()` is the tool result the LLM reads."""

    index: int
    code: str
    status: CellStatus
    stdout: str
    stderr: str
    stdout_chars: int  # full lengths before truncation
    stderr_chars: int
    value: str | None
    exception: str | None
    episode_finished: str | None  # EpisodeFinished.reason when the episode ended during the cell
    images: tuple[ImageAttachment, ...]
    dropped_images: int
    audit_flags: tuple[str, ...]
    elapsed_s: float
    notes: tuple[str, ...] = ()  # executor remarks for the LLM (dropped images, an abandoned worker, ...)
    restarted: bool = False  # the kernel running the cell was killed and replaced: the namespace is gone

    def to_text(self) -> str:
        """Compact text: a status line, then only the non-empty sections; every field was truncated alone."""
        headline = _HEADLINES[self.status].format(i=self.index, t=self.elapsed_s)
        if self.restarted:
            headline = headline.split(";")[0] + "; THE PYTHON SESSION WAS RESTARTED (variables are gone)"
        lines = [headline]

        def section(name: str, text: str | None) -> None:
            if text:
                text = text.rstrip("\n")
                lines.append(f"{name}: {text}" if "\n" not in text else f"{name}:\n{text}")

        section("value", self.value)
        section("stdout", self.stdout)
        section("stderr", self.stderr)
        section("exception", self.exception)
        if self.episode_finished is not None:
            lines.append(f"episode finished: {self.episode_finished}")
        if self.images:
            lines.append("images (attached after this text): " + "; ".join(image.label for image in self.images))
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------- output capture


def clip(text: str, limit: int, *, where: str = "") -> str:
    """`text` cut to about `limit` chars: head + tail with a note of how much was cut (and where it all is)."""
    if len(text) <= limit:
        return text
    head = limit - limit // 3
    return _join_clipped(text[:head], text[len(text) - (limit - head):] if limit - head else "",
                         len(text) - limit, where)


def _join_clipped(head: str, tail: str, omitted: int, where: str) -> str:
    cut = head.rfind("\n")
    if cut >= max(0, len(head) - 200):  # end the head on a line boundary when one is near
        omitted += len(head) - cut - 1
        head = head[:cut + 1]
    cut = tail.find("\n")
    if 0 <= cut < 200 and cut < len(tail) - 1:
        omitted += cut + 1
        tail = tail[cut + 1:]
    more = f"; full output in {where}" if where else ""
    sep = "" if head.endswith("\n") or not head else "\n"
    return f"{head}{sep}... [{omitted} chars omitted{more}] ...\n{tail}"


class _Capture:
    """One stream of one cell: keeps head and tail in memory, appends everything to the workspace log."""

    def __init__(self, log_path: Path, header: str, *, head: int, tail: int, log_max: int,
                 rewrite: tuple[str, str] | None = None) -> None:
        self._lock = threading.Lock()
        self._head_max, self._tail_max, self._log_max = head, tail, log_max
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total = 0
        self._log_path, self._header = log_path, header
        self._log: TextIO | None = None
        self._logged = 0
        self._rewrite = rewrite
        self._closed = False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        written = len(text)
        if self._rewrite is not None and self._rewrite[0] in text:
            text = text.replace(*self._rewrite)
        with self._lock:
            if self._closed or not text:
                return written
            self.total += len(text)
            self._log_write(text)
            room = self._head_max - self._head_len
            if room > 0:
                self._head.append(text[:room])
                self._head_len += min(room, len(text))
                text = text[room:]
            if text and self._tail_max:
                self._tail.append(text)
                self._tail_len += len(text)
                while self._tail_len - len(self._tail[0]) >= self._tail_max:
                    self._tail_len -= len(self._tail.popleft())
        return written

    def _log_write(self, text: str) -> None:
        if self._logged >= self._log_max:
            return
        try:
            if self._log is None:
                self._log = self._log_path.open("a", encoding="utf-8", errors="replace")
                self._log.write(self._header)
            piece = text[: self._log_max - self._logged]
            self._log.write(piece)
            self._logged += len(piece)
            if self._logged >= self._log_max:
                self._log.write(f"\n[log of this cell capped at {self._log_max} chars]\n")
        except OSError:
            self._logged = self._log_max  # the log is best effort; the in-memory capture still works

    def render(self) -> str:
        with self._lock:
            head = "".join(self._head)
            tail = "".join(self._tail)
            if len(tail) > self._tail_max:
                tail = tail[len(tail) - self._tail_max:]
            omitted = self.total - len(head) - len(tail)
        if omitted <= 0:
            return head + tail
        return _join_clipped(head, tail, omitted, self._log_path.name)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._log is not None:
                try:
                    self._log.close()
                except OSError:
                    pass
                self._log = None


@dataclass
class _CellContext:
    """What a cell's thread writes to: its captures, and the images it collected (latest kept)."""

    stdout: _Capture
    stderr: _Capture
    images: deque[CapturedImage]
    drain: Callable[[], Sequence[CapturedImage]] | None
    dropped: int = 0

    def add_images(self, images: Sequence[CapturedImage]) -> None:
        for image in images:
            if len(self.images) == self.images.maxlen:
                self.dropped += 1
            self.images.append(image)

    def drain_robot(self) -> None:
        if self.drain is not None:
            self.add_images(list(self.drain()))


_routes = threading.local()  # .ctx: the _CellContext of the cell running on this thread (absent elsewhere)
_install_lock = threading.Lock()


class _RoutingStream:
    """Stands in for sys.stdout / sys.stderr: writes from a cell's thread go to that cell, others pass through."""

    def __init__(self, real: Any, which: str) -> None:
        self._real = real
        self._which = which

    def _sink(self) -> _Capture | None:
        ctx = getattr(_routes, "ctx", None)
        return None if ctx is None else getattr(ctx, self._which)

    def write(self, text: str) -> int:
        sink = self._sink()
        if sink is not None:
            return sink.write(text)
        return self._real.write(text) if self._real is not None else len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._sink() is None and self._real is not None:
            self._real.flush()

    def isatty(self) -> bool:
        return False if self._sink() is not None or self._real is None else self._real.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _install_routing() -> None:
    """Put the routing proxies on sys.stdout / sys.stderr unless they are already there (idempotent)."""
    with _install_lock:
        for which in ("stdout", "stderr"):
            current = getattr(sys, which)
            if not isinstance(current, _RoutingStream):
                setattr(sys, which, _RoutingStream(current, which))


def _cell_print(*args: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None,
                flush: bool = False) -> None:
    """`print` as cells see it: to the running cell's stdout capture (the real print for other files)."""
    ctx = getattr(_routes, "ctx", None)
    if file is not None or ctx is None:
        print(*args, sep=sep, end=end, file=file, flush=flush)
        return
    if sep is not None and not isinstance(sep, str):
        raise TypeError(f"sep must be None or a string, not {type(sep).__name__}")
    if end is not None and not isinstance(end, str):
        raise TypeError(f"end must be None or a string, not {type(end).__name__}")
    ctx.stdout.write((" " if sep is None else sep).join(map(str, args)) + ("\n" if end is None else end))


def display(image: Any, label: str = "") -> None:
    """Attach an image to this cell's result: uint8 HxWx3 RGB or HxW, or float in [0, 1] (bool masks too)."""
    ctx = getattr(_routes, "ctx", None)
    if ctx is None:
        raise RuntimeError("display() works only inside a cell")
    if not isinstance(label, str):
        raise TypeError("display(): label must be a string")
    array = _as_image(image)
    ctx.drain_robot()  # keep the order: what robo.show captured before this call comes first
    ctx.add_images([CapturedImage(source="display", step=-1, image=array, label=label[:80])])


def _as_image(image: Any) -> np.ndarray:
    array = np.asarray(image)
    if array.ndim == 3 and array.shape[2] in (1, 4):
        array = array[..., 0] if array.shape[2] == 1 else array[..., :3]
    if not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] == 3)) or 0 in array.shape:
        raise ValueError(f"display() expects an HxW or HxWx3 image, got shape {array.shape}")
    if array.dtype == np.bool_:
        return array.astype(np.uint8) * 255
    if array.dtype.kind == "f":
        if not np.isfinite(array).all() or array.min() < 0.0 or array.max() > 1.0:
            raise ValueError("display(): float images must be finite and lie in [0, 1]")
        return np.round(array * 255.0).astype(np.uint8)
    if array.dtype.kind in "iu":
        if array.min() < 0 or array.max() > 255:
            raise ValueError("display(): integer images must lie in 0..255")
        return array.astype(np.uint8, copy=True)
    raise ValueError(f"display(): unsupported image dtype {array.dtype}")


# -------------------------------------------------------------------------------------------------- executor


class _CellWakeup(CellInterrupted):
    """Raised inside a cell's thread to stop it; what stopped it is read from the cancel token."""

    def __init__(self) -> None:
        super().__init__("wakeup")


@dataclass
class _Job:
    """One cell run on one worker thread."""

    index: int
    prepared: PreparedCode
    ctx: _CellContext
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)
    thread_id: int | None = None
    armed: bool = False  # the thread is inside cell code: an interruption may be raised in it
    injected: bool = False  # an interruption was raised into the thread at least once
    outcome: BaseException | None = None
    value: str | None = None


def _raise_in(thread_id: int) -> None:
    """Schedule a _CellWakeup in another thread (delivered at its next bytecode boundary, not inside C)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(_CellWakeup))


def _noop() -> None:
    pass


def _flush_wakeup() -> None:
    """Consume a wakeup that may still be pending for this thread (the caller catches it).

    Clearing with SetAsyncExc(id, NULL) would leave CPython 3.11's interpreter-wide eval breaker set for good,
    slowing every thread down; raising one more wakeup into ourselves and catching it is the clean way.
    """
    _raise_in(threading.get_ident())
    for _ in range(10_000):
        _noop()  # the wakeup is delivered at the first call


_tags = itertools.count(1)


def _forget_lines(filenames: list[str]) -> None:
    for name in filenames:
        linecache.cache.pop(name, None)


class OneCellAtATime:
    """What every executor's `run(code, deadline_s=...)` shares (in-process and kernel alike): the misuse checks,
    refusal once closed, and one cell at a time; `_run` does the work."""

    config: CellConfig
    _closed: bool
    _run_lock: threading.Lock

    def run(self, code: str, *, deadline_s: float | None = None) -> CellResult:
        """Run one cell and return what it did. Raises only for misuse (not a str, closed, concurrent run)."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        if deadline_s is not None and not (deadline_s > 0 and math.isfinite(deadline_s)):
            raise ValueError(f"deadline_s must be a positive number of seconds, got {deadline_s!r}")
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        if not self._run_lock.acquire(blocking=False):
            raise RuntimeError("a cell is already running on this executor")
        try:
            return self._run(code, self.config.deadline_s if deadline_s is None else deadline_s)
        finally:
            self._run_lock.release()

    def _run(self, code: str, deadline_s: float) -> CellResult:
        raise NotImplementedError


class CellExecutor(OneCellAtATime):
    """Runs cells for one episode.

    namespace: names predefined in every cell (`robo`, ...); `np`, `math`, `time`, `display` are added.
    workspace: the only directory cell code may read or write; full per-episode stdout/stderr logs live there.
    cancel: the episode's token; the executor cancels it with CellInterrupted at a cell's deadline and
        clears it before the next cell. Primitives check the same token between chunks.
    drain_images: returns (and forgets) the images `robo.show(...)` captured since the last call.
    """

    def __init__(
        self,
        namespace: Mapping[str, Any],
        *,
        workspace: Path,
        config: CellConfig = CellConfig(),
        cancel: CancelToken | None = None,
        drain_images: Callable[[], Sequence[CapturedImage]] | None = None,
    ) -> None:
        for name in namespace:
            if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
                raise ValueError(f"namespace name {name!r} is not a plain identifier")
        if not isinstance(config, CellConfig):
            raise TypeError("config must be a CellConfig")
        self.config = config
        self.workspace = Path(workspace)
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.workspace = self.workspace.resolve()
        self.cancel = cancel if cancel is not None else CancelToken()
        self._drain = drain_images
        self._tag = f"x{next(_tags)}"
        self._sandbox = Sandbox(self.workspace, cancel=self.cancel, print_fn=_cell_print,
                                extra_allowed_modules=config.extra_allowed_modules)
        self.namespace: dict[str, Any] = self._sandbox.namespace(
            {"np": np, "numpy": np, "math": math, "time": self._sandbox.time_module, "display": display,
             **namespace})
        self._run_lock = threading.Lock()
        self._index = 0
        self._job: _Job | None = None
        self._sources: dict[str, list[str]] = {}
        self._filenames: list[str] = []
        self._primitive_roots = (_PRIMITIVES_DIR, *(Path(p).resolve() for p in config.primitive_paths))
        self._expired = False
        self.abandoned_workers = 0  # threads given up after the grace period (still blocked in native code)
        self._closed = False
        self._finalizer = weakref.finalize(self, _forget_lines, self._filenames)
        _install_routing()

    @property
    def cells_run(self) -> int:
        return self._index

    # -- public API

    def interrupt(self, exc: BaseException) -> None:
        """Stop the running cell (host side): cancel the token with `exc` and raise inside the cell's thread.

        Use `EpisodeFinished(reason)` when the episode ends, `CellInterrupted(reason)` to stop just the cell.
        """
        if not isinstance(exc, (EpisodeFinished, CellInterrupted)):
            raise TypeError("interrupt() takes an EpisodeFinished or CellInterrupted")
        self.cancel.cancel(exc)
        job = self._job
        if job is not None:
            self._inject(job)

    def expire(self) -> None:
        """End the running cell as if its deadline had passed now (a kernel's host enforces the deadline)."""
        self._expired = True

    def close(self) -> None:
        """Stop any running cell and forget this executor's cell sources (linecache)."""
        self._closed = True
        job = self._job
        if job is not None:
            self.cancel.cancel(CellInterrupted("closed"))
            self._inject(job)
        self._finalizer()

    # -- one cell

    def _run(self, code: str, deadline_s: float) -> CellResult:
        started = time.perf_counter()
        self._index += 1
        index = self._index
        filename = f"<cell {index}|{self._tag}>"
        self._remember_source(index, filename, code)
        self.cancel.clear()
        self._expired = False

        def result(status: CellStatus, **fields: Any) -> CellResult:
            base: dict[str, Any] = dict(stdout="", stderr="", stdout_chars=0, stderr_chars=0, value=None,
                                        exception=None, episode_finished=None, images=(), dropped_images=0,
                                        audit_flags=(), notes=())
            base.update(fields)
            return CellResult(index=index, code=code, status=status,
                              elapsed_s=time.perf_counter() - started, **base)

        try:
            prepared = self._sandbox.prepare(code, filename)
        except SyntaxError as exc:
            text = "".join(traceback.format_exception_only(type(exc), exc))
            return result("syntax_error", exception=self._clean(text).rstrip("\n"))
        except SandboxRefusal as refusal:
            return result("refused", exception=f"SandboxError: {refusal.message}", audit_flags=refusal.flags)
        except (RecursionError, MemoryError) as exc:
            return result("syntax_error", exception=f"SyntaxError: the cell is too deeply nested to compile "
                                                    f"({type(exc).__name__}: {exc})")

        cfg = self.config
        ctx = _CellContext(
            stdout=_Capture(self.workspace / "stdout.log", f"===== cell {index} =====\n",
                            head=cfg.output_head_chars, tail=cfg.output_tail_chars, log_max=cfg.log_max_chars),
            stderr=_Capture(self.workspace / "stderr.log", f"===== cell {index} =====\n",
                            head=cfg.output_head_chars, tail=cfg.output_tail_chars, log_max=cfg.log_max_chars,
                            rewrite=(f"|{self._tag}>", ">")),
            images=deque(maxlen=cfg.max_images_per_cell),
            drain=self._drain,
        )
        job = _Job(index=index, prepared=prepared, ctx=ctx)
        before = self.cancel.exception
        _install_routing()
        thread = threading.Thread(target=self._thread_main, args=(job,), name=f"cell-{self._tag}-{index}",
                                  daemon=True)
        self._job = job
        thread.start()
        try:
            stopped_by, abandoned = self._wait(job, started + deadline_s, before)
        finally:
            self._job = None
        notes: list[str] = []
        if abandoned:
            self.abandoned_workers += 1
            notes.append(f"the cell did not stop within {cfg.interrupt_grace_s:g} s of its interruption (blocked "
                         "in native code); its thread was abandoned and the next cell runs on a fresh one")
        ctx.stdout.close()
        ctx.stderr.close()
        try:
            ctx.drain_robot()
        except Exception as exc:  # noqa: BLE001 - a failing image source must not lose the cell's result
            notes.append(f"images from robo.show could not be collected: {type(exc).__name__}: {exc}")
        images, image_notes = self._encode_images(list(ctx.images))
        notes.extend(image_notes)
        if ctx.dropped:
            notes.append(f"{ctx.dropped} earlier image(s) dropped (at most {cfg.max_images_per_cell} per cell; "
                         "the latest are kept)")

        status, exception, finished = self._outcome(job, stopped_by, before, deadline_s)
        return result(
            status,
            stdout=ctx.stdout.render(), stderr=ctx.stderr.render(),
            stdout_chars=ctx.stdout.total, stderr_chars=ctx.stderr.total,
            value=job.value if status == "ok" else None, exception=exception, episode_finished=finished,
            images=images, dropped_images=ctx.dropped, audit_flags=prepared.flags, notes=tuple(notes),
        )

    def _wait(self, job: _Job, deadline_at: float, before: BaseException | None) -> tuple[str | None, bool]:
        """Wait for the cell; interrupt it at the deadline or when the token is cancelled during the cell."""
        stopped_by: str | None = None
        try:
            while not job.done.wait(_POLL_S):
                exc = self.cancel.exception
                if exc is not None and exc is not before:
                    stopped_by = "token"
                    break
                if self._expired or time.perf_counter() >= deadline_at:
                    stopped_by = "deadline"
                    self.cancel.cancel(CellInterrupted("deadline"))
                    break
            if stopped_by is None:
                return None, False
            grace_end = time.perf_counter() + self.config.interrupt_grace_s
            while True:
                self._inject(job)
                remaining = grace_end - time.perf_counter()
                if job.done.wait(max(0.0, min(_REINJECT_S, remaining))):
                    return stopped_by, False
                if remaining <= 0:
                    return stopped_by, True
        except BaseException:  # e.g. KeyboardInterrupt in the host: stop the cell, then let it propagate
            self.cancel.cancel(CellInterrupted("host"))
            self._inject(job)
            raise

    def _inject(self, job: _Job) -> None:
        with job.lock:
            if job.armed and job.thread_id is not None:
                job.injected = True
                _raise_in(job.thread_id)

    def _thread_main(self, job: _Job) -> None:
        _routes.ctx = job.ctx
        try:
            self._execute(job)
        except _CellWakeup:
            pass  # landed just after the cell's own code: the outcome is already recorded
        for _ in range(5):  # no new wakeup after disarming; a pending one is consumed here
            try:
                with job.lock:
                    job.armed = False
                    injected = job.injected
                if injected:
                    _flush_wakeup()
                break
            except _CellWakeup:
                continue
        _routes.ctx = None
        job.done.set()

    def _execute(self, job: _Job) -> None:
        with job.lock:
            job.thread_id = threading.get_ident()
            job.armed = True
        try:
            exec(job.prepared.body, self.namespace)
            if job.prepared.expr is not None:
                value = eval(job.prepared.expr, self.namespace)
                if value is not None:
                    self.namespace["_"] = value
                    job.value = self._repr(value)
        except BaseException as exc:  # noqa: BLE001 - everything the cell raises is reported
            job.outcome = exc

    def _repr(self, value: Any) -> str:
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001
            text = f"<repr() failed: {type(exc).__name__}: {exc}>"
        return clip(text, self.config.value_max_chars)

    # -- outcome and tracebacks

    def _outcome(self, job: _Job, stopped_by: str | None, before: BaseException | None,
                 deadline_s: float) -> tuple[CellStatus, str | None, str | None]:
        """(status, exception text, episode-finished reason) from how the cell ended and the cancel token."""
        token = self.cancel.exception
        exc = job.outcome
        finished = token.reason if isinstance(token, EpisodeFinished) else None
        if stopped_by == "deadline":
            last = f"CellInterrupted: the cell ran past its {deadline_s:g} s deadline and was interrupted"
            return "timeout", self._format(exc, last_line=last) if exc is not None else last, finished
        if isinstance(exc, EpisodeFinished):
            return "episode_finished", None, exc.reason
        if stopped_by == "token" or isinstance(exc, CellInterrupted):
            cause = token if token is not None and (token is not before or isinstance(exc, _CellWakeup)) else exc
            if isinstance(cause, EpisodeFinished):
                return "episode_finished", None, cause.reason
            if isinstance(cause, CellInterrupted):
                last = f"CellInterrupted: {cause.reason}"
                return "error", self._format(exc, last_line=last) if exc is not None else last, finished
        if exc is None:
            return "ok", None, finished
        return "error", self._format(exc), finished

    def _remember_source(self, index: int, filename: str, code: str) -> None:
        lines = code.splitlines(keepends=True)
        self._sources[filename] = lines
        self._filenames.append(filename)
        linecache.cache[filename] = (len(code), None, lines, filename)
        try:
            (self.workspace / f"cell_{index:03d}.py").write_text(code, encoding="utf-8")
        except OSError:
            pass  # the trace keeps the code too; the copy in the workspace is a convenience

    def _is_cell_file(self, filename: str) -> bool:
        if filename in self._sources:
            return True
        path = Path(filename)
        return path.is_absolute() and path.parent == self.workspace

    def _is_primitive_file(self, filename: str) -> bool:
        path = Path(filename)
        return path.is_absolute() and any(root == path or root in path.parents for root in self._primitive_roots)

    def _display_name(self, filename: str) -> str:
        if filename in self._sources:
            return filename.split("|", 1)[0] + ">"
        path = Path(filename)
        if path.is_absolute() and path.parent == self.workspace:
            return path.name
        for root in self._primitive_roots:
            if root == path or root in path.parents:
                return str(path.relative_to(root.parent))
        return filename

    def _clean(self, text: str) -> str:
        for old in (f"|{self._tag}>", "pyrua_dojo.runtime.sandbox.", "primitives.errors.", "__policy__."):
            text = text.replace(old, ">" if old.startswith("|") else "")
        return text

    def _format(self, exc: BaseException, *, last_line: str | None = None) -> str:
        """Traceback trimmed to the cell's frames plus the primitive that raised, with source lines.

        With `last_line` (an interruption) the primitive frame is left out and `last_line` ends the text.
        """
        chain: list[tuple[BaseException, str]] = []  # (exception, how it links to the next one shown)
        seen: set[int] = set()
        current: BaseException | None = exc
        link = ""
        while current is not None and id(current) not in seen and len(chain) < 5:
            seen.add(id(current))
            chain.append((current, link))
            if current.__cause__ is not None:
                current, link = current.__cause__, "The above exception was the direct cause of the following:"
            elif current.__context__ is not None and not current.__suppress_context__:
                current, link = current.__context__, "During handling of the above exception, another occurred:"
            else:
                current = None
        parts: list[str] = []
        for position in range(len(chain) - 1, -1, -1):
            item = chain[position][0]
            if position < len(chain) - 1:
                parts.append(f"\n{chain[position + 1][1]}\n\n")
            parts.append(self._format_one(item, last_line if item is exc else None))
        return clip(self._clean("".join(parts)).rstrip("\n"), self.config.traceback_max_chars)

    def _format_one(self, exc: BaseException, last_line: str | None) -> str:
        entries = list(traceback.walk_tb(exc.__traceback__))
        # A handler that re-raised (the sandbox's guard) adds the same frame again; keep its deepest entry.
        last_seen = {id(frame): i for i, (frame, _) in enumerate(entries)}
        frames = [(frame.f_code.co_filename, lineno, frame.f_code.co_name)
                  for i, (frame, lineno) in enumerate(entries) if last_seen[id(frame)] == i]
        cells = [i for i, (filename, _, _) in enumerate(frames) if self._is_cell_file(filename)]
        keep = [frames[i] for i in cells]
        after = frames[cells[-1] + 1:] if cells else frames
        primitive = [f for f in after if self._is_primitive_file(f[0])]
        if primitive and last_line is None:
            keep.append(primitive[-1])
        out = ["Traceback (most recent call last):\n"] if keep else []
        repeats = 0
        for i, (filename, lineno, name) in enumerate(keep):
            if i and keep[i - 1] == (filename, lineno, name):
                repeats += 1
                if repeats >= 3:
                    continue
            elif repeats >= 3:
                out.append(f"  [Previous line repeated {repeats - 2} more times]\n")
                repeats = 0
            else:
                repeats = 0
            out.append(f'  File "{self._display_name(filename)}", line {lineno}, in {name}\n')
            line = self._source_line(filename, lineno)
            if line:
                out.append(f"    {line}\n")
        if repeats >= 3:
            out.append(f"  [Previous line repeated {repeats - 2} more times]\n")
        if last_line is not None:
            out.append(last_line + "\n")
        else:
            out.extend(traceback.format_exception_only(type(exc), exc))
        return "".join(out)

    def _source_line(self, filename: str, lineno: int) -> str:
        lines = self._sources.get(filename)
        if lines is not None:
            return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
        return linecache.getline(filename, lineno).strip()

    # -- images

    def _encode_images(self, images: list[CapturedImage]) -> tuple[tuple[ImageAttachment, ...], list[str]]:
        import cv2  # here, not at the top: a kernel is ready before OpenCV has loaded (it preloads it after)

        out: list[ImageAttachment] = []
        notes: list[str] = []
        for image in images:
            try:
                out.append(self._encode(image, len(out) + 1))
            except (ValueError, TypeError, cv2.error) as exc:
                notes.append(f"an image from {image.source} could not be encoded: {exc}")
        return tuple(out), notes

    def _encode(self, image: CapturedImage, number: int) -> ImageAttachment:
        data, mime, width, height = encode_image(_as_image(image.image), fmt=self.config.image_format,
                                                 quality=self.config.jpeg_quality, max_side=self.config.image_max_side)
        label = f"image {number}: {image.source}"
        if image.step >= 0:
            label += f" @ step {image.step}"
        if image.label:
            label += f" ({image.label})"
        return ImageAttachment(label=label, source=image.source, step=image.step, mime=mime,
                               data=data, width=width, height=height)
