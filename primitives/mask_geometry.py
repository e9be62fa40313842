"""Mask geometry: segmentation masks' outlines and pixels turned into world geometry, and the table-plane estimates
of `locate` built from them (no depth needed beyond the pixels' own, no solid fit: see `primitives.solid_fit`).

`mask_outline` (sub-pixel outline), `mask_ray` (the camera ray through a mask), `closest_point` (of several rays),
`table_profile` (an outline cast on the table plane around the camera's foot point) and the estimates:

- "depth": the mask's depth pixels are back-projected; table and background points are dropped; the top is a
  high percentile of z, the top centre the centre of the top-surface points, the footprint the minimum-area
  rectangle of all points.
- "head+wrist" (no depth): every camera that sees the object contributes the *near* boundary of its mask cast
  onto the table plane: seen from a camera above, the silhouette's side toward the camera's foot point is the
  object's bottom edge, which lies on the table (exact for upright prisms; parts hidden behind a finger or
  another object are recognised as dents in the convex cast and dropped). The height comes from the
  silhouette's two sides: a vertical edge (box corner, cylinder side) casts as a radial segment whose top is
  k = H / (H - h) times as far from the camera's foot as its bottom (H: camera above the table), which the
  wrist camera placed by `look_at` resolves to about half a millimetre; both sides must agree. Where they do
  not (rounded objects), the far boundary (the top's far edge, cast k times as far as the footprint's far
  edge) against the footprint gives it. Estimates are weighted by their pixel footprints. The footprint's
  hidden back is closed by the symmetric prior below unless the cameras see the object from sides more than
  100 deg apart. Why not a plane sweep: the overlap of two projected masks is flat over the object's height
  range for cameras on one side, and triangulating the shared far edge is ill-conditioned for the look_at
  geometry (the epipolar lines run along that edge).
- "head" (one camera, no depth): the same near boundary, closed by a symmetric-footprint prior (the hidden half
  is the visible half mirrored through the midpoint of the two tangent points; a straight near edge, one face
  seen, is taken as a square's), and the height as above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np

from calibration import Camera
from calibration.transforms import FloatArray


class Tuning(Protocol):
    """The settings these estimates read (`primitives.perception.LocateConfig` has them)."""

    @property
    def bins(self) -> int: ...

    @property
    def min_bin_points(self) -> int: ...

    @property
    def depth_table_margin_m(self) -> float: ...

    @property
    def depth_cell_m(self) -> float: ...

    @property
    def depth_top_percentile(self) -> float: ...

    @property
    def depth_top_band_m(self) -> float: ...

    @property
    def straight_ratio(self) -> float: ...

    @property
    def prior_error_m(self) -> float: ...


@dataclass(frozen=True, eq=False)
class Profile:
    """One camera's mask outline cast on the table plane, in polar coordinates around the camera's foot point."""

    camera: str
    foot: FloatArray  # (2,) the camera's foot point on the table plane
    height: float  # camera above the table plane
    theta: FloatArray  # (n,) angles of the farthest outline point per bin
    near: FloatArray  # (m, 2) tangent point, nearest outline point per bin, tangent point (the bottom edge)
    far_r: FloatArray  # (n,) farthest outline distance per bin (the top's far edge cast on the table)
    near_sigma: FloatArray  # (m,) radial size of half a pixel at the near points, metres
    far_sigma: FloatArray  # (n,) the same at the far points
    hidden: int  # outline samples dropped as hidden behind something in front
    sides: tuple[tuple[float, float, float, float], ...]  # per silhouette side: r bottom, r top, their errors


@dataclass(frozen=True, eq=False)
class Estimate:
    """A measurement of one object: top centre xy, height above the table, footprint, heading, notes."""

    xy: FloatArray
    height: float
    length: float
    width: float
    heading: float
    notes: str
    sigma_xy: float = 0.0  # one standard error of the top centre's xy, metres (0: not estimated)
    sigma_top: float = 0.0  # the same for the top height


# ---------------------------------------------------------------------------------------------------- rays


def mask_ray(cam: Camera, mask: np.ndarray) -> tuple[FloatArray, FloatArray]:
    """The camera's ray through the mask's centroid (origin, unit direction)."""
    rows, cols = np.nonzero(mask)
    origin, d = cam.pixel_rays(np.array([cols.mean() + 0.5, rows.mean() + 0.5]))
    return origin, d


def closest_point(rays: Sequence[tuple[FloatArray, FloatArray]]) -> FloatArray | None:
    """The point nearest to all rays in the least-squares sense (None when they are parallel)."""
    a = np.zeros((3, 3))
    b = np.zeros(3)
    for o, d in rays:
        p = np.eye(3) - np.outer(d, d)
        a += p
        b += p @ o
    if np.linalg.cond(a) > 1e6:
        return None
    return np.linalg.solve(a, b)


# ---------------------------------------------------------------------------------------------------- depth


#: A depth cloud thinner than this across (m) is one face seen edge-on or a side face alone, not a footprint.
SIDE_ONLY_M = 0.004
SIDE_ONLY_NOTE = "only a side face seen (its points lie in one plane): the top and the centre are not seen"


def depth_estimate(
    cfg: Tuning, views: Sequence[tuple[Camera, np.ndarray, np.ndarray]], table_z: float, max_z: float | None = None
) -> Estimate | None:
    """Top centre, footprint and height from the depth pixels of the masks (see the module docstring); points above
    `max_z`, when given, are left out (a holding gripper's own)."""
    clouds = []
    for cam, mask, depth in views:
        rows, cols = np.nonzero(mask)
        d = depth[rows, cols].astype(float)
        ok = np.isfinite(d) & (d > 0)
        if not ok.any():
            continue
        px = np.stack([cols[ok] + 0.5, rows[ok] + 0.5], axis=-1)
        clouds.append(cam.deproject(px, d[ok]))
    if not clouds:
        return None
    pts = np.concatenate(clouds)
    pts = pts[pts[:, 2] > table_z + cfg.depth_table_margin_m]
    if max_z is not None:
        pts = pts[pts[:, 2] <= max_z]
    if len(pts) < 4:
        return None
    pts = _largest_cluster(pts, cfg.depth_cell_m)
    z = pts[:, 2]
    top = float(np.percentile(z, cfg.depth_top_percentile))
    height = top - table_z
    band = max(cfg.depth_top_band_m, 0.1 * (top - float(z.min())))  # of the object's own extent (it may be lifted)
    top_pts = pts[z >= top - band]
    (cx, cy), (tw, th), _ = cv2.minAreaRect(top_pts[:, :2].astype(np.float32))
    (fx, fy), (w, h), angle = cv2.minAreaRect(pts[:, :2].astype(np.float32))
    length, width, heading = rect_sides(w, h, angle)
    note = f"{len(pts)} depth points"
    seen_top = min(tw, th)
    sigma = 0.0
    if width < SIDE_ONLY_M:
        # The points lie in one vertical plane: only a side face is seen (an arm hides the rest), not the top. Its
        # highest points may lie below the top, its centre anywhere behind it (25 mm off for a block beside a gripper).
        extent = float(z.max() - z.min())
        note += "; " + SIDE_ONLY_NOTE
        return Estimate(np.array([cx, cy]), height, length, width, heading, note,
                        sigma_xy=max(0.01, length / 2.0), sigma_top=max(0.005, extent / 2.0))
    if seen_top < 0.6 * width:
        # Only a strip of the top is seen (fingers or a gripper over it): its centre may be off by the unseen part.
        sigma = max(0.0015, (width - seen_top) / 2.0)
        note += f"; only a {1000 * seen_top:.0f} mm strip of its {1000 * width:.0f} mm top seen: centre less sure"
    return Estimate(np.array([cx, cy]), height, length, width, heading, note, sigma_xy=sigma,
                     sigma_top=0.0015 if sigma else 0.0)


def _largest_cluster(pts: FloatArray, cell: float) -> FloatArray:
    """The points of the largest 8-connected group of occupied xy grid cells (drops background bits)."""
    lo = pts[:, :2].min(axis=0)
    ij = np.floor((pts[:, :2] - lo) / cell).astype(int)
    shape = ij.max(axis=0) + 1
    if shape[0] * shape[1] > 4_000_000:
        return pts
    grid = np.zeros((int(shape[1]), int(shape[0])), np.uint8)
    grid[ij[:, 1], ij[:, 0]] = 1
    n, labels = cv2.connectedComponents(grid, connectivity=8)
    if n <= 2:
        return pts
    lab = labels[ij[:, 1], ij[:, 0]]
    counts = np.bincount(lab)
    counts[0] = 0
    return pts[lab == int(np.argmax(counts))]


def rect_sides(w: float, h: float, angle_deg: float) -> tuple[float, float, float]:
    """OpenCV minAreaRect (w, h, angle) -> (length, width, heading of the long side in [0, pi))."""
    a = math.radians(angle_deg)
    if w >= h:
        length, width, heading = w, h, a
    else:
        length, width, heading = h, w, a + math.pi / 2
    return float(length), float(width), float(heading % math.pi)


# ---------------------------------------------------------------------------------------------------- masks


def mask_outline(mask: np.ndarray) -> FloatArray:
    """Sub-pixel outline of a mask: (u, v) midpoints between 4-adjacent inside/outside pixel centres, (n, 2).

    For a mask rendered by point sampling at pixel centres the true edge lies between such a pair, so the
    midpoint is an unbiased estimate of where the outline crosses that pixel pair.
    """
    m = np.asarray(mask, dtype=bool)
    r, c = np.nonzero(m[:, :-1] != m[:, 1:])
    horiz = np.stack([c + 1.0, r + 0.5], axis=-1)
    r, c = np.nonzero(m[:-1, :] != m[1:, :])
    vert = np.stack([c + 0.5, r + 1.0], axis=-1)
    return np.concatenate([horiz, vert]).astype(float)


def table_profile(cfg: Tuning, cam: Camera, mask: np.ndarray, table_z: float) -> Profile | None:
    """Cast a mask's outline on the table and bin it by angle around the camera's foot point."""
    height = float(cam.position[2] - table_z)
    if height <= 0.02:
        return None
    uv = mask_outline(mask)
    if len(uv) < 8:
        return None
    pts = cam.intersect_plane_z(uv, table_z)
    ok = np.all(np.isfinite(pts), axis=1)
    pts, uv = pts[ok, :2], uv[ok]
    if len(pts) < 8:
        return None
    foot = cam.position[:2].astype(float)
    rel = pts - foot
    r = np.hypot(rel[:, 0], rel[:, 1])
    ang = np.arctan2(rel[:, 1], rel[:, 0])
    mid = math.atan2(float(np.mean(np.sin(ang))), float(np.mean(np.cos(ang))))
    ang = (ang - mid + math.pi) % (2 * math.pi) - math.pi
    lo, hi = float(ang.min()), float(ang.max())
    # About three pixel columns per bin, so that every bin holds a sample of the near edge.
    cols = np.nonzero(np.asarray(mask, dtype=bool).any(axis=0))[0]
    n_bins = max(4, min(cfg.bins, int(cols[-1] - cols[0] + 1) // 3))
    edges = np.linspace(lo, hi + 1e-12, n_bins + 1)
    idx = np.clip(np.searchsorted(edges, ang, side="right") - 1, 0, n_bins - 1)
    # Radial size of half a pixel at distance r on the table: slant^2 / (H f) / 2.
    f = cam.intrinsics.fx
    half_px = (height**2 + r**2) / (height * f) / 2.0
    theta, near, far_r, s_near, s_far = [], [], [], [], []
    # The tangent points: the nearest outline points within a pixel of either angular end (a vertical edge at
    # the silhouette's side casts radially, so its nearest point is the bottom corner).
    tol = 2.0 * half_px / np.maximum(r, 1e-6)
    ends = [np.nonzero(ang <= lo + tol)[0], np.nonzero(ang >= hi - tol)[0]]
    first, last = (sel[int(np.argmin(r[sel]))] for sel in ends)
    for b in range(n_bins):
        sel = np.nonzero(idx == b)[0]
        if len(sel) < cfg.min_bin_points:
            continue
        i_near = sel[int(np.argmin(r[sel]))]
        i_far = sel[int(np.argmax(r[sel]))]
        theta.append(float(ang[i_far]) + mid)
        near.append(pts[i_near])
        far_r.append(float(r[i_far]))
        s_near.append(float(half_px[i_near]))
        s_far.append(float(half_px[i_far]))
    # Along the near edge the nearest sample sits up to a pixel inside the corner; the silhouette's side (a
    # vertical edge casts along a ray from the foot point) gives the corner's angle exactly.
    # The silhouette's sides: a vertical edge (box corner, cylinder side) casts as a radial segment from its
    # bottom (nearest) to its top (farthest) point, k = H / (H - h) times as far: a height measurement.
    sides = []
    for sel in ends:
        i_top = sel[int(np.argmax(r[sel]))]
        i_bot = sel[int(np.argmin(r[sel]))]
        sides.append((float(r[i_bot]), float(r[i_top]), float(half_px[i_bot]), float(half_px[i_top])))
    t_first = foot + r[first] * np.array([math.cos(lo + mid), math.sin(lo + mid)])
    t_last = foot + r[last] * np.array([math.cos(hi + mid), math.sin(hi + mid)])
    near_pts = np.array([t_first, *near, t_last])
    near_sig = np.array([half_px[first], *s_near, half_px[last]])
    far_pts = foot + np.array(far_r)[:, None] * np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    # A convex object casts a convex region; outline points well inside its hull are where something in front
    # hides part of the object (a finger, another object), so they say nothing about the object's edges.
    hull = cv2.convexHull(pts.astype(np.float32))
    keep_near = _on_hull(hull, near_pts, 2.0 * near_sig + 0.001)
    keep_far = _on_hull(hull, far_pts, 2.0 * np.array(s_far) + 0.001)
    if keep_near.sum() < 3 or keep_far.sum() < 2:
        return None
    return Profile(
        cam.name,
        foot,
        height,
        np.array(theta)[keep_far],
        near_pts[keep_near],
        np.array(far_r)[keep_far],
        near_sig[keep_near],
        np.array(s_far)[keep_far],
        int(len(keep_near) - keep_near.sum() + len(keep_far) - keep_far.sum()),
        tuple(sides),
    )


def _on_hull(hull: np.ndarray, pts: FloatArray, tol: FloatArray) -> np.ndarray:
    """Which points lie within `tol` of the boundary of a convex polygon (or outside it)."""
    inside = np.array([cv2.pointPolygonTest(hull, (float(x), float(y)), True) for x, y in pts])
    return inside <= tol


def outline_estimate(cfg: Tuning, profiles: Sequence[Profile]) -> Estimate | None:
    """Footprint from the near boundaries (closed by the symmetric prior when needed), height from the far ones."""
    pts = np.concatenate([p.near for p in profiles])
    sig = np.concatenate([p.near_sigma for p in profiles])
    notes = []
    if len(profiles) == 1 or not _surrounds(profiles, pts):
        best = max(profiles, key=lambda p: len(p.theta))
        extra, extra_sig, note = _symmetric_closure(cfg, best)
        pts = np.concatenate([pts, extra])
        sig = np.concatenate([sig, extra_sig])
        notes.append(note)
    rect = cv2.minAreaRect(pts.astype(np.float32))
    (cx, cy), (w, h), angle = rect
    length, width, heading = rect_sides(w, h, angle)
    hull = cv2.convexHull(pts.astype(np.float32)).reshape(-1, 2).astype(float)
    hs, ws = [], []
    for p in profiles:
        for th, far_r, s_far in zip(p.theta, p.far_r, p.far_sigma):
            r_far = _ray_exit(hull, p.foot, th)
            if r_far is None or far_r <= r_far:
                continue
            h = p.height * (1.0 - r_far / far_r)
            # Which footprint point sets r_far: its own half-pixel error counts too.
            q = p.foot + r_far * np.array([math.cos(th), math.sin(th)])
            s_src = float(sig[int(np.argmin(np.hypot(*(pts - q).T)))])
            dh_dR = p.height * r_far / far_r**2
            dh_dr = p.height / far_r
            var = (dh_dR * s_far) ** 2 + (dh_dr * s_src) ** 2
            hs.append(h)
            ws.append(1.0 / max(var, 1e-12))
    # Side edges: both sides of one camera must agree (a rounded object's sides are no vertical edges).
    for p in profiles:
        side_h = []
        for r_bot, r_top, s_bot, s_top in p.sides:
            if r_top <= r_bot:
                break
            h = p.height * (1.0 - r_bot / r_top)
            var = (p.height * r_bot / r_top**2 * s_top) ** 2 + (p.height / r_top * s_bot) ** 2
            side_h.append((h, var))
        if len(side_h) == 2 and min(h for h, _ in side_h) > 0.004:
            (h1, v1), (h2, v2) = side_h
            if abs(h1 - h2) <= max(3.0 * math.sqrt(v1 + v2), 0.1 * max(h1, h2)):
                hs += [h1, h2]
                ws += [1.0 / max(v1, 1e-12) * len(p.theta) / 2, 1.0 / max(v2, 1e-12) * len(p.theta) / 2]
    if not hs:
        return None
    height = _weighted_median(np.array(hs), np.array(ws))
    notes.insert(0, "from the mask outlines of " + ", ".join(p.camera for p in profiles)
                 + ", assuming it stands on the table (if it rests on something, look_at it with a wrist camera)")
    hidden = [p.camera for p in profiles if p.hidden >= 4]  # a few samples off the hull are pixel noise
    if hidden:
        notes.append("partly hidden by something in front in " + ", ".join(hidden)
                     + ": the hidden part is guessed, uncertainty raised")
    return Estimate(np.array([cx, cy]), max(0.0, height), length, width, heading, "; ".join(notes))


def _surrounds(profiles: Sequence[Profile], pts: FloatArray) -> bool:
    """Whether the cameras see the object from sides far enough apart to close its footprint (> 100 deg)."""
    c = pts.mean(axis=0)
    dirs = [math.atan2(*(p.foot - c)[::-1]) for p in profiles]
    spread = 0.0
    for a in dirs:
        for b in dirs:
            spread = max(spread, abs((a - b + math.pi) % (2 * math.pi) - math.pi))
    return spread > math.radians(100.0)


def _symmetric_closure(cfg: Tuning, p: Profile) -> tuple[FloatArray, FloatArray, str]:
    """The hidden far half of the footprint under the symmetric-footprint prior (points and their errors)."""
    t1, t2 = p.near[0], p.near[-1]
    chord = t2 - t1
    length = float(np.hypot(*chord))
    if length < 1e-6:
        return p.near.copy(), p.near_sigma.copy(), "symmetric-footprint prior"
    circle = _fit_circle(p.near)
    if circle is not None:
        centre, radius, rms = circle
        if rms < max(0.0008, 0.03 * radius) and abs(radius - length / 2) < 0.25 * radius:
            # A round footprint (its near boundary is an arc): its centre is the arc's, exactly; the tangent
            # points' midpoint would sit radius^2 / D nearer the camera.
            angles = np.linspace(0.0, 2.0 * math.pi, 36, endpoint=False)
            ring = centre + radius * np.stack([np.cos(angles), np.sin(angles)], axis=-1)
            s = float(np.max(p.near_sigma)) + cfg.prior_error_m
            return ring, np.full(len(ring), s), "round footprint: the visible arc's circle (symmetric-footprint prior)"
    normal = np.array([-chord[1], chord[0]]) / length
    mid = (t1 + t2) / 2.0
    if float(np.dot(mid - p.foot, normal)) < 0:
        normal = -normal  # pointing away from the camera
    sagitta = float(np.max(np.abs((p.near - t1) @ normal)))
    if sagitta < cfg.straight_ratio * length:
        extra = np.array([t1 + normal * length, t2 + normal * length])
        s = float(np.max(p.near_sigma)) + cfg.prior_error_m
        return extra, np.array([s, s]), "one face seen: assumed as deep as it is wide (square-footprint prior)"
    return (
        2.0 * mid - p.near,
        p.near_sigma + cfg.prior_error_m,
        "hidden half assumed symmetric to the visible one through the tangent points' midpoint "
        "(symmetric-footprint prior)",
    )


def _fit_circle(pts: FloatArray) -> tuple[FloatArray, float, float] | None:
    """Least-squares circle through points (centre, radius, rms distance), None when degenerate."""
    if len(pts) < 5:
        return None
    c0 = pts.mean(axis=0)
    q = pts - c0
    a = np.column_stack([2.0 * q, np.ones(len(q))])
    b = (q**2).sum(axis=1)
    sol, *_ = np.linalg.lstsq(a, b, rcond=None)
    centre = sol[:2]
    r2 = float(sol[2] + centre @ centre)
    if r2 <= 0:
        return None
    radius = math.sqrt(r2)
    rms = float(np.sqrt(np.mean((np.hypot(*(q - centre).T) - radius) ** 2)))
    return centre + c0, radius, rms


def _ray_exit(hull: FloatArray, origin: FloatArray, theta: float) -> float | None:
    """Distance from `origin` along direction theta to where the ray leaves a convex polygon (None: misses)."""
    d = np.array([math.cos(theta), math.sin(theta)])
    best = None
    n = len(hull)
    for i in range(n):
        a, b = hull[i], hull[(i + 1) % n]
        e = b - a
        den = d[0] * (-e[1]) - d[1] * (-e[0])
        if abs(den) < 1e-15:
            continue
        rhs = a - origin
        t = (rhs[0] * (-e[1]) - rhs[1] * (-e[0])) / den
        s = (d[0] * rhs[1] - d[1] * rhs[0]) / den
        if -1e-9 <= s <= 1 + 1e-9 and t > 0 and (best is None or t > best):
            best = float(t)
    return best


def _weighted_median(values: FloatArray, weights: FloatArray) -> float:
    order = np.argsort(values)
    v, w = values[order], weights[order]
    c = np.cumsum(w)
    return float(v[int(np.searchsorted(c, 0.5 * c[-1]))])
