"""Twin assets of three Generalization tasks: the packing box and its four kinds of item (pack_objects_into_box),
mugs with an open loop handle and a mug rack with hooks (hang_mugs), and five graded nesting dolls
(sort_nesting_dolls_by_size).

RoboDojo's meshes are not published, so each object is built from primitives with the features its success check
reads: the bbox (root = bbox centre, as everywhere in the twin), the axes the check compares, and the named points
(`NamedPoint`) it reads. Every dimension below is ours unless a comment names upstream as its source. Colours vary
by asset index so the segmentation stand-in can tell the objects apart by words.
"""

from __future__ import annotations

import math

from pyrua_dojo.twin.objects import (
    Appearance,
    NamedPoint,
    ObjectSpec,
    Part,
    Quat,
    _rgba,
)
from pyrua_dojo.twin.shapes import hollow_box, ring


def _yaw(deg: float) -> Quat:
    h = math.radians(deg) / 2.0
    return (math.cos(h), 0.0, 0.0, math.sin(h))


# ---------------------------------------------------------------------------------------- pack_objects_into_box
# An open cardboard box and four items, sized so all four lie side by side in it, lengthwise along the box's local
# y axis (the check wants every item's heading within 45 deg of the box's +-y and the box's +-y within 40 deg of
# world x; the layout puts the box down with its local y along world x, its rest pose). Inside 26.2 cm along y (the
# long sides) and 23.2 cm along x: the hammer (21 cm) fits lengthwise, and the four widths (5 + 2.8 + 7 + 6 cm)
# leave 2.4 cm to spare. Walls 8 cm tall, 6 mm thick. `box_bottom`: the inner floor's four corners (the region every item's root
# must be over).
#
# Each item has an active functional point `checkpoint` whose frame's +x is the item's front (the car's nose, the
# brush head, the hammer head); the check wants the checkpoint's -x within 60 deg of world +x, i.e. the front
# facing world -x (left). The toothbrush is built along its local y, so its checkpoint frame is turned +90 deg
# about z: the heading must be read on the checkpoint frame, not the root. The shoe has no checkpoint upstream (the
# check reads its root's +x and wants it within 60 deg of world +x): the twin's shoe has its toe at local -x, so
# "front facing left" holds for it too.

PACK_BOX_HALF = (0.122, 0.137, 0.04)  # local x (across), local y (along: the long sides), z
PACK_BOX_WALL = 0.006
PACK_BOX_FLOOR = 0.005

CAR_HALF = (0.055, 0.025, 0.0225)
TOOTHBRUSH_HALF = (0.014, 0.095, 0.014)  # along local y
HAMMER_HALF = (0.105, 0.035, 0.012)
SHOE_HALF = (0.08, 0.03, 0.03)

