"""StepBridge: the agent thread and RoboDojo's get_action loop hand chunks and observations to each other."""

import threading
import time

import numpy as np
import pytest

from primitives.actions import hold_action, make_action
from primitives.errors import CancelToken, CellInterrupted, EpisodeFinished
from pyrua_dojo.runtime.stepping import StepBridge, observation_fingerprint


def obs(k: float) -> dict:
    return {
        "state": {
            "left_arm_joint_state": np.full(6, k, dtype=np.float32),
            "right_arm_joint_state": np.zeros(6, dtype=np.float32),
            "left_ee_joint_state": [1.0],
            "right_ee_joint_state": [1.0],
        },
        "vision": {"cam_head": {"color": np.full((48, 64, 3), int(k) % 255, dtype=np.uint8)}},
    }


def act(k: float) -> dict:
    return make_action(np.full(6, k), 1.0, np.zeros(6), 0.5)


def test_chunks_and_observations_alternate():
    bridge = StepBridge(CancelToken(), obs(0))
    seen = []

    def agent():
        for k in (1, 2, 3):
            o = bridge.exchange([act(k), act(k)])
            seen.append(float(o["state"]["left_arm_joint_state"][0]))
        bridge.agent_finished()

    t = threading.Thread(target=agent)
    t.start()
    chunks = [bridge.on_infer(obs(k)) for k in (0, 10, 20, 30)]
    t.join(5)
    assert seen == [10.0, 20.0, 30.0]
    assert [c[0]["left_arm_joint_state"][0] for c in chunks[:3]] == [1, 2, 3]
    # The agent finished: the 4th answer is a hold of the last commanded action.
    assert len(chunks[3]) == 1 and chunks[3][0]["left_arm_joint_state"][0] == 3
    assert bridge.hold_chunks_sent == 1


def _two_chunk_agent(bridge: StepBridge) -> list:
    """Start an agent thread that hands `bridge` the chunks act(1) then act(2); the list gets what each exchange
    returned."""
    got: list = []

    def agent():
        got.append(bridge.exchange([act(1)]))
        got.append(bridge.exchange([act(2)]))

    threading.Thread(target=agent, daemon=True).start()
    return got


def test_retried_infer_does_not_advance_the_agent():
    bridge = StepBridge(CancelToken(), obs(0))
    got = _two_chunk_agent(bridge)
    first = bridge.on_infer(obs(0))
    again = bridge.on_infer(obs(0))  # the client re-sent the same INFER after a reconnect
    assert again[0]["left_arm_joint_state"][0] == first[0]["left_arm_joint_state"][0] == 1
    assert got == []
    second = bridge.on_infer(obs(5))
    assert second[0]["left_arm_joint_state"][0] == 2
    assert len(got) == 1


def _waiting_agent(bridge: StepBridge, stops: type[EpisodeFinished | CellInterrupted]) -> tuple[threading.Thread, list]:
    """An agent thread that hands `bridge` one chunk and waits; the list gets the reason of the `stops` it meets."""
    raised: list = []

    def agent():
        try:
            bridge.exchange([act(1)])
        except stops as exc:
            raised.append(exc.reason)

    t = threading.Thread(target=agent)
    t.start()
    return t, raised


def test_end_wakes_a_waiting_agent_with_episode_finished():
    cancel = CancelToken()
    bridge = StepBridge(cancel, obs(0))
    t, raised = _waiting_agent(bridge, EpisodeFinished)
    bridge.on_infer(obs(0))
    bridge.end("reset")
    t.join(2)
    assert raised == ["reset"]
    with pytest.raises(EpisodeFinished):
        bridge.exchange([act(2)])
    assert cancel.cancelled


