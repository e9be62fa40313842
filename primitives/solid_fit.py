"""Fit a solid (an upright box or cylinder, resting on an unknown support) to an object's masks in several cameras.

Without depth, one camera cannot tell a small object on the table from a bigger one nearer the camera, or a block
on the table from one resting on another block. Two cameras looking from different directions can: the solid's
silhouette in every camera (the convex hull of its projected corners, or of its top and bottom circles) must
contain that camera's mask and, where nothing hides the object, be no bigger than it. So the fit solves for the
footprint centre, heading and size together with the bottom height (the support: the table, another object, a
gripper) and the top height. Hollow and round objects fit the cylinder: a cup's silhouette is the hull of its rim
and its base circle, upright or upside down.

Residuals are in pixels, so a near camera (the wrist camera after look_at) weighs more than the far head camera:
- containment: points along each mask's convex hull that lie outside the solid's silhouette (always an error, up
  to segmentation noise);
- tightness: points along the silhouette that lie outside the mask's hull, robustly weighted, because a finger or
  another object in front of the object hides part of it (those points then lie off the mask by much more than a
  pixel and lose their pull). Silhouette points outside the image say nothing and count zero.
The uncertainty comes from the fit's Jacobian, scaled by its residual and floored at a pixel's footprint.
A cylinder the masks do not fit well (over 0.8 px) is fitted again without the outline points sticking out beside
it (a mug's handle; points above or below it are its height and stay). `fit_held_box`: a box held between a
gripper's pads, with fewer unknowns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import cv2
import numpy as np
from scipy.optimize import least_squares

from calibration import Camera
from calibration.transforms import FloatArray

CIRCLE = 24  # points per circle of the cylinder model
SAMPLES = 48  # points along each outline
MAX_TURN_IN_GRIP = 0.6  # rad: how far a held box may be turned about the vertical between the pads
HIDDEN_PULL = 0.3  # weight of the tightness where an arm may hide a held box's edge (1 where it is seen)
TRIM_RMS_PX = 0.8  # a fit matching the masks worse than this is tried again without the points sticking out
TRIM_PX = 1.0  # ... leaving out the mask outline points this far outside the fitted silhouette
HANDLE_DENT = (3.0, 0.06)  # a dent in a mask's outline deeper than max(px, share of sqrt(area)) may bound a handle
HANDLE_AREA = 0.3  # ... cut off when the part beyond the chord between the two deepest is under this share
CONTAIN_SOFT_PX, CONTAIN_SLOPE = 2.0, 0.15  # round bodies: mask points beyond this pull with this share
NECK_PX, NECK_POINTS = 2.0, 4  # mask points this far above a fitted cylinder, this many: try a neck on it
NECK_MAX_ELEVATION_DEG = 60.0  # ... counted in views from the side only (lower than this above the object)
NECK_MAX_RADIUS = 0.6  # ... at most this share of the body's radius and as tall as the body (a handle is no neck)
NECK_GAIN = 0.7  # ... kept when it brings the robust cost to at most this share


@dataclass(frozen=True)
class View:
    """One camera's view of the object: the camera and the convex hull of its mask's outline (pixels, (n, 2)).

    With the mask itself (`hull_view(..., mask=)`), round bodies are fitted against the mask rather than its hull:
    a mug's hull fills the gaps beside its handle, which lets a cylinder grow or shift into them unchecked."""

    camera: Camera
    hull: FloatArray
    occluded: np.ndarray | None = None  # (H, W) bool: pixels where something in front may hide the object
    outside: np.ndarray | None = None  # (H, W) float32: distance (px) outside the hull, 0 inside (for speed)
    outline: FloatArray | None = None  # (m, 2) the mask's outer contour (pixel-edge polygon), holes filled
    outside_mask: np.ndarray | None = None  # (H, W) float32: signed distance (px) to that contour, + outside
    outline_full: FloatArray | None = None  # the same before a handle was cut off (`_cut_handle`): for a neck
    outside_full: np.ndarray | None = None


