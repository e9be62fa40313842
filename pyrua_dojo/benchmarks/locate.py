"""`pyrua-dojo bench locate`: accuracy of `locate` against the twin's true object poses, per method.

Layouts alternate between `stack_blocks` and `general_pickup` (fixed seeds); every object of a layout is looked
for with a prompt that names it alone. Methods: "head" (the first observation, head camera only), "head+wrist"
(after `look_at` with the nearer arm, for up to `wrist_objects` objects per layout), "depth" (a twin with depth
on, first observation). Errors: top centre xy and top height, against the true top (the pose's xy; the highest
corner of the object's rotated bounding box). Each observation is segmented by one twin server per mask-noise
setting (`NOISES`: the SAM 3 levels none / mild / realistic / harsh, and masks dilated / eroded by 2 px), so
settings compare on the same images. `station`: "unknown" (default) draws each layout's true station around the
defaults the agent's perception assumes; `calibrated` gives the agent that station's calibration file first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from calibration import load_station
from calibration.transforms import quat_to_matrix
from primitives.actions import Observation
from primitives.errors import EpisodeFinished
from primitives.kinematics import X5Kinematics
from primitives.perception import Perception
from primitives.results import Located
from primitives.robot import Robo
from primitives.seg_client import SegmentationClient
from pyrua_dojo.runtime.stepping import EnvBridge
from pyrua_dojo.seg_service.serve import serve_twin
from pyrua_dojo.evaluate.twin_calibration import StationCalibrations
from pyrua_dojo.seg_service.twin_backend import NOISE_LEVELS, TwinNoise, normalize_words
from pyrua_dojo.twin.env import TwinConfig, TwinEnv, UnstableLayoutError
from pyrua_dojo.twin.objects import ObjectSpec
from pyrua_dojo.twin.scene import SceneObject
from pyrua_dojo.twin.station_draw import STATION_MODES, StationSpread
from pyrua_dojo.twin.tasks import get_twin_task

TASKS = ("stack_blocks", "general_pickup")
NOISES: dict[str, TwinNoise] = {
    **NOISE_LEVELS, "dilate2": TwinNoise(grow_px=2, level="dilate2"), "erode2": TwinNoise(grow_px=-2, level="erode2"),
}
TARGETS_MM = {"head": (10.0, None), "head+wrist": (4.0, 4.0), "depth": (3.0, 3.0)}


@dataclass
class Errors:
    """Errors (mm) of one method under one noise setting; misses count objects not found or not so measured."""

    xy: list[float] = field(default_factory=list)
    z: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)  # true error within twice the stated uncertainty (xy and top)
    misses: int = 0

    def add(self, loc: Located, method: str, truth_xy: np.ndarray, truth_top: float) -> None:
        if not loc.found or loc.method != method:
            self.misses += 1
            return
        exy = float(np.hypot(loc.xyz[0] - truth_xy[0], loc.xyz[1] - truth_xy[1]))
        ez = abs(loc.xyz[2] - truth_top)
        self.xy.append(exy * 1000.0)
        self.z.append(ez * 1000.0)
        self.covered.append(exy <= 2 * loc.uncertainty_xy_m + 1e-4 and ez <= 2 * loc.uncertainty_z_m + 1e-4)

    def summary(self) -> dict[str, float]:
        xy, z = np.array(self.xy or [np.nan]), np.array(self.z or [np.nan])
        return {
            "n": len(self.xy),
            "misses": self.misses,
            "xy_median": float(np.median(xy)),
            "xy_p95": float(np.percentile(xy, 95)),
            "z_median": float(np.median(z)),
            "z_p95": float(np.percentile(z, 95)),
            "covered": float(np.mean(self.covered)) if self.covered else float("nan"),
        }


def layout_plan(layouts: int, seed: int) -> list[tuple[str, int, int]]:
    """(task, seed, layout id) for `layouts` layouts, alternating tasks, moving to the next seed when one runs out."""
    plan: list[tuple[str, int, int]] = []
    counters = {t: (seed, 0) for t in TASKS}
    for i in range(layouts):
        task = TASKS[i % len(TASKS)]
        s, lid = counters[task]
        if lid >= get_twin_task(task).episodes_per_seed:
            s, lid = s + 1, 0
        plan.append((task, s, lid))
        counters[task] = (s, lid + 1)
    return plan


def unique_prompt(label: str, objects: dict[str, SceneObject]) -> str | None:
    """A prompt whose words fit this object and no other object of the layout (as the twin server matches)."""
    spec = objects[label].spec
    words = normalize_words(spec.words)
    others = [normalize_words(o.spec.words) for k, o in objects.items() if k != label]
    candidates = [*spec.descriptions, " ".join(spec.words[:2]), *spec.words]
    for text in candidates:
        want = normalize_words(text)
        if want and want <= words and not any(want <= w for w in others):
            return text
    return None


def true_top(spec: ObjectSpec, pose: np.ndarray) -> tuple[np.ndarray, float]:
    """The true top centre's xy (the pose) and the top height (highest rotated bounding-box corner)."""
    corners = spec.bbox_vertices @ quat_to_matrix(pose[3:]).T + pose[:3]
    return pose[:2].copy(), float(corners[:, 2].max())


