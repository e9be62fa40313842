"""The station model: arm bases, table, X5 chain, gripper and cameras, loaded from `station.yml`.

A fitted calibration file (same schema, any subset of keys) can be layered on top of the defaults with
`load_station(calibration_path)`. Everything here is what the agent may know in advance; nothing about objects.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import yaml

from calibration.camera import Camera, Intrinsics
from calibration.transforms import FloatArray, make_transform, quat_to_matrix, rpy_to_matrix

ARMS: tuple[str, str] = ("left", "right")
CAMERAS: tuple[str, str, str] = ("cam_head", "cam_left_wrist", "cam_right_wrist")


@dataclass(frozen=True)
class Table:
    """The table box; its top face is the plane z = top_z."""

    top_z: float
    center: tuple[float, float, float]
    size: tuple[float, float, float]

    @property
    def x_range(self) -> tuple[float, float]:
        return (self.center[0] - self.size[0] / 2, self.center[0] + self.size[0] / 2)

    @property
    def y_range(self) -> tuple[float, float]:
        return (self.center[1] - self.size[1] / 2, self.center[1] + self.size[1] / 2)


@dataclass(frozen=True)
class ArmMount:
    """Where an arm's base_link sits in the env frame."""

    name: str
    base_position: tuple[float, float, float]
    base_quat: tuple[float, float, float, float]

    @property
    def world_from_base(self) -> FloatArray:
        return make_transform(quat_to_matrix(self.base_quat), self.base_position)


@dataclass(frozen=True)
class Joint:
    """One revolute joint of the X5 chain (URDF semantics: origin in the parent link frame, then rotation)."""

    name: str
    origin_xyz: tuple[float, float, float]
    origin_rpy: tuple[float, float, float]
    axis: tuple[float, float, float]
    lower: float
    upper: float
    velocity: float

    @property
    def parent_from_origin(self) -> FloatArray:
        return make_transform(rpy_to_matrix(*self.origin_rpy), self.origin_xyz)


@dataclass(frozen=True)
class GripperModel:
    """Normalised gripper value g (1 open, 0 closed) <-> finger joint s0 + g (s1 - s0), per finger."""

    finger_travel: float
    scale: tuple[float, float]
    rate_limit: float

    def finger_from_value(self, g: float) -> float:
        s0, s1 = self.scale
        return s0 + float(np.clip(g, 0.0, 1.0)) * (s1 - s0)

    def value_from_finger(self, q: float) -> float:
        s0, s1 = self.scale
        return (q - s0) / (s1 - s0)

    @property
    def max_width(self) -> float:
        """Distance between the finger pads when fully open (two fingers)."""
        return 2.0 * self.finger_travel


@dataclass(frozen=True)
class X5Model:
    """The ARX X5 arm: six revolute joints, the reported ee link, the grasp centre and the gripper."""

    joints: tuple[Joint, ...]
    ee_offset: tuple[float, float, float]
    tcp_offset: float
    home: tuple[float, ...]
    gripper: GripperModel

    @property
    def lower(self) -> FloatArray:
        return np.array([j.lower for j in self.joints])

    @property
    def upper(self) -> FloatArray:
        return np.array([j.upper for j in self.joints])

    @property
    def velocity_limits(self) -> FloatArray:
        return np.array([j.velocity for j in self.joints])

    @property
    def link6_from_ee(self) -> FloatArray:
        return make_transform(np.eye(3), self.ee_offset)


@dataclass(frozen=True)
class CameraMount:
    """A camera's intrinsics and its USD-convention pose relative to `parent` (`world` or `<arm>_link6`)."""

    name: str
    intrinsics: Intrinsics
    near: float
    far: float
    parent: str
    position: tuple[float, float, float]
    quat: tuple[float, float, float, float]

    @property
    def arm(self) -> str | None:
        """The arm carrying this camera, or None for a fixed camera."""
        if self.parent == "world":
            return None
        return self.parent.split("_", 1)[0]

    @property
    def parent_from_camera(self) -> FloatArray:
        """Mount transform in OpenCV camera axes (x right, y down, z forward)."""
        r_usd = quat_to_matrix(self.quat)
        return make_transform(r_usd @ np.diag([1.0, -1.0, -1.0]), self.position)

    def posed(self, world_from_parent: FloatArray | None = None) -> Camera:
        """The camera placed in the world, given its parent's world pose (identity for `world`)."""
        parent = np.eye(4) if world_from_parent is None else np.asarray(world_from_parent, dtype=float)
        return Camera(self.name, self.intrinsics, parent @ self.parent_from_camera)


