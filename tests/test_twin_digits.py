"""The digit-tile tasks on the twin: arrange_largest_number (+ _random) and solve_equation.

A truth-driven script (tests only: it teleports tiles with the twin's truth; the arms hold still) completes each
task and the success check fires at that step with score 1, the process score climbing through upstream's tiers on
the way; near misses per predicate kind (off the mat, wrong order, turned, mirrored, grippers closed) do not fire;
layouts keep upstream's ranges and settle; the task cards and the twin's facts agree with the catalogue.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration.transforms import matrix_to_quat, quat_multiply, quat_to_matrix
from pyrua_dojo.seg_service.twin_backend import normalize_words
from pyrua_dojo.twin import TwinEnv, get_twin_task
from pyrua_dojo.twin import objects_digits as D
from pyrua_dojo.twin.layouts import Layout, box_polygon, polygons_intersect
from pyrua_dojo.twin.reward import (
    Pred,
    WorldState,
    any_k_of,
    convex_hull,
)
from pyrua_dojo.twin.truth_controller import CLOSED, OPEN, EpisodeEnded, JointScript
from pyrua_dojo.twin.tasks_digits import (
    OPS,
    arrange_order,
    calc,
    draw_equation,
    equation_pairs,
    find_missing,
)
from tests.support.twin_tasks import (
    HOME,
    STATION,
    TOP,
    eval_trivial_program,
    settle_layouts,
    state_of,
    stated_facts,
    sweep_layouts,
    twin_at,
    yaw_of,
    yaw_q,
)
from tests.support.twin_tasks import run_program as run

ARRANGE = ("arrange_largest_number", "arrange_largest_number_random")
TASKS = (*ARRANGE, "solve_equation")


# --------------------------------------------------------------------------------------------- reward machinery


def test_any_k_of_holds_when_some_k_groups_hold_entirely() -> None:
    flags = {"a": True, "b": False, "c": True, "d": True}

    def p(name: str) -> Pred:
        return Pred(name, lambda s: flags[name])

    groups = [(p("a"),), (p("b"), p("c")), (p("d"),)]
    state = state_of(get_twin_task("arrange_largest_number").layout(STATION, 0, 0), {})
    assert any_k_of(groups, 1)(state) and any_k_of(groups, 2)(state)  # a and d
    assert not any_k_of(groups, 3)(state)  # group (b, c) fails on b
    flags["d"] = False
    assert not any_k_of(groups, 2)(state)
    flags["b"] = True
    assert any_k_of(groups, 2)(state) and not any_k_of(groups, 3)(state)
    for k in (0, 4):
        with pytest.raises(ValueError, match="1 <= k <= 3"):
            any_k_of(groups, k)


# ------------------------------------------------------------------------------------------- facts and layouts


@pytest.mark.parametrize("task", TASKS)
def test_facts_come_from_the_catalogue_and_the_card_is_right(task: str) -> None:
    twin, cat, card = stated_facts(task)
    assert twin == cat
    assert (card.step_limit, card.back_to_origin, card.instruction) == (cat.step_limit, cat.back_to_origin, twin.instruction)
    spec = get_twin_task(task)
    lay = spec.layout(STATION, 0, 0)
    assert spec.has_score is (task != "solve_equation")  # upstream's solve_equation has no get_score
    assert spec.program(lay, state_of(lay, {})).queries == ()  # upstream registers no instant failure


@pytest.mark.parametrize("task", ARRANGE)
def test_arrange_layouts_follow_upstream(task: str) -> None:
    """Per upstream's config: 4 or 5 distinct digits of one texture group (held-out groups in `_random`), one fixed
    mat per digit on one line 8.5 cm apart centred on x = 0 at y -0.1..-0.05 (mat_0 leftmost), digits at x +-0.4,
    y -0.25..-0.05, yaw +-45 deg; `_random` adds clutter kept off the arms' strip."""
    spec = get_twin_task(task)
    ids = range(30, 50) if task.endswith("_random") else range(30)
    counts = set()
    for lid in range(spec.episodes_per_seed):
        lay = spec.layout(STATION, 0, lid)
        digits = [o for o in lay.objects if o.label.startswith("digit_")]
        mats = [lay.object(f"mat_{i}") for i in range(len(digits))]
        counts.add(len(digits))
        assert len(digits) in (4, 5) and len([o for o in lay.objects if o.label.startswith("mat")]) == len(digits)
        assert {o.spec.model_id // 10 for o in digits} == {digits[0].spec.model_id // 10}
        assert all(o.spec.model_id in ids for o in digits)
        assert len({D.number_value(o.spec.model_id) for o in digits}) == len(digits)
        n = len(mats)
        for i, m in enumerate(mats):
            assert m.static and m.spec.category == "cube_cushion" and m.spec.model_id == 1
            assert m.pose[0] == pytest.approx((i - (n - 1) / 2) * 0.085) and m.pose[1] == pytest.approx(mats[0].pose[1])
            assert -0.1 <= m.pose[1] <= -0.05 and m.pose[3] == pytest.approx(1.0)
        for o in digits:
            assert not o.static and -0.4 <= o.pose[0] <= 0.4 and -0.25 <= o.pose[1] <= -0.05
            assert abs(yaw_of(o.pose[3:])) <= 45 + 1e-6
        clutter = [o for o in lay.objects if o.label.startswith("clutter")]
        if task.endswith("_random"):
            assert len(clutter) >= 10
            for o in clutter:
                hull = convex_hull((o.spec.bbox_vertices @ quat_to_matrix(o.pose[3:]).T + np.array(o.pose[:3]))[:, :2])
                assert not polygons_intersect(hull, box_polygon([-0.35, -0.5, 0.35, -0.4]))
        else:
            assert clutter == []
    assert counts == {4, 5}


@pytest.mark.parametrize("task", TASKS)
def test_layouts_settle_and_nothing_is_done_at_the_start(task: str) -> None:
    for layout in settle_layouts(task, range(2)):
        assert not layout.unstable
        for label, d in layout.drift.items():
            assert d < 0.01, (task, layout.layout_id, label)
        assert not layout.done_at_start


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_fifty_layouts_build_and_pass_the_stability_rule(task: str) -> None:
    """50 layouts (seeds 0 and 1 where a seed has 25) compile and settle: none is dropped as unstable."""
    sweep = sweep_layouts(task)
    assert sweep.unbuilt == ()
    assert sweep.unstable == ()


def test_segmentation_words_single_out_each_tile() -> None:
    """"the tile showing 7" (or "seven") finds exactly the tile printed 7; "mat" finds the mats and no tile."""
    lay = get_twin_task("arrange_largest_number").layout(STATION, 0, 0)
    described = {o.label: normalize_words(o.spec.words) | normalize_words(o.spec.descriptions) for o in lay.objects}
    for label, value in arrange_order(lay):
        for phrase in (f"the tile showing {value}", f"number {value}"):
            hits = {lb for lb, ws in described.items() if normalize_words(phrase) <= ws}
            assert hits == {label}, (phrase, hits)
    mats = {lb for lb, ws in described.items() if normalize_words("mat") <= ws}
    assert mats == {o.label for o in lay.objects if o.label.startswith("mat_")}


# -------------------------------------------------------------------------------------- arrange_largest_number


def on_mat(mat_pose: Any, yaw: float = 0.0, dx: float = 0.0, flip: str | None = None) -> list[float]:
    """A tile pose resting on a mat, turned by `yaw` degrees (flip "y": upside down about its y axis)."""
    q = yaw_q(yaw)
    if flip == "y":
        q = np.asarray(quat_multiply(q, [0.0, 0.0, 1.0, 0.0]))
    z = float(mat_pose[2]) + D.MAT_HALF[2] + D.TILE_HALF[2] + 0.0005
    return [float(mat_pose[0]) + dx, float(mat_pose[1]), z, *q]


@pytest.mark.parametrize("task", ARRANGE)
def test_arrange_by_truth_climbs_the_tiers_and_succeeds_at_that_step(task: str) -> None:
    """Tiles put on their mats one by one, largest first, each turned a little: the process score climbs one tier
    per tile (5, 15, 30 or 5, 15, 25, 40) and the last tile makes the episode succeed at that step, score 1."""
    with twin_at(task, 1) as (env, truth, act):
        mats = {lb: p for lb, p in truth.object_poses().items() if lb.startswith("mat_")}
        order = arrange_order(truth.layout)
        gradient = {4: [5.0, 15.0, 30.0], 5: [5.0, 15.0, 25.0, 40.0]}[len(order)]
        for k, (label, _) in enumerate(order):
            truth.set_object_pose(label, on_mat(mats[f"mat_{k}"], yaw=(-1) ** k * 20.0, dx=0.01))
            env.take_action(act)
            if k < len(order) - 1:
                env.take_action(act)
                out = truth.outcome()
                assert not out.finished and out.process_score == gradient[k], (k, out)
        out = truth.outcome()
        assert out.success and out.score == 1.0 and out.process_score == 100.0
        assert out.steps == 2 * len(order) - 1


def _arrange_with(values: set[int]) -> tuple[str, Layout]:
    """A layout (seed 0 or 1) whose digits include all of `values`."""
    for task in ARRANGE:
        spec = get_twin_task(task)
        for k in range(50):
            lay = spec.layout(STATION, *divmod(k, spec.episodes_per_seed))
            if values <= {v for _, v in arrange_order(lay)}:
                return task, lay
    raise AssertionError(f"no layout with digits {values}")


def test_arrange_near_misses_and_upstream_leniencies() -> None:
    """Off the mat by 2.5 cm, two tiles swapped, a tile turned 50 deg, a 7 upside down or mirrored, or grippers
    closed for the score: no. A 0 upside down and an 8 mirrored pass (upstream skips those axes)."""
    task, lay = _arrange_with({0, 8, 7})
    order = arrange_order(lay)
    mats = {o.label: o.pose for o in lay.objects if o.label.startswith("mat_")}
    good = {label: on_mat(mats[f"mat_{k}"], yaw=10.0) for k, (label, _) in enumerate(order)}
    label_of = {v: lb for lb, v in order}
    slot_of = {lb: k for k, (lb, _) in enumerate(order)}

    def with_(**changes: list[float]) -> WorldState:
        return state_of(lay, {**good, **{label_of[int(k[1:])]: v for k, v in changes.items()}})

    def mat_of(v: int) -> Any:
        return mats[f"mat_{slot_of[label_of[v]]}"]

    assert run(task, lay, [state_of(lay, good)]).reward == 1.0
    assert run(task, lay, [with_(d7=on_mat(mat_of(7), dx=0.025))]).reward == 0.0
    assert run(task, lay, [with_(d7=on_mat(mat_of(7), dx=0.018))]).reward == 1.0
    swapped = {**good, label_of[7]: good[label_of[8]], label_of[8]: good[label_of[7]]}
    assert run(task, lay, [state_of(lay, swapped)]).reward == 0.0
    assert run(task, lay, [with_(d7=on_mat(mat_of(7), yaw=50.0))]).reward == 0.0
    assert run(task, lay, [with_(d7=on_mat(mat_of(7), yaw=180.0))]).reward == 0.0
    assert run(task, lay, [with_(d7=on_mat(mat_of(7), flip="y"))]).reward == 0.0
    assert run(task, lay, [with_(d0=on_mat(mat_of(0), yaw=180.0))]).reward == 1.0
    assert run(task, lay, [with_(d0=on_mat(mat_of(0), yaw=50.0))]).reward == 0.0
    assert run(task, lay, [with_(d8=on_mat(mat_of(8), flip="y"))]).reward == 1.0
    assert run(task, lay, [with_(d8=on_mat(mat_of(8), yaw=180.0))]).reward == 0.0
    done = state_of(lay, good)
    far = {a: p + np.array([0, 0, 0.2, 0, 0, 0, 0]) for a, p in HOME.items()}
    assert run(task, lay, [replace(done, ee=far)]).reward == 0.0  # arms not back
    closed = run(task, lay, [state_of(lay, good, grip=0.7)] * 8)
    assert closed.process_score(success=False) == 0.0


def test_arrange_score_counts_any_tiles_in_place() -> None:
    """The tiers count tiles in their right places, whichever they are; one tier per step; the top tier only
    with success."""
    lay = get_twin_task("arrange_largest_number").layout(STATION, 0, 1)
    order = arrange_order(lay)
    mats = {o.label: o.pose for o in lay.objects if o.label.startswith("mat_")}
    n = len(order)
    gradient = {4: [5.0, 15.0, 30.0, 100.0], 5: [5.0, 15.0, 25.0, 40.0, 100.0]}[n]
    last = {order[-1][0]: on_mat(mats[f"mat_{n - 1}"])}  # only the smallest digit, on the last mat
    prog = run("arrange_largest_number", lay, [state_of(lay, last)] * 3)
    assert prog.process_score(success=False) == 5.0
    wrong = {order[0][0]: on_mat(mats["mat_1"])}  # the largest digit on the second mat: not in place
    assert run("arrange_largest_number", lay, [state_of(lay, wrong)] * 3).process_score(success=False) == 0.0
    every = {lb: on_mat(mats[f"mat_{k}"]) for k, (lb, _) in enumerate(order)}
    prog = run("arrange_largest_number", lay, [state_of(lay, every)] * (n - 1))
    assert prog.process_score(success=False) == gradient[n - 2]  # one tier per step
    prog.step(state_of(lay, every))
    assert prog.reward == 1.0 and prog.process_score(success=True) == 100.0
    assert prog.process_score(success=False) == gradient[n - 2]  # 100 is withheld without success


# ----------------------------------------------------------------------------------------------- solve_equation

EQ_MATS_X = (-0.17, -0.085, 0.0, 0.085, 0.17)
OP_X = {"plus": -0.15, "minus": -0.05, "multiplication": 0.05, "division": 0.15}


def _value(lay: Layout, label: str) -> int | str:
    spec = lay.object(label).spec
    return spec.model_id % 10 if spec.category == "number" else spec.category


def _holds(a: int, op: str, b: int, c: int) -> bool:
    """a op b == c in whole non-negative numbers, written independently of the twin's `calc`."""
    if op == "plus":
        return a + b == c
    if op == "minus":
        return a - b == c
    if op == "multiplication":
        return a * b == c
    return b != 0 and a == b * c


def test_equation_rules() -> None:
    """Single digits throughout, no negative difference, exact division by a non-zero digit; every drawn equation
    holds and every slot and operator comes up."""
    for op in OPS:
        pairs = equation_pairs(op)
        assert pairs and all(0 <= calc(a, op, b) <= 9 for a, b in pairs)  # type: ignore[operator]
        assert all(_holds(a, op, b, calc(a, op, b)) for a, b in pairs)  # type: ignore[arg-type]
    assert (3, 5) not in equation_pairs("minus") and (7, 2) not in equation_pairs("division")
    assert (5, 0) not in equation_pairs("division") and (3, 4) not in equation_pairs("multiplication")
    assert calc(7, "minus", 9) is None and calc(7, "division", 2) is None and calc(7, "division", 0) is None
    rng = np.random.default_rng(0)
    draws = [draw_equation(rng) for _ in range(400)]
    assert all(_holds(a, op, b, c) for a, op, b, c, _ in draws)
    assert {d[1] for d in draws} == set(OPS) and {d[4] for d in draws} == {0, 1, 2, 4}


def test_solve_equation_layouts_follow_upstream() -> None:
    """Five fixed mats at y 0 (mat3 holds the "="), three of t0 t1 t2 t4 on their mats (t1 an operator), ten free
    number tiles one per digit (index d, d + 10 or d + 20), four free operators at y -0.27, yaw 0; the missing
    value's tiles are exactly those that make the equation true."""
    spec = get_twin_task("solve_equation")
    empty_slots = set()
    for lid in range(spec.episodes_per_seed):
        lay = spec.layout(STATION, 0, lid)
        for i, x in enumerate(EQ_MATS_X):
            m = lay.object(f"mat{i}")
            assert m.static and m.pose[:2] == pytest.approx((x, 0.0)) and m.spec.key == "cube_cushion_1"
        assert lay.object("equal").parent == "mat3" and lay.object("equal").spec.category == "equal"
        present = [i for i in (0, 1, 2, 4) if any(o.label == f"t{i}" for o in lay.objects)]
        assert len(present) == 3
        for i in present:
            t = lay.object(f"t{i}")
            assert t.parent == f"mat{i}" and t.pose[:2] == pytest.approx(lay.object(f"mat{i}").pose[:2])
            assert (t.spec.category in OPS) if i == 1 else (t.spec.category == "number" and t.spec.model_id < 30)
        nums = [o for o in lay.objects if o.label.startswith("num_")]
        assert sorted(o.spec.model_id % 10 for o in nums) == list(range(10)) and all(o.spec.model_id < 30 for o in nums)
        for o in nums:
            assert -0.43 <= o.pose[0] <= 0.43 and -0.27 <= o.pose[1] <= 0.0 and abs(yaw_of(o.pose[3:])) <= 45 + 1e-6
        for op, x in OP_X.items():
            assert lay.object(op).pose[:2] == pytest.approx((x, -0.27)) and lay.object(op).pose[3] == pytest.approx(1.0)
        (slot,) = {0, 1, 2, 4} - set(present)
        empty_slots.add(slot)
        mat, cands = find_missing(lay)
        assert mat == f"mat{slot}" and cands
        vals = {i: _value(lay, f"t{i}") for i in present}
        free = [o.label for o in nums] if slot != 1 else list(OPS)
        want = []
        for lb in free:
            v = {**vals, slot: _value(lay, lb)}
            if _holds(v[0], v[1], v[2], v[4]):  # type: ignore[arg-type]
                want.append(lb)
        assert sorted(cands) == sorted(want), (lid, vals, cands)
    assert empty_slots == {0, 1, 2, 4}


def _solve_layout_with(slot: int, several: bool) -> tuple[int, Layout]:
    """A solve_equation layout (seed 0, 1) whose empty slot is `slot`, with several or exactly one answer."""
    spec = get_twin_task("solve_equation")
    for k in range(100):
        seed, lid = divmod(k, spec.episodes_per_seed)
        lay = spec.layout(STATION, seed, lid)
        mat, cands = find_missing(lay)
        if mat == f"mat{slot}" and (len(cands) > 1) == several:
            return seed * 100 + lid, lay
    raise AssertionError(f"no layout with slot {slot}, several={several}")


def test_solve_equation_by_truth_succeeds_at_that_step() -> None:
    spec = get_twin_task("solve_equation")
    with twin_at("solve_equation", 0) as (env, truth, act):
        mat, (answer, *_) = find_missing(truth.layout)
        env.take_action(act)
        assert not truth.outcome().finished
        truth.set_object_pose(answer, on_mat(truth.object_poses()[mat], yaw=25.0, dx=0.008))
        env.take_action(act)
        out = truth.outcome()
        assert out.success and out.score == 1.0 and out.steps == 2
    assert spec.program(truth.layout, truth.world_state()).queries == ()  # upstream has no instant failure


@pytest.mark.parametrize("slot", [0, 1, 4])
def test_solve_equation_near_misses(slot: int) -> None:
    """A tile that does not complete the equation, the right one 2 cm off (the check wants 1.8) or turned 50 deg,
    upside down or turned round: no. 1.5 cm off and 40 deg turned: yes."""
    _, lay = _solve_layout_with(slot, several=False)
    mat, (answer,) = find_missing(lay)
    m = lay.object(mat).pose
    others = [o.label for o in lay.objects if (o.label.startswith("num_") if slot != 1 else o.label in OPS)]
    wrong = next(lb for lb in others if lb != answer)
    ok = run("solve_equation", lay, [state_of(lay, {answer: on_mat(m, yaw=40.0, dx=0.015)})])
    assert ok.reward == 1.0
    for miss in ({wrong: on_mat(m)}, {answer: on_mat(m, dx=0.02)}, {answer: on_mat(m, yaw=50.0)},
                 {answer: on_mat(m, flip="y")}, {answer: on_mat(m, yaw=180.0)}):
        assert run("solve_equation", lay, [state_of(lay, miss)]).reward == 0.0, miss
    far = {a: p + np.array([0, 0, 0.2, 0, 0, 0, 0]) for a, p in HOME.items()}
    assert run("solve_equation", lay, [replace(state_of(lay, {answer: on_mat(m)}), ee=far)]).reward == 0.0


def test_solve_equation_any_answer_counts_and_each_check_is_any_of_them() -> None:
    """With several answers each counts; as upstream registers them, the distance and the two axis checks are
    each "any answer", so a turned answer on the mat passes while another answer lies aligned elsewhere."""
    _, lay = _solve_layout_with(1, several=True)
    mat, cands = find_missing(lay)
    m = lay.object(mat).pose
    for lb in cands:
        assert run("solve_equation", lay, [state_of(lay, {lb: on_mat(m, yaw=-30.0)})]).reward == 1.0
    turned = state_of(lay, {cands[0]: on_mat(m, yaw=90.0)})  # cands[1] lies at its start pose, yaw 0
    assert run("solve_equation", lay, [turned]).reward == 1.0
    rest = {lb: [*lay.object(lb).pose[:3], *yaw_q(90.0)] for lb in cands[1:]}
    assert run("solve_equation", lay, [state_of(lay, {cands[0]: on_mat(m, yaw=90.0), **rest})]).reward == 0.0


# ------------------------------------------------------------------------------------------------ end to end

@pytest.mark.slow
def test_eval_runs_each_digit_task_to_its_step_limit_and_books_a_failure(tmp_path: Path) -> None:
    done = eval_trivial_program(TASKS, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    for task in TASKS:
        result, _ = done.booked(task)
        assert [(e.layout_id, e.success, e.score) for e in result.episodes] == [(0, False, 0.0)]


# ------------------------------------------------------------------------------- with the arms (privileged script)


RELAYS = ((0.0, -0.175), (0.0, -0.12), (0.0, -0.23), (0.0, -0.07))  # hand-over sites on the centre line
PAD_CLEAR = 0.028  # grasp centre above the tile's bottom: the finger pads reach 2.5 cm below it, so they clear the table
TURNS = (0.0, 0.5, -0.5)  # how far from square (rad) a tile may be set down: the checks allow 45 deg
PREGRASP = (2 * D.TILE_HALF[0] + 0.016) / 0.088  # gripper command: 1.6 cm wider than a tile (0.088 fully open)
TILTS = (0.0, math.radians(25.0))  # top-down, else leaning away from the robot (solve_equation's far mats)


def grasp_pose(tcp: np.ndarray, yaw: float, tilt: float, tcp_offset: float) -> np.ndarray:
    """ee pose putting the grasp centre at `tcp`, fingers closing along the horizontal direction `yaw`, the approach
    straight down leaned by `tilt` (rad) about the finger axis toward +y (away from the robot)."""
    fingers = np.array([math.cos(yaw), math.sin(yaw), 0.0])
    lean = np.cross(fingers, [0.0, 0.0, 1.0])
    lean *= 1.0 if lean[1] >= 0 else -1.0
    approach = -math.cos(tilt) * np.array([0.0, 0.0, 1.0]) + math.sin(tilt) * lean
    r = np.column_stack([approach, fingers, np.cross(approach, fingers)])
    return np.concatenate([np.asarray(tcp, dtype=float) - tcp_offset * approach, matrix_to_quat(r)])


def _place_tiles_by_arm(env: TwinEnv, moves: list[tuple[str, np.ndarray]]) -> JointScript:
    """Carry each (tile, mat xy) with an arm: a top-down grasp square to the tile's edges (one of its four grasp
    yaws), the tile turned to within 0.5 rad of yaw 0 on the way (the wrist's reachable yaws decide how far), set
    down on the mat; a mat out of reach gets the tile through a free hand-over site on the centre line and the other
    arm. Each arm goes home after each carry. Test-only: it reads true poses; it plans with IK before it moves and
    raises AssertionError when no plan reaches."""
    script = JointScript(env)
    truth = env.truth(0)
    mat_top = TOP + 2 * D.MAT_HALF[2]
    h = D.TILE_HALF[2]
    lift = np.array([0.0, 0.0, 0.06])

    def solve(arm: str, tcp: np.ndarray, yaw: float, tilt: float) -> np.ndarray | None:
        sol = script.ik.solve(arm, grasp_pose(tcp, yaw, tilt, script.tcp_offset), script.q[arm])
        return sol.q if sol.success else None

    def plan(label: str, arm: str, xy: Any, surface: float,
             start: tuple[float, float, float, float] | None = None) -> list[tuple[np.ndarray, float, float, float]] | None:
        """Grasp and place poses the arm reaches, for the tile where it is (or at `start`: x, y, z, yaw)."""
        if start is None:
            pose = truth.object_poses()[label]
            start = (float(pose[0]), float(pose[1]), float(pose[2]), math.radians(yaw_of(pose[3:])))
        pose, tile_yaw = np.array(start[:3]), start[3]
        for tilt in TILTS:  # the same tilt at both ends: the tile stays flat in the fingers
            rise = 0.015 * math.sin(tilt)  # a leaning pad's corner dips this much lower
            grasp = np.array([pose[0], pose[1], pose[2] - h + PAD_CLEAR + rise])
            place = np.array([xy[0], xy[1], surface + PAD_CLEAR + rise + 0.004])
            for turn in TURNS:
                for k in range(4):
                    g = tile_yaw + k * math.pi / 2
                    legs = [(grasp, g, tilt, CLOSED), (place, g - tile_yaw + turn, tilt, OPEN)]
                    if all(solve(arm, tcp + d, yaw, t) is not None for tcp, yaw, t, _ in legs for d in (lift, 0 * lift)):
                        return legs
        return None

    def carry(arm: str, legs: list[tuple[np.ndarray, float, float, float]]) -> None:
        for tcp, yaw, tilt, grip in legs:
            above = solve(arm, tcp + lift, yaw, tilt)
            assert above is not None
            script.move_joints(arm, above)
            if grip == CLOSED:  # open just wider than the tile: neighbours lie 5 mm apart in solve_equation
                script.grip(arm, PREGRASP, actions=4)
            q = solve(arm, tcp, yaw, tilt)
            assert q is not None
            script.move_joints(arm, q, settle=12)  # the joint PD lags a descent by ~1.5 cm: let it arrive
            script.grip(arm, grip)
            script.move_joints(arm, above, settle=0)
        script.home(arm)

    def free(xy: tuple[float, float], label: str) -> bool:
        """Nothing but `label` within 7 cm (xy) of a hand-over site."""
        return all(math.hypot(p[0] - xy[0], p[1] - xy[1]) > 0.07 for lb, p in truth.object_poses().items() if lb != label)

    for label, xy in moves:
        own = "left" if truth.object_poses()[label][0] < 0 else "right"
        other = "right" if own == "left" else "left"
        done = False
        for arm in (own, other):
            legs = plan(label, arm, xy, mat_top)
            if legs is not None:
                carry(arm, legs)
                done = True
                break
        if done:
            continue
        for relay in (r for r in RELAYS if free(r, label)):
            first = plan(label, own, relay, TOP)
            if first is None:
                continue
            (_, g, _, _), (place, p, _, _) = first
            start = (float(place[0]), float(place[1]), TOP + h, math.radians(yaw_of(truth.object_poses()[label][3:])) + p - g)
            second = plan(label, other, xy, mat_top, start)
            if second is None:
                continue
            carry(own, first)
            carry(other, plan(label, other, xy, mat_top) or second)
            break
        else:
            raise AssertionError(f"{label}: no arm reaches {xy}, directly or through a hand-over site")
    return script


ARM_LAYOUTS = range(6)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_the_arms_complete_each_task_on_six_layouts(task: str) -> None:
    """The station's arms carry the tiles (every digit onto its mat, largest on mat_0; the answer onto the empty
    mat), handing over where one arm cannot reach, and go home: every episode succeeds with score 1 within the step
    limit - the tiles can be grasped among their neighbours, turned and set down on the mats."""
    spec = get_twin_task(task)
    steps = []
    with TwinEnv() as env:
        for lid in ARM_LAYOUTS:
            env.reset(task, seed=0, layout_id=lid)
            truth = env.truth(0)
            poses = truth.object_poses()
            if task == "solve_equation":
                mat, (answer, *_) = find_missing(truth.layout)
                moves = [(answer, poses[mat][:2])]
            else:
                moves = [(lb, poses[f"mat_{k}"][:2]) for k, (lb, _) in enumerate(arrange_order(truth.layout))]
            try:
                _place_tiles_by_arm(env, moves)
            except EpisodeEnded:
                pass
            out = truth.outcome()
            assert out.success and out.score == 1.0, (lid, out)
            steps.append(out.steps)
    print(f"{task} by arm: steps {steps} of {spec.step_limit}")