def without_depth(raw: dict[str, Any]) -> dict[str, Any]:
    """The observation as a station without depth sends it."""
    vision = {
        cam: {k: v for k, v in view.items() if k not in ("depth", "approximate_depth")}
        for cam, view in raw["vision"].items()
    }
    return {**raw, "vision": vision}


def run(
    layouts: int = 50,
    seed: int = 0,
    wrist_objects: int = 1,
    noises: Sequence[str] = ("realistic",),
    station: str = "unknown",
    calibrated: bool = False,
    spread_scale: float = 1.0,
    calibration_root: str | None = None,
) -> dict[tuple[str, str], Errors]:
    """Measure every method under the given noise settings (keys of NOISES); result keys (method, noise).

    One twin with depth on serves all methods: "head" and "head+wrist" get its observations with the depth
    images removed, so every method measures the same scene. station / calibrated / spread_scale: see the module
    docstring (`pyrua_dojo.twin.station_draw`); calibration files go under `calibration_root` (default: a temp dir).
    """
    import tempfile

    if station not in STATION_MODES:
        raise ValueError(f"station must be one of {STATION_MODES}, got {station!r}")
    if calibrated and station != "unknown":
        raise ValueError("a prior calibration needs an unknown station")
    spread = StationSpread().scaled(spread_scale) if station == "unknown" else None
    calibrations = (
        StationCalibrations(calibration_root or tempfile.mkdtemp(prefix="pyrua-locate-cal-"), spread)
        if calibrated and spread is not None else None
    )
    default_station = load_station()
    out = {(m, n): Errors() for m in TARGETS_MM for n in noises}
    env = TwinEnv(TwinConfig(segmentation=True, depth=True, mask_capacity=8, station_spread=spread))
    try:
        for task, s, lid in layout_plan(layouts, seed):
            try:
                env.reset(task, s, lid)
            except UnstableLayoutError:
                continue
            agent_station = default_station if calibrations is None else load_station(calibrations.file_for(s, lid))
            kin = X5Kinematics(agent_station)
            truth = env.truth(0)
            objects = dict(truth.scene.objects)
            servers = {n: serve_twin(truth.mask_oracle, noise=NOISES[n]) for n in noises}
            try:
                perceptions = {
                    n: Perception(agent_station, kin, SegmentationClient(srv.url, retries=0))
                    for n, srv in servers.items()
                }
                bridge = EnvBridge(env)
                first = bridge.first_observation()
                with_depth = Observation.from_robodojo(first, 0)
                plain = Observation.from_robodojo(without_depth(first), 0)
                prompts = {lb: unique_prompt(lb, objects) for lb in objects}
                poses = truth.object_poses()
                heads: dict[str, Located] = {}
                for lb, text in prompts.items():
                    if text is None:
                        continue
                    xy, top = true_top(objects[lb].spec, poses[lb])
                    for n, per in perceptions.items():
                        loc = per.locate(plain, text, cameras=["cam_head"])
                        out[("head", n)].add(loc, "head", xy, top)
                        out[("depth", n)].add(per.locate(with_depth, text), "depth", xy, top)
                        if n == noises[0]:
                            heads[lb] = loc
                robo = Robo(bridge, first, station=agent_station, step_limit=env.step_lim,
                            perception=perceptions[noises[0]])
                _wrist_pass(env, robo, perceptions, heads, prompts, objects, out, wrist_objects)
            finally:
                for srv in servers.values():
                    srv.close()
    finally:
        env.close()
    return out


