"""Twin assets of the tool tasks: a dustpan with a lip, a hand broom and the things to sweep (sweep_blocks and its
`_random` variant), and a toolbox with a foam insert and four tools (store_tools_in_toolbox).

RoboDojo's meshes (and their metadata: sizes, functional and support points) are not published, so each object
is built from primitives with the features its success check reads: the bbox (root = bbox centre, as everywhere in
the twin), the axis the check wants up, and the named points (`NamedPoint`) the check reads. Every dimension below
is ours; the comment next to each object says what fixed it. Geometry is first written in a "raw" frame (z = 0 on
the table) and then shifted so that the origin is the bbox centre. No object's words contain another object's name
(the segmentation stand-in matches prompts by words).
"""

from __future__ import annotations

import math

from pyrua_dojo.twin.objects import (
    Appearance,
    NamedPoint,
    ObjectSpec,
    Part,
    Vec3,
    _rgba,
)
from pyrua_dojo.twin.shapes import hollow_box, plate_with_holes

Box = tuple[tuple[float, float], tuple[float, float], tuple[float, float]]  # (x0, x1), (y0, y1), (z0, z1), raw frame


def _centre(boxes: list[Box]) -> tuple[Vec3, Vec3]:
    """Centre and half extents of the raw boxes' common bounding box."""
    lo = [min(b[i][0] for b in boxes) for i in range(3)]
    hi = [max(b[i][1] for b in boxes) for i in range(3)]
    c = tuple((a + b) / 2.0 for a, b in zip(lo, hi))
    h = tuple((b - a) / 2.0 for a, b in zip(lo, hi))
    return c, h  # type: ignore[return-value]


def _box_part(b: Box, c: Vec3, rgba: tuple[float, float, float, float] | None = None, collide: bool = True) -> Part:
    (x0, x1), (y0, y1), (z0, z1) = b
    return Part("box", ((x1 - x0) / 2, (y1 - y0) / 2, (z1 - z0) / 2),
                pos=((x0 + x1) / 2 - c[0], (y0 + y1) / 2 - c[1], (z0 + z1) / 2 - c[2]), rgba=rgba, collide=collide)


def _shift(p: Vec3, c: Vec3) -> Vec3:
    return (p[0] - c[0], p[1] - c[1], p[2] - c[2])


# ---------------------------------------------------------------------------------------------- sweep_blocks
# The dustpan (`broom_shovel`): a 12 x 16 cm pan (inside), 3 mm floor, 2.7 cm side walls, a 4 cm back wall and a
# flat 8.6 cm handle on top of the back wall. Its mouth faces local -x, so upstream's yaw range [135, 225] deg
# turns it towards +x, where the things to sweep lie. The lip is a 3 cm wedge rising from a knife edge on the
# table to the floor's top (a 5.7 deg ramp): something pushed against it climbs into the pan; the pan itself rests
# flat. Named points (upstream's metadata is unpublished): the support circle `broom_shovel/0` at the floor's
# centre with radius 6 cm (the inscribed circle of the floor), and the four functional points `handle` at the
# inner floor's corners - upstream's check accepts the cubes inside either, and a rectangle is what covers a pan
# whose cubes are pushed into its corners (the tag name is upstream's).

PAN_INNER = (0.06, 0.08)  # half depth (x), half width (y) of the floor inside the walls
PAN_FLOOR = 0.003
PAN_WALL = 0.004
PAN_LIP = 0.03  # length of the wedge in front of the floor
PAN_SIDE_H = 0.027
PAN_BACK_H = 0.04
PAN_HANDLE = (0.086, 0.012, 0.012)  # length, half width, thickness
DUSTPAN_LOOKS: dict[int, tuple[str, str]] = {0: ("blue", "#2f62c8"), 1: ("red", "#c83a2f"), 4: ("green", "#3a9a4a")}


