"""The plugin's env-side loop (submission/PyRUA_Dojo/deploy.py) against a strict fake env and model clients.

The env object allows only the six methods RoboDojo's contract gives a policy; anything else raises. The model
clients are shaped like XPolicyLab's `WsModelClient` (a `_client.config.request_timeout_s`), like none, and one
is our real websocket `ModelClient` talking to a real `PolicyServer`.
"""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from submission.install import plugin_dir
from submission.PyRUA_Dojo import deploy
from submission.PyRUA_Dojo.deploy import DeploySettings, eval_one_episode, eval_one_episode_batch

ALLOWED = {"is_episode_end", "get_obs", "take_action", "get_running_env_idx_list", "get_obs_batch", "take_action_batch"}
DEPLOY_PY = plugin_dir() / "deploy.py"


class Privileged(Exception):
    """deploy.py touched something on TASK_ENV outside the allowed methods."""


def action(tag: Any) -> dict[str, Any]:
    return {"left_arm_joint_state": [0.0] * 6, "left_ee_joint_state": [1.0], "right_arm_joint_state": [0.0] * 6,
            "right_ee_joint_state": [1.0], "tag": tag}


@dataclass
class Record:
    """What the env saw: every method call in order, and the actions each env executed."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    executed: dict[int, list[Any]] = field(default_factory=dict)
    handed: list[dict[str, Any]] = field(default_factory=list)  # every observation the env returned


class StrictEnv:
    """A tiny env with per-env step limits; only RoboDojo's six policy-facing methods are reachable."""

    def __init__(self, record: Record, step_limits: list[int]):
        self._record = record
        self._limits = step_limits
        self._steps = [0] * len(step_limits)
        for i in range(len(step_limits)):
            record.executed[i] = []

    def __getattribute__(self, name: str) -> Any:
        if name in ALLOWED or name.startswith("_"):
            return object.__getattribute__(self, name)
        raise Privileged(f"deploy.py used TASK_ENV.{name}")

    def _running(self) -> list[int]:
        return [i for i, (s, lim) in enumerate(zip(self._steps, self._limits)) if s < lim]

    def _obs(self, i: int) -> dict[str, Any]:
        obs = {"env_idx": i, "step": self._steps[i], "additional_info": {"frequency": 25}}
        self._record.handed.append(obs)
        return obs

    def is_episode_end(self) -> bool:
        self._record.calls.append(("is_episode_end", None))
        return not self._running()

    def get_obs(self) -> dict[str, Any]:
        self._record.calls.append(("get_obs", self._steps[0]))
        return self._obs(0)

    def take_action(self, act: dict[str, Any]) -> None:
        self._record.calls.append(("take_action", act["tag"]))
        assert self._steps[0] < self._limits[0], "take_action after the episode ended"
        self._steps[0] += 1
        self._record.executed[0].append(act["tag"])

    def get_running_env_idx_list(self) -> list[int]:
        self._record.calls.append(("get_running_env_idx_list", None))
        return self._running()

    def get_obs_batch(self, env_idx_list: list[int]) -> list[dict[str, Any]]:
        self._record.calls.append(("get_obs_batch", list(env_idx_list)))
        return [self._obs(i) for i in env_idx_list]

    def take_action_batch(self, actions: list[dict[str, Any]], env_idx_list: list[int]) -> None:
        self._record.calls.append(("take_action_batch", list(env_idx_list)))
        assert len(actions) == len(env_idx_list)
        for act, i in zip(actions, env_idx_list):
            if self._steps[i] < self._limits[i]:
                self._steps[i] += 1
                self._record.executed[i].append(act["tag"])


@dataclass
class Config:
    request_timeout_s: float = 120.0


@dataclass(frozen=True)
class FrozenConfig:
    request_timeout_s: float = 120.0


@dataclass
class Inner:
    config: Any


class ScriptedClient:
    """`WsModelClient.call` semantics (update_obs cached, get_action replies) with scripted chunks."""

    def __init__(self, replies: list[Any], config: Any = None, batch: bool = False):
        if config is not None:
            self._client = Inner(config)
        self.replies = list(replies)
        self.calls: list[tuple[str, Any]] = []
        self.seen: list[Any] = []  # the observation each get_action was answered for
        self._latest: Any = None

    def call(self, func_name: str, obs: Any = None) -> Any:
        self.calls.append((func_name, obs))
        if func_name == "reset":
            self._latest = None
            return None
        if func_name in ("update_obs", "update_obs_batch"):
            self._latest = obs
            return None
        if func_name in ("get_action", "get_action_batch"):
            self.seen.append(self._latest)
            reply = self.replies.pop(0)
            return reply(self._latest) if callable(reply) else reply
        raise NotImplementedError(func_name)


