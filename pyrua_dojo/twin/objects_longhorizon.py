"""Twin assets of the Long-Horizon tasks: bottles and the dustbin (put_bottles_into_dustbin), the stacking toy's
rings and its four-peg base (play_stacking_toy), pens and the pen holder (fill_pen_holder).

RoboDojo's meshes are not published, so each object is built from primitives with the features its success check
reads: the bbox (root = bbox centre, as everywhere in the twin), and the named points (`NamedPoint`) the check
reads. Every dimension below is ours unless the comment says where upstream fixes it.
"""

from __future__ import annotations

import math

from pyrua_dojo.twin.objects import Appearance, NamedPoint, ObjectSpec, Part, _rgba
from pyrua_dojo.twin.shapes import hollow_box, ring

# ------------------------------------------------------------------------------------ put_bottles_into_dustbin
# Empty plastic bottles lying on their side (local x = the bottle's axis, cap at +x): upstream's layout puts them
# anywhere down to y = -0.25, where a standing 20 cm bottle would reach into the arms' folded home pose (the
# gripper hangs 12-16 cm above the table at y -0.21), and its left / right yaw ranges mirror each other (-90..30,
# -30..90 deg): the heading of a lying bottle matters, a standing one's would not. Body, shoulder, neck and cap
# are cylinders; a thin flat keel along the bottom line (4 box contacts) keeps the bottle from rolling, as a
# bottle's moulded base ridges do. Upstream's ten `bottle` indices are meshes only; the twin varies colour, radius
# and length per index (water, soda and juice bottles, 17-24 cm long, 5.6-7 cm across: within the X5 gripper's
# 8.8 cm opening).

# index -> (colour word, hex, body radius, body length, neck length)
BOTTLES: dict[int, tuple[str, str, float, float, float]] = {
    0: ("blue", "#5a98d8", 0.032, 0.15, 0.05),
    2: ("green", "#3aa85a", 0.030, 0.14, 0.06),
    5: ("red", "#d04a3a", 0.033, 0.13, 0.05),
    22: ("orange", "#f08a2a", 0.035, 0.12, 0.04),
    25: ("white", "#eeeeea", 0.028, 0.16, 0.05),
    41: ("yellow", "#e8c83a", 0.030, 0.12, 0.04),
    50: ("purple", "#8a4ac8", 0.029, 0.15, 0.06),
    55: ("pink", "#f08ab0", 0.034, 0.11, 0.05),
    59: ("brown", "#8a5a3a", 0.031, 0.13, 0.06),
    60: ("cyan", "#2ac0d0", 0.033, 0.14, 0.04),
}
BOTTLE_INDICES = tuple(BOTTLES)
BOTTLE_NECK_RADIUS = 0.013
BOTTLE_CAP = (0.015, 0.012)  # radius, length
BOTTLE_SHOULDER = 0.02
_ALONG_X = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # a cylinder's axis (local z) along x


def bottle(model_id: int) -> ObjectSpec:
    """RoboDojo's `bottle[i]`: a bottle lying on its side (axis local x, cap at +x) of the index's colour and size."""
    if model_id not in BOTTLES:
        raise ValueError(f"no bottle with index {model_id}; known: {sorted(BOTTLES)}")
    colour, hexcol, r, body_l, neck_l = BOTTLES[model_id]
    cap_r, cap_l = BOTTLE_CAP
    total = body_l + BOTTLE_SHOULDER + neck_l + cap_l
    hx = total / 2.0
    x0 = -hx

    def cyl(radius: float, length: float, start: float, rgba=None) -> Part:
        return Part("cylinder", (radius, length / 2.0), pos=(start + length / 2.0, 0.0, 0.0), quat=_ALONG_X, rgba=rgba)

    keel_h = 0.0015
    parts = (
        cyl(r, body_l, x0),
        cyl((r + BOTTLE_NECK_RADIUS) / 2.0, BOTTLE_SHOULDER, x0 + body_l),
        cyl(BOTTLE_NECK_RADIUS, neck_l, x0 + body_l + BOTTLE_SHOULDER),
        cyl(cap_r, cap_l, hx - cap_l, rgba=_rgba("#f2f2f2")),
        Part("box", (body_l / 2.0 - 0.01, 0.35 * r, keel_h), pos=(x0 + body_l / 2.0, 0.0, -r + keel_h)),
    )
    return ObjectSpec(
        category="bottle",
        model_id=model_id,
        parts=parts,
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.03 + 0.3 * r * r * body_l / 0.00015,  # an empty plastic bottle, 30-60 g
        half_extents=(hx, r, r),
        com=(-0.2 * hx, 0.0, 0.0),
        words=(colour, "bottle", "plastic bottle"),
        descriptions=(f"{colour} bottle", "bottle"),
    )


