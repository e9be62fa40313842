"""The agent loop against a real HTTP server speaking the OpenAI protocol, through the real `openai` client."""

from __future__ import annotations

import base64
import json
import threading

import cv2
import numpy as np
import pytest

from primitives.errors import EpisodeFinished
from pyrua_dojo.runtime.agent import AgentConfig, says_done
from pyrua_dojo.llm import PriceTable
from pyrua_dojo.runtime.prompt.assemble import PromptOptions
from pyrua_dojo.runtime.trace import read_jsonl
from tests.support.episode import build_episode, openai_planner
from tests.support.openai_server import (
    Drop,
    FakeOpenAIServer,
    Garbage,
    HTTPError,
    Slow,
    Text,
    ToolCalls,
    finish_call,
    python_call,
)
from tests.support.robot import camera_colour


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


def _decode(part: dict) -> np.ndarray:
    url = part["image_url"]["url"]
    header, b64 = url.split(",", 1)
    assert header.startswith("data:image/")
    img = cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _images(content) -> list[tuple[str, np.ndarray]]:
    """(label, image) pairs of a content list: each image part preceded by its text label."""
    out = []
    for i, part in enumerate(content if isinstance(content, list) else []):
        if part.get("type") == "image_url":
            label = content[i - 1]["text"] if i and content[i - 1].get("type") == "text" else ""
            out.append((label, _decode(part)))
    return out


def _colour(img: np.ndarray) -> tuple[int, ...]:
    return tuple(int(round(v)) for v in img.reshape(-1, 3).mean(axis=0))


# -- messages and images ---------------------------------------------------------------------------------------


