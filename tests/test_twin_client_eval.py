"""`pyrua-dojo twin eval`: start a policy directory's server as RoboDojo does (a real child process), run the twin
client against it, stop it. Covers the server script with XPolicyLab's positional arguments, the direct-Python
fallback, a server that dies mid-episode, and our own plugin directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyrua_dojo.cli import main
from pyrua_dojo.harness.result_files import read_result_file
from pyrua_dojo.runtime.trace import load_run
from pyrua_dojo.harness.policydir import PolicyDir
from pyrua_dojo.harness.twin_eval import ServerLaunch
from tests.fixtures.policies.helpers import policy_copy, recorded_cfg, records, run_dir_of

TASK = "general_pickup"

PLUMBING_PROGRAM = """\
# %% lift the right arm, close and open its gripper (needs no perception, so any layout will do)
m = robo.move_to("right", [0.3, -0.25, 0.95], path="joint")
print("reached", m.reached, "steps", m.steps_used)
print("held", robo.close("right").held)
robo.open("right")
"""


def twin_eval(policy_dir: Path, results: Path, *extra: str, task: str = TASK) -> int:
    return main(["twin", "eval", "--policy-dir", str(policy_dir), "--task", task, "--results", str(results),
                 "--server-timeout", "120", *extra])


@pytest.mark.slow
def test_server_script_gets_xpolicylabs_positional_arguments(tmp_path):
    pol = policy_copy(tmp_path, chunk=50, obs_every_step=False)
    results = tmp_path / "eval_result"
    rc = twin_eval(pol, results, "--layouts", "1", "--seed", "2", "--ckpt", "ck7", "--server-mode", "script",
                   "--policy-env", "policy_env_x")
    assert rc == 0
    cfg = recorded_cfg(tmp_path)  # the model_cfg the server built: deploy.yml + the script's overrides
    assert {k: cfg[k] for k in ("bench_name", "task_name", "ckpt_name", "env_cfg_type", "seed", "policy_name",
                                "action_type", "host")} == {
        "bench_name": "RoboDojo", "task_name": TASK, "ckpt_name": "ck7", "env_cfg_type": "arx_x5", "seed": 2,
        "policy_name": "hold_policy", "action_type": "joint", "host": "localhost"}
    assert isinstance(cfg["port"], int) and cfg["chunk"] == 50  # deploy.yml's own keys are kept
    run_dir = run_dir_of(results, TASK, "hold_policy", seed=2, ckpt="ck7")
    log = (run_dir / "_policy_server.log").read_text()
    assert f"[SERVER] policy=hold_policy, task={TASK}, policy_server_port={cfg['port']}, conda_env=policy_env_x" in log
    [episode] = read_result_file(run_dir / "_result.json").episodes
    assert episode.layout_id == 1 and len(records(tmp_path)) == 200 // 50


def test_a_server_that_dies_mid_episode(tmp_path):
    pol = policy_copy(tmp_path, chunk=10, obs_every_step=False, fault="die", fault_after=2)
    results = tmp_path / "eval_result"
    rc = twin_eval(pol, results, "--layouts", "0-2", "--server-mode", "python", "--connect-attempts", "1",
                   "--connect-retry-delay", "0.1")
    assert rc == 0  # the run completes; every layout is accounted for
    run_dir = run_dir_of(results, TASK, "hold_policy")
    result = read_result_file(run_dir / "_result.json")
    assert [(e.layout_id, e.success) for e in result.episodes] == [(0, False), (1, False), (2, False)]
    errors = {e["layout_id"]: e for e in json.loads((run_dir / "_errors.json").read_text())["episodes"]}
    assert errors[0]["steps"] == 20 and errors[0]["error"]["kind"] == "connection"
    for lid in (1, 2):
        assert errors[lid]["error"]["kind"] == "aborted"
        assert errors[lid]["error"]["message"].startswith("the policy server exited with status 3")


def test_launch_plans(tmp_path):
    pol = PolicyDir.load(policy_copy(tmp_path))
    script = ServerLaunch.plan(pol, mode="script", port=4567, task=TASK, seed=1, ckpt_name="c", action_type="ee",
                               policy_gpu="3", policy_env="envA", extra_overrides=["planner=scripted"])
    assert script.argv == ("bash", str(pol.path / "setup_eval_policy_server.sh"), "RoboDojo", TASK, "c", "arx_x5",
                           "ee", "1", "3", "envA", "4567")
    assert script.cwd == pol.path and dict(script.env) == {"PYRUA_OVERRIDES": "planner=scripted"}
    auto = ServerLaunch.plan(pol, mode="auto", port=4567, task=TASK, seed=1, ckpt_name="c", action_type="ee")
    assert auto.mode == "python"  # not inside an XPolicyLab checkout
    assert auto.argv[1:] == ("-m", "pyrua_dojo.harness.policy_server", "--config_path", str(pol.path / "deploy.yml"),
                             "--overrides", "port=4567", "host=localhost", "bench_name=RoboDojo", f"task_name={TASK}",
                             "ckpt_name=c", "env_cfg_type=arx_x5", "seed=1", "policy_name=hold_policy",
                             "action_type=ee")
    with pytest.raises(ValueError, match="key=value"):
        ServerLaunch.plan(pol, mode="python", port=1, task=TASK, seed=0, ckpt_name="c", action_type="joint",
                          extra_overrides=["--bad"])


# -------------------------------------------------------------------------------------------- our own plugin


def plugin_dir() -> Path:
    from submission.install import plugin_dir as packaged

    return packaged()


@pytest.mark.slow
def test_our_plugin_runs_the_same_way(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(PLUMBING_PROGRAM)
    results = tmp_path / "eval_result"
    runs = tmp_path / "runs"
    rc = twin_eval(plugin_dir(), results, "--layouts", "4", "--server-mode", "python",
                   "--override", "planner=scripted", "--override", f"program={program}",
                   "--override", "hold_steps=50", "--override", f"run_root={runs}",
                   "--override", "segmentation_url=None")
    assert rc == 0
    run_dir = run_dir_of(results, TASK, "PyRUA_Dojo")
    [episode] = read_result_file(run_dir / "_result.json").episodes
    assert (episode.layout_id, episode.success) == (4, False)  # the program does not try the task
    assert not (run_dir / "_errors.json").exists()  # it held the arms until the step limit, as it should
    [index] = [json.loads(line) for line in (runs / "episodes.jsonl").read_text().splitlines()]
    assert (index["task"], index["seed"], index["env_idx"]) == (TASK, 0, 0)
    agent = load_run(index["run_dir"])
    assert agent.result["status"] == "finished" and agent.result["counts"]["cell_statuses"] == {"ok": 1}
    assert 0 < agent.result["episode"]["steps_used"] < 200
    assert agent.result["config"]["task_name"] == TASK and agent.result["config"]["action_type"] == "joint"


@pytest.mark.slow
def test_our_plugins_scripted_planner_solves_stack_blocks(tmp_path):
    results = tmp_path / "eval_result"
    rc = twin_eval(plugin_dir(), results, "--layouts", "0", "--server-mode", "python", "--twin-segmentation",
                   "--override", "planner=scripted", "--override", f"run_root={tmp_path / 'runs'}",
                   task="stack_blocks")
    assert rc == 0
    [episode] = read_result_file(run_dir_of(results, "stack_blocks", "PyRUA_Dojo") / "_result.json").episodes
    assert episode.success
