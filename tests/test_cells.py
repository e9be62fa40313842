"""The cell executor: notebook semantics, capture, tracebacks, deadlines, episode end, images, concurrency.

Cells run against `FakeRobo`, a small stand-in with the shape of `robo`: motions advance a step counter in
short chunks and check the cancel token between them, `show` captures an image, and the episode ends
(EpisodeFinished) after a configured number of moves.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest

from primitives.errors import CancelToken, CellInterrupted, EpisodeFinished
from primitives.results import CapturedImage
from pyrua_dojo.runtime.cells import CellConfig, CellExecutor, CellResult, clip


class FakeRobo:
    """Motions in 5 ms chunks that check the cancel token; the episode ends after `finish_after` moves."""

    def __init__(self, cancel: CancelToken, *, finish_after: int | None = None) -> None:
        self._cancel = cancel
        self._finish_after = finish_after
        self._shown: list[CapturedImage] = []
        self._held = threading.Lock()
        self._held.acquire()
        self._secret = "robot internals"
        self.moves = 0
        self.step = 0

    def move(self, chunks: int = 2) -> int:
        """Execute `chunks` chunks; returns the step count."""
        for _ in range(chunks):
            if self._finish_after is not None and self.moves >= self._finish_after:
                raise EpisodeFinished("success", "task solved")
            self._cancel.check()
            if self._cancel.wait(0.005):
                self._cancel.check()
            self.step += 1
        self.moves += 1
        return self.step

    def fail(self, value: float) -> None:
        """Validate an argument the way primitives do (ValueError before anything moves)."""
        self._validate(value)

    def _validate(self, value: float) -> None:
        if value < 0:
            raise ValueError(f"value must be >= 0, got {value}")

    def show(self, camera: str = "cam_head", *, height: int = 960, width: int = 1280, label: str = "") -> None:
        """Capture a synthetic RGB frame (red channel = step) for the LLM."""
        image = np.zeros((height, width, 3), np.uint8)
        image[..., 0] = 200
        image[: height // 2, :, 1] = 100
        self._shown.append(CapturedImage(source=camera, step=self.step, image=image, label=label))

    def stuck(self, seconds: float) -> None:
        """Block inside C (a lock wait) where no Python-level interruption can reach."""
        self._held.acquire(timeout=seconds)

    def drain(self) -> list[CapturedImage]:
        out, self._shown = self._shown, []
        return out


@pytest.fixture
def warnings_to_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo pytest's recording of warnings for one test, so they are written to sys.stderr as in production."""
    monkeypatch.setattr(warnings, "_showwarnmsg_impl",
                        lambda msg: sys.stderr.write(warnings._formatwarnmsg(msg)))  # type: ignore[attr-defined]
    monkeypatch.setattr(warnings, "filters", [("default", None, Warning, None, 0)])
    monkeypatch.setattr(warnings, "showwarning", warnings._showwarning_orig)  # type: ignore[attr-defined]


def make(tmp_path: Path, *, finish_after: int | None = None, **config: object) -> tuple[CellExecutor, FakeRobo]:
    cancel = CancelToken()
    robo = FakeRobo(cancel, finish_after=finish_after)
    cfg = CellConfig(primitive_paths=(__file__,), **config)  # type: ignore[arg-type]
    executor = CellExecutor({"robo": robo}, workspace=tmp_path / "ws", config=cfg, cancel=cancel,
                            drain_images=robo.drain)
    return executor, robo


# ----------------------------------------------------------------------------------------- notebook semantics


def test_trailing_expression_is_echoed_and_none_is_not(tmp_path: Path) -> None:
    ex, _ = make(tmp_path)
    assert ex.run("x = 20\nx * 2 + 2").value == "42"
    assert ex.run("_ + 1").value == "43"  # `_` holds the last echoed value
    assert ex.run("y = 3").value is None
    assert ex.run("None").value is None
    assert ex.run("print('hi')").value is None  # print returns None: not echoed
    long = ex.run("list(range(5000))")
    assert long.status == "ok" and long.value is not None
    assert len(long.value) < 4200 and "chars omitted" in long.value and long.value.endswith("4999]")


