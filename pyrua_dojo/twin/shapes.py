"""Shape builders: hollow and holed MuJoCo bodies made of primitive geoms, for RoboDojo assets we cannot have.

MuJoCo collides meshes as their convex hulls, so anything with an opening (a cup, a vase, a rack hole, a slot, a
nut's bore) is assembled from boxes and cylinders: a ring of wall staves, a plate with rectangular holes, a hollow
box with a slot in its lid. Every builder returns `Part`s in the object frame; the callers in `objects_precision.py`
choose the dimensions and say why next to each object.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyrua_dojo.twin.objects import Part, Rgba, Vec3


def _zquat(angle: float) -> tuple[float, float, float, float]:
    return (math.cos(angle / 2.0), 0.0, 0.0, math.sin(angle / 2.0))


def zy_quat(yaw: float, tilt: float) -> tuple[float, float, float, float]:
    """Rotation by `tilt` about local y, then `yaw` about z (a stave leaning outward at azimuth yaw)."""
    cy, sy = math.cos(yaw / 2.0), math.sin(yaw / 2.0)
    ct, st = math.cos(tilt / 2.0), math.sin(tilt / 2.0)
    return (cy * ct, -sy * st, cy * st, sy * ct)


def staves(n: int, r_mid: float, half: Vec3, zc: float = 0.0, lean: float = 0.0, rgba: Rgba | None = None,
           centre: tuple[float, float] = (0.0, 0.0), phase: float = 0.0) -> tuple[Part, ...]:
    """A round wall of `n` boxes (half extents `half`: thickness, width, height) evenly spaced about the z axis
    through `centre`, their centres `r_mid` from it at height `zc`, each facing the axis; `lean` (rad) tilts each
    outward about its own y (a flared wall, a bowl's)."""
    parts = []
    for i in range(n):
        a = phase + 2.0 * math.pi * i / n
        quat = _zquat(a) if lean == 0.0 else zy_quat(a, lean)
        parts.append(Part("box", half, pos=(centre[0] + r_mid * math.cos(a), centre[1] + r_mid * math.sin(a), zc),
                          quat=quat, rgba=rgba))
    return tuple(parts)


def ring(inner: float, outer: float, z0: float, z1: float, n: int = 16, rgba: Rgba | None = None,
         centre: tuple[float, float] = (0.0, 0.0), phase: float = 0.0) -> tuple[Part, ...]:
    """A polygonal tube: `n` wall boxes whose inner faces are `inner` from the axis (the inscribed radius of the
    bore) and outer faces `outer`, between heights z0 and z1. Adjacent boxes overlap at the corners, so there is no
    gap for a ball or a peg to slip through. n = 6 gives a hex nut."""
    if not 0.0 < inner < outer:
        raise ValueError(f"need 0 < inner < outer, got {inner}, {outer}")
    half_w = outer * math.tan(math.pi / n)  # reaches the outer corners of the polygon
    return staves(n, (inner + outer) / 2.0, ((outer - inner) / 2.0, half_w, (z1 - z0) / 2.0), (z0 + z1) / 2.0,
                  rgba=rgba, centre=centre, phase=phase)


def plate_with_holes(half_x: float, half_y: float, z0: float, z1: float,
                     holes: Sequence[tuple[float, float, float, float]], rgba: Rgba | None = None) -> tuple[Part, ...]:
    """A rectangular plate (|x| <= half_x, |y| <= half_y, z0..z1) with rectangular through-holes, each given as
    (centre x, centre y, half width x, half width y): the solid part cut into the fewest boxes of a grid along the
    hole edges (cells merged along x)."""
    xs = sorted({-half_x, half_x, *(c - h for c, _, h, _ in holes), *(c + h for c, _, h, _ in holes)})
    ys = sorted({-half_y, half_y, *(c - h for _, c, _, h in holes), *(c + h for _, c, _, h in holes)})
    for cx, cy, hx, hy in holes:
        if abs(cx) + hx > half_x + 1e-12 or abs(cy) + hy > half_y + 1e-12:
            raise ValueError(f"hole at ({cx}, {cy}) does not fit in the plate")

    def solid(x0: float, x1: float, y0: float, y1: float) -> bool:
        mx, my = (x0 + x1) / 2.0, (y0 + y1) / 2.0
        return not any(abs(mx - cx) < hx and abs(my - cy) < hy for cx, cy, hx, hy in holes)

    parts = []
    hz, zc = (z1 - z0) / 2.0, (z0 + z1) / 2.0
    for j in range(len(ys) - 1):
        y0, y1 = ys[j], ys[j + 1]
        flags = [solid(xs[i], xs[i + 1], y0, y1) for i in range(len(xs) - 1)]
        i = 0
        while i < len(flags):
            if not flags[i]:
                i += 1
                continue
            k = i
            while k + 1 < len(flags) and flags[k + 1]:
                k += 1
            x0, x1 = xs[i], xs[k + 1]
            parts.append(Part("box", ((x1 - x0) / 2.0, (y1 - y0) / 2.0, hz),
                              pos=((x0 + x1) / 2.0, (y0 + y1) / 2.0, zc), rgba=rgba))
            i = k + 1
    return tuple(parts)


def hollow_box(half: Vec3, wall: float, floor: float, lid: float | None,
               lid_holes: Sequence[tuple[float, float, float, float]] = (), rgba: Rgba | None = None) -> tuple[Part, ...]:
    """A box of outer half extents `half` centred on the origin: a floor, four walls and (unless lid is None) a lid
    of thickness `lid` with rectangular holes (as `plate_with_holes`)."""
    hx, hy, hz = half
    parts = [Part("box", (hx, hy, floor / 2.0), pos=(0.0, 0.0, -hz + floor / 2.0), rgba=rgba)]
    top = hz - (lid or 0.0)
    wz0, wz1 = -hz + floor, top
    whz, wzc = (wz1 - wz0) / 2.0, (wz0 + wz1) / 2.0
    parts += [
        Part("box", (wall / 2.0, hy, whz), pos=(hx - wall / 2.0, 0.0, wzc), rgba=rgba),
        Part("box", (wall / 2.0, hy, whz), pos=(-hx + wall / 2.0, 0.0, wzc), rgba=rgba),
        Part("box", (hx - wall, wall / 2.0, whz), pos=(0.0, hy - wall / 2.0, wzc), rgba=rgba),
        Part("box", (hx - wall, wall / 2.0, whz), pos=(0.0, -hy + wall / 2.0, wzc), rgba=rgba),
    ]
    if lid is not None:
        parts += list(plate_with_holes(hx, hy, top, hz, lid_holes, rgba=rgba))
    return tuple(parts)


def t_shape(bar: Vec3, stem: Vec3, rgba: Rgba | None = None) -> tuple[tuple[Part, ...], Vec3, Vec3]:
    """A T of two boxes lying flat: the bar (half extents `bar`) across the top along x, the stem (half extents
    `stem`) below it along -y, both of the same thickness. Returns (parts, half extents of the bbox, centre of
    mass), with the origin at the bbox centre (RoboDojo's root)."""
    if abs(bar[2] - stem[2]) > 1e-12:
        raise ValueError("bar and stem must have the same thickness")
    total_y = 2.0 * bar[1] + 2.0 * stem[1]
    half = (max(bar[0], stem[0]), total_y / 2.0, bar[2])
    bar_y = half[1] - bar[1]
    stem_y = -half[1] + stem[1]
    parts = (Part("box", bar, pos=(0.0, bar_y, 0.0), rgba=rgba), Part("box", stem, pos=(0.0, stem_y, 0.0), rgba=rgba))
    a_bar, a_stem = bar[0] * bar[1], stem[0] * stem[1]
    com_y = (a_bar * bar_y + a_stem * stem_y) / (a_bar + a_stem)
    return parts, half, (0.0, com_y, 0.0)
