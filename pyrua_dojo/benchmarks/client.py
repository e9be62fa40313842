"""`pyrua-dojo bench client`: what driving the twin through the wire costs, per step, against the bare env.

One `general_pickup` episode (200 steps) with a policy that holds the arms, three ways:
- bare: `TwinEnv.take_action` + `get_obs` per step in this process (no websocket, no view);
- through the wire, chunk 1: XPolicyLab's reference loop over the strict env view and our websocket client, the
  policy answering one action per INFER (as XPolicyLab's demo_policy does): one 3-camera observation encoded,
  sent and decoded per step;
- the same with 25 actions per INFER (one INFER per 25 steps; the loop still observes after every action).
The client's calls are timed apart from the env, so the wire's share is measured directly; all figures are
wall-clock on this machine (rendering dominates and depends on the GL backend and the load).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["HoldModel", "main"]

TASK = "general_pickup"


class HoldModel:
    """An XPolicyLab Model that holds both arms where they are, `chunk` actions per INFER."""

    def __init__(self, chunk: int) -> None:
        self.chunk = chunk
        self.infers = 0
        self._obs: Mapping[str, Any] | None = None

    def reset(self) -> None:
        self._obs = None

    def update_obs(self, obs: Mapping[str, Any]) -> None:
        self._obs = obs

    def get_action(self) -> list[dict[str, Any]]:
        assert self._obs is not None
        self.infers += 1
        state = self._obs["state"]
        action = {
            "left_arm_joint_state": np.asarray(state["left_arm_joint_state"], dtype=np.float64),
            "right_arm_joint_state": np.asarray(state["right_arm_joint_state"], dtype=np.float64),
            "left_ee_joint_state": np.ones(1),
            "right_ee_joint_state": np.ones(1),
        }
        return [action] * self.chunk


def _bare(layout: int) -> tuple[float, int]:
    from pyrua_dojo.twin.env import TwinEnv

    with TwinEnv() as env:
        env.reset(TASK, 0, layout)
        model = HoldModel(1)
        obs = env.get_obs()
        t0 = time.perf_counter()
        steps = 0
        while not env.is_episode_end():
            model.update_obs(obs)
            env.take_action(model.get_action()[0])
            obs = env.get_obs()
            steps += 1
        return time.perf_counter() - t0, steps


class _TimedClient:
    """A ModelClient whose calls are timed (what the wire costs, apart from the env)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def call(self, func_name: str, obs: Any = None) -> Any:
        t0 = time.perf_counter()
        try:
            return self.client.call(func_name, obs)
        finally:
            self.seconds[func_name] = self.seconds.get(func_name, 0.0) + time.perf_counter() - t0
            self.counts[func_name] = self.counts.get(func_name, 0) + 1


def _client(layout: int, chunk: int) -> tuple[float, int, _TimedClient]:
    """XPolicyLab's reference loop through the view and the websocket, as the twin client runs it."""
    from pyrua_dojo.twin.env import TwinEnv
    from pyrua_dojo.harness.reference_loop import eval_one_episode
    from pyrua_dojo.harness.taskenv import TaskEnvView, ViewState
    from pyrua_dojo.wire import ModelClient, PolicyServer

    model = HoldModel(chunk)
    with PolicyServer(model, host="127.0.0.1", port=0) as server, TwinEnv() as env:
        env.reset(TASK, 0, layout)
        env.get_obs()  # GL context set up outside the timing, as in the bare loop
        with ModelClient(server.url, evaluation_id="bench", trial_id="bench") as raw:
            client = _TimedClient(raw)
            t0 = time.perf_counter()
            eval_one_episode(TaskEnvView(ViewState(env, None)), client)
            wall = time.perf_counter() - t0
        return wall, env.truth(0).outcome().steps, client


def main(layout: int = 0) -> int:
    bare_s, steps = _bare(layout)
    print(f"bare env loop: {steps} steps in {bare_s:.2f} s = {1000 * bare_s / steps:.1f} ms/step "
          "(one action + one 3-camera observation per step)")
    for chunk in (1, 25):
        wall, n, client = _client(layout, chunk)
        wire = sum(client.seconds.values())
        infers = client.counts.get("get_action", 0)
        per_infer = 1000 * client.seconds.get("get_action", 0.0) / max(infers, 1)
        print(f"twin client, chunk {chunk:2d}: {n} steps in {wall:.2f} s = {1000 * wall / n:.1f} ms/step, of which "
              f"{1000 * wire / n:.1f} ms/step on the wire ({infers} INFERs of {per_infer:.1f} ms: encode, send, "
              f"model, reply, decode) and {1000 * (wall - wire) / n:.1f} ms/step in the env and the view")
    return 0
