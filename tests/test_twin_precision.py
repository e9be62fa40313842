"""The twin's insertion tasks: fasten_screws, plug_in_charger, insert_tubes, pour_balls_into_vase, deposit_coin,
insert_key.

Each task is completed by a truth-driven script (tests only: it reads the twin's true poses and drops the pieces
into place from just above; the arms hold still) and the success check must fire at the step the pieces come to
rest in place, with score 1; near misses, one per predicate kind, must not fire; layouts keep upstream's ranges.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from calibration.transforms import quat_multiply, quat_to_matrix
from pyrua_dojo.twin import get_twin_task
from pyrua_dojo.twin import objects_precision as P
from pyrua_dojo.twin.reward import quat_distance_deg
from pyrua_dojo.twin.tasks_precision import PRECISION_TASKS
from tests.support.twin_tasks import (
    STATION,
    TOP,
    local_to_world,
    settle,
    settle_layouts,
    snapshot,
    stage_holds,
    stated_facts,
    sweep_layouts,
    tilt_x,
    twin_at,
    with_pose,
    yaw_of,
    yaw_q,
)

PRECISION = [row[0] for row in PRECISION_TASKS]
X90 = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)


# ------------------------------------------------------------------------------------------------ task table


def test_precision_tasks_take_the_catalogue_facts() -> None:
    for name in PRECISION:
        twin, cat, _ = stated_facts(name)
        assert twin == cat and twin.dimension == "Precision"
    assert get_twin_task("plug_in_charger").step_limit == 400 and not get_twin_task("insert_key").back_to_origin


# --------------------------------------------------------------------------------------------- layout ranges


def _in(v: float, lim) -> bool:
    arr = np.asarray(lim, dtype=float).reshape(-1, 2)
    return any(lo - 1e-9 <= v <= hi + 1e-9 for lo, hi in arr)


RANGES = {
    "fasten_screws": {"bolt": ([[-0.35, -0.15], [0.15, 0.35]], [-0.2, -0.15], 0), "nut": ([-0.45, 0.45], [-0.25, -0.05], 0)},
    "plug_in_charger": {"charger": ([[-0.45, -0.1], [0.1, 0.45]], [-0.25, -0.1], 30),
                        "socket": ([[-0.4, -0.15], [0.15, 0.4]], [-0.15, -0.05], 30)},
    "insert_tubes": {"slot": ([0.0, 0.0], [-0.025, 0.025], 15), "tube": ([[-0.4, -0.15], [0.15, 0.4]], [-0.25, -0.05], 60)},
    "pour_balls_into_vase": {"vase": ([-0.35, 0.35], [-0.12, 0.05], 45), "cup": ([-0.4, 0.4], [-0.2, 0.05], 75)},
    "deposit_coin": {"vertical_coin_stand": ([-0.43, 0.43], [-0.2, -0.05], 30),
                     "piggy_bank": ([[-0.4, -0.3], [0.3, 0.4]], [-0.2, -0.15], 15)},
    "insert_key": {"slot": ([[-0.2, -0.1], [0.1, 0.2]], [-0.2, -0.15], 30), "key": ([[-0.2, -0.1], [0.1, 0.2]], [-0.2, -0.1], 30)},
}
FIXTURES = {"fasten_screws": "bolt", "insert_tubes": "slot", "pour_balls_into_vase": "vase",
            "deposit_coin": ("vertical_coin_stand", "piggy_bank"), "insert_key": "slot"}


def check_layout(task: str, lay) -> None:
    for obj in lay.objects:
        key = next((k for k in RANGES[task] if obj.label.startswith(k)), None)
        fixed = FIXTURES.get(task, ())
        assert obj.static == any(obj.label.startswith(f) for f in ((fixed,) if isinstance(fixed, str) else fixed))
        if key is None:
            continue
        xlim, ylim, deg = RANGES[task][key]
        assert _in(obj.pose[0], xlim) and _in(obj.pose[1], ylim), (obj.label, obj.pose)
        assert abs(yaw_of(obj.pose[3:])) <= deg + 1e-6, obj.label


@pytest.mark.parametrize("task", PRECISION)
def test_layouts_keep_upstream_ranges_and_are_stable(task: str) -> None:
    spec = get_twin_task(task)
    a, b = spec.layout(STATION, 0, 3), spec.layout(STATION, 0, 3)
    assert a == b and spec.layout(STATION, 1, 3) != a
    for lid in range(3):
        check_layout(task, spec.layout(STATION, 0, lid))
    for layout in settle_layouts(task, range(2)):
        assert not layout.unstable
        assert not layout.done_at_start  # nothing is done at the start


@pytest.mark.slow
@pytest.mark.parametrize("task", PRECISION)
def test_fifty_layouts_build_and_are_stable(task: str) -> None:
    sweep = sweep_layouts(task, one_seed=True)
    for _, _, lay in sweep.layouts:
        check_layout(task, lay)
    assert sweep.unbuilt == ()
    assert sweep.unstable == ()


def test_fasten_screws_layout_details() -> None:
    lay = get_twin_task("fasten_screws").layout(STATION, 2, 5)
    for i in range(3):
        nut, bolt = lay.object(f"nut{i}"), lay.object(f"bolt{i}")
        assert nut.spec.model_id == bolt.spec.model_id and not nut.static and bolt.static
    assert len({lay.object(f"nut{i}").spec.model_id for i in range(3)}) == 3
    balls = get_twin_task("pour_balls_into_vase").layout(STATION, 0, 4)
    cup = balls.object("cup")
    for i in range(7):
        ball = balls.object(f"sphere_{i}")
        local = quat_to_matrix(np.asarray(cup.pose[3:])).T @ (np.asarray(ball.pose[:3]) - np.asarray(cup.pose[:3]))
        assert ball.parent == "cup" and not ball.check_stable
        assert abs(local[0]) <= 0.02 + 1e-9 and abs(local[1]) <= 0.02 + 1e-9  # upstream's offsets in the cup frame
        assert local[2] > -P.CUP6[1] / 2 + P.CUP6[3]  # above the cup's floor
    coin = get_twin_task("deposit_coin").layout(STATION, 0, 4)
    stand, c = coin.object("vertical_coin_stand"), coin.object("coin0")
    assert c.parent == "vertical_coin_stand" and np.allclose(c.pose[:2], stand.pose[:2]) and np.allclose(c.pose[3:], stand.pose[3:])


# --------------------------------------------------------------------------------------------- fasten_screws


@pytest.mark.slow
def test_fasten_screws_by_truth() -> None:
    with twin_at("fasten_screws", 1) as (env, truth, hold):
        poses = truth.object_poses()
        head = P.BOLT_HEAD[1]

        def seated(i: int):
            def fn(t) -> bool:
                nut, bolt = t.object_poses()[f"nut{i}"], poses[f"bolt{i}"]
                bolt_top = bolt[2] + (head + P.BOLT_SHANK) / 2
                return (math.hypot(*(nut[:2] - bolt[:2])) < 0.001 and bolt_top - (nut[2] - P.NUT_HEIGHT / 2) > 0.009
                        and quat_distance_deg(nut[3:], [1, 0, 0, 0]) < 10)
            return fn

        for i in range(3):
            bolt = poses[f"bolt{i}"]
            top = bolt[2] + (head + P.BOLT_SHANK) / 2
            truth.set_object_pose(f"nut{i}", [bolt[0], bolt[1], top + 0.004 + P.NUT_HEIGHT / 2, 1, 0, 0, 0])
            if i < 2:
                assert settle(env, hold, 12, lambda t: False) is None
                assert not env.is_episode_end()
        step = settle(env, hold, 30, seated(2))
        out, final, spec = snapshot(truth)
        assert step is not None and out.success and out.score == 1.0 and out.steps == step

    assert stage_holds(spec, final)
    nut = np.asarray(final.objects["nut0"])
    assert not stage_holds(spec, with_pose(final, "nut0", [nut[0] + 0.002, *nut[1:]]))  # 2 mm off its bolt
    assert not stage_holds(spec, with_pose(final, "nut0", [*nut[:3], *tilt_x(nut[3:], 12)]))  # 12 deg tilted
    bolt_top = final.objects["bolt0"][2] + (P.BOLT_HEAD[1] + P.BOLT_SHANK) / 2
    started = bolt_top - 0.008 + P.NUT_HEIGHT / 2  # the nut's bottom only 8 mm down the peg
    assert not stage_holds(spec, with_pose(final, "nut0", [*nut[:2], started, *nut[3:]]))
    assert not stage_holds(spec, replace(final, gripper_open={"left": 0.85, "right": 1.0}))
    far = {a: np.asarray(p) + np.array([0, 0, 0.2, 0, 0, 0, 0]) for a, p in final.ee.items()}
    assert not stage_holds(spec, replace(final, ee=far))  # arms not back


# ------------------------------------------------------------------------------------------- plug_in_charger


@pytest.mark.slow
def test_plug_in_charger_by_truth() -> None:
    with twin_at("plug_in_charger", 2) as (env, truth, hold):
        sock = truth.object_poses()["socket"]
        theta = yaw_of(sock[3:])
        up = quat_multiply(yaw_q(theta), X90)  # local y up, pins down, pins along the strip's x
        top = sock[2] + P.STRIP_HALF[2]
        below_body = P.CHARGER_PIN[1]  # the body's bottom is this far above the pin tips
        half_y = P.CHARGER_BODY[1] + P.CHARGER_PIN[1] / 2
        outlet = local_to_world(sock, (P.STRIP_OUTLETS[1], 0.0, 0.0))
        # Resting upright on the lid between two outlets: the pins are on the lid, not in the holes.
        between = local_to_world(sock, (0.025, 0.0, 0.0))
        truth.set_object_pose("charger", [between[0], between[1], top + half_y + 0.001, *up])
        assert settle(env, hold, 5, lambda t: False) is None and not env.is_episode_end()

        def plugged(t) -> bool:
            c = t.object_poses()["charger"]
            return top - (c[2] - half_y) > 0.015

        truth.set_object_pose("charger", [outlet[0], outlet[1], top + (half_y - below_body) + 0.006 + 0.0, *up])
        step = settle(env, hold, 20, plugged)
        out, final, spec = snapshot(truth)
        assert step is not None and out.success and out.score == 1.0 and out.steps == step

    c = np.asarray(final.objects["charger"])
    assert not stage_holds(spec, with_pose(final, "charger", [*c[:3], *tilt_x(c[3:], 12)]))  # y axis 12 deg off
    assert not stage_holds(spec, with_pose(final, "charger", [c[0], c[1], top + half_y - 0.014, *c[3:]]))  # 14 mm in
    off = local_to_world(final.objects["socket"], (P.STRIP_HALF[0] + 0.01, 0.0, 0.0))
    assert not stage_holds(spec, with_pose(final, "charger", [off[0], off[1], c[2], *c[3:]]))  # beside the strip


# ---------------------------------------------------------------------------------------------- insert_tubes


@pytest.mark.slow
def test_insert_tubes_by_truth() -> None:
    with twin_at("insert_tubes", 0) as (env, truth, hold):
        rack = truth.object_poses()["slot"]
        up = quat_multiply(yaw_q(yaw_of(rack[3:])), X90)
        top = rack[2] + P.RACK_HALF[2]
        half = P.TUBE_LENGTH / 2

        def inserted(t) -> bool:
            return all(top - (t.object_poses()[f"tube{i}"][2] - half) > 0.045 for i in range(3))

        for i, hole in enumerate((0, 2, 4)):
            p = local_to_world(rack, (P.RACK_HOLES_X[hole], 0.0, 0.0))
            truth.set_object_pose(f"tube{i}", [p[0], p[1], top + 0.01 + half, *up])
            if i < 2:
                assert settle(env, hold, 10, lambda t: False) is None and not env.is_episode_end()
        step = settle(env, hold, 30, inserted)
        out, final, spec = snapshot(truth)
        assert step is not None and out.success and out.score == 1.0 and out.steps == step

    t0 = np.asarray(final.objects["tube0"])
    high = top - 0.040 + half  # its bottom 40 mm below the rack top: 5 mm too high
    assert not stage_holds(spec, with_pose(final, "tube0", [t0[0], t0[1], high, *t0[3:]]))
    assert not stage_holds(spec, with_pose(final, "tube0", [*t0[:3], *tilt_x(t0[3:], 32)]))  # 32 deg from upright
    assert not stage_holds(spec, with_pose(final, "tube0", [t0[0] + 0.2, t0[1], t0[2], *t0[3:]]))  # outside the rack


# -------------------------------------------------------------------------------------- pour_balls_into_vase


@pytest.mark.slow
def test_pour_balls_into_vase_by_truth() -> None:
    with twin_at("pour_balls_into_vase", 0) as (env, truth, hold):
        vase = truth.object_poses()["vase"]
        mouth = local_to_world(vase, truth.layout.object("vase").spec.named_points("mouth")[0].pos)
        balls = [f"sphere_{i}" for i in range(7)]

        half = truth.layout.object("vase").spec.half_extents
        rot_t = quat_to_matrix(vase[3:]).T

        def all_in(t) -> bool:
            # RoboDojo's check: each ball's centre inside the vase's bbox footprint and above its bottom (a ball
            # held over the mouth already counts; one resting on the table beside the vase does not).
            ps = t.object_poses()
            local = [rot_t @ (ps[b][:3] - vase[:3]) for b in balls]
            return all(abs(v[0]) < half[0] and abs(v[1]) < half[1] and v[2] > -half[2] for v in local)

        for i, ball in enumerate(balls):
            truth.set_object_pose(ball, [mouth[0], mouth[1], mouth[2] + 0.03, 1, 0, 0, 0])
            if i < 6:
                assert settle(env, hold, 8, lambda t: False) is None and not env.is_episode_end()
        step = settle(env, hold, 30, all_in)
        out, final, spec = snapshot(truth)
        assert step is not None and out.success and out.score == 1.0 and out.steps == step

    cup = np.asarray(final.objects["cup"])
    assert not stage_holds(spec, with_pose(final, "cup", [*cup[:3], *tilt_x(cup[3:], 20)]))  # cup tipped 20 deg
    b = np.asarray(final.objects["sphere_3"])
    beside = local_to_world(vase, (0.0, -0.09, 0.0))
    assert not stage_holds(spec, with_pose(final, "sphere_3", [beside[0], beside[1], TOP + P.BALL_RADIUS, *b[3:]]))


# ---------------------------------------------------------------------------------------------- deposit_coin


def test_deposit_coin_by_truth() -> None:
    with twin_at("deposit_coin", 0) as (env, truth, hold):
        bank = truth.object_poses()["piggy_bank"]
        slot = local_to_world(bank, (0.0, 0.0, P.BANK_HALF[2]))
        centre_z = bank[2]

        def inside(t) -> bool:
            return t.object_poses()["coin0"][2] + P.COIN[0] < centre_z

        # The coin edge-on above the slot, turned to it (its faces along the bank's y).
        truth.set_object_pose("coin0", [slot[0], slot[1], slot[2] + P.COIN[0] + 0.01, *bank[3:]])
        step = settle(env, hold, 30, inside)
        out, final, spec = snapshot(truth)
        assert step is not None and out.success and out.score == 1.0 and out.steps == step

    c = np.asarray(final.objects["coin0"])
    stuck = [slot[0], slot[1], slot[2], *bank[3:]]  # half through the slot: its top above the bank's centre
    assert not stage_holds(spec, with_pose(final, "coin0", stuck))
    beside = local_to_world(bank, (0.0, -P.BANK_HALF[1] - 0.02, 0.0))
    assert not stage_holds(spec, with_pose(final, "coin0", [beside[0], beside[1], c[2], *c[3:]]))


def test_deposit_coin_score_tiers() -> None:
    with twin_at("deposit_coin", 3) as (env, truth, hold):
        coin = truth.object_poses()["coin0"]
        truth.set_object_pose("coin0", [coin[0], coin[1], coin[2] + 0.09, *coin[3:]])  # lifted > 8 cm
        env.take_action(hold)
        assert truth.program_status().score_reached == 1
        env.take_action(hold)  # it fell back onto the table: the tier stays
        out = truth.outcome()
        assert not out.success and out.process_score == 20.0


# ------------------------------------------------------------------------------------------------ insert_key


@pytest.mark.slow
def test_insert_key_by_truth() -> None:
    with twin_at("insert_key", 0) as (env, truth, hold):
        lock = truth.object_poses()["slot"]
        top = lock[2] + P.LOCK_HALF[2]
        key_half = (P.KEY_BLADE[1] + 2 * P.KEY_BOW[2]) / 2
        turned = yaw_q(yaw_of(lock[3:]) - 60)

        def deep(t) -> bool:
            return top - (t.object_poses()["key"][2] - key_half) > 0.025

        # Inserted but not turned: no success.
        truth.set_object_pose("key", [lock[0], lock[1], top + 0.005 + key_half, *yaw_q(yaw_of(lock[3:]))])
        assert settle(env, hold, 10, lambda t: False) is None and not env.is_episode_end()
        assert deep(truth)
        truth.set_object_pose("key", [lock[0], lock[1], top + 0.005 + key_half, *turned])
        step = settle(env, hold, 20, deep)
        out, final, spec = snapshot(truth)
        assert step is not None and out.success and out.score == 1.0 and out.steps == step

    k = np.asarray(final.objects["key"])
    part_turn = yaw_q(yaw_of(lock[3:]) - 25)  # 35 deg short of the turn
    assert not stage_holds(spec, with_pose(final, "key", [*k[:3], *part_turn]))
    assert not stage_holds(spec, with_pose(final, "key", [*k[:3], *tilt_x(k[3:], 8)]))  # 8 deg from upright
    assert not stage_holds(spec, with_pose(final, "key", [k[0], k[1], top - 0.024 + key_half, *k[3:]]))  # 24 mm in
    assert not stage_holds(spec, with_pose(final, "key", [k[0] + 0.008, *k[1:]]))  # 8 mm off the bore's axis


def test_insert_tubes_score_counts_items() -> None:
    with twin_at("insert_tubes", 1) as (env, truth, hold):
        rack = truth.object_poses()["slot"]
        up = quat_multiply(yaw_q(yaw_of(rack[3:])), X90)
        top = rack[2] + P.RACK_HALF[2]
        tiers = []
        for i, hole in enumerate((1, 3)):
            p = local_to_world(rack, (P.RACK_HOLES_X[hole], 0.0, 0.0))
            truth.set_object_pose(f"tube{i}", [p[0], p[1], top + 0.01 + P.TUBE_LENGTH / 2, *up])
            settle(env, hold, 10, lambda t: False)
            tiers.append(truth.program_status().score_reached)
        out = truth.outcome()
        assert tiers == [1, 2] and not out.finished and out.process_score == 40.0


def test_no_precision_task_fails_early() -> None:
    """Upstream registers no query (instant failure) for any of these tasks: only the step limit ends a failure."""
    for name in PRECISION:
        lay = get_twin_task(name).layout(STATION, 0, 0)
        assert get_twin_task(name).program(lay, None).queries == ()  # type: ignore[arg-type]


def test_segmentation_words_single_out_each_object() -> None:
    """A prompt naming one object's category finds that object and no other of its task (the stand-in returns
    every object whose words cover the prompt)."""
    from pyrua_dojo.seg_service.twin_backend import normalize_words

    prompts = {"fasten_screws": ["nut", "bolt"], "plug_in_charger": ["charger", "power strip"],
               "insert_tubes": ["tube", "rack"], "pour_balls_into_vase": ["ball", "cup", "vase"],
               "deposit_coin": ["coin", "piggy bank", "stand"], "insert_key": ["key", "keyhole"]}
    for task, words in prompts.items():
        lay = get_twin_task(task).layout(STATION, 0, 0)
        described = {o.label: normalize_words(o.spec.words) | normalize_words(o.spec.descriptions)
                     for o in lay.objects}
        for w in words:
            hits = {lb for lb, ws in described.items() if normalize_words(w) <= ws}
            kinds = {lay.object(lb).spec.category for lb in hits}
            assert len(kinds) == 1, (task, w, hits)
    nuts = get_twin_task("fasten_screws").layout(STATION, 0, 0)
    red = [o.label for o in nuts.objects if normalize_words("red nut") <= normalize_words(o.spec.words)]
    assert len(red) <= 1
