"""`pyrua-dojo bench programs`: the reference programs, played by the scripted planner on the twin.

Each episode runs the whole agent side in-process (the XPolicyLab Model, its agent thread, the cell executor,
`robo`, perception through a twin segmentation server) against a `TwinEnv`, driven by XPolicyLab's reference
loop (one observation per chunk). Success, score and steps are the twin's own measurements.

By default the twin does not flatter the agent: masks carry `realistic` noise and each layout's true station is
drawn around the defaults the agent assumes (`Conditions`); `Conditions("none", "exact")` is the oracle.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from pyrua_dojo.runtime.stepping import INFER_SEQ_KEY
from pyrua_dojo.evaluate.twin_calibration import StationCalibrations
from pyrua_dojo.catalog import get_task
from pyrua_dojo.plugin.model import Model
from pyrua_dojo.seg_service.serve import serve_twin
from pyrua_dojo.seg_service.twin_backend import noise_level
from pyrua_dojo.twin.env import TwinConfig, TwinEnv, UnstableLayoutError
from pyrua_dojo.harness.scene_oracle import SceneMaskOracle
from pyrua_dojo.twin.station_draw import STATION_MODES, StationSpread


@dataclass(frozen=True)
class ProgramEpisode:
    """One played episode, as the twin measured it."""

    task: str
    seed: int
    layout_id: int
    success: bool
    score: float
    steps: int
    step_limit: int
    agent_status: str
    failure: str | None
    wall_s: float
    run_dir: str


def play_episode(
    env: TwinEnv, model: Model, task: str, seed: int, layout_id: int, oracle: SceneMaskOracle | None = None
) -> ProgramEpisode:
    """Reset the twin to a layout and drive the Model through it until the episode ends."""
    t0 = time.monotonic()
    env.reset(task, seed, layout_id)
    if oracle is not None:
        oracle.follow(env)
    model.reset()
    model.reset()
    seq = 0
    while not env.is_episode_end():
        obs = env.get_obs()
        seq += 1  # numbered as our plugin's deploy.py numbers what it sends
        obs["additional_info"] = {**obs.get("additional_info", {}), INFER_SEQ_KEY: seq}
        model.update_obs(obs)
        for action in model.get_action():
            env.take_action(action)
            if env.is_episode_end():
                break
    outcome = env.truth(0).outcome()
    episode = model.episode(0)
    model.reset()
    status = episode.result.status if episode is not None and episode.result is not None else "none"
    return ProgramEpisode(
        task=task,
        seed=seed,
        layout_id=layout_id,
        success=outcome.success,
        score=outcome.score,
        steps=outcome.steps,
        step_limit=outcome.step_limit,
        agent_status=status,
        failure=outcome.failure,
        wall_s=time.monotonic() - t0,
        run_dir=str(episode.run_dir) if episode is not None else "",
    )


@dataclass(frozen=True)
class Conditions:
    """How far the twin is from an oracle: mask noise level, station mode and spread, prior calibration.

    seg_noise: a level of `NOISE_LEVELS`; station: "unknown" (drawn per layout, spreads x `spread_scale`) or
    "exact"; calibrated: before its first episode, each layout's drawn station is calibrated once (the routine on
    the twin with camera matrices on) and the agent runs with that calibration file.
    """

    seg_noise: str = "realistic"
    station: str = "unknown"
    calibrated: bool = False
    spread_scale: float = 1.0

    def __post_init__(self) -> None:
        noise_level(self.seg_noise)
        if self.station not in STATION_MODES:
            raise ValueError(f"station must be one of {STATION_MODES}, got {self.station!r}")
        if self.calibrated and self.station != "unknown":
            raise ValueError("a prior calibration needs an unknown station")
        if not self.spread_scale >= 0:
            raise ValueError(f"spread_scale must be >= 0, got {self.spread_scale}")

    @property
    def spread(self) -> StationSpread | None:
        return StationSpread().scaled(self.spread_scale) if self.station == "unknown" else None

    def label(self) -> str:
        station = self.station if self.station == "exact" or self.spread_scale == 1.0 else (
            f"unknown x{self.spread_scale:g}")
        return f"noise {self.seg_noise}, station {station}" + (", calibrated" if self.calibrated else "")


ORACLE = Conditions("none", "exact")


def run(
    tasks: Sequence[str],
    layouts: int,
    seed: int = 0,
    run_root: Path | None = None,
    conditions: Conditions = Conditions(),
    progress: bool = True,
) -> list[ProgramEpisode]:
    """Play `layouts` layouts of each task with its reference program (seed, seed + 1, ... once a seed's layouts
    are used up) under `conditions`; unstable layouts are skipped."""
    root = Path(run_root) if run_root is not None else Path(tempfile.mkdtemp(prefix="pyrua-bench-programs-"))
    out: list[ProgramEpisode] = []
    spread = conditions.spread
    env = TwinEnv(TwinConfig(segmentation=True, station_spread=spread))
    calibrations = StationCalibrations(root / "_calibrations", spread) if conditions.calibrated and spread else None
    oracle = SceneMaskOracle()
    server = serve_twin(oracle, noise=noise_level(conditions.seg_noise), seed=seed)
    try:
        with Progress(disable=not progress, transient=True) as bar:
            job = bar.add_task("episodes", total=len(tasks) * layouts)
            for task in tasks:
                per_seed = get_task(task).episodes_per_seed  # 25 for Generalization tasks: more layouts take the next seed
                models: dict[tuple[int, int], Model] = {}
                for i in range(layouts):
                    s, layout = seed + i // per_seed, i % per_seed
                    key = (s, layout if calibrations is not None else -1)
                    if key not in models:
                        cfg: dict[str, object] = {
                            "task_name": task, "seed": s, "action_type": "joint", "planner": "scripted",
                            "segmentation_url": server.url, "run_root": str(root), "hold_steps": 50,
                        }
                        if calibrations is not None:
                            cfg["calibration_file"] = str(calibrations.file_for(s, layout))
                        models[key] = Model(cfg)
                    try:
                        out.append(play_episode(env, models[key], task, s, layout, oracle))
                    except UnstableLayoutError:
                        pass
                    bar.advance(job)
                for model in models.values():
                    model.close()
    finally:
        server.close()
        env.close()
    return out


def summarize(episodes: Sequence[ProgramEpisode]) -> list[dict[str, float | str | int]]:
    rows = []
    for task in dict.fromkeys(e.task for e in episodes):
        eps = [e for e in episodes if e.task == task]
        wins = [e for e in eps if e.success]
        limit = eps[0].step_limit
        rows.append({
            "task": task,
            "episodes": len(eps),
            "success_rate": len(wins) / len(eps),
            "mean_score": float(np.mean([e.score for e in eps])),
            "steps_success": float(np.mean([e.steps for e in wins])) if wins else float("nan"),
            "steps_all": float(np.mean([e.steps for e in eps])),
            "step_limit": limit,
            "wall_s": float(np.mean([e.wall_s for e in eps])),
        })
    return rows


#: The sweep: every noise level on the exact station, then the unknown station at half, full and double spread
#: with oracle masks, then the default (realistic, unknown) with a prior calibration.
SWEEP: tuple[Conditions, ...] = (
    *(Conditions(level, "exact") for level in ("none", "mild", "realistic", "harsh")),
    *(Conditions("none", "unknown", spread_scale=k) for k in (0.5, 1.0, 2.0)),
    Conditions("realistic", "unknown"),
    Conditions("realistic", "unknown", calibrated=True),
)


def main(
    tasks: Sequence[str],
    layouts: int,
    seed: int,
    run_root: str | None,
    conditions: Conditions = Conditions(),
    sweep: bool = False,
) -> int:
    if sweep:
        return _sweep(tasks, layouts, seed, run_root)
    print(f"bench programs: {conditions.label()}; {layouts} layouts per task, seed {seed}", flush=True)
    episodes = run(tasks, layouts, seed, Path(run_root) if run_root else None, conditions)
    table = Table(title=f"Reference programs on the twin, {layouts} layouts per task, seed {seed}, "
                  f"{conditions.label()} (targets: stack_blocks, general_pickup >= 90 %; steps < 60 % of the limit)")
    for col in ("task", "episodes", "success %", "score", "steps (solved)", "% of limit", "steps (all)",
                "wall s / ep"):
        table.add_column(col, justify="right")
    for r in summarize(episodes):
        table.add_row(
            str(r["task"]), str(r["episodes"]), f"{100 * float(r['success_rate']):.1f}",
            f"{100 * float(r['mean_score']):.1f}", f"{float(r['steps_success']):.0f}",
            f"{100 * float(r['steps_success']) / float(r['step_limit']):.0f}", f"{float(r['steps_all']):.0f}",
            f"{float(r['wall_s']):.1f}",
        )
    Console(width=120).print(table)
    failures = [e for e in episodes if not e.success]
    for e in failures[:20]:
        print(f"  failed: {e.task} layout {e.layout_id}: agent {e.agent_status}, twin {e.failure} -> {e.run_dir}")
    return 0


def _sweep(tasks: Sequence[str], layouts: int, seed: int, run_root: str | None) -> int:
    """Success per task under each of SWEEP's conditions (same layouts in every row)."""
    print(f"bench programs --sweep: {len(SWEEP)} conditions x {len(tasks)} tasks x {layouts} layouts, seed {seed}",
          flush=True)
    table = Table(title=f"Reference programs' success % against mask noise and station spread ({layouts} layouts "
                  f"per task, seed {seed})")
    table.add_column("conditions")
    for t in tasks:
        table.add_column(t, justify="right")
    for k, cond in enumerate(SWEEP):
        root = Path(run_root) / f"sweep{k}" if run_root else None
        rows = {str(r["task"]): r for r in summarize(run(tasks, layouts, seed, root, cond, progress=False))}
        cells = [f"{100 * float(rows[t]['success_rate']):.0f} ({rows[t]['episodes']})" if t in rows else "-"
                 for t in tasks]
        table.add_row(cond.label(), *cells)
        print(f"  {cond.label()}: " + ", ".join(f"{t} {c}" for t, c in zip(tasks, cells)), flush=True)
    Console(width=140).print(table)
    return 0