def _ran_when_ended(handed_out: bool) -> list[int]:
    bridge = StepBridge(CancelToken(), obs(0))
    ran: list[int] = []

    def agent() -> None:
        try:
            bridge.exchange([act(1), act(1), act(1)])
        except EpisodeFinished as exc:
            ran.append(exc.ran)

    t = threading.Thread(target=agent)
    t.start()
    if handed_out:
        while len(bridge.on_infer(obs(0))) != 3:  # the first INFER may come before the agent's chunk
            pass
    else:
        time.sleep(0.3)
    bridge.end("reset")
    t.join(2)
    return ran


def test_the_end_says_how_many_actions_of_the_waiting_chunk_the_benchmark_received():
    """A chunk get_action handed out before the end counts (the judge ran it); one still waiting does not."""
    assert _ran_when_ended(handed_out=True) == [3]
    assert _ran_when_ended(handed_out=False) == [0]


def test_robo_counts_the_chunk_the_episode_ended_during() -> None:
    """Robo.steps_used agrees with the judge when the episode ends inside a motion (in-process env)."""
    from calibration import load_station
    from primitives.robot import Robo
    from pyrua_dojo.runtime.stepping import EnvBridge
    from pyrua_dojo.twin.env import TwinEnv

    env = TwinEnv()
    try:
        env.reset("general_pickup", 0, 0)
        bridge = EnvBridge(env)
        robo = Robo(bridge, bridge.first_observation(), station=load_station(), step_limit=env.step_lim)
        with pytest.raises(EpisodeFinished):
            for _ in range(env.step_lim):
                robo.wait(30)  # 200 is no multiple of 30: the episode ends inside the 7th chunk
        assert robo.steps_used == env.truth(0).outcome().steps == env.step_lim
    finally:
        env.close()


def test_cancel_interrupts_a_waiting_exchange():
    cancel = CancelToken()
    bridge = StepBridge(cancel, obs(0))
    t, raised = _waiting_agent(bridge, CellInterrupted)
    time.sleep(0.1)
    cancel.cancel(CellInterrupted("deadline"))
    t.join(2)
    assert raised == ["deadline"]


def test_get_action_never_returns_an_empty_chunk_when_waiting_times_out():
    bridge = StepBridge(CancelToken(), obs(0))
    chunk = bridge.on_infer(obs(0), timeout_s=0.1)
    assert len(chunk) == 1
    assert np.allclose(chunk[0]["left_arm_joint_state"], 0)


def test_hold_action_from_observation_and_fingerprints():
    h = hold_action(obs(3), None)
    assert np.allclose(h["left_arm_joint_state"], 3) and h["left_ee_joint_state"][0] == 1.0
    assert observation_fingerprint(obs(1)) == observation_fingerprint(obs(1))
    assert observation_fingerprint(obs(1)) != observation_fingerprint(obs(2))


def test_request_numbers_from_our_deploy_loop_identify_retries_exactly():
    a = obs(1)
    a["additional_info"] = {"frequency": 25, "pyrua_infer_seq": 7}
    b = obs(1)
    b["additional_info"] = {"frequency": 25, "pyrua_infer_seq": 8}
    assert observation_fingerprint(a) != observation_fingerprint(b)  # same content, new request
    assert observation_fingerprint(a) == observation_fingerprint(dict(a))


def test_fingerprint_skips_non_numeric_state_entries():
    a = obs(1)
    a["state"]["mobile"] = {"base_pose": [0] * 7, "base_twist": [0] * 6}
    a["state"]["note"] = "text"
    assert observation_fingerprint(a) == observation_fingerprint(obs(1))


def test_a_still_scene_without_request_numbers_replays_a_chunk_at_most_once():
    bridge = StepBridge(CancelToken(), obs(0))
    got = _two_chunk_agent(bridge)
    bridge.on_infer(obs(0))
    bridge.on_infer(obs(0))  # maybe a re-send: replayed, the agent waits
    assert got == []
    third = bridge.on_infer(obs(0))  # the scene is simply still: the agent gets it and moves on
    assert third[0]["left_arm_joint_state"][0] == 2
    assert len(got) == 1