def test_variables_functions_and_imports_persist(tmp_path: Path) -> None:
    ex, robo = make(tmp_path)
    first = ex.run("import json\nfrom math import hypot\ndef double(v):\n    return 2 * v\nsteps = robo.move(3)")
    assert first.status == "ok", first.to_text()
    second = ex.run("json.dumps({'d': double(hypot(3, 4)), 'steps': steps, 'np': float(np.pi)})")
    assert second.status == "ok"
    assert second.value == repr('{"d": 10.0, "steps": 3, "np": 3.141592653589793}')
    assert robo.step == 3


def test_namespace_names_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="plain identifier"):
        CellExecutor({"__builtins__": {}}, workspace=tmp_path / "ws")
    with pytest.raises(ValueError, match="deadline_s"):
        CellConfig(deadline_s=0)
    with pytest.raises(ValueError, match="image_format"):
        CellConfig(image_format="gif")  # type: ignore[arg-type]
    ex, _ = make(tmp_path)
    with pytest.raises(TypeError):
        ex.run(b"x = 1")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------- capture


@pytest.mark.usefixtures("warnings_to_stderr")
def test_stdout_and_stderr_are_captured_truncated_and_logged(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, output_head_chars=100, output_tail_chars=100)
    result = ex.run("for i in range(2000):\n    print(f'line {i}')\nimport warnings\nwarnings.warn('careful')")
    assert result.status == "ok"
    assert result.stdout.startswith("line 0\nline 1\n")
    assert result.stdout.rstrip().endswith("line 1999")
    assert "chars omitted; full output in stdout.log] ..." in result.stdout
    assert len(result.stdout) < 300
    assert result.stdout_chars == sum(len(f"line {i}\n") for i in range(2000))
    assert "UserWarning: careful" in result.stderr and "<cell 1>:4" in result.stderr
    log = (tmp_path / "ws" / "stdout.log").read_text()
    assert "===== cell 1 =====" in log and "line 1000\n" in log and "line 1999\n" in log
    assert "careful" in (tmp_path / "ws" / "stderr.log").read_text()
    traced = ex.run("import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()")
    assert traced.status == "ok" and "ZeroDivisionError" in traced.stderr and traced.stdout == ""
    assert (tmp_path / "ws" / "cell_001.py").read_text().startswith("for i in range(2000)")


def test_clip_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "".join(f"{i:04d}\n" for i in range(1000))
    cut = clip(text, 200, where="stdout.log")
    assert cut.startswith("0000\n") and cut.endswith("0999\n")
    omitted = int(cut.split("... [")[1].split(" chars")[0])
    kept = cut.split("\n... [")[0] + "\n" + cut.split("] ...\n")[1]
    assert omitted == len(text) - len(kept)
    assert clip("short", 200) == "short"


def test_process_streams_are_not_redirected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ex, _ = make(tmp_path)
    host = threading.Timer(0.05, print, args=("host line",))  # another thread prints while the cell runs
    host.start()
    result = ex.run("time.sleep(0.3)\nprint('cell line')")
    host.join()
    ex.run("print('again')")
    out = capsys.readouterr().out
    assert "host line" in out and "cell line" not in out and "again" not in out
    assert result.stdout == "cell line\n"


@pytest.mark.usefixtures("warnings_to_stderr")
def test_to_text_shows_only_non_empty_sections(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, output_head_chars=50, output_tail_chars=50, value_max_chars=80)
    quiet = ex.run("a = 1")
    assert quiet.to_text() == f"cell 1: ok ({quiet.elapsed_s:.2f} s)"
    busy = ex.run("print('x' * 5000)\nimport warnings\nwarnings.warn('w')\n'v' * 5000")
    text = busy.to_text()
    assert text.splitlines()[0].startswith("cell 2: ok")
    for section in ("value:", "stdout:", "stderr:"):
        assert section in text
    assert "exception" not in text and "episode finished" not in text and "images" not in text
    assert len(text) < 700  # every field was cut on its own, the text as a whole is never cut
    failed = ex.run("1 / 0").to_text()
    assert "exception:" in failed and failed.rstrip().endswith("ZeroDivisionError: division by zero")


# ---------------------------------------------------------------------------------------------- exceptions