def test_images_flow_both_ways_in_the_right_messages(server, tmp_path):
    server.script(
        [
            ToolCalls((python_call("r = robo.move('left', steps=4)\nrobo.show('cam_right_wrist')\nrobo.show('cam_head')\nr['steps_used']"),)),
            ToolCalls((finish_call("success", "moved"),)),
        ]
    )
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert result.status == "finished" and result.finish == {"status": "success", "summary": "moved", "via": "tool"}

    first, second = server.requests()
    # request 1: system prompt, then the card with its three step-0 images, each labelled
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.messages[0]["content"] == ep.prompt.system
    card = first.messages[1]["content"]
    assert card[0] == {"type": "text", "text": ep.prompt.card_text}
    imgs = _images(card)
    assert [label for label, _ in imgs] == [
        "image 1: cam_head @ step 0",
        "image 2: cam_left_wrist @ step 0",
        "image 3: cam_right_wrist @ step 0",
    ]
    for (label, img), cam in zip(imgs, ("cam_head", "cam_left_wrist", "cam_right_wrist")):
        assert np.allclose(_colour(img), camera_colour(cam), atol=3), label
    assert first.body["tools"][0]["function"]["name"] == "python"
    assert first.body["tools"][1]["function"]["name"] == "finish"

    # request 2: the assistant call, its tool result (text only), then a user message with the shown images
    roles = [m["role"] for m in second.messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    tool_msg = second.messages[3]
    assert tool_msg["tool_call_id"] == second.messages[2]["tool_calls"][0]["id"]
    assert isinstance(tool_msg["content"], str) and "4" in tool_msg["content"]
    shown = _images(second.messages[4]["content"])
    assert [label for label, _ in shown] == ["image 1: cam_right_wrist @ step 4", "image 2: cam_head @ step 4"]
    assert np.allclose(_colour(shown[0][1]), camera_colour("cam_right_wrist"), atol=3)
    assert np.allclose(_colour(shown[1][1]), camera_colour("cam_head"), atol=3)

    # the trace holds the same images, the cell, its steps, and the robo calls
    turn = read_jsonl(ep.run_dir / "turns.jsonl")[0]
    assert turn["kind"] == "cell" and turn["steps_used"] == 4 and turn["status"] == "ok"
    assert [i["source"] for i in turn["images"]] == ["cam_right_wrist", "cam_head"]
    assert all((ep.run_dir / i["file"]).stat().st_size > 0 for i in turn["images"])
    calls = read_jsonl(ep.run_dir / "calls.jsonl")
    assert [c["tool"] for c in calls] == ["move", "show", "show"] and {c["cell"] for c in calls} == {1}
    assert sorted(p.name for p in (ep.run_dir / "card").iterdir()) == ["cam_head.png", "cam_left_wrist.png", "cam_right_wrist.png"]


def test_card_images_can_be_left_out(server, tmp_path):
    server.script([ToolCalls((finish_call(),))])
    ep = build_episode(tmp_path, openai_planner(server.base_url()), options=PromptOptions(card_images=False))
    ep.agent.run()
    first = server.requests()[0].messages[1]["content"]
    assert isinstance(first, str) and "robo.show(camera)" in first


def test_text_only_model_gets_no_images_and_is_told(server, tmp_path):
    server.script([ToolCalls((python_call("robo.show('cam_head')"),)), ToolCalls((finish_call(),))])
    ep = build_episode(tmp_path, openai_planner(server.base_url(), images=False), options=PromptOptions(images=False))
    ep.agent.run()
    first, second = server.requests()
    assert isinstance(first.messages[1]["content"], str)
    assert "Images the code captured" not in first.body["tools"][0]["function"]["description"]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert "1 image(s) not shown" in second.messages[3]["content"]


def test_old_cell_images_can_be_dropped_from_the_context(server, tmp_path):
    show = ToolCalls((python_call("robo.show('cam_head')\nrobo.show('cam_left_wrist')"),))
    server.script([show, show, ToolCalls((finish_call(),))])
    ep = build_episode(tmp_path, openai_planner(server.base_url(), max_cell_images=3))
    ep.agent.run()
    last = server.requests()[-1].messages
    assert len(_images(last[1]["content"])) == 3  # the card's images stay
    first_cell, second_cell = [m["content"] for m in last[2:] if m["role"] == "user"]
    assert [p["type"] for p in first_cell] == ["text", "text", "text", "text", "image_url"]
    assert first_cell[2]["text"] == "[image no longer shown]" and first_cell[3]["text"].startswith("image 2: cam_left_wrist")
    assert len(_images(second_cell)) == 2


def test_request_parameters_pass_through(server, tmp_path):
    server.script([ToolCalls((finish_call(),))])
    planner = openai_planner(
        server.base_url(),
        tool_choice="required",
        temperature=0.6,
        top_p=0.95,
        seed=7,
        max_tokens=2048,
        reasoning_effort="high",
        extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": True}},
        image_detail="low",
    )
    build_episode(tmp_path, planner).agent.run()
    body = server.requests()[0].body
    assert body["tool_choice"] == "required"
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.6, 0.95, 7)
    assert body["max_completion_tokens"] == 2048 and "max_tokens" not in body
    assert body["reasoning_effort"] == "high"
    assert body["top_k"] == 20 and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert all(p["image_url"]["detail"] == "low" for p in body["messages"][1]["content"] if p["type"] == "image_url")
    assert server.requests()[0].headers["authorization"] == "Bearer test-key"


# -- tool calls, reminders, counting ----------------------------------------------------------------------------


def test_reminder_on_a_text_reply_counts_as_a_call(server, tmp_path):
    server.script([Text("I will first look at the scene."), ToolCalls((python_call("print('hi')"),)), ToolCalls((finish_call(),))])
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert (result.status, result.llm_calls, result.reminders, result.replies) == ("finished", 2, 1, 3)
    second = server.requests()[1].messages
    assert second[-2] == {"role": "assistant", "content": "I will first look at the scene."}
    assert second[-1]["role"] == "user" and "no tool call" in second[-1]["content"]


