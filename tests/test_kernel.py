"""Cells in a kernel process: the robo proxy, the confinement layers, deadlines and faults from outside.

Some tests let cells import `os`, `ctypes` or `signal` (CellConfig.extra_allowed_modules) to act as a cell that
got around the in-process sandbox would; what they can reach is then up to the kernel's OS layers alone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from primitives.errors import CancelToken, EpisodeFinished
from primitives.results import CapturedImage, Grip
from pyrua_dojo.runtime.cells import CellConfig, CellResult
from pyrua_dojo.kernel.host import KernelConfig, KernelExecutor

SECRET = "kernel-test-secret-value"


class Arm:
    """A host object with the shape of `robo`: results, errors, properties, constants, images, episode end."""

    ARMS = ("left", "right")
    TABLE_Z = 0.765

    def __init__(self, cancel: CancelToken, *, finish_after: int | None = None) -> None:
        self._cancel = cancel
        self._finish_after = finish_after
        self._images: list[CapturedImage] = []
        self._secret = SECRET
        self.moves = 0
        self.label = "arm"

    @property
    def steps_used(self) -> int:
        """Moves so far."""
        return self.moves

    def close(self, arm: str) -> Grip:
        """Close a gripper."""
        if arm not in self.ARMS:
            raise ValueError(f"unknown arm {arm!r}")
        if self._finish_after is not None and self.moves >= self._finish_after:
            self._cancel.cancel(EpisodeFinished("success"))
            raise EpisodeFinished("success")
        self._cancel.check()
        self.moves += 1
        return Grip(arm, 0.0, 0.2, True, 0.03, 3, 97)

    def slow(self, seconds: float) -> int:
        """Block on the host, checking the cancel token (a primitive waiting for the bridge)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self._cancel.wait(0.01):
                self._cancel.check()
        return 1

    def show(self, camera: str) -> None:
        import numpy as np

        self._images.append(CapturedImage(camera, self.moves, np.full((20, 30, 3), 90, np.uint8), "shown"))

    def secret_holder(self) -> Any:
        return self  # not data: must never reach the kernel

    def drain(self) -> list[CapturedImage]:
        out, self._images = self._images, []
        return out


def make(tmp_path: Path, *, modules: tuple[str, ...] = (), kernel: KernelConfig = KernelConfig(),
         events: list[tuple[str, dict[str, Any]]] | None = None, finish_after: int | None = None,
         **config: Any) -> tuple[KernelExecutor, Arm]:
    cancel = CancelToken()
    arm = Arm(cancel, finish_after=finish_after)
    cfg = CellConfig(extra_allowed_modules=modules, image_format="png", **config)
    sink = (lambda kind, **fields: events.append((kind, fields))) if events is not None else None
    ex = KernelExecutor({"robo": arm}, workspace=tmp_path / "ws", config=cfg, cancel=cancel,
                        drain_images=arm.drain, kernel=kernel, on_event=sink)
    return ex, arm


@pytest.fixture
def kernel(tmp_path: Path):  # noqa: ANN201
    ex, arm = make(tmp_path)
    yield ex, arm
    ex.close()


def test_notebook_semantics_and_the_robo_proxy(kernel) -> None:
    ex, arm = kernel
    assert ex.run("x = 20\nx * 2 + 2").value == "42"
    grip = ex.run("g = robo.close('left')\ng")
    assert grip.status == "ok" and grip.value.startswith("Grip(arm='left'")
    same = ex.run("type(g).__name__, g.held, g.width_m, robo.steps_used, robo.ARMS, robo.TABLE_Z, robo.label")
    assert same.value == "('Grip', True, 0.03, 1, ('left', 'right'), 0.765, 'arm')"
    assert arm.moves == 1
    bad = ex.run("robo.close('middle')")
    assert bad.status == "error" and "ValueError: unknown arm 'middle'" in bad.exception
    assert "<cell 4>" in bad.exception and "robo.close('middle')" in bad.exception
    doc = ex.run("robo.close.__doc__")
    assert doc.value == repr("Close a gripper.")
    assert ex.run("print('out')\nrobo.show('cam_head')\nx").stdout == "out\n"


def test_only_public_data_crosses_the_channel(kernel, tmp_path: Path) -> None:
    ex, _ = kernel
    private = ex.run("robo._secret")
    assert private.status in ("error", "refused") and SECRET not in private.to_text()
    holder = ex.run("robo.secret_holder()")
    assert holder.status == "error" and "cannot be sent to cells" in holder.exception
    assert SECRET not in holder.to_text()
    odd = ex.run("robo.close(object())")
    assert odd.status == "error" and "cannot be passed" in odd.exception


def test_images_from_show_and_display_keep_their_order(kernel) -> None:
    ex, _ = kernel
    res = ex.run("robo.show('cam_head')\ndisplay(np.zeros((8, 8)), 'mask')\nrobo.show('cam_left_wrist')")
    assert res.status == "ok"
    assert [i.source for i in res.images] == ["cam_head", "display", "cam_left_wrist"]
    assert all(i.mime == "image/png" and i.data.startswith(b"\x89PNG") for i in res.images)