def test_traceback_is_trimmed_to_cell_frames_and_the_primitive_that_raised(tmp_path: Path) -> None:
    ex, robo = make(tmp_path)
    result = ex.run("a = 1\ndef helper(v):\n    return robo.fail(v)\nb = 2\nhelper(-1)\nc = 3")
    assert result.status == "error"
    text = result.exception or ""
    assert 'File "<cell 1>", line 5, in <module>\n    helper(-1)' in text
    assert 'File "<cell 1>", line 3, in helper\n    return robo.fail(v)' in text
    assert 'File "test_cells.py"' in text and "in _validate" in text and "raise ValueError" in text
    assert "in fail\n" not in text  # only the last primitive frame is shown
    assert "pyrua_dojo" not in text and "sandbox.py" not in text and "threading" not in text
    assert text.endswith("ValueError: value must be >= 0, got -1")
    assert ex.run("(a, b)").value == "(1, 2)"  # variables assigned before the exception remain
    assert ex.run("c").status == "error"


def test_chained_exceptions_and_library_errors(tmp_path: Path) -> None:
    ex, _ = make(tmp_path)
    result = ex.run("try:\n    np.linalg.inv(np.zeros((2, 2)))\nexcept np.linalg.LinAlgError as e:\n"
                    "    raise RuntimeError('could not invert') from e")
    text = result.exception or ""
    assert "LinAlgError: Singular matrix" in text and "direct cause" in text
    assert text.endswith("RuntimeError: could not invert")
    assert "numpy/linalg" not in text  # library internals are trimmed


def test_syntax_error_is_reported_with_its_line(tmp_path: Path) -> None:
    ex, _ = make(tmp_path)
    result = ex.run("x = 1\ny = (2,\nz = = 3")
    assert result.status == "syntax_error"
    assert result.exception is not None and "<cell 1>" in result.exception and "SyntaxError" in result.exception
    assert "line 3" in result.exception or "line 2" in result.exception
    assert ex.run("x").status == "error"  # nothing of a cell that does not parse runs
    assert ex.run("return 5").status == "syntax_error"
    assert ex.run("v = 1\x00").status == "syntax_error"
    nested = ex.run("x = " + "-" * 5000 + "1")
    assert nested.status == "syntax_error" and "too deeply nested" in (nested.exception or "")


def test_runaway_recursion_is_reported_compactly(tmp_path: Path) -> None:
    ex, _ = make(tmp_path)
    result = ex.run("def f(n):\n    return f(n + 1)\nf(0)")
    text = result.exception or ""
    assert result.status == "error" and text.endswith("RecursionError: maximum recursion depth exceeded")
    assert "[Previous line repeated" in text and text.count("return f(n + 1)") == 3
    assert ex.run("f").status == "ok"


# ----------------------------------------------------------------------------------------------- deadlines


def test_busy_loop_is_interrupted_and_the_namespace_survives(tmp_path: Path) -> None:
    ex, robo = make(tmp_path, deadline_s=0.3)
    ex.run("kept = 'before'")
    result = ex.run("n = 0\nwhile True:\n    n += 1")
    assert result.status == "timeout"
    assert 0.3 <= result.elapsed_s < 2.0
    text = result.exception or ""
    assert 'File "<cell 2>", line ' in text and "while True" in text or "n += 1" in text
    assert text.endswith("CellInterrupted: the cell ran past its 0.3 s deadline and was interrupted")
    assert "timeout" in result.to_text()
    after = ex.run("(kept, n > 0, robo.move(1))")
    assert after.status == "ok" and after.value == "('before', True, 1)"  # token cleared for the next cell


@pytest.mark.parametrize("loop", [
    "while True:\n    pass",
    "while True:\n    try:\n        time.sleep(10)\n    except:\n        pass",
    "while True:\n    try:\n        robo.move(1000)\n    except BaseException:\n        continue",
])
def test_deadline_reaches_sleeps_primitives_and_greedy_handlers(tmp_path: Path, loop: str) -> None:
    ex, robo = make(tmp_path, deadline_s=0.3)
    result = ex.run(loop)
    assert result.status == "timeout", result.to_text()
    assert result.elapsed_s < 2.0
    assert ex.run("robo.move(1)").status == "ok"


