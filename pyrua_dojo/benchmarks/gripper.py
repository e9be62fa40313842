"""`pyrua-dojo bench gripper`: the figures behind the operating notes' gripper lines, measured on the twin.

- widths: the value close() reports against the object's width (blocks, balls, a mug, the cover_blocks cup), with
  the fingertips clear of the table ("clear") and pressed 5 mm into it ("pressed", how trial H grasped);
- cup: the cover_blocks cup (84 mm across, 87 at its wall's corners) against the 88 mm opening: whether a descent
  with the TCP off centre along the closing line passes the rim, and how well centring from the wrist image (the
  white top's centroid, back_project at the top's height) does.
"""

from __future__ import annotations

import math

import numpy as np
from rich.console import Console
from rich.table import Table

from calibration import load_station
from calibration.transforms import quat_to_matrix
from primitives.errors import EpisodeFinished
from primitives.robot import Robo
from pyrua_dojo.runtime.stepping import EnvBridge
from pyrua_dojo.twin.env import TwinEnv

STATION = load_station()
TABLE = STATION.table.top_z
# task, seed, label, what, width across the fingers (m), height (m), closing heading
WIDTH_CASES = (
    ("general_pickup", 0, "clutter_8", "battery", 0.014, 0.014, 0.0),
    ("general_pickup", 0, "clutter_3", "dice", 0.024, 0.024, 0.0),
    ("general_pickup", 0, "clutter_7", "spool", 0.040, 0.040, 0.0),
    ("stack_blocks", 3, "block_0", "block", 0.040, 0.040, 0.0),
    ("stack_blocks", 4, "block_0", "block", 0.050, 0.050, 0.0),
    ("stack_blocks", 0, "block_0", "block", 0.060, 0.060, 0.0),
    ("general_pickup", 2, "clutter_3", "tennis ball", 0.064, 0.064, 0.0),
    ("general_pickup", 0, "clutter_2", "apple", 0.066, 0.066, 0.0),
    ("general_pickup", 2, "clutter_6", "orange", 0.070, 0.070, 0.0),
    ("general_pickup", 3, "target", "mug body", 0.072, 0.085, math.pi / 2),
)


def _robo(env: TwinEnv, task: str, seed: int) -> Robo:
    env.reset(task, seed, 0)
    bridge = EnvBridge(env)
    return Robo(bridge, bridge.first_observation(), station=STATION, step_limit=5000)


def _alone(env: TwinEnv, label: str, xy: tuple[float, float]) -> None:
    """Put `label` at xy and everything else out of the way, on the left edge of the table."""
    truth = env.truth(0)
    for i, o in enumerate(truth.layout.objects):
        pose = truth.object_poses()[o.label].copy()
        pose[:2] = xy if o.label == label else (-0.55, -0.3 + 0.05 * i)
        truth.set_object_pose(o.label, pose)


def widths(env: TwinEnv) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for task, seed, label, what, width, height, yaw in WIDTH_CASES:
        for mode in ("clear", "pressed"):
            robo = _robo(env, task, seed)
            _alone(env, label, (0.18, -0.15))
            robo.wait(15)
            obj = env.truth(0).object_poses()[label]
            robo.move_to("right", [obj[0], obj[1], TABLE + height + 0.06], yaw=yaw, path="joint")
            z = TABLE + max(min(height / 2, 0.045), 0.031) if mode == "clear" else TABLE + 0.020
            robo.move_to("right", [obj[0], obj[1], z])
            g = robo.close("right")
            try:
                robo.move_to("right", [obj[0], obj[1], TABLE + height + 0.06])
            except EpisodeFinished:  # general_pickup ends when its target rises
                pass
            lifted = env.truth(0).object_poses()[label][2] - obj[2] > 0.03
            rows.append({"object": f"{what} ({task} {seed})", "width mm": round(1000 * width), "fingertips": mode,
                         "value": g.value, "rule": round(width / 0.088 - 0.2, 3), "held": g.held,
                         "width_m": g.width_m, "lifted": lifted})
    return rows