def test_episode_end_reaches_the_cell_and_stays(tmp_path: Path) -> None:
    ex, arm = make(tmp_path, finish_after=1)
    try:
        first = ex.run("robo.close('left')\ntry:\n    robo.close('left')\nexcept BaseException:\n    pass\n'after'")
        assert first.status == "episode_finished" and first.episode_finished == "success"
        again = ex.run("robo.close('right')")
        assert again.status == "episode_finished" and arm.moves == 1
    finally:
        ex.close()


def test_the_host_ends_a_cell_blocked_in_a_host_primitive_at_the_episode_end(kernel) -> None:
    ex, _ = kernel
    import threading

    timer = threading.Timer(0.5, lambda: ex.cancel.cancel(EpisodeFinished("reset")))
    timer.start()
    t0 = time.monotonic()
    res = ex.run("robo.slow(30)")
    assert time.monotonic() - t0 < 5
    assert res.status == "episode_finished" and res.episode_finished == "reset"


def test_layers_are_reported(kernel) -> None:
    ex, _ = kernel
    layers = ex.wait_ready()
    assert set(layers) == {"process", "seccomp", "landlock"}
    assert layers["process"]["active"], layers
    for layer in layers.values():
        assert isinstance(layer["active"], bool) and layer["detail"]
    try:
        import landlock

        landlock.landlock_abi_version()
        landlock_here = True
    except Exception:  # noqa: BLE001
        landlock_here = False
    assert layers["landlock"]["active"] == landlock_here, layers["landlock"]
    assert layers["seccomp"]["active"], layers["seccomp"]


RAW = ("os", "ctypes", "signal", "socket", "subprocess")


def test_a_cell_past_the_sandbox_meets_the_os_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYRUA_KERNEL_TEST_KEY", SECRET)
    (tmp_path / "outside.txt").write_text(SECRET)
    ex, _ = make(tmp_path, modules=RAW)
    try:
        env = ex.run("import os\nsorted(os.environ)")
        assert "PYRUA_KERNEL_TEST_KEY" not in env.value and SECRET not in env.to_text()
        assert ex.run("os.getcwd()").value == repr(str(ex.workspace))
        checks = {
            "read outside": f"os.open({str(tmp_path / 'outside.txt')!r}, os.O_RDONLY)",
            "write outside": f"os.open({str(tmp_path / 'new.txt')!r}, os.O_WRONLY | os.O_CREAT)",
            "host environ": f"os.open('/proc/{os.getpid()}/environ', os.O_RDONLY)",
            "signal host": f"os.kill({os.getpid()}, 0)",
            "socket": "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)",
            "unix socket": "import socket\nsocket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
            "fork": "os.fork()",
            "exec": "os.execv('/bin/true', ['true'])",
            "subprocess": "import subprocess\nsubprocess.run(['/bin/true'])",
        }
        for what, code in checks.items():
            res = ex.run(code)
            assert res.status == "error" and ("PermissionError" in res.exception or "OSError" in res.exception
                                              or "Errno" in res.exception), (what, res.to_text())
        assert not (tmp_path / "new.txt").exists()
        assert ex.run("open('mine.txt', 'w').write('ok')").value == "2"  # the workspace stays writable
        assert ex.restarts == 0
    finally:
        ex.close()


def assert_restarted(res: CellResult) -> None:
    assert res.restarted
    assert "restarted" in res.to_text() and "variables" in res.to_text()


@pytest.mark.parametrize("code, label", [
    ("import ctypes\nctypes.string_at(0)", "SIGSEGV"),
    ("import os\nos.abort()", "killed by signal"),  # as PID 1, abort() ends in SIGSEGV
    ("import ctypes\nctypes.memset(1, 0, 1)", "SIGSEGV"),
])
def test_a_crashed_kernel_is_replaced_and_the_llm_told(tmp_path: Path, code: str, label: str) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    ex, _ = make(tmp_path, modules=RAW, events=events)
    try:
        assert ex.run("x = 1\nx").value == "1"
        first_pid = ex.pid
        crash = ex.run(code)
        assert crash.status == "error" and "KernelCrash" in crash.exception and label in crash.exception
        assert_restarted(crash)
        gone = ex.run("x")
        assert gone.status == "error" and "NameError" in gone.exception
        assert ex.pid != first_pid and ex.run("robo.close('left').held").value == "True"
        restarts = [fields for kind, fields in events if kind == "kernel_restart"]
        assert len(restarts) == 1 and label in restarts[0]["exit"] + restarts[0]["why"]
        assert [kind for kind, _ in events].count("kernel_start") == 2
    finally:
        ex.close()


