"""The kernel process: confines itself, then runs one episode's cells with `pyrua_dojo.runtime.cells.CellExecutor`.

Started by `pyrua_dojo.kernel.host.KernelExecutor` as `python -I -B -c ...` with a scrubbed environment, the
workspace as working directory and one end of a socketpair as its only channel. It holds nothing privileged:
`robo` here is a `RemoteObject` whose every call is a request the host answers. The main thread reads the
channel; each cell runs on a runner thread (the executor then runs the cell's code on a thread of its own);
SIGINT from the host ends the running cell as if its deadline had passed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading
import time
from typing import Any

__all__ = ["main"]


def _confine(spec: dict[str, Any]) -> dict[str, Any]:
    from pyrua_dojo.kernel import confine

    # Load the bindings before any layer is on. pyseccomp looks its libraries up with ctypes.util.find_library,
    # which runs ldconfig (slow, and a process); the host found them already and passes their names.
    import ctypes.util

    known: dict[str, str] = {k: v for k, v in spec.get("libraries", {}).items() if isinstance(v, str)}
    find = ctypes.util.find_library
    ctypes.util.find_library = lambda name: known.get(name) or find(name)
    try:
        for binding in ("pyseccomp", "landlock"):
            try:
                __import__(binding)
            except Exception:  # noqa: BLE001, S110 - the layer reports the failure itself
                pass
    finally:
        ctypes.util.find_library = find
    layers: dict[str, Any] = {}
    layers["process"] = confine.apply_process_layer(
        address_space=int(spec["address_space"]), open_files=int(spec["open_files"]),
        file_size=int(spec["file_size"]))
    if spec.get("landlock", True):
        layers["landlock"] = confine.apply_landlock(
            read_only=confine.library_paths(spec["packages"]), list_only=spec["list_only"],
            read_write=[os.getcwd()])
    else:
        layers["landlock"] = {"active": False, "detail": "turned off by the configuration"}
    if spec.get("seccomp", True):
        layers["seccomp"] = confine.apply_seccomp(os.getpid())
    else:
        layers["seccomp"] = {"active": False, "detail": "turned off by the configuration"}
    return layers


class _Kernel:
    def __init__(self, sock: socket.socket, layers: dict[str, Any], started: float) -> None:
        from pyrua_dojo.kernel.channel import Channel

        self.chan = Channel(sock, trusted=True)
        self.layers = layers
        self.started = started
        self.executor: Any = None
        self._calls: dict[int, list[Any]] = {}  # id -> [Event, reply]
        self._calls_lock = threading.Lock()
        self._ids = 0
        self._runner: threading.Thread | None = None
        self._stop_kind = "deadline"
        self._io = threading.Lock()  # one reader of the channel at a time
        self._no_calls = threading.Event()  # set while no request waits for its reply
        self._no_calls.set()

    # -- requests to the host (from cell threads)

    def call(self, obj: str, name: str, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One request to the host. The calling thread reads the channel itself until its reply comes (one
        thread switch less than handing the reply over from the main thread), dispatching anything else."""
        from primitives.errors import CellInterrupted, EpisodeFinished
        from pyrua_dojo.kernel.channel import ChannelClosed

        with self._calls_lock:
            self._ids += 1
            ident = self._ids
            slot: list[Any] = [threading.Event(), None]
            self._calls[ident] = slot
            self._no_calls.clear()
        try:
            try:
                self.chan.send_data({"t": "call", "id": ident, "obj": obj, "name": name, "kind": kind,
                                     "args": list(args), "kwargs": dict(kwargs)})
            except TypeError as exc:
                raise TypeError(f"robo.{name}: {exc}") from None
            while not slot[0].is_set():  # short waits: an interruption of the cell is delivered between them
                if self._io.acquire(timeout=0.05):
                    try:
                        while not slot[0].is_set():
                            message = self.chan.recv(timeout=0.05)
                            if message is not None:
                                self._dispatch(message)
                    except ChannelClosed:
                        os._exit(0)
                    finally:
                        self._io.release()
        finally:
            with self._calls_lock:
                self._calls.pop(ident, None)
                if not self._calls:
                    self._no_calls.set()
        reply = slot[1]
        if "ok" in reply:
            return reply["ok"]
        kind_name, message, extra = reply["error"]
        if kind_name == "EpisodeFinished":
            exc: BaseException = EpisodeFinished(message, extra or "")
            self.executor.cancel.cancel(exc)
            raise exc
        if kind_name == "CellInterrupted":
            raise CellInterrupted(message)
        error_type = _ERRORS.get(kind_name, RuntimeError)
        raise error_type(message) from None

    def drain_images(self) -> list[Any]:
        return list(self.call("", "drain_images", "call", (), {}))

    # -- the channel (main thread, while no request is waiting for its reply)

    def serve(self) -> None:
        from pyrua_dojo.kernel.channel import ChannelClosed

        signal.signal(signal.SIGINT, self._on_sigint)
        while True:
            if not self._no_calls.is_set():  # a cell thread reads the channel for its reply
                self._no_calls.wait(0.05)
                continue
            if not self.chan.buffered():
                readable, _, _ = select.select([self.chan.sock], [], [], 0.05)
                if not readable:
                    continue
            if not self._io.acquire(blocking=False):
                time.sleep(0.001)
                continue
            try:
                message = self.chan.recv(timeout=0.05)
            except ChannelClosed:
                os._exit(0)
            finally:
                self._io.release()
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("t")
        if kind == "reply":
            with self._calls_lock:
                slot = self._calls.get(message.get("id"))
            if slot is not None:
                slot[1] = message
                slot[0].set()
        elif kind == "run":
            self._stop_kind = "deadline"
            self._runner = threading.Thread(target=self._run, args=(message,), name="kernel-runner", daemon=True)
            self._runner.start()
        elif kind == "stop":
            self._stop(message)
        elif kind == "exit":
            os._exit(0)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.executor is not None and self._stop_kind == "deadline":
            self.executor.expire()

    def _stop(self, message: dict[str, Any]) -> None:
        from primitives.errors import CellInterrupted, EpisodeFinished

        what = message.get("kind")
        self._stop_kind = str(what)
        if what == "deadline":
            self.executor.expire()
        elif what == "finished":
            self.executor.interrupt(EpisodeFinished(str(message.get("reason")), str(message.get("detail", ""))))
        else:
            self.executor.interrupt(CellInterrupted(str(message.get("reason", "host"))))

    def _run(self, message: dict[str, Any]) -> None:
        try:
            res = self.executor.run(message["code"], deadline_s=message["deadline_s"])
            payload = {
                "status": res.status, "stdout": res.stdout, "stderr": res.stderr,
                "stdout_chars": res.stdout_chars, "stderr_chars": res.stderr_chars, "value": res.value,
                "exception": res.exception, "episode_finished": res.episode_finished,
                "images": [{"label": i.label, "source": i.source, "step": i.step, "mime": i.mime, "data": i.data,
                            "width": i.width, "height": i.height} for i in res.images],
                "dropped_images": res.dropped_images, "audit_flags": list(res.audit_flags),
                "notes": list(res.notes), "abandoned": self.executor.abandoned_workers,
            }
        except BaseException as exc:  # noqa: BLE001 - the host must get an answer
            payload = {"status": "error", "exception": f"kernel error: {type(exc).__name__}: {exc}"}
        self.chan.send_data({"t": "result", "cell": payload})


