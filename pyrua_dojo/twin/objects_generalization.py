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

from pyrua_dojo.twin.objects import Appearance, NamedPoint, ObjectSpec, Part, Quat, _rgba
from pyrua_dojo.twin.shapes import hollow_box


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