def dustpan(model_id: int) -> ObjectSpec:
    """RoboDojo's `broom_shovel[i]` (indices 0, 1, 4): a dustpan of the index's colour, mouth towards local -x."""
    if model_id not in DUSTPAN_LOOKS:
        raise ValueError(f"no dustpan with index {model_id}; known: {sorted(DUSTPAN_LOOKS)}")
    colour, hexcol = DUSTPAN_LOOKS[model_id]
    ix, iy = PAN_INNER
    w = PAN_WALL
    hl, hw, ht = PAN_HANDLE
    floor: Box = ((-ix, ix + w), (-iy - w, iy + w), (0.0, PAN_FLOOR))
    sides: list[Box] = [((-ix, ix + w), (iy, iy + w), (PAN_FLOOR, PAN_SIDE_H)),
                        ((-ix, ix + w), (-iy - w, -iy), (PAN_FLOOR, PAN_SIDE_H))]
    back: Box = ((ix, ix + w), (-iy - w, iy + w), (PAN_FLOOR, PAN_BACK_H))
    handle: Box = ((ix + w, ix + w + hl), (-hw, hw), (PAN_BACK_H - ht, PAN_BACK_H))
    lip_x = -ix - PAN_LIP
    lip: Box = ((lip_x, -ix), (-iy - w, iy + w), (0.0, PAN_FLOOR))
    c, half = _centre([floor, *sides, back, handle, lip])
    # The wedge: a triangular prism, knife edge at x = lip_x on the table, full floor height where the floor starts.
    verts: list[float] = []
    for y in (-iy - w, iy + w):
        for x, z in ((lip_x, 0.0), (-ix, 0.0), (-ix, PAN_FLOOR)):
            verts.extend(_shift((x, y, z), c))
    parts = (
        _box_part(floor, c), *(_box_part(b, c) for b in sides), _box_part(back, c),
        _box_part(handle, c, rgba=_rgba("#303030")), Part("mesh", (), vertices=tuple(verts)),
    )
    corners = tuple(NamedPoint("handle", _shift((sx * ix, sy * iy, PAN_FLOOR), c)) for sx in (-1, 1) for sy in (-1, 1))
    return ObjectSpec(
        category="broom_shovel",
        model_id=model_id,
        parts=parts,
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.25,
        half_extents=half,
        com=_shift((0.01, 0.0, 0.01), c),  # the floor carries most of the mass; the handle pulls it back a little
        words=(colour, "dustpan", "dust pan", "pan", "shovel"),
        descriptions=(f"{colour} dustpan",),
        friction=0.5,  # smooth plastic
        points=(NamedPoint("broom_shovel/0", _shift((0.0, 0.0, PAN_FLOOR), c), kind="support", radius=ix), *corners),
    )


# A hand broom: a 12 cm wide head (2.2 cm of bristles under a 1.8 cm wooden back, 3 cm deep) at local -x and an
# 18.5 cm round handle (2 cm across) at the height of the head's back, 2 cm clear of the table so a gripper can
# close round it. The head is the heavy end (the centre of mass lies above the bristles), so the broom lies flat.
BROOM_HEAD = (0.015, 0.06)  # half depth (x), half width (y)
BROOM_BRISTLES = 0.022
BROOM_BACK = 0.018
BROOM_HANDLE = (0.185, 0.01)  # length, radius


def broom() -> ObjectSpec:
    """RoboDojo's `broom`: a hand broom, head at local -x, handle along +x."""
    hx, hy = BROOM_HEAD
    length, r = BROOM_HANDLE
    top = BROOM_BRISTLES + BROOM_BACK
    bristles: Box = ((-hx, hx), (-hy, hy), (0.0, BROOM_BRISTLES))
    back: Box = ((-hx, hx), (-hy, hy), (BROOM_BRISTLES, top))
    zc = top - r - 0.0
    handle: Box = ((hx, hx + length), (-r, r), (zc - r, zc + r))
    c, half = _centre([bristles, back, handle])
    hpos = _shift((hx + length / 2.0, 0.0, zc), c)
    return ObjectSpec(
        category="broom",
        model_id=0,
        parts=(
            _box_part(bristles, c, rgba=_rgba("#d8b84a")),
            _box_part(back, c),
            Part("cylinder", (r, length / 2.0), pos=hpos, quat=(math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)),
        ),
        appearance=Appearance(_rgba("#8a5a32"), "flat"),
        mass=0.2,
        half_extents=half,
        com=_shift((0.006, 0.0, 0.018), c),
        words=("brown", "broom", "brush", "hand broom"),
        descriptions=("broom", "hand broom"),
        friction=0.5,  # bristle tips slide
    )


