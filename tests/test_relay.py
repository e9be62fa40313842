"""The relay: an OpenAI-compatible endpoint answered through `relay show` / `relay reply` (real HTTP, real files)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import openai
import pytest

from pyrua_dojo.runtime.cells import ImageAttachment
from pyrua_dojo.llm import OpenAIConfig, tool_specs, OpenAIPlanner, PlannerStop, RetryPolicy, ToolResult
from pyrua_dojo.relay.server import TOKEN_COUNT, Relay, RelayDir
from pyrua_dojo.relay.commands import reply, show
from tests.support.openai_server import FakeOpenAIServer, ToolCalls, finish_call, python_call


def _png(color: tuple[int, int, int], w: int = 64, h: int = 48) -> bytes:
    img = np.zeros((h, w, 3), np.uint8)
    img[:] = color
    ok, buf = cv2.imencode(".png", img)
    assert ok
    return buf.tobytes()


def _jpeg(w: int = 40, h: int = 30) -> bytes:
    img = np.full((h, w, 3), 200, np.uint8)
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    return buf.tobytes()


def _image(label: str, data: bytes, mime: str = "image/png", w: int = 64, h: int = 48) -> ImageAttachment:
    return ImageAttachment(label=label, source="cam_head", step=0, mime=mime, data=data, width=w, height=h)


PROMPT = SimpleNamespace(system="You are a robot.", card_text="# Task card\nStack the blocks.",
                         card_images=(_image("image 1: cam_head @ step 0", _png((10, 20, 30))),))


def _config(base_url: str) -> OpenAIConfig:
    return OpenAIConfig(model="relay", base_url=base_url, api_key="x", request_timeout_s=60.0,
                        retry=RetryPolicy(max_attempts=1), reasoning_effort="high")


class _Never:
    def is_set(self) -> bool:
        return False


def _converse(planner: OpenAIPlanner) -> list[str]:
    """Two replies: a python call answered with text and two images (PNG and JPEG), then finish."""
    planner.begin(PROMPT)
    first = planner.next(_Never(), None)
    [call] = first.tool_calls
    planner.respond([ToolResult(call.id, "cell 1: ok\nstdout: 1", images=(
        _image("image 1: cam_left_wrist @ step 3", _png((200, 0, 0))),
        _image("image 2: cam_head @ step 3", _jpeg(), "image/jpeg", 40, 30)))])
    second = planner.next(_Never(), None)
    planner.close()
    return [c.name for c in first.tool_calls + second.tool_calls]


def _answer_in_thread(relay_dir: Path, answers: list[dict]) -> threading.Thread:
    def run() -> None:
        for a in answers:
            shown = show(relay_dir, wait_s=30, poll_s=0.05)
            assert shown.kind == "turn", shown.text
            reply(relay_dir, turn=shown.turn, **a)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_the_relay_receives_exactly_what_the_planner_sends_to_a_real_endpoint(tmp_path):
    with FakeOpenAIServer() as fake:
        fake.script([ToolCalls((python_call("print(1)"),)), ToolCalls((finish_call("success", "stacked"),))])
        assert _converse(OpenAIPlanner(_config(fake.base_url()))) == ["python", "finish"]
        expected = [r.body for r in fake.requests()]
    relay = Relay(tmp_path / "relay", answer_timeout_s=30).start()
    answerer = _answer_in_thread(relay.dir.path, [{"code": "print(1)"}, {"finish": ("success", "stacked")}])
    assert _converse(OpenAIPlanner(_config(relay.url))) == ["python", "finish"]
    answerer.join(10)
    relay.end({"status": "test"})
    rd = RelayDir(tmp_path / "relay")
    assert rd.request_turns() == [1, 2]
    received = [json.loads(rd.request_file(t).read_bytes()) for t in (1, 2)]
    assert received == expected  # same messages (ids of the tool calls included), tools, settings
    assert received[1]["messages"][-2] == {"role": "tool", "tool_call_id": "call_1_1", "content": "cell 1: ok\nstdout: 1"}
    # every image of turn 2 was saved as a valid PNG (the JPEG converted), in order, and shown by path
    text = rd.shown_file(2).read_text()
    paths = [Path(line.split("-> ")[1].rstrip("]")) for line in text.splitlines() if line.startswith("[IMAGE -> ")]
    assert [p.name for p in paths] == ["turn0002_01.png", "turn0002_02.png"]
    for p, (w, h) in zip(paths, [(64, 48), (40, 30)]):
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).shape[:2] == (h, w)
    assert "=== SYSTEM PROMPT ===" not in text and "=== TOOL RESULT (of your call call_1_1) ===" in text
    first = rd.shown_file(1).read_text()
    assert "You are a robot." in first and "--- tool python(code) ---" in first and "Stack the blocks." in first
    # usage is the stated estimate, and the transcript holds what was shown and answered
    response = json.loads(rd.response_file(1).read_text())
    assert response["usage"]["prompt_tokens"] > 85 and response["pyrua_relay"]["token_count"] == TOKEN_COUNT
    md = (tmp_path / "relay" / "transcript.md").read_text()
    assert "print(1)" in md and '"status": "success"' in md and "Stack the blocks." in md
    events = [json.loads(line)["event"] for line in (tmp_path / "relay" / "transcript.jsonl").read_text().splitlines()]
    assert events.count("request") == 2 and events.count("answer") == 2 and events[-1] == "ended"


def test_reply_refuses_a_second_answer_and_bad_input_writes_nothing(tmp_path):
    relay = Relay(tmp_path / "r", answer_timeout_s=30).start()
    client = openai.OpenAI(base_url=relay.url, api_key="x")
    assert [m.id for m in client.models.list()] == ["relay"]
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("r", client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "hello"}], tools=tool_specs())), daemon=True)
    t.start()
    assert show(relay.dir.path, wait_s=10, poll_s=0.05).turn == 1
    with pytest.raises(ValueError, match="finish status must be one of"):
        reply(relay.dir.path, finish=("done", "x"))
    with pytest.raises(ValueError, match="the cell is empty"):
        reply(relay.dir.path, code="  \n")
    with pytest.raises(ValueError, match="turn 5 does not exist"):
        reply(relay.dir.path, code="print(1)", turn=5)
    assert not relay.dir.answer_file(1).exists()
    assert reply(relay.dir.path, code="print(1)").startswith("answered turn 1")
    with pytest.raises(ValueError, match="turn 1 already has an answer"):
        reply(relay.dir.path, code="print(2)", turn=1)
    t.join(10)
    message = got["r"].choices[0].message  # any OpenAI client gets a well-formed completion
    assert message.tool_calls[0].function.name == "python"
    assert json.loads(message.tool_calls[0].function.arguments) == {"code": "print(1)"}
    with pytest.raises(ValueError, match="nothing to answer: no turn is waiting"):
        reply(relay.dir.path, code="print(3)")
    nothing = show(relay.dir.path, wait_s=0.3, poll_s=0.05)
    assert (nothing.kind, nothing.exit_code) == ("nothing", 3) and "turn 1 was answered" in nothing.text
    relay.end({"status": "finished", "success": True, "run_dir": "/somewhere"})
    ended = show(relay.dir.path, wait_s=0)
    assert ended.exit_code == 4 and "EPISODE ENDED" in ended.text and "success: True" in ended.text
    assert "run directory: /somewhere" in ended.text
    with pytest.raises(ValueError, match="the episode has ended"):
        reply(relay.dir.path, code="print(4)")
    with pytest.raises(ValueError, match="already holds a relay"):
        Relay(tmp_path / "r")


def test_an_unanswered_turn_times_out_as_planner_error(tmp_path):
    relay = Relay(tmp_path / "r", answer_timeout_s=1.0).start()
    planner = OpenAIPlanner(_config(relay.url))
    planner.begin(PROMPT)
    t0 = time.monotonic()
    with pytest.raises(PlannerStop) as info:
        planner.next(_Never(), None)
    assert info.value.kind == "planner_error" and "no answer within 1 s" in info.value.message
    assert time.monotonic() - t0 < 10
    assert relay.dir.answer(1)["closed"] == "timeout"
    with pytest.raises(ValueError, match="already has an answer: it was closed \\(timeout"):
        reply(relay.dir.path, code="print(1)", turn=1)
    planner.close()
    # the same request again (a client's retry) is shown in full: nothing of it was ever answered
    body = json.loads(relay.dir.request_file(1).read_bytes())
    client = openai.OpenAI(base_url=relay.url, api_key="x", max_retries=0)
    t = threading.Thread(target=lambda: client.chat.completions.create(**body), daemon=True)
    t.start()
    again = show(relay.dir.path, wait_s=10, poll_s=0.05)
    assert again.turn == 2 and "You are a robot." in again.text and "--- tool python(code) ---" in again.text
    reply(relay.dir.path, finish=("stuck", "retried"))
    t.join(10)
    relay.end({"status": "planner_error"})


@pytest.mark.slow
def test_relay_commands_from_the_command_line(tmp_path):
    """`relay serve` in its own process, a client, and show/reply/list as separate processes."""
    state = tmp_path / "served"
    cmd = [sys.executable, "-m", "pyrua_dojo.cli"]
    server = subprocess.Popen([*cmd, "relay", "serve", "--dir", str(state), "--answer-timeout", "30"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        url = line.split("serving ")[1].split(" ")[0]
        client = openai.OpenAI(base_url=url, api_key="x")
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("r", client.chat.completions.create(
            model="m", messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])), daemon=True)
        t.start()
        shown = subprocess.run([*cmd, "relay", "show", "--relay", str(state), "--wait", "20"], capture_output=True,
                               text=True, timeout=60)
        assert shown.returncode == 0 and "=== SYSTEM PROMPT ===\nS" in shown.stdout and "RELAY TURN 1" in shown.stdout
        bad = subprocess.run([*cmd, "relay", "reply", "--relay", str(state), "--finish", "maybe", "x"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "offers no finish tool" in bad.stderr  # this client sent no tools
        ok = subprocess.run([*cmd, "relay", "reply", "--relay", str(state), "--code", "-"], input="x = 1\nprint(x)\n",
                            capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        t.join(10)
        assert json.loads(got["r"].choices[0].message.tool_calls[0].function.arguments) == {"code": "x = 1\nprint(x)\n"}
        listed = subprocess.run([*cmd, "relay", "list", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert str(state) in listed.stdout and "running" in listed.stdout
        missing = subprocess.run([*cmd, "relay", "show", "--relay", str(tmp_path / "nope")], capture_output=True,
                                 text=True, timeout=60)
        assert missing.returncode == 2 and "not a relay state directory" in missing.stderr
        server.kill()  # no chance to record an outcome
        server.wait(10)
        gone = subprocess.run([*cmd, "relay", "show", "--relay", str(state), "--wait", "5"], capture_output=True,
                              text=True, timeout=60)
        assert gone.returncode == 4 and "is gone without recording an outcome" in gone.stdout
    finally:
        server.terminate()
        server.wait(10)


def test_end_text_separates_agent_steps_and_shows_the_cell_the_episode_ended_in(tmp_path: Path) -> None:
    from pyrua_dojo.relay.planners import end_relay

    relay = Relay(tmp_path / "r", answer_timeout_s=30).start()
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "result.json").write_text(json.dumps({"status": "episode_ended", "steps_used": 176,
                                                   "counts": {"llm_calls": 3, "cells": 3}}))
    turns = [{"status": "ok", "text": "cell 2: ok\nstdout:\nfirst"},
             {"status": "episode_finished", "text": "cell 3: episode finished (2 s)\nstdout:\nplaced at 0.81"}]
    (agent / "turns.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    end_relay(relay, agent, success=False, steps=200, step_limit=200)
    text = show(relay.dir.path, wait_s=0).text
    assert "steps: 200" in text and "agent_steps: 176" in text and "the arms hold still" in text
    assert "the episode ended during the last cell; its output:" in text and "placed at 0.81" in text
    assert "first" not in text.split("its output:")[1]


def test_end_text_has_no_cell_output_when_the_last_cell_completed(tmp_path: Path) -> None:
    from pyrua_dojo.relay.planners import end_relay

    relay = Relay(tmp_path / "r", answer_timeout_s=30).start()
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "result.json").write_text(json.dumps({"status": "finished", "steps_used": 90}))
    (agent / "turns.jsonl").write_text(json.dumps({"status": "ok", "text": "cell 1: ok"}) + "\n")
    end_relay(relay, agent, success=True, steps=90, step_limit=200)
    text = show(relay.dir.path, wait_s=0).text
    assert "agent_steps: 90" in text and "its output" not in text and "hold still" not in text


def test_the_end_says_a_step_limit_failure_after_finish_is_the_benchmark_running_out_the_steps(tmp_path: Path) -> None:
    # Trial U: "failure: step limit" after the model's finish(failure) read as if the step limit caused the failure.
    relay = Relay(tmp_path / "relay", answer_timeout_s=30).start()
    relay.end({"status": "finished", "success": False, "failure": "step limit",
               "finish": {"status": "failure", "summary": "x", "via": "tool"}})
    text = show(relay.dir.path, wait_s=0).text
    assert "failure: step limit (how the benchmark booked it: after finish it runs out the remaining steps)" in text
    other = Relay(tmp_path / "other", answer_timeout_s=30).start()
    other.end({"status": "episode_ended", "success": False, "failure": "step limit"})
    assert "failure: step limit\n" in show(other.dir.path, wait_s=0).text + "\n"