CAR_LOOKS: dict[int, tuple[str, str]] = {
    0: ("red", "#d63a2f"), 6: ("blue", "#2f62d6"), 7: ("yellow", "#e8c21f"),  # pack_objects_into_box
    1: ("green", "#2fa84a"), 2: ("orange", "#f07f1a"), 3: ("purple", "#8a3fc2"), 4: ("white", "#eeeeea"),
    5: ("black", "#303030"),  # _random
}
TOOTHBRUSH_LOOKS: dict[int, tuple[str, str]] = {
    0: ("white", "#f0f0f0"), 1: ("blue", "#3a6fd0"), 2: ("pink", "#f08ab0"), 3: ("green", "#3aa85a"),
    4: ("black", "#303030"), 5: ("purple", "#8a4ac8"), 6: ("cyan", "#2ac0d0"),
}
HAMMER_LOOKS: dict[int, tuple[str, str]] = {
    0: ("brown", "#8a5a3a"), 1: ("red", "#c83a2a"), 2: ("yellow", "#e8c83a"), 3: ("black", "#303030"),
    4: ("orange", "#f08a2a"), 5: ("blue", "#2a5ad8"), 6: ("green", "#3a9a4a"), 7: ("gray", "#8a8a8a"),
    8: ("purple", "#7a3ab8"),
}
SHOE_LOOKS: dict[int, tuple[str, str]] = {
    i: look
    for i, look in enumerate(
        (
            ("white", "#eeeeea"), ("black", "#2a2a2a"), ("red", "#c8342a"), ("blue", "#2f5fd6"), ("brown", "#7a4a2a"),
            ("gray", "#8a8a8a"), ("pink", "#f08ab0"), ("green", "#3a9a4a"), ("navy", "#1f2f6a"), ("tan", "#c8a070"),
            ("orange", "#f08a2a"), ("purple", "#7a3ab8"), ("yellow", "#e8c83a"), ("teal", "#2a8a80"),
            ("maroon", "#6a1f2a"), ("beige", "#e0d0b0"), ("cyan", "#2ac0d0"), ("olive", "#7a7a2a"),
        )
    )
}
CAR_INDICES, CAR_INDICES_RANDOM = (0, 6, 7), (1, 2, 3, 4, 5)
TOOTHBRUSH_INDICES, TOOTHBRUSH_INDICES_RANDOM = (0, 1, 2, 3), (4, 5, 6)
HAMMER_INDICES, HAMMER_INDICES_RANDOM = (0, 1, 2, 3, 4), (6, 7, 8)
SHOE_INDICES, SHOE_INDICES_RANDOM = tuple(range(8)), tuple(range(8, 18))


def _look(table: dict[int, tuple[str, str]], what: str, model_id: int) -> tuple[str, str]:
    if model_id not in table:
        raise ValueError(f"no {what} with index {model_id}; known: {sorted(table)}")
    return table[model_id]


def packing_box() -> ObjectSpec:
    """RoboDojo's `box`: an open cardboard box (floor and four walls); `box_bottom` at the inner floor's corners."""
    hx, hy, hz = PACK_BOX_HALF
    ix, iy = hx - PACK_BOX_WALL, hy - PACK_BOX_WALL
    floor = -hz + PACK_BOX_FLOOR
    return ObjectSpec(
        category="box",
        model_id=0,
        parts=hollow_box(PACK_BOX_HALF, PACK_BOX_WALL, PACK_BOX_FLOOR, None),
        appearance=Appearance(_rgba("#c49a62"), "speckle", (0.55, 0.4, 0.22)),
        mass=0.4,
        half_extents=PACK_BOX_HALF,
        words=("box", "cardboard", "brown", "carton", "open box"),
        descriptions=("cardboard box",),
        points=tuple(NamedPoint("box_bottom", (sx * ix, sy * iy, floor)) for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))),
    )


def toy_car(model_id: int) -> ObjectSpec:
    """RoboDojo's `car[i]`: a toy car 11 x 5 x 4.5 cm, nose at local +x (checkpoint frame = root frame)."""
    colour, hexcol = _look(CAR_LOOKS, "car", model_id)
    hx, hy, hz = CAR_HALF
    wheel = 0.011
    dark = _rgba("#202020")
    body_top = 0.004  # the lower body from 6 mm above the table to here, the cabin above it
    parts = [
        # A collision slab under the body carries the car (flat, four contacts); the wheels are drawn only.
        Part("box", (hx, hy - 0.004, 0.003), pos=(0.0, 0.0, -hz + 0.003), rgba=dark),
        Part("box", (hx, hy, (body_top + hz - 0.006) / 2.0), pos=(0.0, 0.0, (body_top - hz + 0.006) / 2.0)),
        Part("box", (hx * 0.5, hy * 0.85, (hz - body_top) / 2.0), pos=(-0.008, 0.0, (hz + body_top) / 2.0),
             rgba=_rgba("#a8c8e8")),
    ]
    for sx in (-1, 1):
        for sy in (-1, 1):
            parts.append(Part("cylinder", (wheel, 0.004), pos=(sx * (hx - 0.018), sy * (hy - 0.002), -hz + wheel),
                              quat=(math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0), rgba=dark, collide=False))
    return ObjectSpec(
        category="car",
        model_id=model_id,
        parts=tuple(parts),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.12,
        half_extents=CAR_HALF,
        words=(colour, "car", "toy car", "toy", "vehicle"),
        descriptions=(f"{colour} toy car",),
        points=(NamedPoint("checkpoint", (hx, 0.0, 0.0), side="active"),),
    )