# The things to sweep. `small_cube`: 3 cm wooden cubes (five fit side by side across the pan's 16 cm), painted per
# index; upstream samples them with duplicates allowed. `_random`: a toy brick 4 x 2 x 2.4 cm, an earbud (a 2.4 cm
# bud and a 2.2 cm stem), a crumpled paper ball (a slightly squashed 4 cm ball, so it rests instead of rolling off).
SMALL_CUBE = 0.03
SMALL_CUBE_LOOKS: dict[int, tuple[str, str]] = {
    0: ("red", "#d63a2f"), 1: ("yellow", "#e8c21f"), 2: ("blue", "#2f62d6"),
    3: ("green", "#2fa84a"), 4: ("orange", "#f07f1a"), 5: ("purple", "#8a3fc2"),
}


def small_cube(model_id: int) -> ObjectSpec:
    if model_id not in SMALL_CUBE_LOOKS:
        raise ValueError(f"no small cube with index {model_id}; known: {sorted(SMALL_CUBE_LOOKS)}")
    colour, hexcol = SMALL_CUBE_LOOKS[model_id]
    h = SMALL_CUBE / 2.0
    return ObjectSpec(
        category="small_cube",
        model_id=model_id,
        parts=(Part("box", (h, h, h)),),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.6 * SMALL_CUBE**3 * 1000.0,
        half_extents=(h, h, h),
        words=(colour, "cube", "block", "small cube"),
        descriptions=(f"{colour} cube", f"{colour} block"),
    )


PAPER_BALL_RADII: Vec3 = (0.021, 0.02, 0.018)
# Rings of points on the ellipsoid (normalised height, count, radial dents): a crumpled ball is faceted and
# lopsided, so it rests on its flat bottom facet and stops soon after the broom lets go of it instead of rolling.
_RINGS = (
    (-0.8, (1.0, 0.92, 0.97, 0.9, 1.0, 0.94)),
    (-0.3, (0.95, 1.0, 0.88, 0.97, 0.93, 1.0, 0.9, 0.96)),
    (0.3, (1.0, 0.9, 0.96, 1.0, 0.87, 0.95, 0.98, 0.91)),
    (0.8, (0.9, 1.0, 0.93, 0.97, 0.88, 1.0)),
)


def _crumpled_ball(radii: Vec3) -> tuple[float, ...]:
    """Vertices of a dented faceted ball inside the ellipsoid of these radii, flat at the bottom."""
    out: list[float] = []
    for k, (z, dents) in enumerate(_RINGS):
        r = math.sqrt(1.0 - z * z)
        for i, dent in enumerate(dents):
            a = 2.0 * math.pi * (i + 0.5 * k) / len(dents)
            rz = z if k == 0 else z * dent  # the bottom ring stays level: the ball's resting facet
            out.extend((radii[0] * dent * r * math.cos(a), radii[1] * dent * r * math.sin(a), radii[2] * rz))
    return tuple(out)


SWEEP_TARGET_LOOKS: dict[str, dict[int, tuple[str, str]]] = {
    "brick": {0: ("red", "#c8322a"), 1: ("yellow", "#e8c21f"), 2: ("blue", "#2f62d6")},
    "earbuds": {0: ("white", "#f2f2ee"), 1: ("black", "#262626"), 2: ("pink", "#e88ab0")},
    "paper_ball": {0: ("white", "#f0efe8"), 1: ("yellow", "#f2e08a"), 2: ("blue", "#a8c8f0")},
}


def sweep_target(category: str, model_id: int) -> ObjectSpec:
    """sweep_blocks_random's `brick`, `earbuds` or `paper_ball` of index 0..2."""
    looks = SWEEP_TARGET_LOOKS.get(category)
    if looks is None or model_id not in looks:
        raise ValueError(f"no sweep target {category}[{model_id}]; known: { {k: sorted(v) for k, v in SWEEP_TARGET_LOOKS.items()} }")
    colour, hexcol = looks[model_id]
    if category == "brick":
        half: Vec3 = (0.02, 0.01, 0.012)
        studs = tuple(Part("cylinder", (0.0045, 0.0015), pos=(x, 0.0, half[2] - 0.0015)) for x in (-0.01, 0.01))
        parts: tuple[Part, ...] = (Part("box", (half[0], half[1], half[2] - 0.0015), pos=(0.0, 0.0, -0.0015)), *studs)
        words: tuple[str, ...] = (colour, "brick", "toy brick", "building brick")
        mass = 0.01
    elif category == "earbuds":
        # bud (ellipsoid) at +x, stem (box) along -x; both rest on the table
        half = (0.023, 0.012, 0.01)
        parts = (Part("ellipsoid", (0.012, 0.012, 0.01), pos=(0.011, 0.0, 0.0)),
                 Part("box", (0.011, 0.0035, 0.0035), pos=(-0.012, 0.0, -0.0065)))
        words = (colour, "earbud", "earbuds", "earphone", "earphones")
        mass = 0.005
    else:
        verts = _crumpled_ball(PAPER_BALL_RADII)
        parts = (Part("mesh", (), vertices=verts),)
        half = tuple(max(abs(v) for v in verts[i::3]) for i in range(3))  # type: ignore[assignment]
        words = (colour, "paper ball", "ball", "crumpled paper", "paper")
        mass = 0.006
    return ObjectSpec(
        category=category,
        model_id=model_id,
        parts=parts,
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=mass,
        half_extents=half,
        words=words,
        descriptions=(f"{colour} {words[1]}",),
    )


