"""`pyrua-dojo twin client`: the twin drives an XPolicyLab policy over the real websocket protocol as RoboDojo does.

The policy under test is `tests/fixtures/policies/hold_policy` (XPolicyLab's conventions: model.py, deploy.py,
deploy.yml, setup_eval_policy_server.sh): it holds both arms, alternates the grippers per chunk and records every
observation it receives; deploy.yml keys make it misbehave in the ways RoboDojo has to survive.
"""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from calibration.station import load_station
from pyrua_dojo.cli import main
from pyrua_dojo.harness.result_files import read_result_file
from pyrua_dojo.harness.eval_client import ClientSettings, TwinEvalClient, classify_error, parse_layouts
from pyrua_dojo.twin.env import TwinEnv
from pyrua_dojo.harness.policydir import PolicyDir, PolicyDirError, merge_overrides
from pyrua_dojo.harness.taskenv import ENV_METHODS, EnvAccessError, TaskEnvView, ViewState
from pyrua_dojo.twin.tasks import get_twin_task
from pyrua_dojo.wire import ErrorCode, WireError
from tests.fixtures.policies.helpers import policy_copy, records, run_dir_of, serve

TASK = "general_pickup"  # the shortest step limit among the twin's tasks (200)
CAMS = ("cam_head", "cam_left_wrist", "cam_right_wrist")


def client(url: str, policy_dir, results, *extra: str) -> int:
    return main(["twin", "client", "--url", url, "--task", TASK, "--results", str(results),
                 *(["--policy-dir", str(policy_dir)] if policy_dir else []), *extra])


def sidecar(run_dir) -> dict:
    return json.loads((run_dir / "_errors.json").read_text())


# ------------------------------------------------------------------------------------------- the observations


@pytest.mark.slow
def test_observations_results_and_videos_follow_robodojo(tmp_path):
    pol = policy_copy(tmp_path, chunk=25, obs_every_step=False)
    results = tmp_path / "eval_result"
    with serve(pol, TASK) as (server, model):
        assert client(server.url, pol, results, "--layouts", "3", "--videos") == 0
        assert model.resets == 2  # EvalEnv.reset's, then deploy.py's: XPolicyLab's Model.reset runs twice

    obs = records(tmp_path)
    assert len(obs) == 200 // 25  # one observation per chunk reaches the model (update_obs only caches)
    first = obs[0]["signature"]["keys"]
    assert set(first) == {"vision", "state", "action", "data_format_version", "additional_info", "instruction",
                          "env_idx"}
    vision = first["vision"]["keys"]
    assert tuple(vision) == CAMS
    for cam in CAMS:
        assert set(vision[cam]["keys"]) == {"color", "shape"}  # no depth or matrices in arx_x5
        assert vision[cam]["keys"]["color"] == {"type": "ndarray", "dtype": "uint8", "shape": [480, 640, 3]}
        assert vision[cam]["keys"]["shape"]["type"] == "list"  # a tuple sim-side; msgpack sends lists
    state = first["state"]["keys"]
    for arm in ("left", "right"):
        assert state[f"{arm}_arm_joint_state"] == {"type": "ndarray", "dtype": "float32", "shape": [6]}
        assert state[f"{arm}_ee_pose"] == {"type": "ndarray", "dtype": "float32", "shape": [7]}
        assert state[f"{arm}_ee_joint_state"] == {"type": "list", "items": [{"type": "float"}]}  # a list, not array
    assert not any(k.endswith(("tcp_pose", "delta_ee_pose")) or k == "mobile" for k in state)
    assert first["env_idx"] == {"type": "int"}
    layout = get_twin_task(TASK).layout(load_station(), 0, 3)
    for o in obs:
        assert o["instruction"] == layout.instruction
        assert o["additional_info"] == {"frequency": 25} and o["data_format_version"] == "v1.0"
        assert o["env_idx"] == 0 and o["color_std"] > 1.0  # a rendered scene, not a blank image
        assert o["color_writeable"] is False  # decoded arrays are read-only, as with XPolicyLab's codec
    # gripper: 1 = open; the state echoes the last commanded value, 1.0 at the start
    assert obs[0]["gripper_state"] == [[1.0], [1.0]]
    for prev, cur in zip(obs, obs[1:], strict=False):
        for g in cur["gripper_state"]:
            assert g[0] == pytest.approx(prev["commanded_gripper"], abs=0.02)
    # holding: the joints do not drift
    assert np.allclose(obs[0]["joints"], obs[-1]["joints"], atol=0.01)

    run_dir = run_dir_of(results, TASK, "hold_policy")
    result = json.loads((run_dir / "_result.json").read_text())
    assert result == {"success_rate": 0.0, "eval_time": 1, "score": 0.0,
                      "details": {"0": {"layout_id": 3, "success": False, "score": 0.0}}}
    assert read_result_file(run_dir / "_result.json").eval_time == 1
    assert not (run_dir / "_errors.json").exists()
    videos = sorted(p.name for p in run_dir.glob("*.mp4"))
    assert videos == [f"episode_0000000_{cam}_fail.mp4" for cam in sorted(CAMS)]
    cap = cv2.VideoCapture(str(run_dir / "episode_0000000_cam_head_fail.mp4"))
    frames = 0
    while cap.read()[0]:
        frames += 1
    assert frames == len(obs) + 1  # one frame per get_obs, plus RoboDojo's last frame when the episode ends
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(25)
    assert not (run_dir / "_stream").exists()