@pytest.mark.parametrize(
    "text, done",
    [
        ("The task is complete.", True),
        ("All three blocks are stacked and both arms are home. Task completed!", True),
        ("Done.", True),
        ("I'm done.", True),
        ("The task is not complete yet.", False),
        ("Is the task complete?", False),
        ("Next I will check whether the task is done.", False),
        ("```python\nprint(1)\n```\nThe task is complete.", False),
        ("Once the block is placed, the task is done.", False),
        ("", False),
    ],
)
def test_says_done_is_conservative(text, done):
    assert says_done(text) is done


def test_saying_done_ends_the_episode(server, tmp_path):
    server.script([Text("The blocks are stacked and the arms are home. The task is complete.")])
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert result.status == "finished" and result.finish["via"] == "text"
    assert len(server.requests()) == 1


def test_malformed_tool_arguments_get_an_error_result(server, tmp_path):
    server.script(
        [
            ToolCalls((("python", '{"code": "print(1)'),)),  # bad JSON
            ToolCalls((("python", {"source": "print(1)"}),)),  # no code
            ToolCalls((("shell", {"cmd": "ls"}),)),  # unknown tool
            ToolCalls((("finish", {"status": "great"}),)),  # bad finish status
            ToolCalls((finish_call(),)),
        ]
    )
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert result.status == "finished" and result.invalid_calls == 4 and result.cells == 0
    assert result.llm_calls == 4  # the finish-only reply is not a decision
    texts = [r.messages[-1]["content"] for r in server.requests()[1:]]
    assert "not valid JSON" in texts[0]
    assert 'string field "code"' in texts[1]
    assert "unknown tool 'shell'" in texts[2]
    assert "status one of success, failure, stuck" in texts[3]
    assert all(t.startswith("Error: ") for t in texts)
    kinds = [t["kind"] for t in read_jsonl(ep.run_dir / "turns.jsonl")]
    assert kinds == ["invalid"] * 4 + ["finish"]


def test_several_tool_calls_run_in_order_and_count_once(server, tmp_path):
    server.script(
        [
            ToolCalls((python_call("a = 1\nprint('first')"), python_call("print('second', a + 1)"))),
            ToolCalls((python_call("print('ok')"), python_call("raise RuntimeError('boom')"), python_call("print('never ran')"))),
            ToolCalls((finish_call(),)),
        ]
    )
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert (result.llm_calls, result.cells, result.skipped_calls) == (2, 4, 1)
    second = server.requests()[1].messages
    tools = [m for m in second if m["role"] == "tool"]
    assert "first" in tools[0]["content"] and "second 2" in tools[1]["content"]
    third = server.requests()[2].messages
    tools = [m for m in third if m["role"] == "tool"][2:]
    assert [m["tool_call_id"] for m in tools] == [c["id"] for c in third[-4]["tool_calls"]]
    assert "ok" in tools[0]["content"]
    assert "RuntimeError" in tools[1]["content"] and "boom" in tools[1]["content"]
    assert tools[2]["content"].startswith("Not run:") and "never ran" not in tools[2]["content"]


def test_calls_left_notice(server, tmp_path):
    server.script([ToolCalls((python_call("1"),))] * 3)
    ep = build_episode(tmp_path, openai_planner(server.base_url()), config=AgentConfig(max_llm_calls=3, calls_left_notice=2))
    result = ep.agent.run()
    assert result.status == "call_budget"
    tool_texts = [r.messages[-1]["content"] for r in server.requests()[1:]]
    assert tool_texts[0].endswith("[2 LLM calls left]") and tool_texts[1].endswith("[1 LLM calls left]")


# -- budgets ----------------------------------------------------------------------------------------------------


def test_call_budget_ends_the_episode_without_another_request(server, tmp_path):
    server.script([ToolCalls((python_call("robo.move('right', steps=1)"),))] * 10)
    ep = build_episode(tmp_path, openai_planner(server.base_url()), config=AgentConfig(max_llm_calls=3))
    result = ep.agent.run()
    assert (result.status, result.llm_calls, result.cells) == ("call_budget", 3, 3)
    assert len(server.requests()) == 3
    saved = json.loads((ep.run_dir / "result.json").read_text())
    assert saved["status"] == "call_budget" and saved["counts"]["llm_calls"] == 3 and saved["counts"]["steps_used"] == 3