def electric_toothbrush(model_id: int) -> ObjectSpec:
    """RoboDojo's `electric_toothbrush[i]`: a 19 cm brush lying along its local y, the head at +y; its checkpoint
    frame is turned +90 deg about z, so the checkpoint's +x is the head direction."""
    colour, hexcol = _look(TOOTHBRUSH_LOOKS, "electric toothbrush", model_id)
    hx, hy, hz = TOOTHBRUSH_HALF
    head = 0.02
    return ObjectSpec(
        category="electric_toothbrush",
        model_id=model_id,
        parts=(
            Part("box", (hx, hy - head, hz), pos=(0.0, -head, 0.0)),
            Part("box", (hx * 0.6, head, hz * 0.6), pos=(0.0, hy - head, -hz * 0.4), rgba=_rgba("#f4f4f4")),
            Part("box", (hx * 0.5, head * 0.8, 0.003), pos=(0.0, hy - head, hz * 0.2 + 0.003), rgba=_rgba("#3ab0e0"),
                 collide=False),
            Part("box", (0.004, 0.008, 0.0015), pos=(0.0, 0.02, hz), rgba=_rgba("#303030"), collide=False),
        ),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.12,
        half_extents=TOOTHBRUSH_HALF,
        words=(colour, "electric toothbrush", "toothbrush", "brush"),
        descriptions=(f"{colour} electric toothbrush",),
        points=(NamedPoint("checkpoint", (0.0, hy, 0.0), quat=_yaw(90.0), side="active"),),
    )


def hammer(model_id: int) -> ObjectSpec:
    """RoboDojo's `hammer[i]`: a 21 cm hammer lying flat, handle along local x, the head (7 cm across) at +x
    (checkpoint frame = root frame)."""
    colour, hexcol = _look(HAMMER_LOOKS, "hammer", model_id)
    hx, hy, hz = HAMMER_HALF
    head_hx = 0.015
    return ObjectSpec(
        category="hammer",
        model_id=model_id,
        parts=(
            Part("box", (hx - head_hx, 0.011, hz), pos=(-head_hx, 0.0, 0.0)),
            Part("box", (head_hx, hy, hz), pos=(hx - head_hx, 0.0, 0.0), rgba=_rgba("#9aa0a8")),
        ),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.3,
        half_extents=HAMMER_HALF,
        com=(0.05, 0.0, 0.0),
        words=(colour, "hammer", "tool"),
        descriptions=(f"{colour} hammer",),
        points=(NamedPoint("checkpoint", (hx, 0.0, 0.0), side="active"),),
    )


def shoe(model_id: int) -> ObjectSpec:
    """RoboDojo's `shoe[i]`: a child's shoe 16 x 6 x 6 cm, sole and upper, the toe at local -x (no checkpoint:
    upstream's check reads the root's +x, the heel direction here)."""
    colour, hexcol = _look(SHOE_LOOKS, "shoe", model_id)
    hx, hy, hz = SHOE_HALF
    sole = 0.006
    return ObjectSpec(
        category="shoe",
        model_id=model_id,
        parts=(
            Part("box", (hx, hy, sole), pos=(0.0, 0.0, -hz + sole), rgba=_rgba("#f4f4f0")),
            Part("box", (hx * 0.55, hy * 0.92, hz - sole), pos=(hx * 0.45, 0.0, sole)),  # heel and ankle
            Part("box", (hx * 0.45, hy * 0.9, (hz - sole) * 0.5), pos=(-hx * 0.55, 0.0, -hz + 2 * sole + (hz - sole) * 0.5)),
        ),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.2,
        half_extents=SHOE_HALF,
        words=(colour, "shoe", "sneaker"),
        descriptions=(f"{colour} shoe",),
    )