@pytest.mark.slow
def test_batch_policy_gets_parallel_envs_with_their_env_idx(tmp_path):
    pol = policy_copy(tmp_path, chunk=50, obs_every_step=False, eval_batch=True)
    results = tmp_path / "eval_result"
    with serve(pol, TASK) as (server, model):
        assert client(server.url, pol, results, "--layouts", "0-1", "--num-envs", "4") == 0
    obs = records(tmp_path)
    assert sorted({o["env_idx"] for o in obs}) == [0, 1]  # two envs (not 4: only two layouts), one INFER each
    for env in (0, 1):
        assert len([o for o in obs if o["env_idx"] == env]) == 200 // 50
    instructions = {o["env_idx"]: o["instruction"] for o in obs}
    station = load_station()
    assert instructions == {i: get_twin_task(TASK).layout(station, 0, i).instruction for i in (0, 1)}
    result = read_result_file(run_dir_of(results, TASK, "hold_policy") / "_result.json")
    assert [(e.index, e.layout_id) for e in result.episodes] == [(0, 0), (1, 1)]


@pytest.mark.slow
@pytest.mark.parametrize(("dispatch", "updates"), [("infer", 2), ("call", 2 + 2 * 2)])
def test_dispatch_like_older_or_newer_xpolicylab_clients(tmp_path, dispatch, updates):
    # Two chunks of 3 actions with XPolicyLab's loop: 6 get_obs. Over INFER (7198143) only the one before each
    # get_action reaches the model; over CALL (newer clients) every update_obs does.
    pol = policy_copy(tmp_path, chunk=3, stop_after_chunks=2)
    with serve(pol, TASK) as (server, model):
        assert client(server.url, pol, tmp_path / "r", "--layouts", "0", "--dispatch", dispatch) == 0
        assert model.updates == updates and len(records(tmp_path)) == 2


@pytest.mark.slow
def test_depth_observations(tmp_path):
    pol = policy_copy(tmp_path, chunk=1, stop_after_chunks=1)
    with serve(pol, TASK) as (server, _):
        assert client(server.url, pol, tmp_path / "r", "--layouts", "0", "--depth") == 0
    [o] = records(tmp_path)
    for cam in CAMS:
        keys = o["signature"]["keys"]["vision"]["keys"][cam]["keys"]
        assert keys["depth"] == {"type": "ndarray", "dtype": "float32", "shape": [480, 640]}
        assert keys["intrinsic_matrix"] == {"type": "ndarray", "dtype": "float64", "shape": [3, 3]}
        assert keys["extrinsic_matrix"] == {"type": "ndarray", "dtype": "float64", "shape": [4, 4]}


# ----------------------------------------------------------------------------------------------- policy errors


@pytest.mark.slow
def test_invalid_action_gets_robodojos_error_and_the_run_goes_on(tmp_path):
    pol = policy_copy(tmp_path, chunk=50, obs_every_step=False, fault="invalid_action", fault_episode=0)
    results = tmp_path / "eval_result"
    with serve(pol, TASK) as (server, _):
        assert client(server.url, pol, results, "--layouts", "0-1") == 0
    run_dir = run_dir_of(results, TASK, "hold_policy")
    result = read_result_file(run_dir / "_result.json")
    assert [(e.layout_id, e.success, e.score) for e in result.episodes] == [(0, False, 0.0), (1, False, 0.0)]
    errors = sidecar(run_dir)["episodes"]
    assert len(errors) == 1
    err = errors[0]
    assert (err["layout_id"], err["index"], err["steps"]) == (0, 0, 0)
    assert err["error"]["kind"] == "invalid_action" and err["error"]["where"] == "take_action"
    assert err["error"]["error_type"] == "ValueError"
    assert err["error"]["message"] == "Unexpected state keys: ['left_gripper']"  # RoboDojo's validate_action_dict
    assert len(records(tmp_path)) == 1 + 200 // 50  # layout 1 ran to its step limit after layout 0 broke