def test_thread_blocked_in_native_code_is_abandoned(tmp_path: Path) -> None:
    ex, robo = make(tmp_path, deadline_s=0.2, interrupt_grace_s=0.3)
    result = ex.run("robo.stuck(1.5)\nafter = True")
    assert result.status == "timeout"
    assert any("abandoned" in note for note in result.notes) and ex.abandoned_workers == 1
    assert result.elapsed_s < 1.4
    assert ex.run("1 + 1").value == "2"  # a fresh worker runs the next cell
    time.sleep(1.5)  # the stuck thread wakes up and meets its pending interruption
    assert ex.run("'after' in globals()").value == "False"


# ------------------------------------------------------------------------------------------ episode finished


@pytest.mark.parametrize("handler", [
    "except Exception:\n        pass",
    "except:\n        pass",
    "except BaseException:\n        pass",
    "except (ValueError, BaseException) as e:\n        last = e",
])
def test_episode_finished_cannot_be_swallowed(tmp_path: Path, handler: str) -> None:
    ex, robo = make(tmp_path, finish_after=3, deadline_s=5.0)
    result = ex.run(f"while True:\n    try:\n        robo.move()\n    {handler}")
    assert result.status == "episode_finished", result.to_text()
    assert result.episode_finished == "success"
    assert robo.moves == 3 and result.elapsed_s < 2.0
    assert "episode finished: success" in result.to_text()


def test_context_managers_and_finally_cannot_swallow_it_either(tmp_path: Path) -> None:
    ex, robo = make(tmp_path, finish_after=2, deadline_s=5.0)
    code = (
        "class Quiet:\n"
        "    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n"
        "def step():\n"
        "    try:\n        robo.move()\n    finally:\n        return 'swallowed'\n"
        "while True:\n"
        "    with Quiet():\n        step()\n"
    )
    result = ex.run(code)
    assert result.status == "episode_finished" and robo.moves == 2


def test_host_ends_the_episode_during_a_pure_python_loop(tmp_path: Path) -> None:
    ex, robo = make(tmp_path, deadline_s=10.0)
    timer = threading.Timer(0.2, ex.cancel.cancel, args=(EpisodeFinished("reset"),))
    timer.start()
    result = ex.run("while True:\n    try:\n        pass\n    except BaseException:\n        pass")
    timer.join()
    assert result.status == "episode_finished" and result.episode_finished == "reset"
    assert result.elapsed_s < 2.0
    # Reading still works after the end; motion raises at once.
    assert ex.run("robo.step").status == "ok"
    moved = ex.run("robo.move()")
    assert moved.status == "episode_finished" and moved.episode_finished == "reset"


def test_after_the_episode_ended_a_runaway_cell_is_still_a_timeout(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, deadline_s=0.3)
    ex.cancel.cancel(EpisodeFinished("step_limit"))
    result = ex.run("while True:\n    pass")
    assert result.status == "timeout" and result.episode_finished == "step_limit"
    assert "episode finished: step_limit" in result.to_text()


def test_interrupt_stops_a_running_cell(tmp_path: Path) -> None:
    ex, _ = make(tmp_path, deadline_s=10.0)
    timer = threading.Timer(0.2, ex.interrupt, args=(CellInterrupted("host"),))
    timer.start()
    result = ex.run("while True:\n    pass")
    timer.join()
    assert result.status == "error" and "CellInterrupted: host" in (result.exception or "")
    with pytest.raises(TypeError):
        ex.interrupt(ValueError("no"))  # type: ignore[arg-type]
    timer = threading.Timer(0.2, ex.interrupt, args=(EpisodeFinished("reset"),))
    timer.start()
    ended = ex.run("while True:\n    pass")
    timer.join()
    assert ended.status == "episode_finished" and ended.episode_finished == "reset"
    ex.close()
    with pytest.raises(RuntimeError, match="closed"):
        ex.run("1")


# ---------------------------------------------------------------------------------------------------- images


def _decode(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)


