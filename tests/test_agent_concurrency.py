"""Many episodes in one process keep their outputs, namespaces and traces apart; a killed process leaves a run
directory whose files parse and say how far it got."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pyrua_dojo.runtime.trace import load_run, read_jsonl
from tests.support.episode import build_episode, openai_planner
from tests.support.openai_server import FakeOpenAIServer, Slow, ToolCalls, finish_call, python_call

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_twenty_concurrent_episodes_stay_apart(tmp_path):
    n = 20
    with FakeOpenAIServer() as server:
        episodes = []
        for k in range(n):
            route = f"ep{k:02d}"
            server.script(
                [
                    Slow(0.05, ToolCalls((python_call(f"secret = '{route}'\nr = robo.move('left', steps={k + 1})\nrobo.show('cam_head')\nprint(secret, r['steps_used'])"),))),
                    Slow(0.05, ToolCalls((python_call("print('again', secret, robo.ident)"),))),
                    ToolCalls((finish_call("success", route),)),
                ],
                route=route,
            )
            episodes.append(build_episode(tmp_path, openai_planner(server.base_url(route)), name=route, robot={"ident": route}))
        results: dict[int, object] = {}
        threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, episodes[k].agent.run())) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)

        for k, ep in enumerate(episodes):
            route = f"ep{k:02d}"
            res = results[k]
            assert res.status == "finished" and res.finish["summary"] == route and res.cells == 2
            turns = read_jsonl(ep.run_dir / "turns.jsonl")
            assert f"{route} {k + 1}" in turns[0]["stdout"]
            assert turns[1]["stdout"].strip() == f"again {route} {route}"
            assert turns[0]["steps_used"] == k + 1
            calls = read_jsonl(ep.run_dir / "calls.jsonl")
            assert [c["kwargs"].get("steps") for c in calls if c["tool"] == "move"] == [k + 1]
            saved = json.loads((ep.run_dir / "result.json").read_text())
            assert saved["meta"]["episode"] == route and saved["counts"]["steps_used"] == k + 1
            # what each route's server saw came only from its own episode
            seen = json.dumps([r.body for r in server.requests(route)])
            others = [f"ep{j:02d}" for j in range(n) if j != k]
            assert route in seen and not any(f"'{o}'" in seen or f"again {o}" in seen for o in others)


def test_killing_the_process_mid_episode_leaves_a_readable_run(tmp_path):
    run_dir = tmp_path / "killed"
    with FakeOpenAIServer() as server:
        server.script([Slow(0.02, ToolCalls((python_call("robo.move('left', steps=1)\nprint('tick')"),)))] * 500)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.episode_child", server.base_url(), str(run_dir)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while len(read_jsonl(run_dir / "turns.jsonl")) < 6:
                assert child.poll() is None, child.stderr.read().decode()
                assert time.monotonic() < deadline, "the child made no progress"
                time.sleep(0.02)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        assert child.returncode == -signal.SIGKILL

    summary = load_run(run_dir)
    assert summary.status == "running" and not summary.finished
    assert summary.cells >= 6 and summary.llm_requests >= 6
    assert summary.result["progress"]["cells"] >= 5  # rewritten after every reply
    assert summary.last_turn["stdout"] == "tick\n"
    for name in ("turns", "llm_calls", "calls", "events"):
        records = read_jsonl(run_dir / f"{name}.jsonl")
        assert records, name
    assert read_jsonl(run_dir / "events.jsonl")[0]["kind"] == "start"
    prompt = (run_dir / "prompt.txt").read_bytes()
    assert (run_dir / "prompt.sha256").read_text().split()[0] == hashlib.sha256(prompt).hexdigest()
    assert json.loads((run_dir / "card.json").read_text())["task"] == "stack_blocks"