def chunk(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [action(start + k) for k in range(n)]


def names(record: Record) -> list[str]:
    return [c[0] for c in record.calls]


def test_observes_only_at_chunk_boundaries() -> None:
    rec = Record()
    env = StrictEnv(rec, [7])
    client = ScriptedClient([chunk(3, 0), chunk(3, 3), chunk(3, 6)], Config())
    report = eval_one_episode(env, client, settings=DeploySettings())
    assert rec.executed[0] == [0, 1, 2, 3, 4, 5, 6]  # the third chunk is cut by the step limit
    assert [c for c in rec.calls if c[0] == "get_obs"] == [("get_obs", 0), ("get_obs", 3), ("get_obs", 6)]
    assert [o["step"] for o in client.seen] == [0, 3, 6]  # each chunk was asked for on the boundary's obs
    assert [c[0] for c in client.calls] == ["reset"] + ["update_obs", "get_action"] * 3
    assert report == deploy.LoopReport(3, 7, 3, "episode_end", 3600.0)


def seqs(client: ScriptedClient) -> list[int]:
    out = []
    for f, o in client.calls:
        for obs in ([o] if f == "update_obs" else o if f == "update_obs_batch" else []):
            out.append((obs["env_idx"], obs["additional_info"][deploy.INFER_SEQ_KEY]))
    return out


def test_observations_are_numbered_on_copies() -> None:
    rec = Record()
    client = ScriptedClient([chunk(2, 0), chunk(2, 2)], Config())
    eval_one_episode(StrictEnv(rec, [4]), client, settings=DeploySettings(obs_every_step=True))
    assert seqs(client) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert all(o["additional_info"] == {"frequency": 25} for o in rec.handed)  # the env's dicts are untouched
    sent = [o for f, o in client.calls if f == "update_obs"]
    assert sent[0]["additional_info"] == {"frequency": 25, deploy.INFER_SEQ_KEY: 0}
    assert deploy.numbered({"a": 1}, 5) == {"a": 1, "additional_info": {deploy.INFER_SEQ_KEY: 5}}
    odd = {"additional_info": "text"}
    assert deploy.numbered(odd, 5) is odd


def test_obs_every_step_sends_each_intermediate_observation() -> None:
    rec = Record()
    env = StrictEnv(rec, [7])
    client = ScriptedClient([chunk(3, 0), chunk(3, 3), chunk(3, 6)], Config())
    report = eval_one_episode(env, client, settings=DeploySettings(obs_every_step=True))
    assert rec.executed[0] == list(range(7))
    sent = [o["step"] for f, o in client.calls if f == "update_obs"]
    assert sent == [0, 1, 2, 3, 4, 5, 6]  # the model's cache always holds the latest state
    assert [o["step"] for o in client.seen] == [0, 3, 6]
    assert report.observations == 7 and report.chunks == 3


@pytest.mark.parametrize(
    ("reply", "stopped"),
    [([], "empty_chunk"), ((), "empty_chunk"), (None, "bad_chunk"), (action(9), "bad_chunk"),
     ([action(9), "oops"], "bad_chunk")],
)
def test_empty_or_malformed_chunk_stops_the_loop(reply: Any, stopped: str, caplog: pytest.LogCaptureFixture) -> None:
    rec = Record()
    env = StrictEnv(rec, [50])
    client = ScriptedClient([chunk(2, 0), reply], Config())
    with caplog.at_level(logging.ERROR, logger=deploy.__name__):
        report = eval_one_episode(env, client, settings=DeploySettings())
    assert report.stopped == stopped
    assert rec.executed[0] == [0, 1]  # nothing of the bad reply ran, and the loop did not spin
    assert names(rec).count("get_obs") == 2 and len(client.calls) == 5
    assert any("stopping the episode loop" in r.getMessage() for r in caplog.records)


def test_batch_runs_each_env_exactly_its_own_chunk() -> None:
    rec = Record()
    env = StrictEnv(rec, [4, 10, 3])
    # round 1: chunks of 2, 3 and 1 actions; round 2: env 0 gets 2 (its limit), env 1 gets 4, env 2 1 more...
    replies = [
        [chunk(2, 0), chunk(3, 100), chunk(1, 200)],
        [chunk(2, 2), chunk(4, 103), chunk(1, 201)],
        [chunk(3, 107), chunk(5, 202)],  # env 0 has ended; env 2 gets more than its limit allows
    ]
    client = ScriptedClient(replies, Config())
    report = eval_one_episode_batch(env, client, settings=DeploySettings())
    assert rec.executed[0] == [0, 1, 2, 3]
    assert rec.executed[1][:7] == [100, 101, 102, 103, 104, 105, 106]
    assert rec.executed[2] == [200, 201, 202]
    tick_sets = [c[1] for c in rec.calls if c[0] == "take_action_batch"]
    assert tick_sets[:3] == [[0, 1, 2], [0, 1], [1]]  # an env leaves the tick once its chunk is used up
    obs_sets = [c[1] for c in rec.calls if c[0] == "get_obs_batch"]
    assert obs_sets[:3] == [[0, 1, 2], [0, 1, 2], [1, 2]]  # observations only at round boundaries
    assert report.stopped == "episode_end" and report.observations == len(obs_sets)


def test_batch_obs_every_step() -> None:
    rec = Record()
    env = StrictEnv(rec, [3, 3])
    client = ScriptedClient([[chunk(3, 0), chunk(2, 10)], [chunk(1, 12)]], Config())
    eval_one_episode_batch(env, client, settings=DeploySettings(obs_every_step=True))
    obs_sets = [c[1] for c in rec.calls if c[0] == "get_obs_batch"]
    assert obs_sets == [[0, 1], [0, 1], [0], [1]]
    assert rec.executed == {0: [0, 1, 2], 1: [10, 11, 12]}
    assert seqs(client) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]  # numbered per env


