"""`pyrua-dojo eval` planning (shards, resume state from disk, refusing a changed configuration) and `merge`, on real
result files written by ResultWriter. The twin episodes themselves are in test_eval_runner_twin.py."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from pyrua_dojo.cli import main as cli_main
from pyrua_dojo.evaluate import episode_run, merge, runner
from pyrua_dojo.harness.result_files import (
    AgentRecord,
    ResultWriter,
    read_agent_record,
    read_result_file,
    write_agent_record,
)
from pyrua_dojo.evaluate.plan import EVAL_FILE, EpisodeKey, EvalSettings, Shard, make_plan, shard_of


def settings(tmp_path: Path, **kw) -> EvalSettings:
    base = dict(tasks=("general_pickup", "align_blocks"), seeds=(0, 1), episodes=10, out=tmp_path / "eval_result")
    base.update(kw)
    return EvalSettings(**base)


def test_shards_partition_every_episode_once_and_evenly():
    keys = [EpisodeKey(t, s, i) for t in ("general_pickup", "stack_blocks", "align_blocks") for s in (0, 1, 2)
            for i in range(50)]
    for n in (1, 2, 3, 4, 7):
        owners = {k: [i for i in range(1, n + 1) if Shard(i, n).owns(k)] for k in keys}
        assert all(len(v) == 1 for v in owners.values())
        # within every (task, seed), shard sizes differ by at most one
        for t in ("general_pickup", "stack_blocks", "align_blocks"):
            for s in (0, 1, 2):
                sizes = Counter(shard_of(k, n) for k in keys if (k.task, k.seed) == (t, s))
                assert max(sizes.values()) - min(sizes.values()) <= 1 and len(sizes) == n
    # a pure function of the key: the same on every machine and call, whatever else is planned
    again = [shard_of(EpisodeKey(k.task, k.seed, k.layout_id), 4) for k in keys[:20]]
    assert [shard_of(k, 4) for k in keys[:20]] == again
    assert len({shard_of(EpisodeKey("general_pickup", 0, 0), 4), shard_of(EpisodeKey("general_pickup", 0, 1), 4)}) == 2


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", "2/-1"])
def test_bad_shard_is_refused(text):
    with pytest.raises(ValueError, match="i/n"):
        Shard.parse(text)


def test_bad_settings_are_refused_with_a_reason(tmp_path):
    with pytest.raises(ValueError, match="unknown twin task"):
        settings(tmp_path, tasks=("no_such_task",))
    with pytest.raises(ValueError, match="same --run-id"):
        settings(tmp_path, shard=Shard(1, 2))
    with pytest.raises(ValueError, match="needs --model"):
        settings(tmp_path, planner="openai")
    with pytest.raises(ValueError, match="program file not found"):
        settings(tmp_path, program=tmp_path / "nope.py")
    with pytest.raises(ValueError, match="given twice"):
        settings(tmp_path, seeds=(0, 0))
    with pytest.raises(ValueError, match="--episodes"):
        settings(tmp_path, episodes=0)
    assert cli_main(["eval", "--tasks", "general_pickup", "--seeds", "x"]) == 2


def test_plan_covers_layouts_and_counts_booked_episodes_as_done(tmp_path):
    s = settings(tmp_path, run_id="2026-11-01_00-00-00")
    plan = make_plan(s)
    assert len(plan.keys) == 2 * 2 * 10 and not plan.done and not plan.resumed
    loc = s.location("general_pickup", 1, plan.run_id)
    assert loc.path == (tmp_path / "eval_result/RoboDojo/general_pickup/PyRUA_Dojo/arx_x5"
                        / "1_ckpt_name=scripted,action_type=joint/2026-11-01_00-00-00")
    w = ResultWriter(loc)
    w.record(3, True, 1.0)
    w.record(7, False, 0.25)
    w.record(42, False, 0.0)  # booked, but outside this plan (--episodes 10)
    plan = make_plan(s)
    assert set(plan.done) == {EpisodeKey("general_pickup", 1, 3), EpisodeKey("general_pickup", 1, 7)}
    assert len(plan.pending) == 38
    # a shard sees only its own share of the done and pending episodes
    halves = [make_plan(settings(tmp_path, run_id=plan.run_id, shard=Shard(i, 2))) for i in (1, 2)]
    assert sorted(halves[0].keys + halves[1].keys) == sorted(plan.keys)
    assert set(halves[0].done) | set(halves[1].done) == set(plan.done)


def test_the_same_command_resumes_the_latest_run_and_a_changed_one_is_refused(tmp_path):
    s = settings(tmp_path)
    first = make_plan(s)
    runner._write_eval_files(s, first)
    ResultWriter(first.locations[("align_blocks", 0)]).record(0, False, 0.0)
    again = make_plan(settings(tmp_path))
    assert again.resumed and again.run_id == first.run_id and EpisodeKey("align_blocks", 0, 0) in again.done
    program = tmp_path / "prog.py"
    program.write_text("# %% x\nprint(1)\n")
    with pytest.raises(ValueError, match="other settings .*program"):
        make_plan(settings(tmp_path, program=program, ckpt_name="scripted"))
    fresh = make_plan(settings(tmp_path, new_run=True, run_id=None))
    assert not fresh.resumed and not fresh.done
    saved = json.loads((first.locations[("align_blocks", 0)].path / EVAL_FILE).read_text())
    assert saved["identity"]["planner"] == "scripted" and saved["run_id"] == first.run_id
    # The twin's conditions are part of the run's identity (realistic masks and an unknown station by default).
    assert (saved["identity"]["seg_noise"], saved["identity"]["station"]) == ("realistic", "unknown")
    with pytest.raises(ValueError, match="other settings .*seg_noise"):
        make_plan(settings(tmp_path, seg_noise="none"))


def _book(s: EvalSettings, run_id: str, task: str, layouts: dict[int, tuple[bool, float]], video: bool = True) -> None:
    loc = s.location(task, 0, run_id)
    w = ResultWriter(loc)
    for layout, (success, score) in layouts.items():
        write_agent_record(loc.path, AgentRecord(task, 0, layout, success, score, "finished", 3, 1000, 0, 100, None,
                                                 50, 200, 1.0))
        index = w.record(layout, success, score).index
        if video:
            name = f"episode_{index:07d}_cam_head_{'success' if success else 'fail'}.mp4"
            (loc.path / name).write_bytes(b"v%d" % layout)


def test_merge_joins_shards_by_path_and_is_idempotent(tmp_path):
    run_id = "2026-11-02_00-00-00"
    a = settings(tmp_path / "a", run_id=run_id, shard=Shard(1, 2))
    b = settings(tmp_path / "b", run_id=run_id, shard=Shard(2, 2))
    _book(a, run_id, "general_pickup", {0: (True, 1.0), 2: (False, 0.5)})
    _book(b, run_id, "general_pickup", {1: (False, 0.0), 3: (True, 1.0)})
    _book(b, run_id, "align_blocks", {5: (False, 0.0)})
    out = tmp_path / "merged"
    stdout = io.StringIO()
    assert merge.run_cli([str(a.out), str(b.out)], str(out), stdout=stdout, err=io.StringIO()) == 0
    assert "5 episode(s) booked" in stdout.getvalue()
    loc = settings(tmp_path, run_id=run_id, out=out).location("general_pickup", 0, run_id)
    merged = read_result_file(loc.result_path)
    assert [(e.index, e.layout_id, e.success, e.score) for e in merged.episodes] == [
        (0, 0, True, 1.0), (1, 2, False, 0.5), (2, 1, False, 0.0), (3, 3, True, 1.0)]
    assert merged.eval_time == 4 and merged.success_rate == 0.5
    for layout in (0, 1, 2, 3):
        assert read_agent_record(loc.path / "episodes" / f"layout_{layout:04d}").layout_id == layout
    # videos follow their episode to its new index
    assert (loc.path / "episode_0000002_cam_head_fail.mp4").read_bytes() == b"v1"
    assert (loc.path / "episode_0000003_cam_head_success.mp4").read_bytes() == b"v3"
    # merging again books nothing; a different outcome for a booked layout is a reported conflict
    again = merge.merge_trees([a.out, b.out], out)
    assert (again.booked, again.already_there, again.conflicts) == (0, 5, ())
    c = settings(tmp_path / "c", run_id=run_id)
    _book(c, run_id, "general_pickup", {0: (False, 0.0)}, video=False)
    err = io.StringIO()
    assert merge.run_cli([str(c.out)], str(out), stdout=io.StringIO(), err=err) == 1
    assert "layout 0" in err.getvalue() and "kept the destination's" in err.getvalue()
    assert read_result_file(loc.result_path).episodes[0].success is True


def test_merge_refuses_bad_input(tmp_path):
    err = io.StringIO()
    assert merge.run_cli([str(tmp_path / "none")], str(tmp_path / "out"), stdout=io.StringIO(), err=err) == 2
    assert "results directory not found" in err.getvalue()
    s = settings(tmp_path / "a", run_id="r")
    _book(s, "r", "general_pickup", {0: (True, 1.0)})
    err = io.StringIO()
    assert merge.run_cli([str(s.out)], str(s.out), stdout=io.StringIO(), err=err) == 2
    assert "is the destination itself" in err.getvalue()


def test_a_booked_episode_without_its_record_gets_it_back_from_the_agent_runs(tmp_path):
    """A kill between the twin's booking and the agent record: the resume attaches the agent's run directory."""
    from pyrua_dojo.runtime.trace import RunTrace

    s = settings(tmp_path, run_id="2026-11-03_00-00-00", tasks=("general_pickup",), seeds=(0,), episodes=3)
    key = EpisodeKey("general_pickup", 0, 1)
    run_root = episode_run._agent_runs_root(s, s.run_id, key)
    agent_run = run_root / "general_pickup" / "20261103-000000-env0-ep0001"
    trace = RunTrace(agent_run, meta={"task": "general_pickup", "seed": 0, "env_idx": 0})
    trace.update_result(episode={"steps_used": 200})
    trace.finish("finished", counts={"llm_calls": 2, "steps_used": 200},
                 tokens={"prompt_tokens": 500, "cached_tokens": 0, "completion_tokens": 20}, cost_usd=None)
    (run_root / "episodes.jsonl").write_text(json.dumps(
        {"run_dir": str(agent_run), "env_idx": 0, "task": "general_pickup", "seed": 0, "started_at": 1.0}) + "\n")
    loc = s.location("general_pickup", 0, s.run_id)
    ResultWriter(loc).record(1, False, 0.25)
    plan = make_plan(s)
    assert episode_run.recover_agent_records(s, plan) == [key]
    rec = read_agent_record(loc.path / "episodes" / "layout_0001")
    assert (rec.layout_id, rec.success, rec.score, rec.llm_calls, rec.input_tokens, rec.steps_used) == \
        (1, False, 0.25, 2, 500, 200)
    assert "recovered" in rec.extra and rec.extra["failure"] is None
    assert episode_run.recover_agent_records(s, make_plan(s)) == []  # nothing left to recover


def test_stability_check_of_a_layout_asks_a_real_twin():
    # every twin layout of seeds 0 and 1 passes the stability check today (checked over all 550); a layout that fails
    # it is dropped from the count instead of being retried forever
    assert episode_run.is_unstable(EpisodeKey("general_pickup", 0, 0)) is False
    with pytest.raises(ValueError, match="layout_id must be in"):
        episode_run.is_unstable(EpisodeKey("general_pickup", 0, 999))


def test_layouts_picks_layout_ids_and_relay_is_a_planner(tmp_path):
    s = settings(tmp_path, episodes=None, layouts="3,5-6", planner="relay", run_id="2026-11-01_00-00-00")
    assert [k.layout_id for k in make_plan(s).keys] == [3, 5, 6] * 4
    assert s.ckpt == "relay" and s.identity()["planner"] == "relay"
    with pytest.raises(ValueError, match="out of range"):
        settings(tmp_path, episodes=None, layouts="99")
    with pytest.raises(ValueError, match="either --episodes or --layouts"):
        settings(tmp_path, layouts="3")