# ---------------------------------------------------------------------------------------------------- hang_mugs
# A mug 7.2 cm across and 8.5 cm tall (a wall of 16 staves and a floor) with an open loop handle at its +x side: two
# arms and an outer bar, 6 mm thick, leaving an opening 2.8 cm deep and 4.9 cm tall that a 1 cm hook passes
# through. The root is the bbox centre (the handle included), so the mug's axis is 1.7 cm to the root's -x. The
# active functional point `handle` is the opening's centre, its frame the mug's (z along the mug's axis, x towards
# the handle): the check wants it above z = 0.9 m (13.5 cm above the table), within 4.5 cm of a hook point, and its
# z and +-x within 60 deg of the hook frame's.
#
# The rack (`cup_holder`, a fixture): a base plate, two posts and a bar along local x 19 cm above the table, with
# three hooks 15 cm apart pointing to local -y (towards the robot at yaw 0) and rising 20 deg, 6.5 cm long with a
# knob at the tip. A mug hangs by its handle with the hook through the opening; its weight turns it about the hook
# until its body hangs below (about 35-45 deg from upright). `handle_support_point` (passive) on each hook, 3.5 cm
# out along it, frame = the rack's (x along the bar, z up).

MUG_RADIUS = 0.036
MUG_HEIGHT = 0.095
MUG_WALL = 0.004
MUG_FLOOR = 0.006
MUG_HANDLE_OUT = 0.022  # how far the handle stands out from the wall
MUG_HANDLE_BAR = 0.006  # thickness of the handle's arms and bar
MUG_HANDLE_ARMS_Z = (0.0445, -0.015)  # arm centres above the mug's mid-height: the top arm at the rim
MUG_HANDLE_HALF_WIDTH = 0.007  # along local y
MUG_LOOKS: dict[int, tuple[str, str]] = {
    i: look
    for i, look in enumerate(
        (
            ("white", "#eeeeea"), ("red", "#d63a2f"), ("blue", "#2f62d6"), ("green", "#2fa84a"), ("yellow", "#e8c21f"),
            ("black", "#303030"), ("pink", "#f08ab0"), ("orange", "#f07f1a"), ("purple", "#8a3fc2"), ("gray", "#8a8a8a"),
            ("cyan", "#2ac0d0"), ("brown", "#8a5a3a"), ("teal", "#2a8a80"), ("navy", "#1f2f6a"), ("lime", "#9ad02a"),
        )
    )
}
MUG_INDICES, MUG_INDICES_RANDOM = tuple(range(10)), tuple(range(10, 15))

RACK_BAR_HEIGHT = 0.19  # bar axis above the table
RACK_HOOK_X = (-0.15, 0.0, 0.15)
RACK_HOOK = (0.005, 0.085, 20.0)  # radius, length, rise (deg)
RACK_POINT_ALONG = 0.05
RACK_LOOKS: dict[int, tuple[str, str]] = {0: ("brown", "#7a4a2a"), 1: ("black", "#2a2a2a")}


