"""Deterministic object placement on the table, in the manner of RoboDojo's layout generator.

RoboDojo samples its evaluation layouts offline (`utils/cluttered_generator.py`) and ships them as JSON in its
Assets; the twin generates them on the fly from (task, seed, layout_id) with a seeded numpy Generator, so the same
triple always gives the same scene. Placement rules mirror the generator:
- the placement centre is sampled uniformly in the task's xlim x ylim; yaw uniform in (-d, d) for a scalar
  `rotate_deg` d, or in [lo, hi] for a range;
- the object's footprint (xy convex hull of its rotated bbox, grown by `margin`) must lie inside the table region
  and must not intersect a ProhibitedArea box or an already placed footprint;
- clutter (`cluttered=True`) taller than 10 cm is kept off the near half (footprint y < 0) and taller than 5 cm off
  the strip y < -0.2;
- an `xlim` / `ylim` given as several ranges (`[[-0.35, -0.15], [0.15, 0.35]]`) is their union: each try picks
  one range with probability proportional to its length;
- fixtures (RoboDojo's `Geometry`, `static=True`) are placed by the same rules and welded to the world;
- an object placed on or in another (`place_on`, RoboDojo's `relative_plane: <label>`) is sampled in the parent's
  frame around one of the parent's support points and rests on it; `check="enforce"` (RoboDojo's check_mode) does
  not test its footprint against others, which the twin narrows to "no two children of one parent interpenetrate"
  (MuJoCo would push overlapping bodies apart; a child that finds no room at one level goes one layer up);
- up to 100 tries per object; a layout whose objects cannot all be placed is redrawn from the next sub-seed.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from calibration.station import Table
from calibration.transforms import quat_multiply, quat_to_matrix
from pyrua_dojo.twin.objects import CLUTTER_OBJECTS, IDENTITY, ObjectSpec, Quat, box_corners
from pyrua_dojo.twin.reward import ProgramSpec, WorldState, convex_hull
from pyrua_dojo.twin.scene import SceneObject

#: RoboDojo's clutter sampler region on the table (env_cfg/scene/default.yml): x in [-0.65, 0.65], y in [-0.55, 0.45].
TABLE_REGION = (-0.65, -0.55, 0.65, 0.45)


class PlacementError(RuntimeError):
    """An object could not be placed within its region after the allowed number of tries."""


@dataclass(frozen=True)
class Layout:
    """One generated scene: the objects with their poses, and the episode's instruction."""

    task: str
    seed: int
    layout_id: int
    objects: tuple[SceneObject, ...]
    instruction: str
    attempt: int = 0

    def object(self, label: str) -> SceneObject:
        for o in self.objects:
            if o.label == label:
                return o
        raise KeyError(f"no object labelled {label!r} in this layout (labels: {[o.label for o in self.objects]})")


def layout_rng(task: str, seed: int, layout_id: int, attempt: int = 0) -> np.random.Generator:
    """The Generator for one layout (stable across processes and platforms)."""
    return np.random.default_rng([zlib.crc32(task.encode("utf-8")), int(seed), int(layout_id), int(attempt)])


def box_polygon(rect: Sequence[float]) -> np.ndarray:
    """A ProhibitedArea `[x1, y1, x2, y2]` (corners in any order, as shapely's `box`) as a CCW polygon."""
    x1, y1, x2, y2 = (float(v) for v in rect)
    lo_x, hi_x = min(x1, x2), max(x1, x2)
    lo_y, hi_y = min(y1, y2), max(y1, y2)
    return np.array([[lo_x, lo_y], [hi_x, lo_y], [hi_x, hi_y], [lo_x, hi_y]])