# The dustbin (upstream's fixture `dustbin[0]`, Geometry on the Ground at x -0.63, y -0.1, root z 0.35): the root is
# its bbox centre, so a bin 70 cm tall stands on the floor; its rim is 1.5 cm below the table slab's underside (the
# slab spans z 0.715..0.765), so it stands off the table, under the table's left end, its opening reachable beyond
# the table edge (x < -0.7): 44 cm (x) by 40 cm (y), 13.5 cm of the opening beyond the table's end. Walls 1.5 cm and
# a 2.5 cm floor: a bottle that has rolled in the bin has bbox corners up to r(sqrt 2 - 1) (1.5 cm) beyond its
# surface, and the check reads the bbox; with thinner walls a bottle lying against one would count as outside.
# Upstream states only the pose; the size is ours.
DUSTBIN_HALF = (0.22, 0.20, 0.35)
DUSTBIN_POSE = (-0.63, -0.1, 0.35)
DUSTBIN_WALL = 0.015
DUSTBIN_FLOOR = 0.025


def dustbin() -> ObjectSpec:
    """RoboDojo's `dustbin[0]` (a fixture): an open box bin standing on the floor beside the table."""
    return ObjectSpec(
        category="dustbin",
        model_id=0,
        parts=hollow_box(DUSTBIN_HALF, DUSTBIN_WALL, DUSTBIN_FLOOR, None),
        appearance=Appearance(_rgba("#4a5a4a"), "flat"),
        mass=3.0,
        half_extents=DUSTBIN_HALF,
        words=("dustbin", "bin", "trash can", "garbage bin", "dark green"),
        descriptions=("dustbin",),
    )



# ------------------------------------------------------------------------------------------ play_stacking_toy
# A stacking toy: a fixture base (a 28 x 7 x 1.5 cm board) with four round pegs 1.6 cm across in a row 7 cm apart,
# and flat octagonal rings (5.2 cm across, 1.6 cm thick) whose bore leaves 0.4 mm per side around a peg at a 1.5 mm
# lip halfway up (2.6 mm above and below it, so a ring landing tilted does not jam): a ring set over a peg slides
# down it under gravity, and two rings on one peg stay within 0.8 mm of each other - inside the check's 1 mm (a
# looser bore would let correctly stacked rings fail it). Peg i carries the pieces of group i
# (4, 3, 2, 1 pieces: upstream's block0-3, 4-6, 7-8, 9), so the pegs are as tall as their stacks plus 1.2 cm,
# round-topped to guide a ring on. A ring rests on three 2 mm feet under its bottom face (3 contacts on the table
# or the ring below instead of 32: the twin's step time). Upstream's `stackingblocks` meshes and its base are not
# published: the sizes and the four colours (one per group, drawn distinct per layout as upstream's
# `allow_global_same: false`) are ours; `pole/i` support points mark each peg's foot on the board.

RING_OUTER = 0.026  # circumscribed radius of the octagon
RING_BORE = 0.0084  # inscribed radius of the octagonal bore: at a 1.5 mm lip halfway up the ring
RING_LIP = 0.0015
RING_RELIEF = 0.011  # the bore above and below the lip (a tight bore the ring's full height would jam when tilted)
RING_THICK = 0.016
RING_FOOT = 0.002  # foot sphere radius; it reaches 1 mm below the ring's body
RING_SIDES = 8
TOY_FRICTION = 0.4  # smooth lacquered wood (MuJoCo takes the larger of two geoms' frictions: rings and pegs)
PEG_RADIUS = 0.008
PEG_PITCH = 0.07
PEG_COUNTS = (4, 3, 2, 1)
BASE_HALF = (0.14, 0.035, 0.0075)
RING_STEP = RING_THICK + 0.001  # height of one ring on the peg (body plus the feet's reach)
RING_LOOKS: dict[int, tuple[str, str]] = {0: ("red", "#d83a2a"), 1: ("yellow", "#e8c82a"), 2: ("green", "#3aa84a"),
                                          3: ("blue", "#2a5ad8"), 4: ("purple", "#8a3ac8"), 5: ("orange", "#f0802a")}


def peg_height(peg: int) -> float:
    """Height of peg `peg` above the board's top: its stack of rings plus 1.2 cm."""
    return PEG_COUNTS[peg] * RING_STEP + 0.012


def peg_x(peg: int) -> float:
    return (peg - (len(PEG_COUNTS) - 1) / 2.0) * PEG_PITCH