def test_wall_budget_aborts_a_slow_request(server, tmp_path):
    server.script([ToolCalls((python_call("x = 1"),)), Slow(30.0, ToolCalls((finish_call(),)))])
    ep = build_episode(tmp_path, openai_planner(server.base_url()), config=AgentConfig(wall_budget_s=1.5))
    result = ep.agent.run()
    assert result.status == "timeout"
    assert server.wait_for_disconnects(1)
    assert server.requests()[1].disconnected and not server.requests()[1].replied
    calls = read_jsonl(ep.run_dir / "llm_calls.jsonl")
    assert calls[-1]["ok"] is False and calls[-1]["error_kind"] in ("timeout", "cancelled")


def test_wall_budget_stops_a_cell_through_the_cancel_token(server, tmp_path):
    server.script([ToolCalls((python_call("robo.move('left', steps=100000)"),))])
    ep = build_episode(
        tmp_path, openai_planner(server.base_url()), config=AgentConfig(wall_budget_s=1.0), robot={"tick_s": 0.01, "step_limit": 10**6}
    )
    ep.executor.wait_ready()  # the kernel's start (about a second) must not use up the 1 s budget
    result = ep.agent.run()
    assert result.status == "timeout" and result.outcome == "budget"
    assert 0 < ep.robot.steps_used < 100000


# -- retries and errors -------------------------------------------------------------------------------------------


def test_transient_errors_are_retried_logged_and_not_counted(server, tmp_path):
    server.script(
        [
            HTTPError(429, "rate limited", (("retry-after", "0"),)),
            HTTPError(500, "internal error"),
            HTTPError(503, "overloaded"),
            ToolCalls((python_call("print('after retries')"),)),
            Drop(),
            Garbage(),
            ToolCalls((finish_call(),)),
        ]
    )
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert result.status == "finished"
    assert (result.llm_calls, result.llm_requests, result.llm_retries) == (1, 7, 5)
    calls = read_jsonl(ep.run_dir / "llm_calls.jsonl")
    assert [c["ok"] for c in calls] == [False, False, False, True, False, False, True]
    assert [c["status_code"] for c in calls[:3]] == [429, 500, 503]
    assert [c["attempt"] for c in calls] == [1, 2, 3, 4, 1, 2, 3]
    assert all(c["error_kind"] == "transient" and c["retry_in_s"] is not None for c in calls if not c["ok"])
    assert "Connection" in calls[4]["error"] and "malformed" in calls[5]["error"]
    retries = [e for e in read_jsonl(ep.run_dir / "events.jsonl") if e["kind"] == "llm_retry"]
    assert len(retries) == 5


def test_exhausted_retries_end_with_planner_error(server, tmp_path):
    server.script([HTTPError(500, "down")] * 4)
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert result.status == "planner_error" and "4 attempts failed" in result.reason
    assert (result.llm_calls, result.llm_requests) == (0, 4)
    calls = read_jsonl(ep.run_dir / "llm_calls.jsonl")
    assert calls[-1]["retry_in_s"] is None and calls[-1]["error_kind"] == "transient"
    assert json.loads((ep.run_dir / "result.json").read_text())["status"] == "planner_error"