def test_sigkill_from_inside_cannot_end_the_kernel(tmp_path: Path) -> None:
    """The kernel is PID 1 of its own PID namespace: it cannot kill itself (nor name any other process)."""
    ex, _ = make(tmp_path, modules=RAW)
    try:
        res = ex.run("import os, signal\nx = 3\nos.kill(os.getpid(), signal.SIGKILL)\nos.getpid(), os.getppid()")
        assert res.status == "ok" and res.value == "(1, 0)" and not res.restarted
        assert ex.run("x").value == "3"
    finally:
        ex.close()


def test_a_huge_allocation_fails_inside_the_kernel(kernel) -> None:
    ex, _ = kernel
    res = ex.run("x = 5\nbig = np.ones(4 * 2**30 // 8)")
    assert res.status == "error" and "Unable to allocate" in res.exception
    assert ex.run("x").value == "5" and ex.restarts == 0


def test_an_endless_exception_str_cannot_hang_the_host(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, interrupt_grace_s=0.5)
    try:
        code = "class Bad(Exception):\n    def __str__(self):\n        while True:\n            pass\nraise Bad()"
        t0 = time.monotonic()
        res = ex.run(code, deadline_s=1.0)
        assert time.monotonic() - t0 < 1.0 + 0.5 + 3.0
        assert res.status == "timeout"
        assert_restarted(res)
        assert ex.run("1 + 1").value == "2"
    finally:
        ex.close()


def test_a_cell_blocked_in_c_past_the_grace_gets_a_fresh_kernel(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, modules=RAW, interrupt_grace_s=0.5)
    try:
        code = "import os\nr, w = os.pipe()\nos.read(r, 1)"
        t0 = time.monotonic()
        res = ex.run(code, deadline_s=1.0)
        assert time.monotonic() - t0 < 1.0 + 0.5 + 3.0
        assert res.status == "timeout" and res.restarted
        busy = ex.run("while True:\n    pass", deadline_s=0.5)  # a plain busy loop keeps the session
        assert busy.status == "timeout" and not busy.restarted
    finally:
        ex.close()


def test_process_layer_only_still_keeps_host_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYRUA_KERNEL_TEST_KEY", SECRET)
    ex, _ = make(tmp_path, modules=RAW, kernel=KernelConfig(seccomp=False, landlock=False))
    try:
        layers = ex.wait_ready()
        assert not layers["seccomp"]["active"] and not layers["landlock"]["active"]
        env = ex.run("import os\ndict(os.environ)")
        assert SECRET not in env.to_text()
        mem = ex.run(f"os.open('/proc/{os.getpid()}/environ', os.O_RDONLY)")
        assert mem.status == "error" and "PermissionError" in mem.exception
        kill = ex.run(f"os.kill({os.getpid()}, 0)")  # the host is not in the kernel's PID namespace
        assert kill.status == "error" and "ProcessLookupError" in kill.exception
        assert "own pid" in layers["process"]["detail"]
        import socket

        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            listener.settimeout(0.5)
            port = listener.getsockname()[1]
            connect = ex.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)")
            assert connect.status == "error" and "Error" in connect.exception, connect.to_text()
            with pytest.raises(TimeoutError):
                listener.accept()  # nothing arrived: the kernel has a network namespace of its own
    finally:
        ex.close()


def test_close_kills_the_kernel(tmp_path: Path) -> None:
    ex, _ = make(tmp_path)
    ex.wait_ready()
    pid = ex.pid
    assert pid is not None
    ex.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(RuntimeError, match="closed"):
        ex.run("1")


def test_a_kernel_still_running_at_the_episode_end_is_killed(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, modules=RAW, interrupt_grace_s=0.5)
    try:
        import threading

        timer = threading.Timer(0.5, lambda: ex.cancel.cancel(EpisodeFinished("reset")))
        timer.start()
        t0 = time.monotonic()
        res = ex.run("import os\nr, w = os.pipe()\nos.read(r, 1)", deadline_s=30)
        assert time.monotonic() - t0 < 0.5 + 0.5 + 3.0
        assert res.status == "episode_finished" and res.episode_finished == "reset" and res.restarted
        again = ex.run("robo.close('left')")  # every further move: EpisodeFinished from the host
        assert again.status == "episode_finished" and again.episode_finished == "reset"
    finally:
        ex.close()


def test_a_thread_left_running_after_the_cell_gets_a_fresh_kernel(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, modules=("threading",))
    try:
        ordinary = ex.run("import cv2\na = np.random.rand(400, 400)\nb = cv2.GaussianBlur(a, (9, 9), 2)\n"
                          "c = a @ a\nx = 1\nfloat(b.sum() > 0)")
        assert ordinary.status == "ok" and not ordinary.restarted, ordinary.to_text()
        left = ex.run("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()")
        assert left.restarted and "left 1 thread(s) running" in left.to_text()
        assert "NameError" in ex.run("x").exception
    finally:
        ex.close()