def stacking_ring(model_id: int) -> ObjectSpec:
    """RoboDojo's `stackingblocks[i]`: a flat octagonal ring of the index's colour, lying on three small feet."""
    if model_id not in RING_LOOKS:
        raise ValueError(f"no stacking ring with index {model_id}; known: {sorted(RING_LOOKS)}")
    colour, hexcol = RING_LOOKS[model_id]
    inner = RING_BORE
    outer = RING_OUTER * math.cos(math.pi / RING_SIDES)  # inscribed radius of the outer octagon
    hz = (RING_THICK + 0.001) / 2.0
    body_z0 = -hz + 0.001
    mid = (body_z0 + hz) / 2.0
    parts = list(ring(RING_RELIEF, outer, body_z0, hz, n=RING_SIDES, phase=math.pi / RING_SIDES))
    parts += ring(inner, RING_RELIEF + 0.0005, mid - RING_LIP / 2.0, mid + RING_LIP / 2.0, n=RING_SIDES,
                  phase=math.pi / RING_SIDES)
    r_feet = (inner + outer) / 2.0
    for k in range(3):
        a = 2.0 * math.pi * k / 3.0
        parts.append(Part("sphere", (RING_FOOT,), pos=(r_feet * math.cos(a), r_feet * math.sin(a), -hz + RING_FOOT)))
    reach = outer / math.cos(math.pi / RING_SIDES)
    return ObjectSpec(
        category="stackingblocks",
        model_id=model_id,
        parts=tuple(parts),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.03,
        half_extents=(reach, reach, hz),
        friction=TOY_FRICTION,
        words=(colour, "ring", "stacking ring", "piece", "stacking toy piece", "donut"),
        descriptions=(f"{colour} ring", f"{colour} stacking ring"),
    )


def stack_base() -> ObjectSpec:
    """RoboDojo's `stack_base` (a fixture): a board with four round-topped pegs of 4, 3, 2 and 1 rings' height;
    support points `pole/0` .. `pole/3` at the pegs' feet on the board's top."""
    bx, by, bz = BASE_HALF
    tallest = max(peg_height(p) for p in range(len(PEG_COUNTS)))
    hz = (2 * bz + tallest) / 2.0
    board_top = -hz + 2 * bz
    parts = [Part("box", (bx, by, bz), pos=(0.0, 0.0, -hz + bz))]
    points = []
    for p in range(len(PEG_COUNTS)):
        h = peg_height(p)
        shaft = h - PEG_RADIUS  # the capsule's hemispherical top ends exactly at the peg's height
        parts.append(Part("capsule", (PEG_RADIUS, shaft / 2.0), pos=(peg_x(p), 0.0, board_top + shaft / 2.0),
                          rgba=_rgba("#c8965a")))
        points.append(NamedPoint(f"pole/{p}", (peg_x(p), 0.0, board_top), kind="support", radius=PEG_RADIUS))
    return ObjectSpec(
        category="stack_base",
        model_id=0,
        parts=tuple(parts),
        appearance=Appearance(_rgba("#e0bc88"), "flat"),
        mass=0.5,
        half_extents=(bx, by, hz),
        friction=TOY_FRICTION,
        words=("base", "stacking toy base", "pegs", "peg board", "wooden"),
        descriptions=("stacking toy base",),
        points=tuple(points),
    )


# -------------------------------------------------------------------------------------------- fill_pen_holder
# Pens lying on their side (upstream's `place_tag: side_unit`), axis along local x, the tip at -x. Each has a
# functional point `check` at the tip whose frame's z axis points from the tip back along the pen (RoboDojo's
# score wants it within 45 deg of world up: tip down). The body is drawn round; its collision is a "plus" of two
# boxes as wide and tall as the drawn body (a round pen would roll on the table; this one lies still, and the
# gripper meets its sides where it sees them); the tip is a thin cylinder with a small box for contact. Ballpoint pens (`pen[0, 1,
# 4]`) are 14 cm long and 1 cm across; the paint markers (`oil_pen[0, 1]`) 13 cm long and 1.6 cm across. Upstream's
# meshes are not published: sizes and colours are ours.

# (category, index) -> (colour word, body hex, cap hex, body length, radius, tip length)
PENS: dict[tuple[str, int], tuple[str, str, str, float, float, float]] = {
    ("pen", 0): ("blue", "#2a5ad8", "#1a3a90", 0.125, 0.005, 0.015),
    ("pen", 1): ("black", "#303030", "#101010", 0.125, 0.005, 0.015),
    ("pen", 4): ("red", "#d8382a", "#902018", 0.125, 0.005, 0.015),
    ("oil_pen", 0): ("white", "#eeeeea", "#d8382a", 0.115, 0.008, 0.015),
    ("oil_pen", 1): ("silver", "#b8b8c0", "#2a5ad8", 0.115, 0.008, 0.015),
}
PEN_INDICES = (0, 1, 4)
OIL_PEN_INDICES = (0, 1)
_TIP_BACK = _ALONG_X  # the `check` frame: its z along local +x, from the tip toward the cap


