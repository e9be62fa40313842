"""An unknown station: each twin episode's true station drawn around the twin's station truth, seeded by its layout.

The station file marks the wrist-camera mounts, RoboDojo's ee link and (through the assets) the exact camera poses
as unknown to us. A twin built from the very numbers the agent assumes can never show what a wrong assumption
costs, so by default (`station="unknown"` in `play`, `eval` and the benchmarks) every episode's twin simulates a
station drawn around its station truth (`station_truth.yml`, today the same numbers as the agent's defaults) while
the agent keeps its defaults or its calibration file.

What moves, and by how much (`StationSpread`, defaults; each amount is `spread x U(0.5, 1.5)`, so mean = spread,
never zero, never more than 1.5 x spread; directions and rotation axes uniform on the sphere):

| part | moved | turned | why |
|---|---|---|---|
| each wrist-camera mount (on `<arm>_link6`) | 10 mm | 3 deg | [assumed] in station.yml: a bracket drawn by us, not measured |
| the ee link (`x5.ee_offset`, both arms) | 3 mm along link6 x | - | RoboDojo's ee link is an asset frame we never saw; along x only because the closed-form IK needs the ee on link6 x; the fingers stay put (tcp_offset moves the other way) |
| the head camera | 3 mm | 1 deg | [robodojo] from camera_config.yml, but a rendered camera's optical centre and a config's Euler angles rarely agree to the millimetre |

Intrinsics, arm bases, the table and the joint chain are not drawn (the intrinsics arrive with the images in
RoboDojo's depth config; the others are [robodojo] / [arx] numbers). The draw is a pure function of
(seed, layout id) so a layout's station is the same in every task and every run, and a calibration made for it can
be reused.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from calibration.station import Station
from calibration.transforms import quat_from_axis_angle, quat_multiply
from pyrua_dojo.twin.station_truth import load_truth_station

__all__ = ["STATION_MODES", "StationDraw", "StationSpread", "draw_station", "station_for_layout"]

#: `exact`: the twin simulates its station truth as filed (today the agent's numbers: the oracle); `unknown`: a
#: drawn station per layout.
STATION_MODES: tuple[str, ...] = ("unknown", "exact")


@dataclass(frozen=True)
class StationSpread:
    """Mean size of each drawn change (metres, degrees); a spread of 0 leaves that part alone."""

    wrist_shift_m: float = 0.010
    wrist_turn_deg: float = 3.0
    ee_shift_m: float = 0.003
    head_shift_m: float = 0.003
    head_turn_deg: float = 1.0

    def __post_init__(self) -> None:
        for name in ("wrist_shift_m", "wrist_turn_deg", "ee_shift_m", "head_shift_m", "head_turn_deg"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")

    def scaled(self, factor: float) -> StationSpread:
        """Every spread times `factor` (for sensitivity sweeps)."""
        if not math.isfinite(factor) or factor < 0:
            raise ValueError(f"factor must be >= 0, got {factor}")
        return StationSpread(*(factor * getattr(self, n) for n in (
            "wrist_shift_m", "wrist_turn_deg", "ee_shift_m", "head_shift_m", "head_turn_deg")))


@dataclass(frozen=True)
class StationDraw:
    """What one draw changed: per camera (shift m, turn deg) and the ee link's shift along link6 x (m, signed).

    overlay: the station-schema dict that, laid over the base station, gives the drawn one.
    """

    seed: int
    layout_id: int
    cameras: dict[str, tuple[float, float]]
    ee_shift_m: float
    overlay: dict[str, Any]


def _rng(seed: int, layout_id: int) -> np.random.Generator:
    digest = hashlib.sha256(f"pyrua-dojo station draw|{seed}|{layout_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def draw_station(
    seed: int, layout_id: int, spread: StationSpread = StationSpread(), base: Station | None = None
) -> tuple[Station, StationDraw]:
    """The true station of layout (seed, layout_id): `base` (default: the twin's station truth) moved by a seeded
    draw."""
    if isinstance(seed, bool) or int(seed) != seed or seed < 0 or int(layout_id) != layout_id or layout_id < 0:
        raise ValueError(f"seed and layout_id must be ints >= 0, got {seed!r}, {layout_id!r}")
    st = base if base is not None else load_truth_station()
    rng = _rng(int(seed), int(layout_id))
    cams: dict[str, Any] = {}
    moved: dict[str, tuple[float, float]] = {}
    for name in sorted(st.cameras):
        mount = st.cameras[name]
        shift_m, turn_deg = (
            (spread.head_shift_m, spread.head_turn_deg) if mount.arm is None
            else (spread.wrist_shift_m, spread.wrist_turn_deg)
        )
        shift = shift_m * float(rng.uniform(0.5, 1.5))
        turn = turn_deg * float(rng.uniform(0.5, 1.5))
        direction, axis = _unit(rng), _unit(rng)
        pos = np.array(mount.position) + shift * direction
        # The turn is about the camera's own axes (a bracket bent in place), applied after the mount rotation.
        quat = quat_multiply(np.array(mount.quat), quat_from_axis_angle(axis, math.radians(turn)))
        quat = quat / np.linalg.norm(quat)
        if shift == 0.0 and turn == 0.0:
            continue
        cams[name] = {"position": [float(v) for v in pos], "quat": [float(v) for v in quat]}
        moved[name] = (shift, turn)
    ee_shift = spread.ee_shift_m * float(rng.uniform(0.5, 1.5)) * (1.0 if rng.random() < 0.5 else -1.0)
    overlay: dict[str, Any] = {"cameras": cams} if cams else {}
    if ee_shift != 0.0:
        ee = list(st.x5.ee_offset)
        ee[0] += ee_shift
        # The fingers are fixed to link6: the grasp centre (ee_offset.x + tcp_offset) stays where it was.
        overlay["x5"] = {"ee_offset": ee, "tcp_offset": st.x5.tcp_offset - ee_shift}
    return _overlay(st, overlay), StationDraw(int(seed), int(layout_id), moved, ee_shift, overlay)


def _overlay(base: Station, overlay: dict[str, Any]) -> Station:
    """`base` with a draw's `overlay` applied."""
    cams = dict(base.cameras)
    for name, entry in overlay.get("cameras", {}).items():
        cams[name] = replace(cams[name], position=tuple(entry["position"]), quat=tuple(entry["quat"]))
    x5 = base.x5
    if "x5" in overlay:
        x5 = replace(x5, ee_offset=tuple(overlay["x5"]["ee_offset"]), tcp_offset=float(overlay["x5"]["tcp_offset"]))
    return replace(base, cameras=MappingProxyType(cams), x5=x5, source=f"{base.source} + station draw")


def station_for_layout(mode: str, seed: int, layout_id: int, spread: StationSpread = StationSpread()) -> Station:
    """The station the twin simulates for a layout under `mode` (`exact`: the twin's station truth as filed)."""
    if mode not in STATION_MODES:
        raise ValueError(f"station must be one of {STATION_MODES}, got {mode!r}")
    if mode == "exact":
        return load_truth_station()
    return draw_station(seed, layout_id, spread)[0]
