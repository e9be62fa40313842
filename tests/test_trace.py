"""The run directory writer: atomic result.json, append-and-flush JSON lines, images, robo calls, readers."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass

import cv2
import numpy as np
import pytest

from pyrua_dojo.runtime.cells import ImageAttachment
from pyrua_dojo.runtime.trace import RunTrace, jsonable, load_run, read_jsonl, write_json_atomic


def test_result_json_says_running_at_start_and_final_status_at_end(tmp_path):
    trace = RunTrace(tmp_path / "r", config={"model": "m"}, meta={"task": "stack_blocks"})
    first = json.loads((tmp_path / "r" / "result.json").read_text())
    assert first["status"] == "running"
    assert first["config"] == {"model": "m"} and first["meta"] == {"task": "stack_blocks"}
    trace.update_result(progress={"cells": 2})
    assert json.loads((tmp_path / "r" / "result.json").read_text())["progress"] == {"cells": 2}
    final = trace.finish("finished", counts={"cells": 2})
    on_disk = json.loads((tmp_path / "r" / "result.json").read_text())
    assert on_disk == final
    assert on_disk["status"] == "finished" and on_disk["counts"] == {"cells": 2}
    assert on_disk["wall_s"] >= 0 and on_disk["ended_at"] >= on_disk["started_at"]
    kinds = [e["kind"] for e in read_jsonl(tmp_path / "r" / "events.jsonl")]
    assert kinds == ["start", "end"]
    assert not list((tmp_path / "r").glob(".*.tmp"))


def test_an_existing_run_is_never_overwritten(tmp_path):
    RunTrace(tmp_path / "r").finish("finished")
    with pytest.raises(FileExistsError, match="already holds a run"):
        RunTrace(tmp_path / "r")


def test_every_line_is_on_disk_as_soon_as_it_is_recorded(tmp_path):
    trace = RunTrace(tmp_path / "r")
    trace.record_call({"tool": "move_to", "kwargs": {"xyz": np.array([0.1, 0.2, 0.3])}, "dist": float("inf")})
    # read back while the writer still holds the file open: nothing is buffered
    calls = read_jsonl(tmp_path / "r" / "calls.jsonl")
    assert calls[0]["tool"] == "move_to"
    assert calls[0]["kwargs"]["xyz"] == [0.1, 0.2, 0.3]
    assert calls[0]["dist"] == "inf"  # strict JSON: no Infinity token
    assert calls[0]["cell"] is None
    trace.begin_cell(3)
    trace.record_call({"tool": "show"})
    trace.record_host_call({"tool": "state"})
    trace.end_cell()
    assert read_jsonl(tmp_path / "r" / "calls.jsonl")[1]["cell"] == 3
    assert read_jsonl(tmp_path / "r" / "host_calls.jsonl") == [{"t": pytest.approx(0, abs=60), "cell": 3, "tool": "state"}]
    for line in (tmp_path / "r" / "calls.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_prompt_is_written_byte_exact_with_its_hash(tmp_path):
    trace = RunTrace(tmp_path / "r")
    text = "System: naïve café — ünïcode\n\ncard\n"
    digest = trace.write_prompt(text, sections={"contract": 3})
    data = (tmp_path / "r" / "prompt.txt").read_bytes()
    assert data == text.encode("utf-8")
    assert digest == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "r" / "prompt.sha256").read_text() == f"{digest}  prompt.txt\n"
    assert trace.result["prompt"]["sha256"] == digest
    assert trace.result["prompt"]["sections"] == {"contract": 3}


def test_card_images_are_lossless_png(tmp_path):
    trace = RunTrace(tmp_path / "r")
    img = np.random.default_rng(0).integers(0, 255, (30, 40, 3), dtype=np.uint8)
    files = trace.write_card({"task": "t", "instruction": "do it"}, [("cam_head", img)])
    assert files == ["card/cam_head.png"]
    back = cv2.cvtColor(cv2.imread(str(tmp_path / "r" / files[0])), cv2.COLOR_BGR2RGB)
    assert np.array_equal(back, img)
    card = json.loads((tmp_path / "r" / "card.json").read_text())
    assert card["image_files"] == files and card["instruction"] == "do it"
    with pytest.raises(ValueError, match="uint8 HxWx3"):
        trace.write_card({}, [("bad", np.zeros((4, 4), dtype=np.float32))])


def test_turn_images_are_the_bytes_sent_and_listed_in_the_turn(tmp_path):
    trace = RunTrace(tmp_path / "r")
    img = ImageAttachment("image 1: cam_head @ step 7", "cam_head", 7, "image/jpeg", b"\xff\xd8jpegbytes", 64, 48)
    rec = trace.record_turn({"kind": "cell", "cell": 2, "code": "robo.show('cam_head')"}, [img])
    assert rec["images"][0]["file"] == "images/cell_002_01_cam_head.jpg"
    assert (tmp_path / "r" / rec["images"][0]["file"]).read_bytes() == b"\xff\xd8jpegbytes"
    turn = read_jsonl(tmp_path / "r" / "turns.jsonl")[0]
    assert turn["images"][0]["label"] == "image 1: cam_head @ step 7" and turn["images"][0]["step"] == 7


def test_concurrent_writers_never_interleave_lines(tmp_path):
    trace = RunTrace(tmp_path / "r")

    def writer(k: int) -> None:
        for i in range(200):
            trace.record_call({"writer": k, "i": i, "pad": "x" * 500})

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    calls = read_jsonl(tmp_path / "r" / "calls.jsonl")
    assert len(calls) == 800
    for k in range(4):
        assert [c["i"] for c in calls if c["writer"] == k] == list(range(200))


def test_read_jsonl_skips_a_torn_last_line_but_not_a_corrupt_middle_one(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "b": [1, 2')
    assert read_jsonl(p) == [{"a": 1}, {"a": 2}]
    p.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"x.jsonl:2"):
        read_jsonl(p)
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_jsonable_handles_numpy_dataclasses_and_oddities():
    @dataclass(frozen=True)
    class R:
        reached: bool
        err: float
        xyz: np.ndarray

    out = jsonable({"r": R(True, float("nan"), np.array([1.0, 2.0])), "n": np.int64(3), "b": b"abc", "s": {1}})
    assert out == {"r": {"reached": True, "err": "nan", "xyz": [1.0, 2.0]}, "n": 3, "b": "<3 bytes>", "s": [1]}
    assert isinstance(jsonable(object()), str)


def test_atomic_write_replaces_the_whole_file(tmp_path):
    p = tmp_path / "f.json"
    write_json_atomic(p, {"a": "x" * 10000})
    write_json_atomic(p, {"a": 1})
    assert json.loads(p.read_text()) == {"a": 1}


def test_load_run_summarises_progress(tmp_path):
    trace = RunTrace(tmp_path / "r")
    trace.record_turn({"kind": "cell", "cell": 1, "code": "x=1"})
    trace.record_turn({"kind": "invalid", "call_id": "c"})
    trace.record_llm_call({"ok": True})
    trace.record_llm_call({"ok": False})
    s = load_run(tmp_path / "r")
    assert (s.status, s.finished, s.turns, s.cells, s.llm_requests, s.llm_errors) == ("running", False, 2, 1, 2, 1)
    trace.finish("finished")
    assert load_run(tmp_path / "r").finished
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        load_run(tmp_path)


def test_late_records_after_finish_are_still_written(tmp_path):
    trace = RunTrace(tmp_path / "r")
    trace.finish("finished")
    trace.event("error", where="close")  # e.g. the episode host, after the agent ended
    trace.record_call({"tool": "state"})
    trace.update_result(episode={"closed_by": "reset"})
    again = trace.finish("cancelled", note="second")
    trace.close()
    kinds = [e["kind"] for e in read_jsonl(tmp_path / "r" / "events.jsonl")]
    assert kinds == ["start", "end", "error"]
    assert read_jsonl(tmp_path / "r" / "calls.jsonl")[0]["tool"] == "state"
    saved = json.loads((tmp_path / "r" / "result.json").read_text())
    assert saved == again and saved["episode"] == {"closed_by": "reset"} and saved["note"] == "second"