def test_a_fatal_error_is_not_retried(server, tmp_path):
    server.script([HTTPError(401, "invalid api key"), ToolCalls((finish_call(),))])
    result = build_episode(tmp_path, openai_planner(server.base_url())).agent.run()
    assert result.status == "planner_error" and "invalid api key" in result.reason
    assert len(server.requests()) == 1


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 65536 tokens. However, your request has 70001 input tokens. Please reduce the length of the input messages.",
        "'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's maximum context length is 65536 tokens and your request has 65000 input tokens (16384 > 65536 - 65000).",
        "The decoder prompt (length 70001) is longer than the maximum model length of 65536. Make sure that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens.",
        "Requested token count exceeds the model's maximum context length of 65536 tokens. You requested a total of 75000 tokens: 65000 tokens from the input messages and 10000 tokens for the completion.",
        "The input (70001 tokens) is longer than the model's context length (65536 tokens).",
    ],
)
def test_context_overflow_ends_the_episode(server, tmp_path, message):
    server.script([ToolCalls((python_call("x = 1"),)), HTTPError(400, message)])
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    result = ep.agent.run()
    assert result.status == "context_overflow"
    assert len(server.requests()) == 2
    assert read_jsonl(ep.run_dir / "llm_calls.jsonl")[-1]["error_kind"] == "context_overflow"


@pytest.mark.parametrize(
    "message, room",
    [
        ("'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's maximum context length is 65536 tokens and your request has 60000 input tokens (16384 > 65536 - 60000).", 5536),
        ("Requested token count exceeds the model's maximum context length of 65536 tokens. You requested a total of 70000 tokens: 61000 tokens from the input messages and 9000 tokens for the completion.", 4536),
    ],
)
def test_max_tokens_shrink_to_the_room_left_in_the_context(server, tmp_path, message, room):
    server.script([HTTPError(400, message), ToolCalls((python_call("x = 1"),)), ToolCalls((finish_call(),))])
    ep = build_episode(tmp_path, openai_planner(server.base_url(), max_tokens=16384))
    result = ep.agent.run()
    assert result.status == "finished" and result.llm_calls == 1 and result.llm_retries == 1
    sent = [r.body["max_completion_tokens"] for r in server.requests()]
    assert sent == [16384, room - 16, room - 16]  # the lower cap stays for the rest of the episode
    first = read_jsonl(ep.run_dir / "llm_calls.jsonl")[0]
    assert first["error_kind"] == "context_overflow" and f"retrying with max_tokens={room - 16}" in first["error"]


def test_openai_error_code_marks_an_overflow(server, tmp_path):
    server.script([HTTPError(400, "Input too large", code="context_length_exceeded")])
    assert build_episode(tmp_path, openai_planner(server.base_url())).agent.run().status == "context_overflow"


# -- the end of an episode ----------------------------------------------------------------------------------------


def test_episode_that_ends_during_a_cell_stops_the_loop(server, tmp_path):
    server.script(
        [
            ToolCalls((python_call("for i in range(100):\n    try:\n        robo.move('left', steps=2)\n    except Exception:\n        pass"), python_call("print('after')"))),
            ToolCalls((finish_call(),)),
        ]
    )
    ep = build_episode(tmp_path, openai_planner(server.base_url()), robot={"success_at": 7})
    result = ep.agent.run()
    assert (result.status, result.outcome) == ("episode_ended", "success")
    assert ep.robot.steps_used == 7
    assert len(server.requests()) == 1  # no LLM call after the end
    kinds = [t["kind"] for t in read_jsonl(ep.run_dir / "turns.jsonl")]
    assert kinds == ["cell", "skipped"]
    saved = json.loads((ep.run_dir / "result.json").read_text())
    assert saved["outcome"] == "success" and saved["counts"]["steps_used"] == 7


