"""`pyrua-dojo bench twin`: how fast the twin runs a RoboDojo-length episode and renders its three cameras.

The episode is `stack_blocks` (550 steps): the scripted joint-space stacker's actions are recorded once (arms parked
away from home afterwards, so the episode does not end early), then replayed from a fresh reset and held to the
step limit, with one observation (three 640x480 RGB cameras) every `obs_every` steps. Printed: wall time of the
episode, its split into actions and observations, reset time, and render milliseconds for the three cameras
(RGB, RGB + depth, RGB + segmentation).

`--all-tasks` (`run_all`): every twin task, one full-length episode each (layout 0) with one observation every
`obs_every` steps, both arms swinging joint1 a little about home (the arms move, nothing is touched, the episode runs
to its step limit); the target is stack_blocks' 5 s per 550 steps scaled by the task's step limit.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from pyrua_dojo.twin.env import TwinEnv
from pyrua_dojo.twin.truth_controller import JointScript, stack_blocks


def _record_actions(env: TwinEnv, task: str, seed: int, layout_id: int) -> list[dict[str, Any]]:
    env.reset(task, seed, layout_id)
    actions: list[dict[str, Any]] = []

    def on_step(script: JointScript) -> None:
        actions.append(
            {
                "left_arm_joint_state": script.q["left"].copy(),
                "left_ee_joint_state": [script.g["left"]],
                "right_arm_joint_state": script.q["right"].copy(),
                "right_ee_joint_state": [script.g["right"]],
            }
        )

    stack_blocks(env, go_home=False, on_step=on_step)
    return actions


def _render_ms(env: TwinEnv, repeats: int, **kind: bool) -> float:
    truth = env.truth(0)
    cams = [(truth.scene.cameras[c.name], c.intrinsics.width, c.intrinsics.height) for c in env._cams]  # noqa: SLF001
    renderer = env._renderer(env._slots[0])  # noqa: SLF001 - the bench times the renderer alone
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        renderer.render(truth.data, cams, **kind)
        times.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(times)


def run(seed: int = 0, layout_id: int = 2, obs_every: int = 20, repeats: int = 20) -> dict[str, float]:
    """Measure and return the figures (seconds / milliseconds) of one benchmark run."""
    task = "stack_blocks"
    with TwinEnv() as env:
        actions = _record_actions(env, task, seed, layout_id)
        t = time.perf_counter()
        env.reset(task, seed, layout_id)
        reset_s = time.perf_counter() - t
        env.get_obs()  # GL context and render context exist before timing (as after RoboDojo's reset renders)
        step_limit = env.step_lim
        hold = actions[-1]
        act_s = obs_s = 0.0
        n_obs = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for i in range(step_limit):
            if i % obs_every == 0:
                t = time.perf_counter()
                env.get_obs()
                obs_s += time.perf_counter() - t
                n_obs += 1
            t = time.perf_counter()
            env.take_action(actions[i] if i < len(actions) else hold)
            act_s += time.perf_counter() - t
        wall_s = time.perf_counter() - t0
        cpu_s = time.process_time() - c0
        out = env.truth(0).outcome()
        if out.steps != step_limit:
            raise RuntimeError(f"the benchmark episode ended after {out.steps} steps, expected {step_limit}")
        figures = {
            "episode_wall_s": wall_s,
            "episode_cpu_s": cpu_s,
            "actions_s": act_s,
            "observations_s": obs_s,
            "observations": float(n_obs),
            "steps": float(step_limit),
            "action_ms": act_s / step_limit * 1000.0,
            "reset_s": reset_s,
            "scripted_actions": float(len(actions)),
            "render_rgb_ms": _render_ms(env, repeats),
            "render_rgb_depth_ms": _render_ms(env, repeats, depth=True),
            "render_rgb_seg_ms": _render_ms(env, max(3, repeats // 4), segmentation=True),
            "mj_steps_per_action": float(10 * env.truth(0).scene.options.substeps),
        }
        return figures


TARGET_S_PER_STEP = 5.0 / 550  # the stack_blocks target (< 5 s for 550 steps), scaled by each task's step limit


def _swing_action(home: np.ndarray, step: int) -> dict[str, Any]:
    """Both arms turn joint1 by up to 0.15 rad about home (a 4 s period): motion without touching anything."""
    q = home.copy()
    q[0] += 0.15 * float(np.sin(2.0 * np.pi * step / 100.0))
    return {
        "left_arm_joint_state": q.copy(),
        "left_ee_joint_state": [1.0],
        "right_arm_joint_state": q.copy(),
        "right_ee_joint_state": [1.0],
    }


def run_task(env: TwinEnv, task: str, seed: int = 0, layout_id: int = 0, obs_every: int = 20) -> dict[str, float]:
    """One full-length episode of `task`: wall time, steps, reset time, and the 3-camera RGB render time."""
    t = time.perf_counter()
    env.reset(task, seed, layout_id)
    reset_s = time.perf_counter() - t
    env.get_obs()
    home = np.asarray(env.station.x5.home, dtype=float)
    step_limit = env.step_lim
    c0 = time.process_time()
    t0 = time.perf_counter()
    for i in range(step_limit):
        if i % obs_every == 0:
            env.get_obs()
        env.take_action(_swing_action(home, i))
    wall_s = time.perf_counter() - t0
    cpu_s = time.process_time() - c0
    out = env.truth(0).outcome()
    if out.steps != step_limit:
        raise RuntimeError(f"{task}: the benchmark episode ended after {out.steps} steps ({out.failure}), expected {step_limit}")
    return {
        "steps": float(step_limit),
        "episode_wall_s": wall_s,
        "episode_cpu_s": cpu_s,
        "target_s": TARGET_S_PER_STEP * step_limit,
        "reset_s": reset_s,
        "objects": float(len(env.truth(0).scene.objects)),
        "render_rgb_ms": _render_ms(env, 10),
    }


def run_all(tasks: list[str] | None = None, seed: int = 0, layout_id: int = 0, obs_every: int = 20) -> dict[str, dict[str, float]]:
    """`run_task` for each twin task (default: all, in registry order)."""
    from pyrua_dojo.twin.tasks import TWIN_TASKS

    names = list(TWIN_TASKS) if tasks is None else tasks
    out: dict[str, dict[str, float]] = {}
    with TwinEnv() as env:
        for name in names:
            out[name] = run_task(env, name, seed, layout_id, obs_every)
    return out


def main_all(seed: int = 0, layout_id: int = 0, obs_every: int = 20, tasks: list[str] | None = None) -> int:
    print(f"twin, every task, seed {seed} layout {layout_id}: one full-length episode each, one observation every "
          f"{obs_every} steps, arms swinging joint1 about home")
    print(f"{'task':28s} {'steps':>5s} {'wall s':>7s} {'target s':>8s} {'ok':>3s} {'cpu s':>6s} {'reset s':>7s} "
          f"{'objects':>7s} {'render ms':>9s}")
    ok_all = True
    for name, f in run_all(tasks, seed, layout_id, obs_every).items():
        ok = f["episode_wall_s"] < f["target_s"]
        ok_all &= ok
        print(f"{name:28s} {int(f['steps']):5d} {f['episode_wall_s']:7.2f} {f['target_s']:8.2f} {'yes' if ok else 'NO':>3s} "
              f"{f['episode_cpu_s']:6.2f} {f['reset_s']:7.2f} {int(f['objects']):7d} {f['render_rgb_ms']:9.1f}")
    print("cpu s: the episode's process CPU time (render threads included; on a loaded machine wall time exceeds it); "
          "render ms: median of 10 RGB renders of the three 640x480 cameras at the episode's end")
    return 0 if ok_all else 1


def main(seed: int = 0, layout_id: int = 2, obs_every: int = 20) -> int:
    f = run(seed=seed, layout_id=layout_id, obs_every=obs_every)
    print(f"twin stack_blocks seed {seed} layout {layout_id}: {int(f['steps'])} steps, "
          f"{int(f['scripted_actions'])} scripted then held, one observation every {obs_every} steps")
    print(f"  episode wall      {f['episode_wall_s']:.2f} s   (target < 5 s; process CPU {f['episode_cpu_s']:.2f} s, "
          "llvmpipe render threads included)")
    print(f"    actions         {f['actions_s']:.2f} s   ({f['action_ms']:.2f} ms per action, "
          f"{int(f['mj_steps_per_action'])} MuJoCo steps each)")
    print(f"    observations    {f['observations_s']:.2f} s   ({int(f['observations'])} x 3 cameras)")
    print(f"  reset             {f['reset_s']:.2f} s   (build + 500 settle ticks incl. stability check)")
    print(f"  render, 3 cameras 640x480: RGB {f['render_rgb_ms']:.1f} ms, RGB + depth {f['render_rgb_depth_ms']:.1f} ms,"
          f" RGB + segmentation {f['render_rgb_seg_ms']:.1f} ms (median)")
    return 0 if np.isfinite(f["episode_wall_s"]) else 1