def test_images_are_labelled_downscaled_and_encoded(tmp_path: Path) -> None:
    ex, robo = make(tmp_path)
    result = ex.run("robo.move(3)\nrobo.show('cam_head', label='after move')\n"
                    "display(np.linspace(0, 1, 200 * 300).reshape(200, 300), label='ramp')")
    assert result.status == "ok" and result.dropped_images == 0
    head, ramp = result.images
    assert head.label == "image 1: cam_head @ step 3 (after move)" and head.mime == "image/jpeg"
    assert (head.width, head.height) == (640, 480)
    pixels = _decode(head.data)
    assert pixels.shape == (480, 640, 3)
    assert abs(int(pixels[400, 10, 2]) - 200) < 8 and abs(int(pixels[400, 10, 1])) < 8  # RGB sent as BGR
    assert ramp.label == "image 2: display (ramp)" and (ramp.width, ramp.height) == (300, 200)
    assert "images (attached after this text): image 1: cam_head @ step 3 (after move); image 2" in \
        result.to_text()


def test_images_are_capped_per_cell_keeping_the_latest(tmp_path: Path) -> None:
    ex, robo = make(tmp_path, max_images_per_cell=2, image_format="png", image_max_side=None)
    result = ex.run("for cam in ('cam_head', 'cam_left', 'cam_right'):\n"
                    "    robo.move(1)\n    robo.show(cam, height=48, width=64)\n"
                    "display(np.zeros((10, 20), bool))")
    assert [image.label for image in result.images] == ["image 1: cam_right @ step 3", "image 2: display"]
    assert result.dropped_images == 2 and any("2 earlier image(s) dropped" in n for n in result.notes)
    right = _decode(result.images[0].data)
    assert result.images[0].mime == "image/png" and right.shape == (48, 64, 3)
    assert int(right[40, 5, 2]) == 200  # lossless
    assert ex.run("robo.step").images == ()  # images are consumed by the cell that captured them


def test_display_rejects_what_is_not_an_image(tmp_path: Path) -> None:
    ex, _ = make(tmp_path)
    for bad in ("np.zeros((4, 4, 2))", "np.full((4, 4), 2.0)", "np.array(['a'])", "np.full((4, 4), 300)"):
        result = ex.run(f"display({bad})")
        assert result.status == "error" and "ValueError: display()" in (result.exception or ""), bad
        assert result.images == ()


# --------------------------------------------------------------------------------------------- concurrency


@pytest.mark.usefixtures("warnings_to_stderr")
def test_twenty_executors_in_threads_keep_outputs_and_namespaces_apart(tmp_path: Path) -> None:
    results: dict[int, list[CellResult]] = {}
    errors: list[BaseException] = []

    def episode(k: int) -> None:
        try:
            ex, robo = make(tmp_path / f"ep{k}", deadline_s=20.0)
            out = [ex.run(f"mine = {k}\nfor i in range(30):\n    print('episode', mine, i)\n"
                          "    time.sleep(0.001)\nrobo.move(2)")]
            out.append(ex.run("import warnings\nwarnings.warn(f'from {mine}')\nprint(mine * 2)\nmine"))
            results[k] = out
            ex.close()
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=episode, args=(k,)) for k in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and len(results) == 20
    for k, (first, second) in results.items():
        lines = first.stdout.splitlines()
        assert lines == [f"episode {k} {i}" for i in range(30)], (k, first.stdout[:200])
        assert first.value == "2"
        assert second.value == str(k) and second.stdout == f"{2 * k}\n"
        assert f"UserWarning: from {k}" in second.stderr and second.stderr.count("UserWarning") == 1
        log = (tmp_path / f"ep{k}" / "ws" / "stdout.log").read_text()
        assert f"episode {k} 29" in log and all(f"episode {j} " not in log for j in range(20) if j != k)


def test_cells_run_under_a_tracer(tmp_path: Path) -> None:
    """Coverage tools and debuggers trace every thread; interruption must not wedge the interpreter."""
    ex, _ = make(tmp_path, deadline_s=0.3)
    lines: list[int] = []

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "line" and frame.f_code.co_filename.startswith("<cell"):
            lines.append(frame.f_lineno)
        return tracer

    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        assert ex.run("x = 1\ny = x + 1\ny").value == "2"
        assert ex.run("while True:\n    pass").status == "timeout"
        assert ex.run("y").value == "2"
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    assert lines[:2] == [1, 2]
