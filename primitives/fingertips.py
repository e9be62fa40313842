"""The fingertips as a wrist camera sees them, against the camera model: the model's error near the grasp.

A wrist camera's mount may differ a little from the model (a bracket moved by a centimetre, turned by a few degrees):
then `back_project` through it is off by 1-4 cm near the grasp, while the fingers, fixed to the same link as the
camera, are the truth in the image. `measure_fingertips` segments the fingers ("gripper finger") in the arm's wrist
image, takes the two masks nearest where the model projects this gripper's pads (a merged pair of closed pads is split
along the closing line), and compares the tip end of each pad seen with the same feature of the modelled pad's
silhouette (a box: 50 mm along the approach axis centred on the TCP, 10 mm thick, 24 mm wide). The tip end of a
silhouette: the centre, across the pad, of its last quarter toward the tip, placed at its far end along the tip's
image direction. The midpoint's pixel offset, back-projected at the fingertips' height through the model, gives the
world correction (`Fingertips.shift_m`): first order in the camera error, exact for points at that height.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from calibration import Camera, Station
from calibration.transforms import FloatArray
from primitives.actions import Observation
from primitives.kinematics import X5Kinematics
from primitives.results import Fingertips
from primitives.seg_client import SegmentationClient

#: What the fingers are called in the segmentation prompt.
FINGER_PROMPT = "gripper finger"
#: Half extents of a finger pad (m): along the approach axis (centred on the TCP), across the closing axis, and
#: along the third axis (the twin's gripper design; prompts/notes.md states it).
PAD_HALF = (0.025, 0.005, 0.012)
#: Fingers within this angle of straight down (rad; look_at leans them more than 40 deg); beyond it the rays of the
#: fingertips graze their height plane and the correction in xy is not measured.
MAX_TILT = math.radians(75.0)
#: A seen pad's offset from its modelled place may be this large (px): 4 cm at the fingertips' distance and more.
GATE_PX = 140.0
#: The two pads' offsets across the closing line must agree within this (px) plus `AGREE_SHARE` of the pads'
#: distance in the image (a camera turned about its axis moves them apart by that much): one rigid camera error.
AGREE_PX = 12.0
AGREE_SHARE = 0.12
#: The two pads' seen areas must be within this share of each other (mirror images; a partly hidden one is not).
PAIR_AREA_SHARE = 0.8
#: ... and then their tips' offsets from the model may differ by this much along the closing line (px).
SPREAD_PX = 50.0
#: locate corrects a wrist camera by its fingertips only when they are this far from the model (px): below it the
#: offset is mostly mask noise (a pixel or two at the realistic level).
CORRECT_FROM_PX = 3.0
#: The tip region: the last quarter of the pad's silhouette along the tip's image direction.
TIP_SHARE = 0.25


def measure_fingertips(
    obs: Observation,
    arm: str,
    *,
    station: Station,
    kinematics: X5Kinematics,
    camera: Camera,
    segmentation: SegmentationClient | None,
    min_score: float = 0.3,
) -> Fingertips:
    """The fingertips of `arm` in its wrist camera's image of `obs` (see the module docstring); `camera`: that camera
    posed as the model puts it."""
    model = _model_pads(obs, arm, station, kinematics, camera)
    if isinstance(model, Fingertips):
        return model
    cam, cam_name, tip_z = camera, f"cam_{arm}_wrist", model.tip_z
    model_masks, along, length, model_tips = model.masks, model.along, model.length, model.tips
    model_centroids = [_centroid(m) for m in model_masks]

    def fail(reason: str) -> Fingertips:
        return Fingertips(arm, cam_name, False, reason, [], [], [], [], [], [], round(tip_z, 4), obs.step)

    if segmentation is None:
        return fail("segmentation unavailable: no segmentation service is configured")
    reply = segmentation.segment(obs.images[cam_name], [FINGER_PROMPT], score_threshold=float(min_score))
    if not reply.ok:
        err = reply.error
        return fail(f"segmentation unavailable ({err.code}: {err.message})" if err else "segmentation unavailable")
    min_area = 0.2 * min(float(m.sum()) for m in model_masks)
    masks = [
        np.asarray(i.mask, dtype=bool) for i in reply.instances(FINGER_PROMPT)
        if i.score >= min_score and i.mask is not None and i.area_px >= min_area
    ]
    picked = _pick_pads(masks, model_centroids, model_masks, along)
    if isinstance(picked, str):
        return fail(picked)
    pads, merged = picked
    if any(m is None for m in pads):
        # One pad: its offset from the model is taken for both (the same camera error; only an opening unlike the
        # model's would move it along the closing line).
        k = 0 if pads[0] is not None else 1
        tip = _tip(pads[k], along, length)
        tips = [tip if j == k else model_tips[j] + tip - model_tips[k] for j in (0, 1)]
        return _result(cam, arm, cam_name, tips, model_tips, tip_z, obs.step,
                       "one pad seen (the other not found): its offset taken for both, less sure")
    areas = sorted(float(m.sum()) for m in pads)
    tips = [_tip(m, along, length) for m in pads]
    # A gripper opened a little more or less than its reported value moves the pads apart along the closing line;
    # across it the two offsets are one camera error and must agree.
    offsets = [t - mt for t, mt in zip(tips, model_tips)]
    closing_px = model_tips[1] - model_tips[0]
    apart = float(np.hypot(*closing_px))
    closing_px = closing_px / max(apart, 1e-9)
    d = offsets[0] - offsets[1]
    disagree = abs(float(closing_px[0] * d[1] - closing_px[1] * d[0]))
    if disagree > AGREE_PX + AGREE_SHARE * apart:
        return fail(f"the two fingers seen are offset differently from the model ({disagree:.0f} px apart): "
                    "not this gripper's pair, or one is partly hidden")
    # A pad partly hidden (by the other gripper, an object) is smaller than its mirror image and its visible tip
    # sits off along the closing line: its midpoint would be wrong. (A camera off its mount moves both tips alike and
    # changes their sizes a little; an opening unlike the model's moves them apart evenly, sizes kept.)
    spread = abs(float(np.dot(d, closing_px)))
    if not merged and areas[0] < PAIR_AREA_SHARE * areas[1] and spread > SPREAD_PX:
        return fail(f"one finger is partly hidden ({areas[0]:.0f} px against {areas[1]:.0f} px seen of the other)")
    notes = "the pads were seen as one mask, split along the closing line" if merged else ""
    return _result(cam, arm, cam_name, tips, model_tips, tip_z, obs.step, notes)


def reuse_offset(
    obs: Observation,
    arm: str,
    *,
    station: Station,
    kinematics: X5Kinematics,
    camera: Camera,
    offset_px: Sequence[float],
    seen_step: int,
) -> Fingertips:
    """The fingertips' offset from the model seen in an earlier image (`offset_px`, at step `seen_step`) applied to
    the model's pads in this one: the camera is fixed to the gripper, so its mount's error moves the fingertips'
    midpoint by the same pixels in every image (an opening unlike the model's moves the pads apart, not their
    midpoint). For images where they are hidden (a held object, the other gripper) or out of view."""
    model = _model_pads(obs, arm, station, kinematics, camera)
    if isinstance(model, Fingertips):
        return model
    off = np.asarray(offset_px, dtype=float)
    return _result(camera, arm, f"cam_{arm}_wrist", [t + off for t in model.tips], model.tips, model.tip_z, obs.step,
                   f"not seen in this image: the offset seen at step {seen_step} reused")


@dataclass(frozen=True)
class _ModelPads:
    """The finger pads where the camera model shows them: silhouettes, the tips' image direction, the tip region's
    length (px), each pad's tip end, and the fingertips' height (m)."""

    masks: list[np.ndarray]
    along: FloatArray
    length: float
    tips: list[FloatArray]
    tip_z: float


def _model_pads(
    obs: Observation, arm: str, station: Station, kinematics: X5Kinematics, cam: Camera
) -> _ModelPads | Fingertips:
    """The pads of `arm` as `cam` (its wrist camera, posed as modelled) shows them by the model, or a Fingertips with
    found=False saying why they cannot be measured."""
    cam_name = f"cam_{arm}_wrist"
    kin = kinematics.arm(arm)
    tcp = kin.fk(obs.joints[arm], "tcp")
    rot, centre = tcp[:3, :3], tcp[:3, 3]
    approach, closing, third = rot[:, 0], rot[:, 1], rot[:, 2]
    tip_z = float(centre[2] + PAD_HALF[0] * approach[2])

    def fail(reason: str) -> Fingertips:
        return Fingertips(arm, cam_name, False, reason, [], [], [], [], [], [], round(tip_z, 4), obs.step)

    if approach[2] > -math.cos(MAX_TILT):
        return fail(f"the fingers do not point down (more than {math.degrees(MAX_TILT):.0f} deg from vertical)")
    k = cam.intrinsics
    finger = station.x5.gripper.finger_from_value(float(obs.gripper[arm]))
    masks: list[np.ndarray] = []
    for side in (1.0, -1.0):
        pad_centre = centre + side * (finger + PAD_HALF[1]) * closing
        corners = np.array([
            pad_centre + sa * PAD_HALF[0] * approach + sc * PAD_HALF[1] * closing + st * PAD_HALF[2] * third
            for sa in (-1, 1) for sc in (-1, 1) for st in (-1, 1)
        ])
        uv, dist = cam.project(corners)
        if np.any(dist <= 0):
            return fail(f"a finger pad is behind {cam_name}'s model")
        masks.append(_silhouette(uv, k.height, k.width))
    if not all(m.any() for m in masks):
        return fail(f"the model puts a finger pad outside {cam_name}'s image")
    # The tip's direction in the image: from the pads' centres toward their tips.
    uv_c, _ = cam.project(np.array([centre, centre + PAD_HALF[0] * approach]))
    along = uv_c[1] - uv_c[0]
    if not np.all(np.isfinite(along)) or np.hypot(*along) < 1.0:
        return fail(f"the fingers point along {cam_name}'s view: their tips cannot be told apart")
    along = along / np.hypot(*along)
    # The tip region's length: a quarter of the modelled pad's extent along the tip direction (the seen pad's far
    # end may be the same, its near end is often hidden by the gripper's body or cut by the image).
    length = max(3.0, TIP_SHARE * min(_extent(m, along) for m in masks))
    return _ModelPads(masks, along, length, [_tip(m, along, length) for m in masks], tip_z)


def _result(cam: Camera, arm: str, cam_name: str, tips: list[FloatArray], model_tips: list[FloatArray], tip_z: float,
            step: int, notes: str) -> Fingertips:
    """The fingertips found: their midpoint's offset from the model's in the image and on their height plane."""
    mid, model_mid = 0.5 * (tips[0] + tips[1]), 0.5 * (model_tips[0] + model_tips[1])
    seen_at = cam.intersect_plane_z(mid, tip_z)
    model_at = cam.intersect_plane_z(model_mid, tip_z)
    if not (np.all(np.isfinite(seen_at)) and np.all(np.isfinite(model_at))):
        return Fingertips(arm, cam_name, False, "the fingertips' rays do not meet their height plane", [], [], [], [],
                          [], [], round(tip_z, 4), step)
    shift = model_at[:2] - seen_at[:2]
    return Fingertips(
        arm=arm,
        camera=cam_name,
        found=True,
        reason=notes,
        tips_px=[_r(t) for t in tips],
        midpoint_px=_r(mid),
        model_tips_px=[_r(t) for t in model_tips],
        model_midpoint_px=_r(model_mid),
        offset_px=_r(mid - model_mid),
        shift_m=[round(float(v), 4) for v in shift],
        z=round(tip_z, 4),
        step=step,
    )


def _pick_pads(
    masks: list[np.ndarray], model_centroids: list[FloatArray], model_masks: list[np.ndarray], along: FloatArray
) -> tuple[list[np.ndarray | None], bool] | str:
    """The seen masks of pad a and pad b and whether they came as one mask: the pair nearest the modelled pads,
    offset alike; one mask over both (closed pads touch) is split across the closing line; one pad alone (the other
    None). Else why not."""
    if not masks:
        return f"no {FINGER_PROMPT!r} seen in the wrist image"
    cents = [_centroid(m) for m in masks]
    best: tuple[float, int, int] | None = None
    for i, ci in enumerate(cents):
        for j, cj in enumerate(cents):
            if i == j:
                continue
            da, db = ci - model_centroids[0], cj - model_centroids[1]
            if max(np.hypot(*da), np.hypot(*db)) > GATE_PX:
                continue
            cost = float(np.hypot(*da) + np.hypot(*db) + 2.0 * np.hypot(*(da - db)))
            if best is None or cost < best[0]:
                best = (cost, i, j)
    if best is not None:
        return [masks[best[1]], masks[best[2]]], False
    # One mask over both pads: as large as both, centred between them.
    model_mid = 0.5 * (model_centroids[0] + model_centroids[1])
    both = float(model_masks[0].sum() + model_masks[1].sum())
    for m, c in sorted(zip(masks, cents), key=lambda mc: float(np.hypot(*(mc[1] - model_mid)))):
        if np.hypot(*(c - model_mid)) <= GATE_PX and m.sum() >= 0.6 * both:
            across = np.array([-along[1], along[0]])
            if float(np.dot(model_centroids[1] - model_centroids[0], across)) < 0:
                across = -across  # from pad a toward pad b
            rows, cols = np.nonzero(m)
            side = (cols + 0.5 - c[0]) * across[0] + (rows + 0.5 - c[1]) * across[1]
            a, b = np.zeros_like(m), np.zeros_like(m)
            a[rows[side < 0], cols[side < 0]] = True
            b[rows[side >= 0], cols[side >= 0]] = True
            return [a, b], True
    # One pad seen (segmentation missed the other, or it is hidden): a mask as large as a pad near one model pad only.
    one = [(float(np.hypot(*(c - model_centroids[k]))), i, k) for i, c in enumerate(cents) for k in (0, 1)
           if np.hypot(*(c - model_centroids[k])) <= GATE_PX and np.hypot(*(c - model_centroids[1 - k])) > GATE_PX
           and masks[i].sum() >= 0.25 * float(model_masks[k].sum())]
    if one:
        _, i, k = min(one)
        return ([masks[i], None] if k == 0 else [None, masks[i]]), False
    return f"the fingers seen do not match where the model puts this gripper's pads (within {GATE_PX:.0f} px)"


def _silhouette(uv: FloatArray, height: int, width: int) -> np.ndarray:
    """The pixels whose centres (col + 0.5, row + 0.5) lie inside the convex hull of projected points."""
    out = np.zeros((height, width), bool)
    hull = cv2.convexHull(uv.astype(np.float32)).reshape(-1, 2).astype(float)  # clockwise in image axes
    c0, r0 = max(0, int(np.floor(hull[:, 0].min()))), max(0, int(np.floor(hull[:, 1].min())))
    c1, r1 = min(width, int(np.ceil(hull[:, 0].max())) + 1), min(height, int(np.ceil(hull[:, 1].max())) + 1)
    if c0 >= c1 or r0 >= r1:
        return out
    cols, rows = np.meshgrid(np.arange(c0, c1) + 0.5, np.arange(r0, r1) + 0.5)
    inside = np.ones(cols.shape, bool)
    area2 = float(np.sum(hull[:, 0] * np.roll(hull[:, 1], -1) - np.roll(hull[:, 0], -1) * hull[:, 1]))
    sign = 1.0 if area2 >= 0 else -1.0
    for (ax, ay), (bx, by) in zip(hull, np.roll(hull, -1, axis=0)):
        inside &= sign * ((bx - ax) * (rows - ay) - (by - ay) * (cols - ax)) >= 0
    out[r0:r1, c0:c1] = inside
    return out


def _centroid(mask: np.ndarray) -> FloatArray:
    rows, cols = np.nonzero(mask)
    return np.array([cols.mean() + 0.5, rows.mean() + 0.5])


def _tip(mask: np.ndarray, along: FloatArray, length: float) -> FloatArray:
    """The tip end of a pad's mask: the centre of its pixels within `length` px of its far end along `along`."""
    rows, cols = np.nonzero(mask)
    pts = np.column_stack([cols + 0.5, rows + 0.5])
    s = pts @ along
    region = pts[s >= float(s.max()) - length]
    return region.mean(axis=0)


def _extent(mask: np.ndarray, along: FloatArray) -> float:
    rows, cols = np.nonzero(mask)
    return float(np.ptp(cols * along[0] + rows * along[1]))


def _r(p: FloatArray) -> list[float]:
    return [round(float(v), 2) for v in p]