def polygons_intersect(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two convex polygons (k, 2) overlap or touch (bounding boxes first, then separating axes)."""
    eps = 1e-12
    if np.any(a.max(axis=0) < b.min(axis=0) - eps) or np.any(b.max(axis=0) < a.min(axis=0) - eps):
        return False
    edges = np.concatenate([np.roll(a, -1, axis=0) - a, np.roll(b, -1, axis=0) - b])
    normals = np.stack([-edges[:, 1], edges[:, 0]], axis=1)
    pa = a @ normals.T
    pb = b @ normals.T
    separated = (pa.max(axis=0) < pb.min(axis=0) - eps) | (pb.max(axis=0) < pa.min(axis=0) - eps)
    return not bool(separated.any())


def yaw_quat(yaw_deg: float) -> Quat:
    h = math.radians(yaw_deg) / 2.0
    return (math.cos(h), 0.0, 0.0, math.sin(h))


class Placer:
    """Places objects one after another on the table, rejecting overlaps and prohibited areas."""

    def __init__(
        self,
        rng: np.random.Generator,
        table: Table,
        prohibited: Sequence[Sequence[float]] = (),
        region: Sequence[float] = TABLE_REGION,
    ) -> None:
        self.rng = rng
        self.table = table
        self.region = box_polygon(region)
        self.prohibited = [box_polygon(p) for p in prohibited]
        self.footprints: list[np.ndarray] = []
        self.objects: list[SceneObject] = []

    def add_prohibited(self, rect: Sequence[float]) -> None:
        self.prohibited.append(box_polygon(rect))

    def _sample_yaw(self, rotate_deg: float | Sequence[float] | None) -> float:
        if rotate_deg is None:
            return 0.0
        arr = np.asarray(rotate_deg, dtype=float).reshape(-1)
        if arr.size == 1:
            return float(self.rng.uniform(-arr[0], arr[0])) if arr[0] != 0 else 0.0
        lo, hi = float(arr.min()), float(arr.max())
        return float(self.rng.uniform(lo, hi))

    def _sample_range(self, lim: Sequence[float] | Sequence[Sequence[float]]) -> float:
        """Uniform in one range, or in a union of ranges (each chosen in proportion to its length)."""
        arr = np.asarray(lim, dtype=float)
        if arr.ndim == 1:
            lo, hi = float(arr.min()), float(arr.max())
            return lo if lo == hi else float(self.rng.uniform(lo, hi))
        lengths = np.abs(arr[:, 1] - arr[:, 0])
        k = int(self.rng.choice(len(arr), p=lengths / lengths.sum())) if lengths.sum() > 0 else int(
            self.rng.integers(len(arr)))
        lo, hi = float(arr[k].min()), float(arr[k].max())
        return lo if lo == hi else float(self.rng.uniform(lo, hi))

    def footprint(self, spec: ObjectSpec, x: float, y: float, quat: Quat, margin: float = 0.0) -> np.ndarray:
        hx, hy, hz = spec.half_extents
        verts = box_corners((hx + margin, hy + margin, hz)) @ quat_to_matrix(quat).T
        return convex_hull(verts[:, :2] + np.array([x, y]))

    def place(
        self,
        spec: ObjectSpec,
        label: str,
        xlim: Sequence[float] | Sequence[Sequence[float]],
        ylim: Sequence[float] | Sequence[Sequence[float]],
        rotate_deg: float | Sequence[float] | None = None,
        base_quat: Quat = IDENTITY,
        margin: float = 0.0,
        cluttered: bool = False,
        max_attempts: int = 100,
        static: bool = False,
    ) -> SceneObject:
        """Sample a free pose for `spec` and record it; raises PlacementError after max_attempts.
        static: a fixture (welded to the world)."""
        for _ in range(max_attempts):
            x = self._sample_range(xlim)
            y = self._sample_range(ylim)
            yaw = self._sample_yaw(rotate_deg)
            quat = tuple(float(v) for v in quat_multiply(yaw_quat(yaw), base_quat))
            poly = self.footprint(spec, x, y, quat, margin)  # type: ignore[arg-type]
            verts = spec.bbox_vertices @ quat_to_matrix(quat).T
            height = float(verts[:, 2].max() - verts[:, 2].min())
            if cluttered:
                min_y = float(poly[:, 1].min())
                if (min_y < 0.0 and height > 0.1) or (min_y < -0.2 and height > 0.05):
                    continue
            if not _inside(self.region, poly):
                continue
            if any(polygons_intersect(poly, p) for p in self.prohibited):
                continue
            if any(polygons_intersect(poly, p) for p in self.footprints):
                continue
            z = self.table.top_z - float(verts[:, 2].min()) + 0.0005
            obj = SceneObject(label, spec, (x, y, z, *quat), static=static)  # type: ignore[arg-type]
            self.footprints.append(poly)
            self.objects.append(obj)
            return obj
        raise PlacementError(f"could not place {label} ({spec.key}) in x {list(xlim)}, y {list(ylim)}")

    def place_on(
        self,
        spec: ObjectSpec,
        label: str,
        parent: SceneObject,
        support: str,
        xlim: Sequence[float] = (0.0, 0.0),
        ylim: Sequence[float] = (0.0, 0.0),
        rotate_deg: float | Sequence[float] | None = None,
        base_quat: Quat = IDENTITY,
        check_stable: bool = True,
        within: float | None = None,
        max_layers: int = 4,
        max_attempts: int = 100,
    ) -> SceneObject:
        """Place `spec` on `parent`'s support point `support` (RoboDojo's `relative_plane: <parent>`).

        The offset (xlim, ylim) is sampled in the support point's frame, the yaw about its z; the child's lowest
        bbox corner rests on the point. `within`: the child's footprint must stay within this radius of the point
        (a cup's inner wall); children of one parent never interpenetrate (their bboxes are kept apart, with a
        child going one layer up when its level is full, at most `max_layers`).
        """
        points = parent.spec.named_points(support, kind="support")
        if not points:
            raise ValueError(f"{parent.label} ({parent.spec.key}) has no support point {support!r}")
        point = points[0]
        parent_rot = quat_to_matrix(parent.pose[3:])
        frame_quat = tuple(float(v) for v in quat_multiply(parent.pose[3:], point.quat))
        frame_rot = quat_to_matrix(frame_quat)
        origin = parent_rot @ np.asarray(point.pos) + np.asarray(parent.pose[:3])
        siblings = [o for o in self.objects if o.parent == parent.label]
        for _ in range(max_attempts):
            dx, dy = self._sample_range(xlim), self._sample_range(ylim)
            quat = tuple(float(v) for v in quat_multiply(frame_quat, quat_multiply(
                yaw_quat(self._sample_yaw(rotate_deg)), base_quat)))
            verts = spec.bbox_vertices @ quat_to_matrix(quat).T
            local_xy = np.array([dx, dy])
            if within is not None:
                reach = float(np.abs(verts[:, :2]).max())  # the half extent: exact for balls and upright disks
                if float(np.hypot(dx, dy)) + reach > within + 1e-9:
                    continue
            for layer in range(max_layers):
                lift = float(-verts[:, 2].min()) + layer * float(verts[:, 2].max() - verts[:, 2].min()) + 0.0005
                centre = origin + frame_rot @ np.array([local_xy[0], local_xy[1], lift])
                box = verts + centre
                if not any(_boxes_overlap(box, np.asarray(o.spec.bbox_vertices) @ quat_to_matrix(o.pose[3:]).T
                                          + np.asarray(o.pose[:3])) for o in siblings):
                    obj = SceneObject(label, spec, (*(float(v) for v in centre), *quat),  # type: ignore[arg-type]
                                      check_stable=check_stable, parent=parent.label)
                    self.objects.append(obj)
                    return obj
        raise PlacementError(f"could not place {label} ({spec.key}) on {parent.label}:{support}")


def place_clutter(placer: Placer, rng: np.random.Generator, nums: int,
                  xlim: Sequence[float] | Sequence[Sequence[float]], ylim: Sequence[float] | Sequence[Sequence[float]],
                  rotate_deg: float = 30.0, margin: float = 0.015, exclude: Sequence[str] = ()) -> list[SceneObject]:
    """RoboDojo's `category_unique` clutter: up to `nums` objects of distinct categories (drawn in a random order,
    those named in `exclude` left out) in xlim x ylim (ranges may be unions); an object that does not fit is skipped.
    Labels run on from the clutter already placed (clutter_0, clutter_1, ...). Returns the objects placed."""
    names = [n for n in sorted(CLUTTER_OBJECTS) if n not in exclude]
    placed: list[SceneObject] = []
    for k in rng.permutation(len(names))[:nums]:
        label = f"clutter_{sum(o.label.startswith('clutter_') for o in placer.objects)}"
        try:
            placed.append(placer.place(CLUTTER_OBJECTS[names[int(k)]], label, xlim, ylim, rotate_deg=rotate_deg,
                                       margin=margin, cluttered=True))
        except PlacementError:
            continue
    return placed


LayoutFn = Callable[[Placer, np.random.Generator], str]  # places a task's objects; returns the instruction
ProgramFn = Callable[[Layout, WorldState], ProgramSpec]  # a task's reward program for a layout and its first state
NO_CLUTTER_STRIP = (-0.35, -0.5, 0.35, -0.4)  # the `_random` variants' ProhibitedArea (the arms' parking strip)


def _boxes_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the axis-aligned hulls of two vertex sets (n, 3) overlap (a conservative test for children)."""
    return bool(np.all(a.min(axis=0) < b.max(axis=0)) and np.all(b.min(axis=0) < a.max(axis=0)))


def _inside(region: np.ndarray, poly: np.ndarray) -> bool:
    lo = region.min(axis=0)
    hi = region.max(axis=0)
    return bool(np.all(poly >= lo) and np.all(poly <= hi))