@dataclass(frozen=True)
class SolidFit:
    """The fitted solid. Heights are world z (metres); sigma_* are one-standard-error estimates."""

    shape: str  # "box" or "cylinder"
    centre: FloatArray  # (2,) footprint centre
    heading: float  # box: direction of the long side (mod pi); cylinder: 0
    length: float  # box: long side; cylinder: diameter
    width: float
    bottom: float  # world z of the bottom (the support)
    top: float  # world z of the top
    rms_px: float  # residual rms over all views, pixels (residuals under 5 px: the parts not hidden)
    sigma_xy: float
    sigma_top: float
    hidden_fraction: float  # share of seen silhouette points off the mask by over 3 px (hidden by something unknown)
    left_out: float = 0.0  # share of the masks' outline points left out as a part the solid does not model
    # Per view (same order as the views fitted): how far the footprint centre, the top and the bottom move (metres)
    # when that view's image is shifted by one pixel (u, v combined in quadrature): the fit's sensitivity to an error
    # of that camera's model (`model_sigma`).
    shift_xy: tuple[float, ...] = ()
    shift_top: tuple[float, ...] = ()
    shift_bottom: tuple[float, ...] = ()
    sigma_bottom: float = 0.0
    # Per view: the share of the fitted silhouette's edge (inside the image) where something may hide it; there the
    # view does not bound the solid, which may be larger or placed otherwise than the fit says.
    unseen: tuple[float, ...] = ()

    def model_sigma(self, view_px: Sequence[float]) -> tuple[float, float, float]:
        """(xy, top, bottom) one-sigma errors (m) from the cameras' model errors, `view_px` pixels per view (a
        rigid image shift of each view, independent between views)."""
        if len(view_px) != len(self.shift_xy):
            return 0.0, 0.0, 0.0
        px = np.asarray(view_px, float)
        return tuple(float(np.sqrt(np.sum((np.asarray(a) * px) ** 2)))  # type: ignore[return-value]
                     for a in (self.shift_xy, self.shift_top, self.shift_bottom))