def _cup_heading(env: TwinEnv, label: str) -> float:
    rot = quat_to_matrix(env.truth(0).object_poses()[label][3:])
    return math.atan2(float(rot[1, 0]), float(rot[0, 0]))


def cup_margin(env: TwinEnv) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for facing, rel in (("flats", 0.0), ("corners", 15.0)):
        for offset_mm in (0.0, 0.5, 1.0, 2.0, 3.0, -2.0, -3.0):
            robo = _robo(env, "cover_blocks", 0)
            cup = env.truth(0).object_poses()["cup0"]
            yaw = _cup_heading(env, "cup0") + math.radians(rel)
            xy = cup[:2] + offset_mm / 1000 * np.array([math.cos(yaw), math.sin(yaw)])
            robo.move_to("left", [xy[0], xy[1], TABLE + 0.145], yaw=yaw, path="joint")
            d = robo.descend("left", z=TABLE + 0.05, speed=0.05)
            pushed = float(np.linalg.norm(env.truth(0).object_poses()["cup0"][:2] - cup[:2]))
            rows.append({"pads face": facing, "offset mm": offset_mm, "descent": d.stopped_by,
                         "stopped mm above table": round(1000 * (d.tcp[2] - TABLE)), "cup pushed mm": round(1000 * pushed, 1)})
    return rows


def cup_centring(env: TwinEnv) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    starts = (((0.006, -0.004), 0.0), ((-0.005, 0.003), 15.0), ((0.003, 0.006), 7.0), ((-0.008, -0.005), 22.0))
    for label, arm in (("cup0", "left"), ("cup2", "right")):
        for (dx, dy), rel in starts:
            robo = _robo(env, "cover_blocks", 0)
            truth = env.truth(0)
            cup = truth.object_poses()[label]
            top = TABLE + 0.095
            yaw = _cup_heading(env, label) + math.radians(rel)
            robo.move_to(arm, [cup[0] + dx, cup[1] + dy, top + 0.08], yaw=yaw, path="joint")
            cam = f"cam_{arm}_wrist"
            white = np.all(robo.image(cam) >= 245, axis=2)
            tcp = robo.arm(arm).tcp
            ref = robo.project(cam, [tcp[0], tcp[1], top])
            rows_px, cols_px = np.nonzero(white)
            near = np.hypot(cols_px - ref[0], rows_px - ref[1]) < 150
            p = robo.back_project(cam, [cols_px[near].mean() + 0.5, rows_px[near].mean() + 0.5], z=top)
            robo.move_to(arm, [p[0], p[1], tcp[2]], path="line")
            err = np.array(robo.arm(arm).tcp[:2]) - cup[:2]
            closing = np.array([math.cos(yaw), math.sin(yaw)])
            d = robo.descend(arm, z=TABLE + 0.05, speed=0.05)
            g = robo.close(arm)
            robo.move_to(arm, [p[0], p[1], TABLE + 0.15])
            rose = truth.object_poses()[label][2] - cup[2]
            rows.append({"cup": label, "start off mm": f"({1000 * dx:+.0f}, {1000 * dy:+.0f})", "heading": f"+{rel:g} deg",
                         "error along closing mm": round(1000 * float(np.dot(err, closing)), 1),
                         "error across mm": round(1000 * float(abs(np.cross(closing, err))), 1),
                         "descent": d.stopped_by, "close": g.value, "lifted": bool(rose > 0.08)})
    return rows


def _print(title: str, rows: list[dict[str, object]]) -> None:
    table = Table(title=title)
    for key in rows[0]:
        table.add_column(key)
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    Console(width=160).print(table)


def main(parts: tuple[str, ...] = ("widths", "cup")) -> int:
    env = TwinEnv()
    try:
        if "widths" in parts:
            _print("close() value against the object's width (rule: width / 88 mm - 0.2)", widths(env))
        if "cup" in parts:
            _print("cover_blocks cup vs the 88 mm opening: descent off centre along the closing line", cup_margin(env))
            _print("cover_blocks cup: centred from the wrist image, then grasped", cup_centring(env))
    finally:
        env.close()
    return 0