# ------------------------------------------------------------------------------------- store_tools_in_toolbox
# Four tools lying flat, each with its long axis along local y, and a fixture toolbox with a foam insert that has
# one pocket per tool. Tool sizes are ours (compact hand tools): hammer 22 cm (8 cm steel head at +y), wrench 18 cm,
# pliers 16 cm (jaws at +y), tape measure 6.6 x 6.6 x 3.6 cm. Each tool's `center` point (active) is its root; the
# pliers also have `center_flip`, the same point turned 180 deg about their long axis (upstream accepts the pliers
# either way up: they are symmetric about that axis, so they fit their pocket both ways).
#
# The toolbox (upstream's `toolbox[0]`, a fixture at yaw -90 deg, its centre 2.5 cm above the table: so it is 5 cm
# tall) is 36 x 26 cm outside (long axis local x, across the table once turned), an 8 mm wall to 5 cm, a 5 mm floor
# and a 3.8 cm black foam insert cut through to the floor with four pockets 5 mm wider than each tool on every side.
# Its `<tool>_slot` points (passive) are where a tool's centre is when the tool lies on the pocket's floor, turned
# +90 deg about z in the box frame: a tool goes in with the heading it starts with (upstream places the tools
# unrotated). A tool in its pocket is within the check's 5 cm and 10 deg by construction, and lies below the rim, so
# the box's bbox covers it.

TOOL_HALF: dict[str, Vec3] = {
    "hammer": (0.04, 0.11, 0.012),
    "wrench": (0.0175, 0.09, 0.005),
    "pliers": (0.025, 0.08, 0.007),
    "tape_measure": (0.033, 0.033, 0.018),
}
TOOL_INDEX: dict[str, int] = {"hammer": 5, "pliers": 0, "tape_measure": 0, "wrench": 0}
TOOLBOX_HALF: Vec3 = (0.18, 0.13, 0.025)
TOOLBOX_WALL = 0.008
TOOLBOX_FLOOR = 0.005
TOOLBOX_FOAM_TOP = 0.043  # above the box's bottom
POCKET_CLEARANCE = 0.005
_SLOT_YAW = (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))  # +90 deg about z: tool y -> box -x
# Pocket centres (box frame, xy) of each tool's centre.
TOOL_SLOTS: dict[str, tuple[float, float]] = {
    "hammer": (0.0, -0.07),
    "wrench": (0.0, 0.0035),
    "pliers": (-0.067, 0.07),
    "tape_measure": (0.066, 0.07),
}


