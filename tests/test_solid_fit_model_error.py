"""The solid fit's sensitivity to a camera model error (`SolidFit.shift_top` etc.): on synthetic masks of a box seen
by two cameras, the stated response to a one-pixel image shift matches what a refit with the shifted camera gives."""

from __future__ import annotations

import math
from dataclasses import replace

import cv2
import numpy as np

from calibration import Camera
from calibration.camera import Intrinsics
from calibration.transforms import make_transform
from primitives.mask_geometry import mask_outline
from primitives.solid_fit import fit_solid, hull_view

TABLE = 0.765
BOX = (np.array([0.02, -0.01]), 0.3, 0.045, 0.040, TABLE + 0.04, TABLE + 0.085)  # a block on another one


def _looking(name: str, position: np.ndarray, target: np.ndarray, fx: float) -> Camera:
    """A camera at `position` looking at `target` (OpenCV axes: z forward, x right, y down)."""
    z = target - position
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return Camera(name, Intrinsics.centred(640, 480, fx), make_transform(np.column_stack([x, y, z]), position))


def _box_mask(cam: Camera) -> np.ndarray:
    (cx, cy), yaw, length, width, bottom, top = BOX
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([[a * length / 2, b * width / 2] for a, b in ((1, 1), (1, -1), (-1, -1), (-1, 1))])
    xy = local @ np.array([[c, s], [-s, c]]) + [cx, cy]
    pts = np.concatenate([np.column_stack([xy, np.full(4, z)]) for z in (bottom, top)])
    uv, _ = cam.project(pts)
    hull = cv2.convexHull(uv.astype(np.float32)).reshape(-1, 2)
    mask = np.zeros((480, 640), np.uint8)
    cv2.fillConvexPoly(mask, np.round((hull - 0.5) * 16).astype(np.int32), 1, shift=4)
    return mask.astype(bool)


def _fit(cams: list[Camera], masks: list[np.ndarray]):  # type: ignore[no-untyped-def]
    views = [hull_view(cam, mask_outline(m)) for cam, m in zip(cams, masks)]
    starts = [(BOX[0] + 0.005, TABLE, TABLE + 0.05)]
    return fit_solid([v for v in views if v is not None], starts, 0.2, (0.045, 0.04), TABLE, shapes=("box",))


def test_stated_shift_sensitivity_matches_a_refit_with_the_camera_shifted() -> None:
    target = np.array([0.02, -0.01, TABLE + 0.06])
    head = _looking("cam_head", np.array([0.0, -0.45, 1.35]), target, 290.0)
    wrist = _looking("cam_left_wrist", np.array([0.08, -0.08, 1.0]), target, 400.0)
    masks = [_box_mask(head), _box_mask(wrist)]
    fit = _fit([head, wrist], masks)
    assert fit is not None and abs(fit.top - BOX[5]) < 0.002 and abs(fit.bottom - BOX[4]) < 0.005
    assert len(fit.shift_top) == 2 and all(v > 0 for v in fit.shift_top)
    # The wrist camera's model off by 2 px in u, then in v (masks from the true camera, fitted with the model's).
    moves = []
    for du, dv in ((2.0, 0.0), (0.0, 2.0)):
        k = wrist.intrinsics
        off = Camera(wrist.name, replace(k, cx=k.cx + du, cy=k.cy + dv), wrist.world_from_camera)
        refit = _fit([head, off], masks)
        assert refit is not None
        moves.append((refit.top - fit.top, refit.bottom - fit.bottom))
    top = math.hypot(moves[0][0], moves[1][0]) / 2.0
    bottom = math.hypot(moves[0][1], moves[1][1]) / 2.0
    assert top > 0.0002  # a two-pixel error of one camera moves the top
    assert 0.6 * top <= fit.shift_top[1] <= 1.6 * top, (fit.shift_top, top)
    assert 0.6 * bottom <= fit.shift_bottom[1] <= 1.6 * bottom, (fit.shift_bottom, bottom)
    # model_sigma combines the views in quadrature, scaled by each view's pixels.
    _, s_top, _ = fit.model_sigma([0.0, 2.0])
    assert math.isclose(s_top, 2.0 * fit.shift_top[1], rel_tol=1e-6)
    assert fit.model_sigma([1.0]) == (0.0, 0.0, 0.0)  # a wrong number of views states nothing