def _wrist_pass(
    env: TwinEnv,
    robo: Robo,
    perceptions: dict[str, Perception],
    heads: dict[str, Located],
    prompts: dict[str, str | None],
    objects: dict[str, SceneObject],
    out: dict[tuple[str, str], Errors],
    wrist_objects: int,
) -> None:
    """look_at each of the first objects with the nearer arm, then locate with every camera; home after each."""
    done = 0
    for lb, head in heads.items():
        text = prompts[lb]
        if done >= wrist_objects or not head.found or text is None:
            continue
        if robo.steps_left < 80:
            break
        arm = "left" if head.xyz[0] < 0 else "right"
        try:
            motion = robo.look_at(arm, head.xyz)
            if not motion.planned:
                continue
            obs = Observation.from_robodojo(without_depth(env.get_obs()), robo.steps_used)
            xy, top = true_top(objects[lb].spec, env.truth(0).object_poses()[lb])
            for n, per in perceptions.items():
                out[("head+wrist", n)].add(per.locate(obs, text), "head+wrist", xy, top)
            robo.home()
            done += 1
        except EpisodeFinished:
            break


SWEEP: tuple[tuple[str, str, float, bool], ...] = (
    *((level, "exact", 1.0, False) for level in ("none", "mild", "realistic", "harsh")),
    *(("none", "unknown", k, False) for k in (0.5, 1.0, 2.0)),
    ("realistic", "unknown", 1.0, False),
    ("realistic", "unknown", 1.0, True),
)


def _label(noise: str, station: str, scale: float, calibrated: bool) -> str:
    st = station if station == "exact" or scale == 1.0 else f"unknown x{scale:g}"
    return f"noise {noise}, station {st}" + (", calibrated" if calibrated else "")


def main(
    layouts: int = 50,
    seed: int = 0,
    wrist_objects: int = 1,
    noise: str = "realistic",
    station: str = "unknown",
    calibrated: bool = False,
    sweep: bool = False,
) -> int:
    """Print the table (covered: the share of results whose true error lies within twice the stated uncertainty); exit
    status 1 when a target is missed (targets apply to the oracle: no mask noise, the exact station)."""
    if sweep:
        return _sweep(layouts, seed, wrist_objects)
    noises = tuple(NOISES) if noise == "all" else (noise,)
    if any(n not in NOISES for n in noises):
        raise ValueError(f"noise must be 'all' or one of {tuple(NOISES)}, got {noise!r}")
    print(f"bench locate: {_label(noise, station, 1.0, calibrated)}; {layouts} layouts, seed {seed}", flush=True)
    results = run(layouts, seed, wrist_objects, noises, station=station, calibrated=calibrated)
    table = Table(
        title=f"locate vs the twin's true poses over {layouts} layouts ({', '.join(TASKS)}), seed {seed}, station "
        f"{station}{' (calibrated)' if calibrated else ''}; errors in mm (top centre xy, top height)"
    )
    for col in ("method", "mask noise", "objects", "missed", "xy median", "xy p95", "z median", "z p95", "covered",
                "target"):
        table.add_column(col, justify="right")
    failed = False
    for (method, mask_noise), err in results.items():
        s = err.summary()
        t_xy, t_z = TARGETS_MM[method]
        target = f"xy < {t_xy:g}" + (f", z < {t_z:g}" if t_z is not None else "")
        ok = s["xy_median"] < t_xy and (t_z is None or s["z_median"] < t_z)
        if mask_noise == "none" and station == "exact":
            target += " ok" if ok else " MISSED"
            failed |= not ok
        else:
            target = "(report only)"
        table.add_row(
            method, mask_noise, str(s["n"]), str(s["misses"]), f"{s['xy_median']:.1f}", f"{s['xy_p95']:.1f}",
            f"{s['z_median']:.1f}", f"{s['z_p95']:.1f}", f"{100 * s['covered']:.0f}%", target,
        )
    Console(width=140).print(table)
    return 1 if failed else 0


def _sweep(layouts: int, seed: int, wrist_objects: int) -> int:
    """Median xy / top-height error and objects missed per method, against noise level and station spread."""
    print(f"bench locate --sweep: {len(SWEEP)} conditions x {layouts} layouts, seed {seed}", flush=True)
    table = Table(title=f"locate error (mm, median xy / z; objects missed) against mask noise and station spread, "
                  f"{layouts} layouts, seed {seed}")
    table.add_column("conditions")
    for m in TARGETS_MM:
        table.add_column(m, justify="right")
    for noise, station, scale, calibrated in SWEEP:
        res = run(layouts, seed, wrist_objects, (noise,), station=station, calibrated=calibrated, spread_scale=scale)
        cells = []
        for m in TARGETS_MM:
            s = res[(m, noise)].summary()
            cells.append(f"{s['xy_median']:.1f} / {s['z_median']:.1f}; {s['misses']} of {s['n'] + s['misses']}")
        label = _label(noise, station, scale, calibrated)
        table.add_row(label, *cells)
        print(f"  {label}: " + "  |  ".join(f"{m} {c}" for m, c in zip(TARGETS_MM, cells)), flush=True)
    Console(width=150).print(table)
    return 0
