"""Acceptance: a 2-task x 10-layout twin eval with the scripted planner, killed mid-run (the whole process group,
SIGKILL) and resumed, books the same episodes and gives the same summary as an uninterrupted run.

Every episode goes through the real stack: `pyrua-dojo eval` -> spawned workers -> play -> policy server on a free
port -> twin client with the plugin's deploy.py -> twin. The program is one small cell, so each episode holds until
the step limit of the two cheapest tasks (200 steps each)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyrua_dojo.evaluate import report
from pyrua_dojo.harness.result_files import read_agent_record, read_result_file, resolve_root
from pyrua_dojo.evaluate.summarize import summarize, to_json

pytestmark = pytest.mark.slow

TASKS = ("general_pickup", "align_blocks")
EPISODES = 10
PROGRAM = """# a minimal program: look at the state, go home, finish
# %% state
s = robo.state()
print(s)
# %% home
robo.home()
"""


def _eval(out: Path, program: Path, *, workers: int, popen: bool = False):
    cmd = [sys.executable, "-m", "pyrua_dojo.cli", "eval", "--tasks", ",".join(TASKS), "--episodes", str(EPISODES),
           "--program", str(program), "--segmentation", "none", "--workers", str(workers), "--out", str(out)]
    env = {**os.environ, "MUJOCO_GL": "egl", "COLUMNS": "120"}
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def _booked(out: Path) -> dict[str, list[tuple[int, bool, float]]]:
    """task -> [(layout, success, score)] booked in the run's _result.json files, in index order."""
    found: dict[str, list[tuple[int, bool, float]]] = {}
    for path in sorted((out / "RoboDojo").glob("*/*/*/*/*/_result.json")):
        run = read_result_file(path)
        assert [e.index for e in run.episodes] == list(range(len(run.episodes))), "indices must stay contiguous"
        found[run.key.task] = [(e.layout_id, e.success, e.score) for e in run.episodes]
    return found


def _worker_pids(parent: int) -> list[int]:
    """The eval's worker processes (spawned children of `parent` running multiprocessing's spawn_main)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and "spawn_main" in cmdline:
            pids.append(int(entry.name))
    return sorted(pids)


def _table(stdout: str) -> str:
    """The eval's closing summary table, without the run id in its title."""
    start = stdout.index("booked episodes")
    return re.sub(r"run \S+:", "run:", stdout[start:]).split("next:")[0]