def test_usage_and_cost_are_recorded_per_request(server, tmp_path):
    prices = tmp_path / "prices.yml"
    prices.write_text("models:\n  - match: fake-*\n    input: 2.0\n    cached_input: 0.5\n    output: 8.0\n")
    server.script(
        [
            ToolCalls((python_call("x = 1"),), usage={"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 40}}),
            ToolCalls((finish_call(),), usage={"prompt_tokens": 2000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 1000}, "completion_tokens_details": {"reasoning_tokens": 0}}),
        ]
    )
    ep = build_episode(tmp_path, openai_planner(server.base_url(), prices_path=str(prices)))
    result = ep.agent.run()
    assert (result.usage.prompt_tokens, result.usage.cached_tokens, result.usage.completion_tokens, result.usage.reasoning_tokens) == (3000, 1000, 110, 40)
    expected = (1000 * 2.0 + 100 * 8.0) / 1e6 + (1000 * 2.0 + 1000 * 0.5 + 10 * 8.0) / 1e6
    assert result.cost_usd == pytest.approx(expected)
    calls = read_jsonl(ep.run_dir / "llm_calls.jsonl")
    assert calls[0]["usage"]["reasoning_tokens"] == 40 and calls[0]["cost_usd"] == pytest.approx(0.0028)
    assert calls[0]["latency_s"] > 0 and calls[0]["tool_calls"][0]["name"] == "python"
    saved = json.loads((ep.run_dir / "result.json").read_text())
    assert saved["tokens"]["total_tokens"] == 3110 and saved["cost_usd"] == pytest.approx(expected)


def test_unknown_price_gives_no_cost(server, tmp_path):
    server.script([ToolCalls((finish_call(),))])
    result = build_episode(tmp_path, openai_planner(server.base_url(), model="nobody-knows-7b")).agent.run()
    assert result.cost_usd is None
    assert PriceTable.load().cost("nobody-knows-7b", result.usage) is None


# -- cancellation --------------------------------------------------------------------------------------------------


def _run_in_thread(agent):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("result", agent.run()), daemon=True)
    t.start()
    return t, box


def test_cancel_aborts_the_in_flight_request(server, tmp_path):
    server.script([Slow(60.0, ToolCalls((finish_call(),)))])
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    t, box = _run_in_thread(ep.agent)
    assert server.wait_for_requests(1)
    ep.agent.cancel("reset")
    t.join(10.0)
    assert not t.is_alive(), "the loop did not return while the server was still thinking"
    assert box["result"].status == "cancelled"
    assert server.wait_for_disconnects(1), "the HTTP request was not aborted"
    assert json.loads((ep.run_dir / "result.json").read_text())["status"] == "cancelled"


def test_episode_reset_on_the_cancel_token_aborts_the_request(server, tmp_path):
    server.script([Slow(60.0, ToolCalls((finish_call(),)))])
    ep = build_episode(tmp_path, openai_planner(server.base_url()))
    t, box = _run_in_thread(ep.agent)
    assert server.wait_for_requests(1)
    ep.cancel.cancel(EpisodeFinished("reset"))  # what the episode host does on reset
    t.join(10.0)
    assert not t.is_alive()
    assert (box["result"].status, box["result"].outcome) == ("cancelled", "reset")
    assert server.wait_for_disconnects(1)


def test_cancel_stops_a_running_cell_and_a_retry_wait(server, tmp_path):
    server.script([ToolCalls((python_call("robo.move('left', steps=100000)"),))])
    ep = build_episode(tmp_path, openai_planner(server.base_url()), robot={"tick_s": 0.01, "step_limit": 10**6})
    t, box = _run_in_thread(ep.agent)
    assert server.wait_for_requests(1)
    while ep.robot.steps_used < 3:
        threading.Event().wait(0.01)
    ep.agent.cancel("reset")
    t.join(10.0)
    assert not t.is_alive() and box["result"].status == "cancelled"
    assert ep.robot.steps_used < 100000
    assert read_jsonl(ep.run_dir / "turns.jsonl")[0]["episode_finished"] == "reset"

    server.script([HTTPError(503, "busy", (("retry-after", "30"),))], route="wait")
    slow_retry = openai_planner(server.base_url("wait"), retry=__import__("pyrua_dojo.llm", fromlist=["RetryPolicy"]).RetryPolicy(max_attempts=3, base_delay_s=30, max_delay_s=30))
    ep2 = build_episode(tmp_path, slow_retry, name="run2")
    t2, box2 = _run_in_thread(ep2.agent)
    assert server.wait_for_requests(1, route="wait")
    ep2.agent.cancel()
    t2.join(10.0)
    assert not t2.is_alive() and box2["result"].status == "cancelled"