def tool(name: str) -> ObjectSpec:
    """RoboDojo's hammer[5], pliers[0], tape_measure[0] or wrench[0] (long axis local y)."""
    if name not in TOOL_HALF:
        raise ValueError(f"no tool {name!r}; known: {sorted(TOOL_HALF)}")
    hx, hy, hz = TOOL_HALF[name]
    steel, black = _rgba("#9aa0a8"), _rgba("#202020")
    points: tuple[NamedPoint, ...] = (NamedPoint("center", (0.0, 0.0, 0.0), side="active"),)
    com: Vec3 = (0.0, 0.0, 0.0)
    if name == "hammer":
        head_y = 0.012  # half thickness of the head along y
        handle_len = 2 * hy - 2 * head_y
        parts: tuple[Part, ...] = (
            Part("box", (0.012, handle_len / 2, 0.01), pos=(0.0, -hy + handle_len / 2, -hz + 0.01)),
            Part("box", (hx, head_y, hz), pos=(0.0, hy - head_y, 0.0), rgba=steel),
        )
        colour, base, mass, com = "red", "#c8322a", 0.35, (0.0, 0.06, 0.0)
        words: tuple[str, ...] = ("red", "hammer")
    elif name == "wrench":
        parts = (
            Part("box", (0.008, 0.065, hz), pos=(0.0, 0.0, 0.0)),
            Part("box", (hx, 0.0125, hz), pos=(0.0, hy - 0.0125, 0.0)),
            Part("cylinder", (hx, hz), pos=(0.0, -hy + hx, 0.0)),
        )
        colour, base, mass = "silver", "#b8bcc4", 0.15
        words = ("silver", "wrench", "spanner")
    elif name == "pliers":
        tilt = math.radians(8.0)
        q_l = (math.cos(tilt / 2), 0.0, 0.0, math.sin(tilt / 2))
        q_r = (math.cos(-tilt / 2), 0.0, 0.0, math.sin(-tilt / 2))
        parts = (
            Part("box", (0.012, 0.035, hz), pos=(0.0, 0.045, 0.0), rgba=steel),
            Part("box", (0.007, 0.045, hz * 0.85), pos=(-0.0135, -0.035, 0.0), quat=q_r),
            Part("box", (0.007, 0.045, hz * 0.85), pos=(0.0135, -0.035, 0.0), quat=q_l),
        )
        colour, base, mass = "blue", "#2f62d6", 0.2
        words = ("blue", "pliers")
        flip = (0.0, 0.0, 1.0, 0.0)  # 180 deg about local y (the long axis)
        points = (*points, NamedPoint("center_flip", (0.0, 0.0, 0.0), quat=flip, side="active"))
    else:
        parts = (
            Part("cylinder", (hx, hz * 0.95), pos=(0.0, 0.0, 0.0)),
            Part("box", (hx, hx * 0.6, hz * 0.95), pos=(0.0, -hx * 0.4, 0.0)),
            Part("box", (0.012, 0.002, 0.006), pos=(0.0, hy - 0.002, -hz + 0.006), rgba=black),
        )
        colour, base, mass = "yellow", "#f0c81a", 0.18
        words = ("yellow", "tape measure", "measuring tape")
    return ObjectSpec(
        category=name,
        model_id=TOOL_INDEX[name],
        parts=parts,
        appearance=Appearance(_rgba(base), "flat"),
        mass=mass,
        half_extents=(hx, hy, hz),
        com=com,
        words=words,
        descriptions=(f"{colour} {name.replace('_', ' ')}",),
        points=points,
    )


def _pockets() -> list[tuple[float, float, float, float]]:
    """Pocket rectangles (centre x, centre y, half x, half y) in the box frame: each tool's outline (tool y along
    box -x), widened by the clearance; the hammer's pocket is a T (its head is wider than its handle)."""
    c = POCKET_CLEARANCE
    out = []
    for name, (sx, sy) in TOOL_SLOTS.items():
        hx, hy, _ = TOOL_HALF[name]
        if name == "hammer":
            head_y = 0.012
            out.append((sx - (hy - head_y), sy, head_y + c, hx + c))  # the head, at tool +y = box -x
            out.append((sx + head_y, sy, hy - head_y + c, 0.012 + c))  # the handle
        else:
            out.append((sx, sy, hy + c, hx + c))
    return out


def toolbox() -> ObjectSpec:
    """RoboDojo's `toolbox[0]` (a fixture): a red box with a black foam insert holding one pocket per tool."""
    bx, by, bz = TOOLBOX_HALF
    w = TOOLBOX_WALL
    floor_top = -bz + TOOLBOX_FLOOR
    walls = hollow_box(TOOLBOX_HALF, w, TOOLBOX_FLOOR, None)  # a floor and four walls, open at the top
    foam = plate_with_holes(bx - w, by - w, floor_top, -bz + TOOLBOX_FOAM_TOP, _pockets(), rgba=_rgba("#262626"))
    slots = tuple(
        NamedPoint(f"{name}_slot", (sx, sy, floor_top + TOOL_HALF[name][2]), quat=_SLOT_YAW)
        for name, (sx, sy) in TOOL_SLOTS.items()
    )
    return ObjectSpec(
        category="toolbox",
        model_id=0,
        parts=(*walls, *foam),
        appearance=Appearance(_rgba("#c0302a"), "flat"),
        mass=2.0,
        half_extents=TOOLBOX_HALF,
        words=("red", "toolbox", "tool box", "box", "foam"),
        descriptions=("toolbox",),
        points=slots,
    )