@pytest.mark.parametrize(
    ("reply", "stopped"),
    [([chunk(2)], "bad_chunk"), ([chunk(2), []], "empty_chunk"), ([chunk(2), {"a": 1}], "bad_chunk"), (None, "bad_chunk")],
)
def test_batch_rejects_bad_replies(reply: Any, stopped: str, caplog: pytest.LogCaptureFixture) -> None:
    rec = Record()
    env = StrictEnv(rec, [5, 5])
    client = ScriptedClient([reply], Config())
    with caplog.at_level(logging.ERROR, logger=deploy.__name__):
        report = eval_one_episode_batch(env, client, settings=DeploySettings())
    assert report.stopped == stopped and report.actions == 0
    assert "take_action_batch" not in names(rec)


def test_strict_env_catches_privileged_access() -> None:
    env = StrictEnv(Record(), [1])
    with pytest.raises(Privileged):
        env.reward_manager  # noqa: B018 - the harness itself must refuse


def test_deploy_source_touches_only_allowed_env_methods() -> None:
    tree = ast.parse(DEPLOY_PY.read_text(encoding="utf-8"))
    used = {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "TASK_ENV"}
    assert used and used <= ALLOWED
    # TASK_ENV is never handed to anything else (getattr, vars, helpers) that could reach further
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            assert not any(isinstance(a, ast.Name) and a.id == "TASK_ENV" for a in n.args), ast.unparse(n)