def pen(category: str, model_id: int) -> ObjectSpec:
    """RoboDojo's `pen[i]` / `oil_pen[i]`: a pen lying along local x, its tip at -x with the `check` point there (the
    point's z axis pointing back along the pen, toward +x)."""
    if (category, model_id) not in PENS:
        raise ValueError(f"no {category} with index {model_id}; known: {sorted(PENS)}")
    colour, body_hex, cap_hex, body_l, r, tip_l = PENS[(category, model_id)]
    total = body_l + tip_l
    hx = total / 2.0
    tip_x = -hx
    body_c = -hx + tip_l + body_l / 2.0
    cap_l = 0.035

    def cyl(radius: float, length: float, centre: float, rgba=None, collide=False) -> Part:
        return Part("cylinder", (radius, length / 2.0), pos=(centre, 0.0, 0.0), quat=_ALONG_X, rgba=rgba,
                    collide=collide)

    grey = _rgba("#c8c8c8")
    parts = (
        # contact: a "plus" of two boxes inside the drawn round body (their corners reach 0.06 r past it)
        Part("box", (body_l / 2.0, 0.35 * r, r), pos=(body_c, 0.0, 0.0)),
        Part("box", (body_l / 2.0, r, 0.35 * r), pos=(body_c, 0.0, 0.0)),
        cyl(r, body_l - cap_l, body_c - cap_l / 2.0),
        cyl(r * 1.05, cap_l, hx - cap_l / 2.0, rgba=_rgba(cap_hex)),
        cyl(r * 0.45, tip_l, -hx + tip_l / 2.0, rgba=grey),
        Part("box", (tip_l / 2.0, r * 0.32, r * 0.32), pos=(-hx + tip_l / 2.0, 0.0, 0.0), rgba=grey),
    )
    kind = "paint marker" if category == "oil_pen" else "pen"
    return ObjectSpec(
        category=category,
        model_id=model_id,
        parts=parts,
        appearance=Appearance(_rgba(body_hex), "flat"),
        mass=0.012 if category == "pen" else 0.02,
        half_extents=(hx, r * 1.05, r * 1.05),
        com=(0.01, 0.0, 0.0),
        words=(colour, "pen", *(("marker", "paint marker", "oil pen") if category == "oil_pen" else ("ballpoint",))),
        descriptions=(f"{colour} {kind}", kind),
        points=(NamedPoint("check", (tip_x, 0.0, 0.0), quat=_TIP_BACK),),
    )


# The pen holder (upstream's `pen_holder`, a free rigid object): a cup 8 cm across and 10 cm tall (inside 7 cm
# across, a 6 mm floor): the check wants each pen tip within 3.5 cm of the holder's axis, so the inside radius is
# exactly that; four pens 14 cm long stand in it leaning on the rim. A base plate inside the drawn disk touches the
# table (4 box contacts); 16 wall staves.
HOLDER_RADIUS = 0.039  # outer (inscribed) radius of the wall
HOLDER_INNER = 0.035
HOLDER_HEIGHT = 0.10
HOLDER_FLOOR = 0.006


def pen_holder() -> ObjectSpec:
    """RoboDojo's `pen_holder`: an open round cup standing upright."""
    hz = HOLDER_HEIGHT / 2.0
    parts = ring(HOLDER_INNER, HOLDER_RADIUS, -hz + HOLDER_FLOOR, hz, n=16) + (
        Part("box", (HOLDER_INNER * 0.75, HOLDER_INNER * 0.75, HOLDER_FLOOR / 2.0), pos=(0.0, 0.0, -hz + HOLDER_FLOOR / 2.0)),
        Part("cylinder", (HOLDER_RADIUS, HOLDER_FLOOR / 2.0 - 0.0003), pos=(0.0, 0.0, -hz + HOLDER_FLOOR / 2.0 + 0.0003),
             collide=False),
    )
    reach = HOLDER_RADIUS / math.cos(math.pi / 16)
    return ObjectSpec(
        category="pen_holder",
        model_id=0,
        parts=parts,
        appearance=Appearance(_rgba("#3a8a80"), "flat"),
        mass=0.25,
        half_extents=(reach, reach, hz),
        com=(0.0, 0.0, -hz * 0.4),
        words=("teal", "pen holder", "holder", "cup", "pencil cup"),
        descriptions=("pen holder",),
    )