def mug(model_id: int) -> ObjectSpec:
    """RoboDojo's `mug[i]`: a mug with an open loop handle at +x (active functional point `handle`)."""
    colour, hexcol = _look(MUG_LOOKS, "mug", model_id)
    r, h, t = MUG_RADIUS, MUG_HEIGHT, MUG_HANDLE_BAR
    cx = -MUG_HANDLE_OUT / 2.0  # the mug's axis in the bbox-centred frame
    parts = list(ring(r - MUG_WALL, r, -h / 2.0 + MUG_FLOOR, h / 2.0, n=16, centre=(cx, 0.0)))
    plate = (r - MUG_WALL) / math.sqrt(2.0) + 0.002  # a square floor: four contacts on the table
    parts.append(Part("box", (plate, plate, MUG_FLOOR / 2.0), pos=(cx, 0.0, -h / 2.0 + MUG_FLOOR / 2.0)))
    x0, x1 = cx + r - 0.002, cx + r + MUG_HANDLE_OUT
    hw = MUG_HANDLE_HALF_WIDTH
    for z in MUG_HANDLE_ARMS_Z:
        parts.append(Part("box", ((x1 - x0) / 2.0, hw, t / 2.0), pos=((x0 + x1) / 2.0, 0.0, z)))
    top, bottom = MUG_HANDLE_ARMS_Z[0] + t / 2.0, MUG_HANDLE_ARMS_Z[1] - t / 2.0
    parts.append(Part("box", (t / 2.0, hw, (top - bottom) / 2.0), pos=(x1 - t / 2.0, 0.0, (top + bottom) / 2.0)))
    opening_x = (cx + r + x1 - t) / 2.0
    opening_z = sum(MUG_HANDLE_ARMS_Z) / 2.0
    return ObjectSpec(
        category="mug",
        model_id=model_id,
        parts=tuple(parts),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.15,
        half_extents=(r + MUG_HANDLE_OUT / 2.0, r, h / 2.0),
        com=(cx, 0.0, -0.025),  # a heavy bottom: a hanging mug tilts less
        words=(colour, "mug", "cup", "handle"),
        descriptions=(f"{colour} mug",),
        points=(NamedPoint("handle", (opening_x, 0.0, opening_z), side="active"),),
    )


def mug_rack(model_id: int) -> ObjectSpec:
    """RoboDojo's `cup_holder[i]` (a fixture): a bar on two posts with three rising hooks (`handle_support_point`
    on each)."""
    colour, hexcol = _look(RACK_LOOKS, "mug rack", model_id)
    radius, length, rise_deg = RACK_HOOK
    rise = math.radians(rise_deg)
    bar_r = 0.008
    half_x = max(abs(x) for x in RACK_HOOK_X) + 0.03
    reach = length * math.cos(rise) + 0.012  # the hooks' tips (with the knob) in front of the bar
    half_y = (reach + bar_r + 0.016) / 2.0  # the base plate spans from behind the bar to the hooks' tips
    top = RACK_BAR_HEIGHT + bar_r + length * math.sin(rise) + 0.012
    hz = top / 2.0
    bar_y = half_y - bar_r - 0.016  # the bar near the back
    bar_z = -hz + RACK_BAR_HEIGHT
    plate = 0.012
    x90y = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # cylinder axis along x
    parts = [
        Part("box", (half_x, half_y, plate / 2.0), pos=(0.0, 0.0, -hz + plate / 2.0)),
        Part("capsule", (bar_r, half_x - bar_r), pos=(0.0, bar_y, bar_z), quat=x90y),
    ]
    for sx in (-1, 1):
        post_h = RACK_BAR_HEIGHT - plate
        # behind the bar's axis: a mug swinging on its hook (in the x-z plane in front of the bar) never meets them
        parts.append(Part("box", (0.008, 0.008, post_h / 2.0),
                          pos=(sx * (half_x - 0.01), bar_y + 0.008, -hz + plate + post_h / 2.0)))
    # A hook leaves the bar towards -y, rising by `rise`: a capsule along its own z turned about x.
    hook_q = (math.cos((math.pi / 2 - rise) / 2.0), math.sin((math.pi / 2 - rise) / 2.0), 0.0, 0.0)  # z -> d
    points = []
    for x in RACK_HOOK_X:
        d = (0.0, -math.cos(rise), math.sin(rise))
        mid = (x, bar_y + d[1] * length / 2.0, bar_z + d[2] * length / 2.0)
        tip = (x, bar_y + d[1] * length, bar_z + d[2] * length)
        parts.append(Part("capsule", (radius, length / 2.0), pos=mid, quat=hook_q, rgba=_rgba("#b8b8b8")))
        parts.append(Part("sphere", (0.008,), pos=tip, rgba=_rgba("#b8b8b8")))
        points.append(NamedPoint("handle_support_point",
                                 (x, bar_y + d[1] * RACK_POINT_ALONG, bar_z + d[2] * RACK_POINT_ALONG)))
    return ObjectSpec(
        category="cup_holder",
        model_id=model_id,
        parts=tuple(parts),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=1.0,
        half_extents=(half_x, half_y, hz),
        words=(colour, "rack", "mug rack", "hooks", "stand"),
        descriptions=("mug rack",),
        points=tuple(points),
    )