def hull_view(
    camera: Camera, outline_uv: FloatArray, occluded: np.ndarray | None = None, mask: np.ndarray | None = None
) -> View | None:
    """A view from a mask's sub-pixel outline (None when too small to fit); `occluded` as in View; `mask` (the
    mask itself, (H, W) bool) adds its outer contour and distance map for the cylinder."""
    if len(outline_uv) < 6:
        return None
    hull = cv2.convexHull(outline_uv.astype(np.float32)).reshape(-1, 2).astype(float)
    if len(hull) < 3:
        return None
    k = camera.intrinsics
    filled = np.ones((k.height, k.width), np.uint8)
    cv2.fillConvexPoly(filled, np.round((hull - 0.5) * 16).astype(np.int32), 0, shift=4)  # centres at +0.5
    outside = cv2.distanceTransform(filled, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    if mask is None:
        return View(camera, hull, occluded, outside)
    outline, signed = _mask_shape(np.asarray(mask, bool), cut=True)
    full, signed_full = _mask_shape(np.asarray(mask, bool), cut=False)
    return View(camera, hull, occluded, outside, outline, signed, full, signed_full)


def _mask_shape(mask: np.ndarray, cut: bool) -> tuple[FloatArray | None, np.ndarray | None]:
    """The body of a mask for a round fit (its largest outer contour, holes filled, a handle cut off: `_cut_handle`)
    as a polygon (vertices on pixel edges, centres at +0.5) and the signed distance to it (px, + outside, - inside;
    0 on the edge between an inside and an outside pixel centre)."""
    m = np.ascontiguousarray(mask, dtype=np.uint8)
    contours, _ = cv2.findContours(m, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    if not contours:
        return None, None
    big = max(contours, key=cv2.contourArea)
    if len(big) < 6:
        return None, None
    if cut:
        big = _cut_handle(big)
    solid = np.zeros(m.shape, np.uint8)
    cv2.drawContours(solid, [big.astype(np.int32)], -1, 1, -1)
    out = cv2.distanceTransform(1 - solid, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    inside = cv2.distanceTransform(solid, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    signed = np.where(solid > 0, 0.5 - inside, out - 0.5).astype(np.float32)
    # Contour pixels' centres, moved half a pixel outward (away from the body's centre) approximate the edge.
    pts = big.reshape(-1, 2).astype(float) + 0.5
    centre = pts.mean(axis=0)
    d = pts - centre
    pts = pts + 0.5 * d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-9)
    return pts, signed


def _cut_handle(contour: np.ndarray) -> np.ndarray:
    """A contour with a protruding part (a mug's handle) cut off along the chord between the two deepest dents of
    its outline (convexity defects deeper than `HANDLE_DENT`), when the part cut off is the smaller one (under
    `HANDLE_AREA` of the whole); else the contour as it is."""
    c = contour.reshape(-1, 2)
    area = float(cv2.contourArea(contour))
    if area <= 0 or len(c) < 12:
        return contour
    try:
        defects = cv2.convexityDefects(contour, cv2.convexHull(contour, returnPoints=False))
    except cv2.error:  # a self-touching contour
        return contour
    if defects is None:
        return contour
    d = defects.reshape(-1, 4)
    depth = d[:, 3] / 256.0
    deep = np.nonzero(depth > max(HANDLE_DENT[0], HANDLE_DENT[1] * math.sqrt(area)))[0]
    if len(deep) < 2:
        return contour
    i1, i2 = sorted(int(d[k, 2]) for k in deep[np.argsort(depth[deep])[-2:]])
    inner, outer = c[i1 : i2 + 1], np.concatenate([c[i2:], c[: i1 + 1]])
    a_in, a_out = (abs(float(cv2.contourArea(p.reshape(-1, 1, 2).astype(np.int32)))) for p in (inner, outer))
    body, part = (inner, a_out) if a_in >= a_out else (outer, a_in)
    if part > HANDLE_AREA * area or len(body) < 6:
        return contour
    return body.reshape(-1, 1, 2)


# A start of a fit: (xy, bottom z, top z), or with its own (heading, (length, width)) after them.
FitStart = tuple[FloatArray, float, float] | tuple[FloatArray, float, float, float, tuple[float, float]]


def fit_solid(
    views: Sequence[View],
    starts: Sequence[FitStart],
    heading: float,
    size: tuple[float, float],
    table_z: float,
    shapes: Sequence[str] = ("box", "cylinder"),
) -> SolidFit | None:
    """The best fit over shapes and starts ((xy, bottom z, top z) guesses, each with its own (heading, (length,
    width)) after them where given, else `heading` and `size`); a box must beat a cylinder by 10 %.

    Every (shape, start) pair gets a short fit; the best one is refined.
    """
    by_shape = {shape: _samples(views, shape) for shape in shapes}
    trials = []
    # Round bodies first: their fit has fewer unknowns and lands nearer the centre from a poor start (a box's free
    # length can run along edges an arm hides); a box is also started where the best of them ended.
    for shape in sorted(shapes, key=lambda s: s != "cylinder"):
        more = []
        if shape == "box" and trials:
            _, _, xc, _, _ = min(trials, key=lambda t: t[0])
            more = [(xc[:2], float(xc[3]), float(xc[3] + xc[4]))]
        for xy, s0, t0, *own in [*starts, *more]:
            a, lw = own if own else (heading, size)
            x0, lo, hi = _start(shape, xy, s0, t0, a, lw, table_z)
            r = _solve(shape, by_shape[shape], x0, lo, hi, 25)
            if r is not None:
                # A box has more free parameters than a round body: prefer the round fit unless 10 % worse.
                trials.append((float(r.cost) * (1.0 if shape == "box" else 0.9), shape, r.x, lo, hi))
    if not trials:
        return None
    _, shape, x0, lo, hi = min(trials, key=lambda t: t[0])
    samples = by_shape[shape]
    r = _solve(shape, samples, x0, lo, hi, 150)
    if r is None:
        return None
    fit = _result(shape, r.x, r.jac, samples)
    if fit.rms_px <= TRIM_RMS_PX or shape != "cylinder":
        return fit
    # A part the solid does not model (a mug's handle, a spout) sticks out of it in some view: leave out the mask
    # outline points well outside the fitted silhouette (at most a third per view) and fit again.
    # Repeated: as the solid moves off the part, more of the part's points come out.
    best, x = fit, r.x
    for _ in range(3):
        trimmed, dropped = [], 0
        for pts, view in samples:
            sil = _silhouette(x, shape, view.camera)
            seen_sil = sil is not None and len(sil) >= 3
            out = (_signed_distance(sil, pts) > TRIM_PX) if seen_sil else np.zeros(len(pts), bool)
            out &= _beside(x, view.camera, pts)  # what sticks out above or below (a bottle's neck) is its height
            if out.mean() > 1 / 3:
                return best
            trimmed.append((pts[~out], view))
            dropped += int(out.sum())
        if not dropped:
            return best
        r2 = _solve(shape, trimmed, x, lo, hi, 150)
        if r2 is None:
            return best
        refit = _result(shape, r2.x, r2.jac, trimmed)
        if refit.rms_px >= best.rms_px:
            return best
        best, x = replace(refit, left_out=dropped / sum(len(p) for p, _ in samples)), r2.x
    return best


def fit_neck(views: Sequence[View], body: SolidFit) -> tuple[SolidFit, float] | None:
    """A narrower coaxial cylinder standing on a fitted cylinder (a bottle's neck, a knob) when the masks stick out
    above the body in a view from the side (over `NECK_PX`, not beside it): its radius and height fitted with the body fixed, the masks
    compared with the union of the two silhouettes. Returns the body with its top raised to the neck's and the
    neck's radius; None when nothing sticks out or the neck does not explain it."""
    if body.shape != "cylinder" or points_above(views, body) < NECK_POINTS:
        return None
    cx, cy = (float(v) for v in body.centre)
    r, s, h = body.length / 2.0, body.bottom, body.top - body.bottom
    xb = np.array([cx, cy, r, s, h])
    samples = _samples(views, "cylinder", full=True)

    def res(y: FloatArray) -> FloatArray:
        xn = np.array([cx, cy, y[0], s + h, y[1]])
        out = []
        for pts, v in samples:
            sb, sn = _silhouette(xb, "cylinder", v.camera), _silhouette(xn, "cylinder", v.camera)
            if sb is None or sn is None or len(sb) < 3 or len(sn) < 3:
                out.append(np.full(len(pts) + SAMPLES, 50.0))
                continue
            d = np.minimum(_signed_distance(sb, pts), _signed_distance(sn, pts))
            out.append(3.0 * np.maximum(d, 0.0))
            sp = _perimeter(sn, SAMPLES)
            out.append(np.where(_seen(v, sp), _outside(v, sp, "cylinder", full=True), 0.0))
        return np.concatenate(out)

    lo, hi = np.array([0.002, 0.002]), np.array([max(NECK_MAX_RADIUS * r, 0.0025), max(h, 0.0025)])
    base = res(np.array([0.002, 0.002]))
    try:
        fit = least_squares(res, np.clip([0.4 * r, 0.3 * h], lo + 1e-6, hi - 1e-6), bounds=(lo, hi), loss="soft_l1",
                            f_scale=1.0, diff_step=1e-4, max_nfev=100, ftol=1e-5, xtol=1e-5)
    except ValueError:
        return None
    resid = res(fit.x)
    if float(np.sum(np.sqrt(1 + resid**2) - 1)) > NECK_GAIN * float(np.sum(np.sqrt(1 + base**2) - 1)):
        return None  # the neck explains too little of what sticks out
    inliers = resid < 5.0
    rms = float(np.sqrt(np.mean(resid[inliers] ** 2))) if inliers.any() else math.inf
    j = np.asarray(fit.jac)[inliers]
    cov = np.linalg.pinv(j.T @ j) * max(rms, 0.35) ** 2
    sig_h = float(math.sqrt(max(cov[1, 1], 0.0)))
    top = s + h + float(fit.x[1])
    return replace(body, top=top, sigma_top=math.hypot(body.sigma_top, sig_h), rms_px=rms), float(fit.x[0])


def points_above(views: Sequence[View], body: SolidFit) -> int:
    """How many mask outline points stick out above a fitted cylinder (over `NECK_PX`, not beside it) in the views
    from the side (under `NECK_MAX_ELEVATION_DEG`): a neck, a knob or a dome on top (0 for a box)."""
    if body.shape != "cylinder":
        return 0
    cx, cy = (float(v) for v in body.centre)
    r, s, h = body.length / 2.0, body.bottom, body.top - body.bottom
    xb = np.array([cx, cy, r, s, h])
    above = 0
    for pts, v in _samples(views, "cylinder", full=True):
        rel = np.array([cx, cy, s + h]) - v.camera.position
        if -rel[2] / float(np.linalg.norm(rel)) > math.sin(math.radians(NECK_MAX_ELEVATION_DEG)):
            continue  # seen from this steeply, a part sticking out away from the camera looks "above" it too
        sil = _silhouette(xb, "cylinder", v.camera)
        if sil is not None and len(sil) >= 3:
            above += int(np.sum((_signed_distance(sil, pts) > NECK_PX) & ~_beside(xb, v.camera, pts)))
    return above


def fit_held_box(
    views: Sequence[View],
    tcp: FloatArray,
    closing_axis: FloatArray,
    width: float,
    table_z: float,
    pulled: Sequence[bool] | None = None,
) -> SolidFit | None:
    """A box held between a gripper's pads (pointing down): centred on the TCP along the fingers' closing axis, as
    wide there as the pads are apart (a box turned in the grip touches them with its corners); free are its offset
    along the pads, its turn about the vertical, its length, its bottom and its top. The fingers hide much of a held
    object, so the free fit of `fit_solid` finds too little of it. `pulled`: per view, whether its edges where an arm
    may hide them still pull weakly (HIDDEN_PULL; without it nothing keeps the box from growing where the arm's outline
    covers it: held cubes came out 7 mm long, their centre 3 mm off): not in the holding gripper's own wrist view,
    whose image bottom and pads truly hide the object."""
    u = np.asarray(closing_axis[:2], float)
    u = u / max(float(np.linalg.norm(u)), 1e-9)
    p = np.array([-u[1], u[0]])
    yaw = math.atan2(float(p[1]), float(p[0]))  # the box's local x runs along the pads (p), y across them (u)
    samples = [(_perimeter(v.hull, SAMPLES), v) for v in views]
    pull = [HIDDEN_PULL if on else 0.0 for on in (pulled or [True] * len(views))]
    tz = float(tcp[2])

    def full(y: FloatArray) -> FloatArray:
        # A box turned by t in the grip touches the pads with its corners: its extent across them is `width`.
        off, t, a, bottom, h = y
        c = np.asarray(tcp[:2], float) + off * p
        b = max((width / 2.0 - a * abs(math.sin(t))) / math.cos(t), 0.002)
        return np.array([c[0], c[1], yaw + t, a, b, bottom, h])

    def res(y: FloatArray) -> FloatArray:
        return _residuals(full(y), "box", samples, pull)

    turn = MAX_TURN_IN_GRIP if len(views) > 1 else 1e-6  # one view cannot tell a turn from a longer box
    lo = np.array([-0.03, -turn, 0.005, table_z - 0.005, 0.005])
    hi = np.array([0.03, turn, 0.1, tz + 0.02, 0.2])
    best = None
    for below, above in ((0.03, 0.02), (0.05, 0.0), (0.02, 0.04)):
        y0 = np.clip(np.array([0.0, 0.0, max(width / 2.0, 0.01), tz - below, below + above]), lo + 1e-6, hi - 1e-6)
        try:
            r = least_squares(res, y0, bounds=(lo, hi), loss="soft_l1", f_scale=1.0, diff_step=1e-4, max_nfev=100,
                              ftol=1e-5, xtol=1e-5)
        except ValueError:
            continue
        if best is None or r.cost < best.cost:
            best = r
    if best is None:
        return None
    inliers = res(best.x) < 5.0
    seen = _residuals(full(best.x), "box", samples)  # the rms: of the edges seen, not the weak pull
    rms = float(np.sqrt(np.mean(seen[seen < 5.0] ** 2))) if (seen < 5.0).any() else math.inf
    j = np.asarray(best.jac)[inliers]
    cov = np.linalg.pinv(j.T @ j) * max(rms, 0.35) ** 2
    x = full(best.x)
    a, b, bottom, h = x[3], x[4], x[5], x[6]
    length, wid, heading = (2 * a, 2 * b, x[2]) if a >= b else (2 * b, 2 * a, x[2] + math.pi / 2)
    sig_xy = float(math.sqrt(max(cov[0, 0], 0.0)))
    sig_top = float(math.sqrt(max(cov[3, 3] + cov[4, 4] + 2 * cov[3, 4], 0.0)))
    return SolidFit("box", x[:2].copy(), float(heading % math.pi), float(length), float(wid), float(bottom),
                    float(bottom + h), rms, sig_xy, sig_top, _hidden_fraction(x, "box", samples),
                    unseen=_unseen(x, "box", samples))


def _samples(views: Sequence[View], shape: str, full: bool = False) -> list[tuple[FloatArray, View]]:
    """Points along each view's mask to contain: a cylinder takes the mask's own contour where the view has it
    (the hull's bridges beside a handle are no edge of the body; `full`: before a handle was cut off), a box the
    hull."""
    out = []
    for v in views:
        own = v.outline_full if full else v.outline
        poly = own if shape == "cylinder" and own is not None else v.hull
        out.append((_perimeter(poly, 2 * SAMPLES if poly is own else SAMPLES), v))
    return out


def _beside(x: FloatArray, cam: Camera, pts: FloatArray) -> np.ndarray:
    """Which outline points lie beside a fitted cylinder in this view (a handle) rather than above or below it
    along its projected axis. In views along the axis (from straight above) every point is beside it."""
    cx, cy, rad, s, h = x
    uv, d = cam.project(np.array([[cx, cy, s], [cx, cy, s + h]]))
    axis = uv[1] - uv[0]
    length = float(np.linalg.norm(axis))
    if length < 5.0 or np.any(d <= 1e-3):
        return np.ones(len(pts), bool)
    axis /= length
    r_px = cam.intrinsics.fx * rad / float(np.mean(d))
    lateral = np.abs((pts - uv[0]) @ np.array([-axis[1], axis[0]]))
    return lateral > 0.7 * r_px


def _start(
    shape: str,
    xy: FloatArray,
    s0: float,
    t0: float,
    heading: float,
    size: tuple[float, float],
    table_z: float,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    length, width = max(size[0], 0.01), max(size[1], 0.01)
    s0 = max(s0, table_z)
    h0 = max(t0 - s0, 0.005)
    if shape == "box":
        x0 = [xy[0], xy[1], heading, length / 2, width / 2, s0, h0]
        lo = [xy[0] - 0.1, xy[1] - 0.1, heading - math.pi, 0.002, 0.002, table_z - 0.005, 0.003]
        hi = [xy[0] + 0.1, xy[1] + 0.1, heading + math.pi, 0.2, 0.2, table_z + 0.6, 0.4]
    else:
        x0 = [xy[0], xy[1], math.sqrt(length * width) / 2, s0, h0]
        lo = [xy[0] - 0.1, xy[1] - 0.1, 0.002, table_z - 0.005, 0.003]
        hi = [xy[0] + 0.1, xy[1] + 0.1, 0.2, table_z + 0.6, 0.4]
    lo_a, hi_a = np.array(lo), np.array(hi)
    return np.clip(np.array(x0, float), lo_a + 1e-6, hi_a - 1e-6), lo_a, hi_a


def _solve(
    shape: str, samples: list[tuple[FloatArray, View]], x0: FloatArray, lo: FloatArray, hi: FloatArray, nfev: int
) -> Any:
    try:
        return least_squares(_residuals, np.clip(x0, lo + 1e-6, hi - 1e-6), bounds=(lo, hi), args=(shape, samples),
                             loss="soft_l1", f_scale=1.0, diff_step=1e-4, max_nfev=nfev, ftol=1e-5, xtol=1e-5)
    except ValueError:
        return None


def _result(shape: str, x: FloatArray, jac: FloatArray, samples: list[tuple[FloatArray, View]]) -> SolidFit:
    res = _residuals(x, shape, samples)
    inliers = res < 5.0  # points off by more are hidden parts of the silhouette (see `hidden_fraction`)
    rms = float(np.sqrt(np.mean(res[inliers] ** 2))) if inliers.any() else math.inf
    # Standard errors from the Jacobian of the points that are seen, the residual scale at least a third of a pixel.
    j = np.asarray(jac)[inliers]
    cov = np.linalg.pinv(j.T @ j) * max(rms, 0.35) ** 2
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    sig_xy = float(math.hypot(sd[0], sd[1]))
    if shape == "box":
        cx, cy, yaw, a, b, s, h = x
        if a >= b:
            length, width, heading = 2 * a, 2 * b, yaw
        else:
            length, width, heading = 2 * b, 2 * a, yaw + math.pi / 2
        t_var = cov[5, 5] + cov[6, 6] + 2 * cov[5, 6]
    else:
        cx, cy, rad, s, h = x
        length = width = 2 * rad
        heading = 0.0
        t_var = cov[3, 3] + cov[4, 4] + 2 * cov[3, 4]
    sxy, stop, sbot = _shift_sensitivity(shape, x, np.asarray(jac), res, inliers, samples)
    b_var = cov[5, 5] if shape == "box" else cov[3, 3]
    return SolidFit(shape, np.array([cx, cy]), float(heading % math.pi), float(length), float(width), float(s),
                    float(s + h), rms, sig_xy, float(math.sqrt(max(t_var, 0.0))), _hidden_fraction(x, shape, samples),
                    shift_xy=sxy, shift_top=stop, shift_bottom=sbot, sigma_bottom=float(math.sqrt(max(b_var, 0.0))),
                    unseen=_unseen(x, shape, samples))


def _shift_sensitivity(
    shape: str, x: FloatArray, jac: FloatArray, res: FloatArray, inliers: np.ndarray,
    samples: list[tuple[FloatArray, View]],
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Per view, how far the solution moves (xy, top, bottom; metres) when that view's image shifts by one pixel in
    u and in v (combined in quadrature): the linearised response of the robust least-squares fit, dx = -(J'J)^-1 J'
    dr, with `jac` the loss-scaled Jacobian at the solution and dr scaled alike (soft_l1: (1 + r^2)^-3/4)."""
    j = jac[inliers]
    try:
        hinv = np.linalg.pinv(j.T @ j)
    except np.linalg.LinAlgError:
        n = len(samples)
        return (0.0,) * n, (0.0,) * n, (0.0,) * n
    scale = (1.0 + res**2) ** -0.75
    top_i, bot_i = ((5, 6), 5) if shape == "box" else ((3, 4), 3)
    out_xy, out_top, out_bot = [], [], []
    for k, (pts, view) in enumerate(samples):
        moves = []
        for du, dv in ((1.0, 0.0), (0.0, 1.0)):
            kk = view.camera.intrinsics
            cam = Camera(view.camera.name, replace(kk, cx=kk.cx + du, cy=kk.cy + dv), view.camera.world_from_camera)
            shifted = list(samples)
            shifted[k] = (pts, replace(view, camera=cam))
            dr = (_residuals(x, shape, shifted) - res) * scale
            moves.append(-hinv @ (j.T @ dr[inliers]))
        out_xy.append(float(math.sqrt(sum(m[0] ** 2 + m[1] ** 2 for m in moves))))
        out_top.append(float(math.sqrt(sum((m[top_i[0]] + m[top_i[1]]) ** 2 for m in moves))))
        out_bot.append(float(math.sqrt(sum(m[bot_i] ** 2 for m in moves))))
    return tuple(out_xy), tuple(out_top), tuple(out_bot)


def _solid_points(x: FloatArray, shape: str) -> FloatArray:
    if shape == "box":
        cx, cy, yaw, a, b, s, h = x
        c, sn = math.cos(yaw), math.sin(yaw)
        local = np.array([[a, b], [a, -b], [-a, -b], [-a, b]])
        xy = local @ np.array([[c, sn], [-sn, c]]) + [cx, cy]
    else:
        cx, cy, rad, s, h = x
        ang = np.linspace(0.0, 2 * math.pi, CIRCLE, endpoint=False)
        xy = np.stack([cx + rad * np.cos(ang), cy + rad * np.sin(ang)], axis=-1)
    n = len(xy)
    return np.concatenate([np.column_stack([xy, np.full(n, s)]), np.column_stack([xy, np.full(n, s + h)])])


def _silhouette(x: FloatArray, shape: str, cam: Camera) -> FloatArray | None:
    uv, d = cam.project(_solid_points(x, shape))
    if np.any(d <= 1e-3):
        return None
    return cv2.convexHull(uv.astype(np.float32)).reshape(-1, 2).astype(float)


def _residuals(
    x: FloatArray, shape: str, samples: list[tuple[FloatArray, View]], pull: Sequence[float] | None = None
) -> FloatArray:
    """Containment and tightness residuals (px), view by view. `pull`: per view, the weight of a tightness where
    something may hide the edge (0: none, the default; HIDDEN_PULL), appended after the others for the views that
    pull."""
    out, pulls = [], []
    for i, (mask_pts, view) in enumerate(samples):
        weight = pull[i] if pull is not None else 0.0
        sil = _silhouette(x, shape, view.camera)
        if sil is None or len(sil) < 3:
            out.append(np.full(len(mask_pts) + SAMPLES, 50.0))
            if weight:
                pulls.append(np.zeros(SAMPLES))
            continue
        # Containment: the mask lies inside the silhouette. For a round body, mask points far outside it pull less
        # (a handle or spout the outline cut could not remove: `_cut_handle` needs two dents).
        d = np.maximum(_signed_distance(sil, mask_pts), 0.0)
        if shape == "cylinder":
            d = np.minimum(d, CONTAIN_SOFT_PX) + CONTAIN_SLOPE * np.maximum(d - CONTAIN_SOFT_PX, 0.0)
        out.append(3.0 * d)
        # Tightness: the silhouette lies inside the mask (where it is seen and in the image); weakly where something
        # may hide it, for a view that pulls.
        sil_pts = _perimeter(sil, SAMPLES)
        inside = _in_image(view, sil_pts)
        seen = _seen(view, sil_pts, inside)
        outside = _outside(view, sil_pts, shape)
        out.append(np.where(seen, outside, 0.0))
        if weight:
            pulls.append(np.where(inside & ~seen, weight * outside, 0.0))
    return np.concatenate(out + pulls)


def _in_image(view: View, pts: FloatArray) -> np.ndarray:
    """Which points lie inside the view's image (a pixel from its border)."""
    k = view.camera.intrinsics
    return (pts[:, 0] > 1) & (pts[:, 0] < k.width - 1) & (pts[:, 1] > 1) & (pts[:, 1] < k.height - 1)


def _seen(view: View, pts: FloatArray, inside: np.ndarray | None = None) -> np.ndarray:
    """Which silhouette points could show the object's edge: inside the image (`inside`, when already known) and not
    where something may hide it."""
    k = view.camera.intrinsics
    ok = (_in_image(view, pts) if inside is None else inside).copy()
    if view.occluded is not None:
        col = np.clip(pts[:, 0].astype(int), 0, k.width - 1)
        row = np.clip(pts[:, 1].astype(int), 0, k.height - 1)
        ok &= ~view.occluded[row, col]
    return ok


def _outside(view: View, pts: FloatArray, shape: str = "box", full: bool = False) -> FloatArray:
    """How far points lie outside the view's mask hull (px; 0 inside), bilinear in the precomputed map; for a
    cylinder outside the mask itself where the view has it (`full`: before a handle was cut off)."""
    if shape == "cylinder" and full and view.outside_full is not None:
        return np.maximum(_bilinear(view.outside_full, pts), 0.0)
    if shape == "cylinder" and view.outside_mask is not None:
        return np.maximum(_bilinear(view.outside_mask, pts), 0.0)
    if view.outside is None:
        return np.maximum(_signed_distance(view.hull, pts), 0.0)
    return _bilinear(view.outside, pts)


def _bilinear(m: np.ndarray, pts: FloatArray) -> FloatArray:
    """A per-pixel map sampled at image points (pixel centres at +0.5), bilinear."""
    h, w = m.shape
    x = np.clip(pts[:, 0] - 0.5, 0.0, w - 1.001)
    y = np.clip(pts[:, 1] - 0.5, 0.0, h - 1.001)
    x0, y0 = x.astype(int), y.astype(int)
    fx, fy = x - x0, y - y0
    top = m[y0, x0] * (1 - fx) + m[y0, x0 + 1] * fx
    bottom = m[y0 + 1, x0] * (1 - fx) + m[y0 + 1, x0 + 1] * fx
    return (top * (1 - fy) + bottom * fy).astype(float)


def _hidden_fraction(x: FloatArray, shape: str, samples: list[tuple[FloatArray, View]]) -> float:
    off, total = 0, 0
    for _, view in samples:
        sil = _silhouette(x, shape, view.camera)
        if sil is None:
            continue
        pts = _perimeter(sil, SAMPLES)
        seen = _seen(view, pts)
        off += int(np.sum(_outside(view, pts[seen], shape) > 3.0))
        total += int(seen.sum())
    return off / total if total else 0.0


def _unseen(x: FloatArray, shape: str, samples: list[tuple[FloatArray, View]]) -> tuple[float, ...]:
    """Per view, the share of the solid's silhouette edge inside the image where something may hide it."""
    out = []
    for _, view in samples:
        sil = _silhouette(x, shape, view.camera)
        if sil is None or len(sil) < 3:
            out.append(1.0)
            continue
        pts = _perimeter(sil, SAMPLES)
        inside = _in_image(view, pts)
        out.append(float(np.sum(inside & ~_seen(view, pts, inside)) / max(int(inside.sum()), 1)))
    return tuple(out)


def _perimeter(poly: FloatArray, n: int) -> FloatArray:
    """n points evenly spaced along a closed polygon."""
    closed = np.vstack([poly, poly[:1]])
    seg = np.diff(closed, axis=0)
    lens = np.hypot(seg[:, 0], seg[:, 1])
    cum = np.concatenate([[0.0], np.cumsum(lens)])
    if cum[-1] <= 0:
        return np.repeat(poly[:1], n, axis=0)
    t = np.linspace(0.0, cum[-1], n, endpoint=False)
    i = np.clip(np.searchsorted(cum, t, side="right") - 1, 0, len(seg) - 1)
    f = (t - cum[i]) / np.maximum(lens[i], 1e-12)
    return closed[i] + f[:, None] * seg[i]


def _signed_distance(poly: FloatArray, pts: FloatArray) -> FloatArray:
    """Distance of points to a convex polygon's boundary: positive outside, negative inside."""
    a = poly
    b = np.roll(poly, -1, axis=0)
    ab = b - a  # (k, 2)
    ap = pts[:, None, :] - a[None, :, :]  # (n, k, 2)
    t = np.clip((ap * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-12), 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    dist = np.hypot(*(pts[:, None, :] - closest).transpose(2, 0, 1)).min(axis=1)
    cross = ab[None, :, 0] * ap[..., 1] - ab[None, :, 1] * ap[..., 0]
    # Convex polygon: inside when on the same side of every edge (either orientation).
    inside = np.all(cross >= 0, axis=1) | np.all(cross <= 0, axis=1)
    return np.where(inside, -dist, dist)