@pytest.mark.slow
def test_reference_loop_and_an_error_frame_from_the_model(tmp_path):
    # No --policy-dir: XPolicyLab's reference loop drives the env (one get_obs after every action).
    pol = policy_copy(tmp_path, chunk=5, fault="raise", fault_episode=0, fault_after=2)
    results = tmp_path / "eval_result"
    with serve(pol, TASK) as (server, _):
        assert client(server.url, None, results, "--layouts", "0", "--policy-name", "hold_ref", "--videos") == 0
    run_dir = run_dir_of(results, TASK, "hold_ref")
    [err] = sidecar(run_dir)["episodes"]
    assert err["steps"] == 10  # two chunks of 5 ran, the third INFER failed
    assert err["error"]["kind"] == "policy_error" and err["error"]["error_type"] == "WireError"
    assert err["error"]["message"] == "infer_failed: hold_policy: deliberate failure"
    cap = cv2.VideoCapture(str(run_dir / "episode_0000000_cam_head_fail.mp4"))
    frames = 0
    while cap.read()[0]:
        frames += 1
    assert frames == 11  # the reference loop observes after every action but a chunk's last: 1 + 2 * 5


@pytest.mark.slow
def test_timeout_with_on_error_skip_leaves_the_episode_out_as_robodojo_does(tmp_path):
    pol = policy_copy(tmp_path, chunk=5, obs_every_step=False, fault="sleep", fault_sleep_s=2.0)
    results = tmp_path / "eval_result"
    with serve(pol, TASK) as (server, _):
        assert client(server.url, pol, results, "--layouts", "0", "--request-timeout", "0.5",
                      "--on-error", "skip") == 0
    run_dir = run_dir_of(results, TASK, "hold_policy")
    assert not (run_dir / "_result.json").exists()  # nothing booked
    data = sidecar(run_dir)
    assert data["not_booked"] == [{"layout_id": 0, "reason": "timeout"}]
    [err] = data["episodes"]
    assert err["index"] is None and err["error"]["kind"] == "timeout"


@pytest.mark.slow
def test_deploy_that_returns_early_is_booked_as_failed_and_a_run_resumes(tmp_path):
    pol = policy_copy(tmp_path, chunk=5, obs_every_step=False, stop_after_chunks=1)
    results = tmp_path / "eval_result"
    with serve(pol, TASK) as (server, _):
        assert client(server.url, pol, results, "--layouts", "2", "--run-id", "2026-01-01_00-00-00") == 0
        run_dir = run_dir_of(results, TASK, "hold_policy")
        assert read_result_file(run_dir / "_result.json").episodes[0].success is False
        [err] = sidecar(run_dir)["episodes"]
        assert err["steps"] == 5 and err["error"]["kind"] == "unfinished"
        # the same run id again: layout 2 is booked already, only layout 3 runs
        assert client(server.url, pol, results, "--layouts", "2-3", "--run-id", "2026-01-01_00-00-00") == 0
    assert [r["episode"] for r in records(tmp_path)] == [0, 1]  # one INFER per episode: layout 2 did not rerun
    episodes = read_result_file(run_dir / "_result.json").episodes
    assert [(e.index, e.layout_id) for e in episodes] == [(0, 2), (1, 3)]
    assert [e["layout_id"] for e in sidecar(run_dir)["episodes"]] == [2, 3]


def test_deploy_reaching_for_simulator_state_fails_naming_the_attribute(tmp_path):
    pol = policy_copy(tmp_path, probe_env="step_lim")
    results = tmp_path / "eval_result"
    with serve(pol, TASK) as (server, _):
        assert client(server.url, pol, results, "--layouts", "0") == 0
    [err] = sidecar(run_dir_of(results, TASK, "hold_policy"))["episodes"]
    assert err["error"]["kind"] == "env_access" and err["error"]["error_type"] == "EnvAccessError"
    assert err["error"]["message"].startswith("TASK_ENV.step_lim: cannot read it")
    assert err["blocked_attributes"] == ["step_lim"]