# ---------------------------------------------------------------------------------------- sort_nesting_dolls_by_size
# Five graded matryoshka dolls per texture group; the size rank is the index % 5 (0 smallest). Upstream's config
# states the ranks' half extents in its comments (rank 0 .. 4: 1.52, 1.98, 2.44, 2.90, 3.35 cm): the twin's doll
# radius. The height (1.7 diameters, a typical matryoshka's proportion) is ours. A doll: a cylindrical body over a
# square contact plate (four contacts on the table), a dome and a head (spheres); colour by texture group.

DOLL_RADII = (0.0152, 0.0198, 0.0244, 0.029, 0.0335)  # by rank (index % 5), upstream's half extents
DOLL_GROUPS: dict[str, tuple[int, ...]] = {
    "texture0": (0, 1, 2, 3, 4), "texture1": (5, 6, 7, 8, 9), "texture2": (10, 11, 12, 13, 14),
}
DOLL_GROUPS_RANDOM: dict[str, tuple[int, ...]] = {"texture0": (15, 16, 17, 18, 19), "texture1": (20, 21, 22, 23, 24)}
DOLL_LOOKS = (  # by index // 5: (colour word, body, face/apron)
    ("red", "#c8302a", "#f4e0c0"),
    ("blue", "#2f5fd6", "#f0f0f0"),
    ("green", "#2f9a4a", "#f4e8c0"),
    ("yellow", "#e8c21f", "#c8302a"),
    ("purple", "#8a3fc2", "#f4e0c0"),
)


def nesting_doll(model_id: int) -> ObjectSpec:
    """RoboDojo's `matryoshka_dolls[i]`: a doll of size rank i % 5 standing upright (local +z)."""
    if not 0 <= model_id < 5 * len(DOLL_LOOKS):
        raise ValueError(f"no nesting doll with index {model_id}; known: 0..{5 * len(DOLL_LOOKS) - 1}")
    colour, body, face = DOLL_LOOKS[model_id // 5]
    r = DOLL_RADII[model_id % 5]
    h = 3.4 * r
    hz = h / 2.0
    body_top = -hz + 0.55 * h
    head_r = 0.62 * r
    head_z = hz - head_r
    plate = 0.7 * r
    return ObjectSpec(
        category="matryoshka_dolls",
        model_id=model_id,
        parts=(
            Part("box", (plate, plate, 0.002), pos=(0.0, 0.0, -hz + 0.002)),
            Part("cylinder", (r, (body_top - (-hz + 0.001)) / 2.0), pos=(0.0, 0.0, (body_top - hz + 0.001) / 2.0)),
            Part("sphere", (0.92 * r,), pos=(0.0, 0.0, body_top - 0.1 * r)),
            Part("sphere", (head_r,), pos=(0.0, 0.0, head_z)),
            Part("sphere", (0.45 * r,), pos=(0.0, -0.3 * r, head_z - 0.05 * r), rgba=_rgba(face), collide=False),
            Part("box", (0.55 * r, 0.02 * r, 0.3 * h), pos=(0.0, -0.985 * r, -hz + 0.3 * h), rgba=_rgba(face),
                 collide=False),
        ),
        appearance=Appearance(_rgba(body), "flat"),
        mass=0.02 + 4.0 * r**2 * h * 100.0,  # hollow wood
        half_extents=(r, r, hz),
        com=(0.0, 0.0, -0.1 * h),
        words=(colour, "doll", "nesting doll", "matryoshka", "wooden"),
        descriptions=(f"{colour} nesting doll",),
    )