@dataclass(frozen=True)
class Station:
    """Everything known in advance about the dual-X5 station."""

    table: Table
    arms: Mapping[str, ArmMount]
    x5: X5Model
    cameras: Mapping[str, CameraMount]
    source: str

    def fixed_camera(self, name: str) -> Camera:
        """A camera that does not move with an arm (the head camera)."""
        mount = self.cameras[name]
        if mount.arm is not None:
            raise ValueError(f"{name} is carried by the {mount.arm} arm; pose it with the arm's joints")
        return mount.posed()


def _tuple(values: Any, n: int, what: str) -> tuple[float, ...]:
    arr = tuple(float(v) for v in values)
    if len(arr) != n:
        raise ValueError(f"{what}: expected {n} numbers, got {len(arr)}")
    return arr


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def default_station_path() -> Path:
    """Path of the packaged defaults (`calibration/station.yml`)."""
    return Path(str(resources.files("calibration").joinpath("station.yml")))


def station_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Station:
    """Build a Station from a parsed station document; raises ValueError naming the bad entry."""
    try:
        t = data["table"]
        table = Table(float(t["top_z"]), _tuple(t["center"], 3, "table.center"), _tuple(t["size"], 3, "table.size"))
        arms = {
            name: ArmMount(
                name,
                _tuple(a["base_position"], 3, f"arms.{name}.base_position"),
                _tuple(a["base_quat"], 4, f"arms.{name}.base_quat"),
            )
            for name, a in data["arms"].items()
        }
        x = data["x5"]
        joints = tuple(
            Joint(
                str(j["name"]),
                _tuple(j["origin_xyz"], 3, "joint origin_xyz"),
                _tuple(j["origin_rpy"], 3, "joint origin_rpy"),
                _tuple(j["axis"], 3, "joint axis"),
                float(j["lower"]),
                float(j["upper"]),
                float(j["velocity"]),
            )
            for j in x["joints"]
        )
        g = x["gripper"]
        x5 = X5Model(
            joints=joints,
            ee_offset=_tuple(x["ee_offset"], 3, "x5.ee_offset"),
            tcp_offset=float(x["tcp_offset"]),
            home=_tuple(x["home"], 6, "x5.home"),
            gripper=GripperModel(float(g["finger_travel"]), _tuple(g["scale"], 2, "gripper.scale"), float(g["rate_limit"])),
        )
        cameras = {}
        for name, c in data["cameras"].items():
            intr = Intrinsics.centred(int(c["width"]), int(c["height"]), float(c["fx"]), c.get("fy"))
            cameras[name] = CameraMount(
                name,
                intr,
                float(c["near"]),
                float(c["far"]),
                str(c["parent"]),
                _tuple(c["position"], 3, f"cameras.{name}.position"),
                _tuple(c["quat"], 4, f"cameras.{name}.quat"),
            )
    except KeyError as exc:
        raise ValueError(f"{source}: missing station entry {exc}") from None
    if set(arms) != set(ARMS):
        raise ValueError(f"{source}: arms must be {ARMS}, got {sorted(arms)}")
    if len(joints) != 6:
        raise ValueError(f"{source}: the X5 has 6 arm joints, got {len(joints)}")
    missing = set(CAMERAS) - set(cameras)
    if missing:
        raise ValueError(f"{source}: missing cameras {sorted(missing)}")
    return Station(table, MappingProxyType(arms), x5, MappingProxyType(cameras), source)


def load_station(
    calibration: str | Path | Mapping[str, Any] | None = None, *, base: str | Path | None = None
) -> Station:
    """The packaged station defaults (or the station file `base`), optionally overlaid with a calibration file or
    dict (same schema)."""
    base_path = Path(base) if base is not None else default_station_path()
    data = yaml.safe_load(base_path.read_text())
    source = str(base_path)
    if calibration is not None:
        if isinstance(calibration, Mapping):
            override, where = calibration, "<dict>"
        else:
            path = Path(calibration)
            override, where = yaml.safe_load(path.read_text()) or {}, str(path)
        data = _deep_merge(data, override)
        source = f"{source} + {where}"
    return station_from_dict(data, source)