def test_no_server_is_a_clear_error(tmp_path, capsys):
    pol = policy_copy(tmp_path)
    rc = client("ws://127.0.0.1:9", pol, tmp_path / "r", "--layouts", "0", "--connect-attempts", "1",
                "--connect-retry-delay", "0")
    assert rc == 1
    assert "failed to connect to ws://127.0.0.1:9 after 1 attempts" in capsys.readouterr().err


# -------------------------------------------------------------------------------------------- the strict view


def test_task_env_view_offers_only_robodojos_methods():
    with TwinEnv() as env:
        env.reset(TASK, 0, 0)
        state = ViewState(env, None)
        view = TaskEnvView(state)
        assert dir(view) == sorted(ENV_METHODS)
        assert view.get_running_env_idx_list() == [0] and view.is_episode_end() is False
        assert view.get_obs()["env_idx"] == 0
        for probe in (lambda: view.step_lim, lambda: view._state, lambda: view.__dict__, lambda: view.truth(0)):
            with pytest.raises(EnvAccessError, match="only RoboDojo's env methods"):
                probe()
        with pytest.raises(TypeError):
            vars(view)
        assert hasattr(view, "reward_manager") is False
        with pytest.raises(EnvAccessError, match="cannot set it"):
            view.take_action = None
        assert state.blocked == ["step_lim", "_state", "__dict__", "truth", "__dict__", "reward_manager", "take_action"]
        with pytest.raises(ValueError, match="Unexpected state keys"):
            view.take_action({"left_arm_joint_states": [0.0] * 6})
        assert isinstance(state.invalid_action, ValueError)


# ------------------------------------------------------------------------------------------------ small parts


def test_parse_layouts():
    assert parse_layouts("all", 3) == (0, 1, 2)
    assert parse_layouts("0-2,7", 10) == (0, 1, 2, 7)
    for bad, msg in (("3-1", "backwards"), ("x", "not N or N-M"), ("9", "out of range"), ("1,1", "twice")):
        with pytest.raises(ValueError, match=msg):
            parse_layouts(bad, 5)


def test_merge_overrides_as_xpolicylab_does():
    base = {"seed": None, "planner": "openai"}
    assert merge_overrides(base, ["seed=0", "ckpt_name=123", "flag=true", "x=1e3"]) == {
        "seed": 0, "planner": "openai", "ckpt_name": 123, "flag": "true", "x": 1000.0}
    assert merge_overrides(base, ["--seed", "2", "--planner", "scripted"]) == {"seed": 2, "planner": "scripted"}
    with pytest.raises(ValueError, match="key value pairs"):
        merge_overrides(base, ["--seed"])


def test_policy_dir_errors(tmp_path):
    with pytest.raises(PolicyDirError, match="not found"):
        PolicyDir.load(tmp_path / "missing")
    (tmp_path / "bad-name").mkdir()
    with pytest.raises(PolicyDirError, match="not a Python identifier"):
        PolicyDir.load(tmp_path / "bad-name")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyDirError, match="no deploy.yml"):
        PolicyDir.load(tmp_path / "empty")
    pol = policy_copy(tmp_path)
    (pol / "deploy.py").write_text("def something_else():\n    pass\n")
    with pytest.raises(PolicyDirError, match="does not define eval_one_episode"):
        TwinEvalClient(ClientSettings(url="ws://127.0.0.1:1", task=TASK, seed=0, layouts=(0,), policy_dir=pol))


def test_settings_are_checked():
    with pytest.raises(ValueError, match="unknown twin task"):
        ClientSettings(url="ws://x:1", task="no_such_task", seed=0, layouts=(0,))
    with pytest.raises(ValueError, match="out of range"):
        ClientSettings(url="ws://x:1", task=TASK, seed=0, layouts=(0, 999))


def test_classify_error():
    assert classify_error(WireError(ErrorCode.TIMEOUT, "t"), where="deploy").kind == "timeout"
    assert classify_error(WireError(ErrorCode.INTERNAL, "connection closed: x"), where="deploy").kind == "connection"
    assert classify_error(WireError(ErrorCode.RESET_FAILED, "r"), where="reset").kind == "policy_error"
    assert classify_error(ConnectionError("refused"), where="reset").kind == "connection"
    exc = KeyError("right_ee_joint_state")
    assert classify_error(exc, where="deploy", invalid_action=exc).kind == "invalid_action"
    assert classify_error(RuntimeError("x"), where="deploy").kind == "deploy_error"
