"""Model presets, reasoning output and the context window, against the project's OpenAI-protocol test server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pyrua_dojo.runtime.agent import AgentConfig
from pyrua_dojo.plugin.config import PolicyConfig
from pyrua_dojo.evaluate.viewer import load_episode, render_view
from pyrua_dojo.llm import OpenAIPlanner
from pyrua_dojo.llm.context import estimate_message_tokens, fit_to_window
from pyrua_dojo.plugin.presets import apply_preset, available_presets, load_preset
from pyrua_dojo.runtime.trace import read_jsonl
from tests.support.episode import FAST_RETRY, build_episode
from tests.support.openai_server import FakeOpenAIServer, ToolCalls, finish_call, python_call

from submission.install import plugin_dir
from pyrua_dojo.harness.policydir import PolicyDir


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


def _policy(server_url: str, *overrides: str) -> PolicyConfig:
    """The packaged deploy.yml with XPolicyLab-style overrides, as the policy server reads it."""
    cfg = PolicyDir.load(plugin_dir()).model_cfg(
        ("task_name=stack_blocks", "seed=0", "planner=openai", f"base_url={server_url}", *overrides)
    )
    return PolicyConfig.from_model_cfg(cfg)


def _first_body(server: FakeOpenAIServer, policy: PolicyConfig, tmp_path) -> dict[str, Any]:
    assert policy.llm is not None
    server.script([ToolCalls((finish_call(),))])
    llm = policy.llm
    planner = OpenAIPlanner(type(llm)(**{**llm.__dict__, "api_key": "k", "retry": FAST_RETRY}))
    build_episode(tmp_path, planner).agent.run()
    return server.requests()[0].body


def test_the_packaged_presets_load_and_name_their_source():
    assert set(available_presets()) >= {"coder-4b", "hosted-reasoning", "open-weights-chat"}
    for name in available_presets():
        p = load_preset(name)
        assert p.source and p.settings, name
    with pytest.raises(ValueError, match="unknown preset 'nope'.*coder-4b"):
        load_preset("nope")


def test_coder_4b_requests_carry_exactly_the_model_cards_settings(server, tmp_path):
    policy = _policy(server.base_url(), "preset=coder-4b")
    body = _first_body(server, policy, tmp_path)
    assert body["model"] == "PyRUA-Lean-Coder-v0.1-4B"
    assert body["max_tokens"] == 8192 and "max_completion_tokens" not in body
    assert body["tool_choice"] == "required"
    assert (body["temperature"], body["top_p"], body["top_k"]) == (1.0, 0.95, 20)
    assert "reasoning_effort" not in body  # SGLang's qwen3 parser takes no effort
    assert policy.agent.max_llm_calls == 40 and policy.agent.wall_budget_s == 5400
    assert policy.llm.context_window == 65536 and policy.llm.replay_reasoning is False


def test_hosted_reasoning_sends_an_effort_and_no_sampling(server, tmp_path):
    body = _first_body(server, _policy(server.base_url(), "preset=hosted-reasoning"), tmp_path)
    assert body["reasoning_effort"] == "high" and body["max_completion_tokens"] == 16384
    for key in ("temperature", "top_p", "top_k", "max_tokens"):
        assert key not in body, key


def test_open_weights_chat_sends_sampling_and_no_effort(server, tmp_path):
    body = _first_body(server, _policy(server.base_url(), "preset=open-weights-chat", "model=qwen-instruct"), tmp_path)
    assert (body["model"], body["max_tokens"], body["tool_choice"]) == ("qwen-instruct", 4096, "auto")
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.8, 20)
    for key in ("reasoning_effort", "max_completion_tokens"):
        assert key not in body, key


def test_the_default_deploy_yml_uses_a_preset_and_records_it():
    policy = _policy("http://127.0.0.1:9/v1")
    assert policy.preset is not None and policy.preset.name == "hosted-reasoning"
    public = policy.public()
    assert public["preset"]["name"] == "hosted-reasoning" and public["preset"]["source"]
    assert public["llm"]["model"] == "gpt-6-astra" and public["llm"]["context_window"] == 1050000


def test_explicit_settings_win_over_the_preset(server, tmp_path):
    policy = _policy(server.base_url(), "preset=coder-4b", "temperature=0.2", "llm_call_budget=7", "model=my-coder",
                     "tool_choice=auto")
    body = _first_body(server, policy, tmp_path)
    assert (body["temperature"], body["model"], body["tool_choice"]) == (0.2, "my-coder", "auto")
    assert body["top_p"] == 0.95  # not overridden: still the preset's
    assert policy.agent.max_llm_calls == 7
    # a key present with null wins too: the preset's sampling is not sent
    policy = _policy(server.base_url(), "preset=coder-4b", "top_p=None")
    assert policy.llm is not None and policy.llm.top_p is None


def test_a_preset_that_leaves_the_model_open_says_so():
    with pytest.raises(ValueError, match="needs a model.*open-weights-chat"):
        _policy("http://127.0.0.1:9/v1", "preset=open-weights-chat")
    cfg, preset = apply_preset({"preset": "open-weights-chat", "model": "qwen"})
    assert preset is not None and cfg["model"] == "qwen" and cfg["context_window"] == 32768


@pytest.mark.parametrize("replay", [False, True])
def test_reasoning_content_is_stored_and_replayed_only_when_asked(server, tmp_path, replay):
    server.script([
        ToolCalls((python_call("x = 1"),), reasoning="I should set x first."),
        ToolCalls((finish_call(),)),
    ])
    policy = _policy(server.base_url(), "preset=coder-4b", f"replay_reasoning={replay}")
    llm = policy.llm
    assert llm is not None
    planner = OpenAIPlanner(type(llm)(**{**llm.__dict__, "api_key": "k", "retry": FAST_RETRY}))
    ep = build_episode(tmp_path, planner)
    ep.agent.run()
    calls = read_jsonl(ep.run_dir / "llm_calls.jsonl")
    assert calls[0]["reasoning"] == "I should set x first."
    assert calls[0]["usage"]["reasoning_tokens"] > 0 and calls[0]["reasoning_tokens_estimated"] is True
    assistant = [m for m in server.requests()[1].body["messages"] if m["role"] == "assistant"][0]
    assert ("reasoning_content" in assistant) is replay
    assert "I should set x first." not in json.dumps(server.requests()[1].body) or replay


# -- the context window ------------------------------------------------------------------------------------------

_LONG_CELL = "print('measurement ' * 600)\nfor cam in ('cam_head', 'cam_left_wrist', 'cam_right_wrist'):\n    robo.show(cam)"


@pytest.mark.slow
def test_a_long_episode_is_shortened_to_fit_a_65536_token_window(server, tmp_path):
    """Forty cells, each printing a long output and asking for three images, pass a 65,536-token window; the
    episode runs to its end, every request fits by the estimate and the model is told each time."""
    cells = 40
    server.script([ToolCalls((python_call(_LONG_CELL),)) for _ in range(cells)] + [ToolCalls((finish_call(),))])
    window, max_tokens = 65536, 8192
    policy = _policy(server.base_url(), "preset=coder-4b", "model=fake-model")
    llm = policy.llm
    assert llm is not None and (llm.context_window, llm.max_tokens) == (window, max_tokens)
    planner = OpenAIPlanner(type(llm)(**{**llm.__dict__, "api_key": "k", "retry": FAST_RETRY}))
    ep = build_episode(tmp_path, planner, config=AgentConfig(max_llm_calls=100, wall_budget_s=300.0),
                       trace_config=policy.public())
    result = ep.agent.run()
    assert result.status == "finished", result
    calls = read_jsonl(ep.run_dir / "llm_calls.jsonl")
    assert len(calls) == cells + 1 and all(c["ok"] for c in calls)
    assert all(c["context_estimate"] <= window - max_tokens for c in calls)
    shortened = [c for c in calls if c.get("shortening")]
    assert shortened, "the conversation never needed shortening: the test does not exercise the rule"
    # without the rule the conversation would not have fitted
    unshortened = sum(estimate_message_tokens(m) for m in _replayed_conversation(cells))
    assert unshortened > window
    bodies = [r.body for r in server.requests()]
    for call, body in zip(calls, bodies):
        if call.get("shortening"):
            note = body["messages"][-1]
            assert note["role"] == "user" and "to fit the 65,536-token window" in note["content"]
        # never the system prompt or the card
        assert body["messages"][0]["role"] == "system" and body["messages"][1] == bodies[0]["messages"][1]
    # the last exchanges are whole: the latest cell's images are all there
    last = bodies[-1]["messages"]
    assert sum(p.get("type") == "image_url" for m in last[-3:] if isinstance(m["content"], list) for p in m["content"]) == 3
    # the viewer shows the preset, the resolved settings and every shortening
    html = render_view(load_episode(ep.run_dir), tmp_path / "view.html").html()
    assert "preset <b>coder-4b</b>" in html and "context_window" in html
    assert f"shortened {len(shortened)} time(s)" in html


def _replayed_conversation(cells: int) -> list[dict[str, Any]]:
    """A conversation of `cells` long cells, as the planner would send it without shortening (for the size check)."""
    text = "measurement " * 600
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "card"}]
    img = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,"}}
    for i in range(cells):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": str(i), "type": "function", "function": {"name": "python", "arguments": json.dumps({"code": _LONG_CELL})}}]})
        msgs.append({"role": "tool", "tool_call_id": str(i), "content": text})
        msgs.append({"role": "user", "content": [img, img, img]})
    return msgs


def test_the_rule_drops_images_first_then_outputs_never_the_card_or_last_turns():
    img = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,"}}  # 640x480 by default: 416 tokens
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "system " * 100}, {"role": "user", "content": ["card", img]}]
    msgs[1] = {"role": "user", "content": [{"type": "text", "text": "card"}, img]}
    for i in range(6):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": str(i), "type": "function", "function": {"name": "python", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": str(i), "content": "y" * 9000})
        msgs.append({"role": "user", "content": [{"type": "text", "text": "image"}, img, img]})
    total = sum(estimate_message_tokens(m) for m in msgs)
    # a window that fits once the older images are gone
    fit = fit_to_window(msgs, window=total + 1000 - 2 * 416, max_tokens=1000, fixed_tokens=0, margin=0.0, headroom=0.0)
    assert fit.fits and fit.shortening is not None
    assert fit.shortening.images_dropped >= 2 and fit.shortening.outputs_trimmed == 0
    assert msgs[1]["content"][1] is img  # the card's image stays
    assert all(p is img for m in msgs[-7:-1] if isinstance(m["content"], list) for p in m["content"][1:])
    # a much smaller window: outputs are trimmed, then whole exchanges go
    fit = fit_to_window(msgs, window=9000, max_tokens=1000, fixed_tokens=0, margin=0.0)
    assert fit.shortening is not None and fit.shortening.outputs_trimmed > 0
    assert msgs[0]["content"].startswith("system") and msgs[1]["content"][1] is img
    # a window the card alone cannot fit: context_overflow is the only answer
    fit = fit_to_window(msgs, window=1200, max_tokens=1000, fixed_tokens=0, margin=0.0)
    assert not fit.fits


def test_play_and_eval_take_a_preset_and_check_it(tmp_path):
    from pyrua_dojo.evaluate.plan import EvalSettings
    from pyrua_dojo.evaluate.play import PlayOptions

    settings = EvalSettings(tasks=("stack_blocks",), planner="openai", preset="coder-4b", out=tmp_path)
    assert settings.ckpt == "coder-4b" and settings.identity()["preset"] == "coder-4b"
    with pytest.raises(ValueError, match="needs --model or --preset"):
        EvalSettings(tasks=("stack_blocks",), planner="openai", out=tmp_path)
    with pytest.raises(ValueError, match="unknown preset"):
        EvalSettings(tasks=("stack_blocks",), planner="openai", preset="gpt-9", out=tmp_path)
    with pytest.raises(ValueError, match="unknown preset"):
        PlayOptions(task="stack_blocks", planner="openai", preset="gpt-9")
    assert PlayOptions(task="stack_blocks", planner="openai", preset="coder-4b").preset == "coder-4b"