def test_interrupted_and_resumed_eval_matches_an_uninterrupted_one(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    a, b = tmp_path / "a", tmp_path / "b"

    t0 = time.monotonic()
    full = _eval(a, program, workers=1)  # in-process; the interrupted run below uses two worker processes
    full_s = time.monotonic() - t0
    assert full.returncode == 0, full.stderr[-3000:]
    reference = _booked(a)
    assert sorted(reference) == sorted(TASKS)
    for task in TASKS:
        assert sorted(lid for lid, _, _ in reference[task]) == list(range(EPISODES))

    # the same eval on two workers: one worker is killed after the first booking (a replacement takes over), then
    # the whole process group once a few more episodes are booked
    proc = _eval(b, program, workers=2, popen=True)
    deadline = time.monotonic() + max(300.0, 3 * full_s)
    killed_worker = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            count = sum(len(v) for v in _booked(b).values()) if (b / "RoboDojo").exists() else 0
            if killed_worker is None and count >= 1:
                workers = _worker_pids(proc.pid)
                if workers:
                    killed_worker = workers[0]
                    os.kill(killed_worker, signal.SIGKILL)
            if killed_worker is not None and count >= 4:
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be interrupted"
    assert killed_worker is not None
    assert re.search(r"not booked - worker \d died \(exit code -9\)", " ".join(err.split())), err[-3000:]
    partial = _booked(b)
    booked_before = sum(len(v) for v in partial.values())
    assert 4 <= booked_before < len(TASKS) * EPISODES
    for eps in partial.values():  # nothing booked twice, nothing half-written
        assert len({lid for lid, _, _ in eps}) == len(eps)

    resumed = _eval(b, program, workers=2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    said = " ".join(resumed.stderr.split())
    assert "(resumed)" in said and f"{booked_before} already booked" in said
    assert f"{len(TASKS) * EPISODES - booked_before} to run" in said

    # the same episodes with the same outcomes (booking order may differ), the same summaries
    final = _booked(b)
    assert {t: sorted(v) for t, v in final.items()} == {t: sorted(v) for t, v in reference.items()}
    assert _table(resumed.stdout) == _table(full.stdout)
    ja, jb = to_json(summarize(a)), to_json(summarize(b))
    ja.pop("root", None), jb.pop("root", None)
    assert json.dumps(ja, sort_keys=True) == json.dumps(jb, sort_keys=True)
    (_, pa, _), (_, pb, _) = report.collect(a), report.collect(b)
    assert [(p.policy, dict(p.groups), dict(p.task_cells)) for p in pa] == \
        [(p.policy, dict(p.groups), dict(p.task_cells)) for p in pb]

    # every booked episode has its agent record, with the twin's failure reason
    root = resolve_root(b)
    for path in root.glob("*/*/*/*/*/_result.json"):
        run = read_result_file(path)
        for e in run.episodes:
            rec = read_agent_record(path.parent / "episodes" / f"layout_{e.layout_id:04d}")
            assert rec is not None and rec.layout_id == e.layout_id and rec.success == e.success
            assert rec.step_limit == 200 and "failure" in rec.extra

    # the episode page and the report work on what eval wrote
    from pyrua_dojo.evaluate.viewer import write_view

    first = next(root.glob("*/*/*/*/*/episodes/layout_0000"))
    page, _ = write_view(first, tmp_path / "ep.html")
    assert "Cell 1" in page.read_text() and "robo.home()" in page.read_text()
    built = report.build_report(b, tmp_path / "report")
    assert sorted(built.plots) == ["dimensions", "failures", "llm_calls", "steps", "token_budget"]

    # running it once more finds nothing to do
    again = _eval(b, program, workers=1)
    assert again.returncode == 0 and "0 to run" in " ".join(again.stderr.split())


def test_eval_with_an_llm_planner_books_its_usage(tmp_path):
    """Two episodes with the openai planner against a real HTTP server speaking the OpenAI protocol (in process,
    one worker): the agent records carry the LLM calls and tokens, and the report plots them."""
    from io import StringIO

    from rich.console import Console

    from pyrua_dojo.evaluate.plan import EvalSettings
    from pyrua_dojo.evaluate.runner import run_eval
    from tests.support.openai_server import FakeOpenAIServer, ToolCalls, finish_call, python_call

    usage = {"prompt_tokens": 5000, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 4000},
             "completion_tokens_details": {"reasoning_tokens": 0}}
    with FakeOpenAIServer() as server:
        for _ in range(2):
            server.script([ToolCalls((python_call("print(robo.state())\nrobo.home()"),), text="home", usage=usage),
                           ToolCalls((finish_call("failure", "only went home"),), usage=usage)])
        settings = EvalSettings(tasks=("general_pickup",), episodes=2, out=tmp_path / "er", planner="openai",
                                model="fake-model", base_url=server.base_url(), segmentation="none")
        log = StringIO()
        result = run_eval(settings, console=Console(file=log, width=200))
        assert len(server.requests()) == 4
    assert result.complete and len(result.finished) == 2, log.getvalue()
    root = settings.root
    for path in root.glob("*/*/*/*/*/_result.json"):
        assert "ckpt_name=fake-model" in str(path)
        for e in read_result_file(path).episodes:
            rec = read_agent_record(path.parent / "episodes" / f"layout_{e.layout_id:04d}")
            assert (rec.llm_calls, rec.input_tokens, rec.cached_tokens, rec.output_tokens) == (1, 10000, 8000, 100)
            assert rec.status == "finished" and rec.extra["failure"] == "step limit"
    (_, (policy,), _) = report.collect(settings.out)
    assert report.solved_within(policy.records, 10**9) == 0.0 and len(policy.records) == 2