def test_deploy_imports_only_stdlib_and_yaml() -> None:
    tree = ast.parse(DEPLOY_PY.read_text(encoding="utf-8"))
    roots = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            roots |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            roots.add((n.module or "").split(".")[0])
    assert roots - set(sys.stdlib_module_names) <= {"yaml", "numpy"}
    assert (plugin_dir() / "__init__.py").read_text() == ""
    # and it really loads in a process where pyrua_dojo cannot be imported
    code = (
        "import sys, importlib.util\n"
        "sys.modules['pyrua_dojo'] = None\n"
        f"spec = importlib.util.spec_from_file_location('deploy', {str(DEPLOY_PY)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['deploy'] = m; spec.loader.exec_module(m)\n"
        "print(m.load_settings().request_timeout_s)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "3600.0"


def test_timeout_raised_on_xpolicylab_shaped_client() -> None:
    client = ScriptedClient([chunk(1)], Config(120.0))
    report = eval_one_episode(StrictEnv(Record(), [1]), client, settings=DeploySettings(request_timeout_s=1800))
    assert client._client.config.request_timeout_s == 1800.0 and report.request_timeout_s == 1800.0


def test_timeout_never_lowered() -> None:
    client = ScriptedClient([chunk(1)], Config(7200.0))
    report = eval_one_episode(StrictEnv(Record(), [1]), client, settings=DeploySettings(request_timeout_s=1800))
    assert client._client.config.request_timeout_s == 7200.0 and report.request_timeout_s == 7200.0


def test_timeout_left_alone_when_configured_null() -> None:
    client = ScriptedClient([chunk(1)], Config(120.0))
    report = eval_one_episode(StrictEnv(Record(), [1]), client, settings=DeploySettings(request_timeout_s=None))
    assert client._client.config.request_timeout_s == 120.0 and report.request_timeout_s == 120.0


@pytest.mark.parametrize("config", [None, FrozenConfig()], ids=["no-attribute", "frozen"])
def test_client_without_settable_timeout_still_runs(config: Any, caplog: pytest.LogCaptureFixture) -> None:
    rec = Record()
    client = ScriptedClient([chunk(2, 0), chunk(2, 2)], config)
    with caplog.at_level(logging.WARNING, logger=deploy.__name__):
        report = eval_one_episode(StrictEnv(rec, [4]), client, settings=DeploySettings())
    assert rec.executed[0] == [0, 1, 2, 3] and report.stopped == "episode_end"
    assert report.request_timeout_s == (None if config is None else 120.0)
    assert any(r.levelno == logging.WARNING and "request" in r.getMessage() for r in caplog.records)


def test_settings_from_the_shipped_deploy_yml_and_bad_values(tmp_path: Path) -> None:
    assert deploy.load_settings() == DeploySettings(request_timeout_s=3600.0, obs_every_step=False)
    good = tmp_path / "good.yml"
    good.write_text("request_timeout_s: '900'\nobs_every_step: 'true'\n")
    assert deploy.load_settings(good) == DeploySettings(900.0, True)
    for text, what in [("request_timeout_s: -1\n", "request_timeout_s"), ("request_timeout_s: soon\n", "request_timeout_s"),
                       ("obs_every_step: maybe\n", "obs_every_step"), ("- a\n- b\n", "mapping")]:
        bad = tmp_path / "bad.yml"
        bad.write_text(text)
        with pytest.raises(ValueError, match=what):
            deploy.load_settings(bad)


def test_deploy_yml_is_accepted_by_the_model_config() -> None:
    """The shipped deploy.yml plus setup_policy_server.py's overrides parse with the Model's own config."""
    import ast as pyast

    from pyrua_dojo.plugin.config import PolicyConfig

    cfg = yaml.safe_load((plugin_dir() / "deploy.yml").read_text())
    overrides = dict(port="40001", host="localhost", bench_name="RoboDojo", task_name="stack_blocks",
                     ckpt_name="pyrua", env_cfg_type="arx_x5", seed="0", policy_name="PyRUA_Dojo", action_type="joint")

    def parse(v: str) -> Any:  # setup_policy_server.py's _parse_val
        try:
            return pyast.literal_eval(v)
        except Exception:  # noqa: BLE001 - exactly upstream's fallback
            return v

    merged = {**cfg, **{k: parse(v) for k, v in overrides.items()}}
    pc = PolicyConfig.from_model_cfg(merged)
    assert pc.planner == "openai" and pc.llm is not None and pc.agent.max_llm_calls == 100
    assert pc.prompt.depth is False and pc.task == "stack_blocks" and pc.seed == 0
    assert PolicyConfig.from_model_cfg({**merged, "planner": "scripted"}).llm is None


class WireModel:
    """A minimal XPolicyLab Model: chunks of 2 actions tagged with the observed step."""

    def __init__(self) -> None:
        self.resets = 0
        self.obs: Any = None

    def reset(self) -> None:
        self.resets += 1

    def update_obs(self, obs: Any) -> None:
        self.obs = obs

    def get_action(self) -> list[dict[str, Any]]:
        s = int(self.obs["step"])
        return [action(s), action(s + 1)]


def test_over_real_websockets_with_our_model_client() -> None:
    from pyrua_dojo.wire.client import ModelClient
    from pyrua_dojo.wire.server import PolicyServer

    model = WireModel()
    rec = Record()
    with PolicyServer(model, host="127.0.0.1", port=0) as server:
        client = ModelClient(server.url, evaluation_id="plugin-test", trial_id="stack_blocks-0")
        try:
            assert client._client.config.request_timeout_s == 120.0
            report = deploy.eval_one_episode(StrictEnv(rec, [5]), client)  # settings from deploy.yml
            assert client._client.config.request_timeout_s == 3600.0
        finally:
            client.close()
    assert rec.executed[0] == [0, 1, 2, 3, 4]
    assert model.resets == 1 and report == deploy.LoopReport(3, 5, 3, "episode_end", 3600.0)