_ERRORS: dict[str, type[Exception]] = {
    "ValueError": ValueError, "TypeError": TypeError, "KeyError": KeyError, "IndexError": IndexError,
    "RuntimeError": RuntimeError, "AttributeError": AttributeError, "ZeroDivisionError": ZeroDivisionError,
    "NotImplementedError": NotImplementedError, "LookupError": LookupError, "ArithmeticError": ArithmeticError,
}


def _make_proxy(kernel: _Kernel, name: str, spec: dict[str, Any]) -> Any:
    from pyrua_dojo.kernel.proxy import remote_object

    return remote_object(name, spec, kernel.call)


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_PR_SET_PDEATHSIG = 1


def _enter_pid_namespace(channel_fd: int) -> str:
    """Become PID 1 of a new PID namespace, so no other process (the policy server, other kernels) can be named
    in kill(2), in a network namespace of its own (no interfaces up: no TCP/UDP to anything) and an IPC namespace
    of its own (no shared memory or message queues of others); the process the host started stays outside as a launcher that forwards SIGINT and passes on the
    kernel's exit. Returns what was done (or why not) for the process layer's report."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    how = None
    own = _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC
    for flags, what in ((own, "pid, network and IPC namespaces"),
                        (_CLONE_NEWUSER | own, "user, pid, network and IPC namespaces"),
                        (_CLONE_NEWPID, "pid namespace"), (_CLONE_NEWUSER | _CLONE_NEWPID, "user+pid namespace")):
        if libc.unshare(flags) == 0:
            how = what
            break
    if how is None:
        return f"no pid namespace ({os.strerror(ctypes.get_errno())}): other processes can be signalled"
    child = os.fork()
    if child == 0:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return f"own {how} (PID {os.getpid()})"
    _launcher(child, channel_fd)
    raise AssertionError("unreachable")


def _launcher(child: int, channel_fd: int) -> None:
    """The host's child outside the namespace: ignore signals, forward SIGINT, exit the way the kernel did."""
    import resource

    os.close(channel_fd)  # only the kernel holds the channel: its death is the host's EOF
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for signum in signal.valid_signals():
        if signum in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            continue
        try:
            signal.signal(signum, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, lambda *_: os.kill(child, signal.SIGINT))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    """argv[0]: JSON spec (channel fd, limits, layers, package dirs)."""
    started = time.monotonic()
    spec = json.loads(argv[0])
    namespace = _enter_pid_namespace(int(spec["fd"])) if spec.get("pid_namespace", True) else \
        "no pid namespace (turned off)"
    sock = socket.socket(fileno=int(spec["fd"]))
    sock.setblocking(True)
    layers = _confine(spec)
    layers["process"]["detail"] += f"; {namespace}"
    if namespace.startswith("no pid namespace"):
        layers["process"]["active"] = False
    kernel = _Kernel(sock, layers, started)
    init = kernel.chan.recv()
    from pyrua_dojo.runtime.cells import CellExecutor

    namespace = {name: _make_proxy(kernel, name, obj) for name, obj in init["objects"].items()}
    kernel.executor = CellExecutor(namespace, workspace=os.getcwd(), config=init["config"],
                                   drain_images=kernel.drain_images if init.get("images") else None)
    kernel.chan.send_data({"t": "ready", "layers": layers, "pid": os.getpid(),
                           "import_s": time.monotonic() - started})
    _preload()
    kernel.serve()


def _preload() -> None:
    """Import OpenCV after 'ready', while the LLM thinks about its first cell (a first cell waits for it), on
    the main thread: between cells the kernel runs no thread but its main one (the host checks that). OpenCV
    runs single-threaded here, as numpy's BLAS does (environment), so it starts no worker pool."""
    try:
        import cv2

        cv2.setNumThreads(0)
    except Exception:  # noqa: BLE001, S110 - the cell that needs it reports the error
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
