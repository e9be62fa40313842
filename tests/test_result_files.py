"""RoboDojo result files: the writer's exact format, resume and concurrency, and reading runs as summarize does."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from pyrua_dojo.harness.result_files import (
    AgentRecord,
    EpisodeResult,
    ResultFileError,
    ResultWriter,
    RunKey,
    RunLocation,
    additional_info,
    agent_record_dir,
    load_agent_records,
    new_run_id,
    read_agent_record,
    read_result_file,
    resolve_root,
    scan_results,
    write_agent_record,
)

INFO = "ckpt_name=gpt,action_type=joint"


def _loc(root: Path, task: str = "stack_blocks", seed: int = 0, run_id: str = "2026-08-01_10-00-00",
         info: str = INFO, policy: str = "PyRUA_Dojo") -> RunLocation:  # fmt: skip
    return RunLocation(root, task, policy, "arx_x5", seed, info, run_id)


def _write_raw(path: Path, details: dict[str, object], **header: object) -> None:
    path.mkdir(parents=True, exist_ok=True)
    body = {"success_rate": 0.0, "eval_time": len(details), "score": 0.0, **header, "details": details}
    (path / "_result.json").write_text(json.dumps(body, indent=2))


def _record(root: str, worker: int, count: int) -> None:
    writer = ResultWriter(_loc(Path(root)))
    for i in range(count):
        writer.record(worker * 100 + i, i % 2 == 0, 1.0 if i % 2 == 0 else 0.25)


def test_location_paths_round_trip(tmp_path: Path) -> None:
    loc = _loc(tmp_path / "eval_result" / "RoboDojo", seed=2)
    expected = tmp_path / "eval_result/RoboDojo/stack_blocks/PyRUA_Dojo/arx_x5" / f"2_{INFO}" / "2026-08-01_10-00-00"
    assert loc.path == expected
    assert RunLocation.from_path(loc.path) == loc
    assert loc.key == RunKey("stack_blocks", "PyRUA_Dojo", "arx_x5", 2)
    assert additional_info("gpt", "joint") == INFO
    assert len(new_run_id()) == len("2026-08-01_10-00-00")
    with pytest.raises(ValueError, match="seed"):
        RunLocation(tmp_path, "t", "p", "c", -1, "", "r")
    with pytest.raises(ValueError, match="policy"):
        RunLocation(tmp_path, "t", "a/b", "c", 0, "", "r")
    with pytest.raises(ValueError, match="<seed>_"):
        RunLocation.from_path(tmp_path / "t/p/c/seedless/run")


def test_writer_produces_robodojo_format(tmp_path: Path) -> None:
    writer = ResultWriter(_loc(tmp_path))
    assert writer.episodes() == ()
    assert writer.record(7, True, 1.0) == EpisodeResult(0, 7, True, 1.0)
    assert writer.record(3, False, 0.15) == EpisodeResult(1, 3, False, 0.15)
    writer.record(11, False, 0.0)
    expected = """{
  "success_rate": 0.3333333333333333,
  "eval_time": 3,
  "score": 38.33333333333333,
  "details": {
    "0": {
      "layout_id": 7,
      "success": true,
      "score": 1.0
    },
    "1": {
      "layout_id": 3,
      "success": false,
      "score": 0.15
    },
    "2": {
      "layout_id": 11,
      "success": false,
      "score": 0.0
    }
  }
}
"""
    assert writer.path.read_text() == expected
    assert sorted(p.name for p in writer.path.parent.iterdir()) == ["_result.json"]  # no temp file left


def test_writer_resumes_and_refuses_bad_input_without_touching_the_file(tmp_path: Path) -> None:
    loc = _loc(tmp_path)
    ResultWriter(loc).record(0, True, 1.0)
    writer = ResultWriter(loc)  # a new process picking the run up again
    assert writer.record(1, False, 0.5).index == 1
    before = writer.path.read_bytes()
    bad = [
        ((1, True, 1.0), "already booked as episode 1"),
        ((2, True, 0.5), "scores 1.0"),
        ((2, False, 1.0), "never gets the top"),
        ((2, False, 1.5), "0..1"),
        ((2, False, float("nan")), "finite"),
        ((-1, False, 0.0), "layout_id"),
        ((True, False, 0.0), "layout_id"),
        ((2, 1, 0.0), "success must be a bool"),
    ]
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            writer.record(*args)  # type: ignore[arg-type]
    assert writer.path.read_bytes() == before


def test_writer_never_overwrites_an_unreadable_file(tmp_path: Path) -> None:
    loc = _loc(tmp_path)
    loc.path.mkdir(parents=True)
    loc.result_path.write_text('{"details": {"0": {"layout_id": 0, "succ')
    with pytest.raises(ResultFileError, match="not valid JSON"):
        ResultWriter(loc).record(1, True, 1.0)
    assert loc.result_path.read_text() == '{"details": {"0": {"layout_id": 0, "succ'
    loc.result_path.write_text("[1, 2]")
    with pytest.raises(ResultFileError, match="refusing to overwrite"):
        ResultWriter(loc).record(1, True, 1.0)
    assert loc.result_path.read_text() == "[1, 2]"


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_record, args=(str(tmp_path), w, 8)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    run = read_result_file(_loc(tmp_path).result_path)
    assert [e.index for e in run.episodes] == list(range(32))
    assert sorted(e.layout_id for e in run.episodes) == sorted(w * 100 + i for w in range(4) for i in range(8))
    assert run.eval_time == 32 and run.success_rate == 0.5
    assert run.score == pytest.approx((16 * 1.0 + 16 * 0.25) / 32 * 100)


def test_reader_follows_summarize_on_robodojo_files(tmp_path: Path) -> None:
    """Keys sorted as integers, non-integer keys skipped, missing or null scores read as 0, no layout is tolerated."""
    loc = _loc(tmp_path)
    details = {
        "10": {"layout_id": 10, "success": True, "score": 1.0},
        "9": {"layout_id": 9, "success": False, "score": None},
        "2": {"layout_id": 2, "success": False},
        "note": {"text": "not an episode"},
        "0": {"success": True, "score": 1.0},
    }
    _write_raw(loc.path, details, success_rate=0.5, score=50.0)
    run = read_result_file(loc.result_path)
    assert run.location == loc
    assert run.episodes == (
        EpisodeResult(0, None, True, 1.0),
        EpisodeResult(2, 2, False, 0.0),
        EpisodeResult(9, 9, False, 0.0),
        EpisodeResult(10, 10, True, 1.0),
    )
    assert run.successes == 2 and run.success_rate == 0.5 and run.score == 50.0 and run.eval_time == 5
    assert set(run.by_layout()) == {2, 9, 10}
    _write_raw(loc.path, {"0": {"layout_id": "seven", "success": True, "score": 1.0}})
    with pytest.raises(ResultFileError, match="layout_id must be an integer"):
        read_result_file(loc.result_path)
    _write_raw(loc.path, {"0": {"layout_id": 1, "success": True, "score": "high"}})
    with pytest.raises(ResultFileError, match="not a number"):
        read_result_file(loc.result_path)


def test_scan_picks_the_latest_run_like_summarize(tmp_path: Path) -> None:
    root = tmp_path / "eval_result" / "RoboDojo"
    one = {"0": {"layout_id": 0, "success": True, "score": 1.0}}
    two = {**one, "1": {"layout_id": 1, "success": False, "score": 0.0}}
    # seed 0: the later run id wins; a newer run dir without _result.json is ignored.
    _write_raw(_loc(root, run_id="2026-08-01_10-00-00").path, one)
    _write_raw(_loc(root, run_id="2026-08-02_10-00-00").path, two)
    (_loc(root, run_id="2026-08-03_10-00-00").path / "_stream").mkdir(parents=True)
    # seed 1: two <seed>_<info> dirs; the one holding the greatest run id wins, whatever its name.
    _write_raw(_loc(root, seed=1, info="a", run_id="2026-08-05_00-00-00").path, two)
    _write_raw(_loc(root, seed=1, info="b", run_id="2026-08-04_00-00-00").path, one)
    # seed 2: the latest run is corrupt: skipped with a warning, no fall-back to the older one.
    _write_raw(_loc(root, seed=2, run_id="2026-08-01_00-00-00").path, one)
    bad = _loc(root, seed=2, run_id="2026-08-09_00-00-00")
    bad.path.mkdir(parents=True)
    bad.result_path.write_text("{")
    # noise summarize ignores: a resume manifest file, a directory not starting with "<seed>_".
    (_loc(root).path.parent.parent / "_resume_x.json").write_text("{}")
    (_loc(root).path.parent.parent / "notes").mkdir()
    tree = scan_results(root)
    key = RunKey("stack_blocks", "PyRUA_Dojo", "arx_x5", 0)
    assert set(tree.runs) == {key, RunKey("stack_blocks", "PyRUA_Dojo", "arx_x5", 1)}
    assert tree.runs[key].location.run_id == "2026-08-02_10-00-00" and len(tree.runs[key].episodes) == 2
    seed1 = tree.runs[RunKey("stack_blocks", "PyRUA_Dojo", "arx_x5", 1)]
    assert (seed1.location.additional_info, len(seed1.episodes)) == ("a", 2)
    assert any("seed 1 has runs under more than one directory" in w for w in tree.warnings)
    assert any("skipped the latest run" in w and "not valid JSON" in w for w in tree.warnings)
    assert tree.policy_seeds == {"PyRUA_Dojo": (0, 1, 2)}
    assert tree.policies == ("PyRUA_Dojo",)


def test_resolve_root(tmp_path: Path) -> None:
    root = tmp_path / "eval_result" / "RoboDojo"
    _write_raw(_loc(root).path, {})
    assert resolve_root(root) == root
    assert resolve_root(tmp_path / "eval_result") == root
    assert resolve_root(tmp_path) == root
    with pytest.raises(ValueError, match="no RoboDojo results"):
        resolve_root(root / "stack_blocks")
    with pytest.raises(ValueError, match="not found"):
        resolve_root(tmp_path / "missing")


def _agent(layout: int, success: bool = True, **changes: object) -> AgentRecord:
    values: dict[str, object] = dict(
        task="stack_blocks", seed=0, layout_id=layout, success=success, score=1.0 if success else 0.15,
        status="success" if success else "step_limit", llm_calls=12, input_tokens=300_000, cached_tokens=250_000,
        output_tokens=9_000, cost_usd=0.42, steps_used=431, step_limit=550, wall_s=380.5,
    )  # fmt: skip
    values.update(changes)
    return AgentRecord(**values)  # type: ignore[arg-type]


def test_agent_records_round_trip_and_tolerate_missing(tmp_path: Path) -> None:
    loc = _loc(tmp_path)
    writer = ResultWriter(loc)
    for layout, success in ((4, True), (5, False), (6, True), (7, False), (8, True)):
        writer.record(layout, success, 1.0 if success else 0.15)
    assert agent_record_dir(loc.path, 7) == loc.path / "episodes" / "layout_0007"
    path = write_agent_record(loc.path, _agent(4))
    assert path == loc.path / "episodes/layout_0004/result.json"
    assert read_agent_record(path) == _agent(4)
    assert read_agent_record(path.parent) == _agent(4)
    assert read_agent_record(loc.path / "episodes/layout_0099") is None
    # extra keys are kept and written back
    extra = json.loads(path.read_text()) | {"model": "m1", "trace": "trace.jsonl"}
    path.write_text(json.dumps(extra))
    assert read_agent_record(path).extra == {"model": "m1", "trace": "trace.jsonl"}  # type: ignore[union-attr]
    write_agent_record(loc.path, _agent(5, success=True))  # disagrees with the booking (failure)
    write_agent_record(loc.path, _agent(6, task="push_T"))  # belongs elsewhere
    broken = agent_record_dir(loc.path, 7) / "result.json"
    broken.parent.mkdir(parents=True)
    broken.write_text(json.dumps({"task": "stack_blocks", "seed": 0, "llm_calls": -3}))
    records, warnings = load_agent_records(read_result_file(loc.result_path))
    assert set(records) == {4, 5}  # 8 has no record: simply absent
    assert records[5].success is True
    assert len(warnings) == 3
    assert any("layout 5" in w and "RoboDojo booked success=False" in w for w in warnings)
    assert any("names task 'push_T'" in w for w in warnings)
    assert any("missing 'layout_id'" in w and "'llm_calls' has an invalid value -3" in w for w in warnings)


def test_agent_record_validation() -> None:
    with pytest.raises(ValueError, match="'input_tokens' has an invalid value"):
        _agent(1, input_tokens=1.5)
    with pytest.raises(ValueError, match="'score' has an invalid value"):
        _agent(1, score=2.0)
    assert _agent(1, cost_usd=None).cost_usd is None
    with pytest.raises(ResultFileError, match="expected a JSON object"):
        AgentRecord.from_json([1])
