"""Twin assets of the rearrangement tasks: T blocks and their pad (push_T, swap_T), nestable bowls (stack_bowls),
the wooden tower pieces (build_tower), and the xylophone with its mallet and stand (play_Xylophone).

RoboDojo's meshes are not published, so each object is built from primitives with the features its success check
reads: the bbox (root = bbox centre, as everywhere in the twin), the axis the check wants up, and the named points
(`NamedPoint`) the check reads. Every dimension below is ours; the comment next to it says what fixed it. Colours
are chosen so the segmentation stand-in can tell the objects apart by words ("the blue T", "the red key").
"""

from __future__ import annotations

import math

from pyrua_dojo.twin.objects import Appearance, NamedPoint, ObjectSpec, Part, Vec3, _rgba
from pyrua_dojo.twin.shapes import staves, t_shape

# --------------------------------------------------------------------------------------------- push_T, swap_T
# A T of two boxes lying flat, as in the classic push-T benchmark: a bar 12 x 3 cm across the top and a stem
# 3 x 9 cm below it, 3 cm thick - a stem the gripper can close on, a bar long enough that the orientation is easy
# to read from the head camera. The bbox is 12 x 12 x 3 cm; the root is its centre, so a T lying exactly on the
# pad (same outline) has the pad's root xy and orientation - what `is_qpos_close` and the 7 mm xy check compare.

T_BAR: Vec3 = (0.06, 0.015, 0.015)
T_STEM: Vec3 = (0.015, 0.045, 0.015)
T_LOOKS: dict[int, tuple[str, str]] = {0: ("blue", "#2f5fd6"), 1: ("orange", "#f07f1a")}  # t[0]; t[1] (held out)
T_PAD_THICKNESS = 0.002


def t_block(model_id: int) -> ObjectSpec:
    """RoboDojo's `t[i]`: a T-shaped block of the index's colour (0 blue, 1 orange)."""
    if model_id not in T_LOOKS:
        raise ValueError(f"no T block with index {model_id}; known: {sorted(T_LOOKS)}")
    colour, hexcol = T_LOOKS[model_id]
    parts, half, com = t_shape(T_BAR, T_STEM)
    return ObjectSpec(
        category="t",
        model_id=model_id,
        parts=parts,
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.6 * 1000.0 * 8.0 * (T_BAR[0] * T_BAR[1] + T_STEM[0] * T_STEM[1]) * T_BAR[2],  # wood, 600 kg/m^3
        half_extents=half,
        com=com,
        words=(colour, "T", "t-shaped", "T-shaped", "block", "T block"),
        descriptions=(f"{colour} T-shaped block", f"{colour} T"),
    )


def t_cushion() -> ObjectSpec:
    """RoboDojo's `t_cushion` (a fixture): a gray pad with the T's outline, 2 mm thick and drawn only (upstream's
    Geometry objects collide only when their config asks; a pad the T is pushed onto must not be a step to climb,
    and a 2 mm lift stays far below push_T's 1 cm lift failure either way)."""
    bar = (T_BAR[0], T_BAR[1], T_PAD_THICKNESS / 2.0)
    stem = (T_STEM[0], T_STEM[1], T_PAD_THICKNESS / 2.0)
    parts, half, _ = t_shape(bar, stem)
    parts = tuple(Part(p.kind, p.size, p.pos, p.quat, p.rgba, collide=False) for p in parts)
    return ObjectSpec(
        category="t_cushion",
        model_id=0,
        parts=parts,
        appearance=Appearance(_rgba("#8a8a8a"), "flat"),
        mass=0.05,
        half_extents=half,
        words=("gray", "grey", "pad", "T-shaped pad", "cushion", "target", "outline"),
        descriptions=("gray T-shaped pad",),
    )


# ------------------------------------------------------------------------------------------------- stack_bowls
# A nestable bowl: a base and a ring of 16 staves flaring outward by BOWL_FLARE from vertical, so a bowl set
# into another comes to rest on the lower bowl's wall a little higher (the stacking check wants height steps of
# at least 5 mm and xy within 4 cm). The base 9 cm across and the rim 14 cm, 5 cm tall: a cereal bowl; three of
# them fit side by side in stack_bowls' 90 cm x range without rotation. RoboDojo picks one index for all three
# bowls (`mode: same`); the twin varies colour by index and size a little (the held-out indices differ most).

BOWL_FLARE = math.radians(35.0)
BOWL_WALL = 0.004
BOWL_BASE = 0.005
BOWL_STAVES = 16
# index -> (colour word, colour, scale of the 9 cm base / 14 cm rim / 5 cm height)
BOWL_LOOKS: dict[int, tuple[str, str, float]] = {
    1: ("white", "#eeeeea", 1.0),
    2: ("blue", "#3a6fd0", 1.0),
    3: ("green", "#3aa85a", 1.0),
    5: ("red", "#d04a3a", 1.0),
    7: ("yellow", "#e8c83a", 0.95),
    8: ("pink", "#f08ab0", 0.95),
    9: ("brown", "#8a5a3a", 1.05),
    10: ("gray", "#9a9a9a", 1.05),
    11: ("cyan", "#2ac0d0", 0.9),
    12: ("purple", "#8a4ac8", 0.9),
    13: ("orange", "#f08a2a", 1.1),
    14: ("black", "#303030", 1.1),
    15: ("teal", "#2a8a80", 1.0),
}
BOWL_INDICES = (1, 2, 3, 5, 7, 8, 9, 10)
BOWL_INDICES_RANDOM = (11, 12, 13, 14, 15)


def bowl(model_id: int) -> ObjectSpec:
    """RoboDojo's `bowl[i]`: a flared bowl (base disk + 16 leaning staves), opening up (local +z)."""
    if model_id not in BOWL_LOOKS:
        raise ValueError(f"no bowl with index {model_id}; known: {sorted(BOWL_LOOKS)}")
    colour, hexcol, k = BOWL_LOOKS[model_id]
    height = 0.05 * k
    r_base = 0.045 * k
    slant = height / math.cos(BOWL_FLARE)
    r_rim = r_base + height * math.tan(BOWL_FLARE)
    # A leaning stave's corners reach `lean` beyond its slanted ends (above and below): the bbox grows by that much.
    # The base is a drawn disk with a square plate inside it for contact (a flat box face gives MuJoCo four contact
    # points, a cylinder's one), and the staves stop 1 mm above the bottom, so a bowl on the table touches it only
    # with the plate: 4 contacts instead of some 40 (the twin's step time).
    lean = BOWL_WALL / 2.0 * math.sin(BOWL_FLARE)
    lift = 0.001
    hz = (height + 2.0 * lean + lift) / 2.0
    plate = r_base / math.sqrt(2.0)
    parts = [
        Part("cylinder", (r_base, BOWL_BASE / 2.0), pos=(0.0, 0.0, -hz + BOWL_BASE / 2.0), collide=False),
        Part("box", (plate, plate, BOWL_BASE / 2.0), pos=(0.0, 0.0, -hz + BOWL_BASE / 2.0)),
    ]
    half_w = r_rim * math.tan(math.pi / BOWL_STAVES) + 0.001
    r_mid = (r_base + r_rim) / 2.0 + BOWL_WALL / 2.0 * math.cos(BOWL_FLARE)
    parts += staves(BOWL_STAVES, r_mid, (BOWL_WALL / 2.0, half_w, slant / 2.0), lift / 2.0, lean=BOWL_FLARE)
    r_out = math.hypot(r_rim + BOWL_WALL, half_w)  # the staves' outer top corners
    return ObjectSpec(
        category="bowl",
        model_id=model_id,
        parts=tuple(parts),
        appearance=Appearance(_rgba(hexcol), "flat"),
        mass=0.15 * k,
        half_extents=(r_out, r_out, hz),
        com=(0.0, 0.0, -hz / 3.0),
        words=(colour, "bowl", "dish"),
        descriptions=(f"{colour} bowl",),
    )


# ------------------------------------------------------------------------------------------------- build_tower
# Wooden pieces (RoboDojo `block[0..4]`): boards 20 x 6 x 1.5 cm (block[0] the lower board, block[4] the upper),
# pillars 3 x 3 x 6 cm standing (block[2], four of them), a 4 x 4 x 3 cm cube (block[1]) and a 2.5 x 2.5 x 5 cm
# post (block[3]) whose long axis is its local y (the check wants block4's y axis up: it stands on block3; the
# twin's layout puts it down standing, its rest pose). Two pillars 14 cm apart carry a board with 3 cm to spare
# at each end; the upper pillars stand on the lower board and carry the upper board. Support points `block/0`
# sit at each piece's top centre (the check gives the circle radii: 4.3 cm on the lower board, 2.3 cm on
# board7 and block3).

TOWER_SIZES: dict[int, Vec3] = {
    0: (0.10, 0.03, 0.0075),
    1: (0.02, 0.02, 0.015),
    2: (0.015, 0.015, 0.03),
    3: (0.0125, 0.025, 0.0125),
    4: (0.10, 0.03, 0.0075),
}
TOWER_LOOKS: dict[int, tuple[str, str, tuple[str, ...]]] = {
    0: ("light wood", "#d8b27a", ("board", "plank", "wooden board")),
    1: ("natural wood", "#c8965a", ("cube", "block", "wooden block")),
    2: ("dark wood", "#9a6a3a", ("pillar", "column", "wooden block")),
    3: ("red", "#c0483a", ("post", "block", "wooden block", "red block")),
    4: ("light wood", "#e0bc88", ("board", "plank", "wooden board")),
}


def tower_block(model_id: int) -> ObjectSpec:
    """RoboDojo's `block[i]` of build_tower: a wooden box piece with a `block/0` support point on its top."""
    if model_id not in TOWER_SIZES:
        raise ValueError(f"no tower block with index {model_id}; known: {sorted(TOWER_SIZES)}")
    hx, hy, hz = TOWER_SIZES[model_id]
    colour, hexcol, kind_words = TOWER_LOOKS[model_id]
    top: Vec3 = (0.0, hy, 0.0) if model_id == 3 else (0.0, 0.0, hz)  # block[3] stands on its local -y face
    return ObjectSpec(
        category="block",
        model_id=model_id,
        parts=(Part("box", (hx, hy, hz)),),
        appearance=Appearance(_rgba(hexcol), "speckle", (0.45, 0.3, 0.18)),
        mass=0.6 * 1000.0 * 8 * hx * hy * hz,  # wood
        half_extents=(hx, hy, hz),
        words=(*colour.split(), "wood", "wooden", *kind_words),
        descriptions=(f"{kind_words[-1]}",),
        points=(NamedPoint("block/0", top, kind="support", radius=min(hx, hy if model_id != 3 else hz)),),
    )


# ---------------------------------------------------------------------------------------------- play_Xylophone
# A fixture xylophone: a dark frame of two rails carrying 8 coloured keys along x, key 0 (the lowest note, the
# longest key) at -x: "from left to right" is key 0 to key 7 for a xylophone turned at most 15 deg. Keys 3 cm wide
# at a 3.6 cm pitch, 12.0 down to 8.5 cm long, 1.2 cm thick, their tops 3.2 cm above the table. Functional points
# per key: `bbox_i` (the key top's four corners, the region the mallet head must be over) and `hit_i` (the top
# centre; the head centre must be 1-3.6 cm above it - a 1.2 cm head resting on the key is 1.2 cm above).

XYLO_KEYS = 8
XYLO_KEY_WIDTH = 0.03
XYLO_PITCH = 0.036
XYLO_KEY_THICK = 0.012
XYLO_RAIL_HEIGHT = 0.02
XYLO_KEY_COLOURS = (
    ("red", "#d8382a"),
    ("orange", "#f0802a"),
    ("yellow", "#e8c82a"),
    ("green", "#3aa84a"),
    ("cyan", "#2ab8d0"),
    ("blue", "#2a5ad8"),
    ("purple", "#8a3ac8"),
    ("pink", "#f07ab8"),
)


def xylo_key_length(i: int) -> float:
    return 0.12 - 0.005 * i


def xylophone() -> ObjectSpec:
    """RoboDojo's `xylophone` (a fixture): two rails and 8 keys; `bbox_i` / `hit_i` points on each key."""
    half_x = (XYLO_KEYS - 1) * XYLO_PITCH / 2.0 + XYLO_KEY_WIDTH / 2.0 + 0.01
    half_y = xylo_key_length(0) / 2.0
    hz = (XYLO_RAIL_HEIGHT + XYLO_KEY_THICK) / 2.0
    rail_z = -hz + XYLO_RAIL_HEIGHT / 2.0
    key_z = -hz + XYLO_RAIL_HEIGHT + XYLO_KEY_THICK / 2.0
    dark = _rgba("#3a2a22")
    parts: list[Part] = [
        Part("box", (half_x, 0.008, XYLO_RAIL_HEIGHT / 2.0), pos=(0.0, y, rail_z), rgba=dark) for y in (-0.035, 0.035)
    ]
    points: list[NamedPoint] = []
    top = -hz + XYLO_RAIL_HEIGHT + XYLO_KEY_THICK
    for i in range(XYLO_KEYS):
        x = (i - (XYLO_KEYS - 1) / 2.0) * XYLO_PITCH
        length = xylo_key_length(i)
        parts.append(Part("box", (XYLO_KEY_WIDTH / 2.0, length / 2.0, XYLO_KEY_THICK / 2.0), pos=(x, 0.0, key_z),
                          rgba=_rgba(XYLO_KEY_COLOURS[i][1])))
        for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
            points.append(NamedPoint(f"bbox_{i}", (x + sx * XYLO_KEY_WIDTH / 2.0, sy * length / 2.0, top)))
        points.append(NamedPoint(f"hit_{i}", (x, 0.0, top)))
    return ObjectSpec(
        category="xylophone",
        model_id=0,
        parts=tuple(parts),
        appearance=Appearance(_rgba("#3a2a22"), "flat"),
        mass=1.0,
        half_extents=(half_x, half_y, hz),
        words=("xylophone", "keys", "instrument", *(c for c, _ in XYLO_KEY_COLOURS)),
        descriptions=("xylophone",),
        points=tuple(points),
    )


# A mallet: a 19 cm handle (1 cm thick) along local x with a 2.4 cm ball head at +x; `beat` (active) is the head
# centre. It rests across the stand's two saddles, the head hanging just past the stand's +x end.
MALLET_HANDLE = (0.005, 0.095)  # radius, half length
MALLET_HEAD = 0.012  # radius
_MALLET_HEAD_X = 0.095 + 0.008  # head centre from the handle's middle (the head overlaps the handle's end)


def mallet() -> ObjectSpec:
    """RoboDojo's `mallet`: a handle along local x and a ball head at +x (functional point `beat`, active)."""
    r_h, half_len = MALLET_HANDLE
    lo, hi = -half_len, _MALLET_HEAD_X + MALLET_HEAD
    cx = (lo + hi) / 2.0  # bbox centre along x: shift everything so the origin is there
    y90 = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # capsule axis (local z) along x
    return ObjectSpec(
        category="mallet",
        model_id=0,
        parts=(
            Part("capsule", (r_h, half_len - r_h), pos=(-cx, 0.0, 0.0), quat=y90),
            Part("sphere", (MALLET_HEAD,), pos=(_MALLET_HEAD_X - cx, 0.0, 0.0), rgba=_rgba("#d8382a")),
        ),
        appearance=Appearance(_rgba("#c8a070"), "flat"),
        mass=0.05,
        half_extents=((hi - lo) / 2.0, MALLET_HEAD, MALLET_HEAD),
        com=(0.2 * (_MALLET_HEAD_X - cx), 0.0, 0.0),
        words=("mallet", "stick", "hammer", "wooden", "red"),
        descriptions=("mallet",),
        points=(NamedPoint("beat", (_MALLET_HEAD_X - cx, 0.0, 0.0), side="active"),),
    )


# The stand: a 12 x 5 cm base plate 8 mm thick and two saddles (pairs of 1.2 x 0.6 x 2.6 cm posts with a 7 mm gap)
# at x = -0.045 and +0.035; the mallet's 1 cm handle lies in the gaps along the stand's x axis, 3.1 cm above the
# table at its bottom, so the 2.4 cm head hangs free past the +x end. Support point `mallet_stand/0` is where the
# mallet's bbox bottom comes to rest when its handle sits in the saddles.
STAND_PLATE = (0.06, 0.025, 0.004)
STAND_POST = (0.006, 0.003, 0.013)
STAND_GAP = 0.0035  # half gap between a saddle's posts
STAND_SADDLES_X = (-0.045, 0.035)


def mallet_stand() -> ObjectSpec:
    """RoboDojo's `mallet_stand`: a base plate with two saddles the mallet's handle lies in."""
    px, py, pz = STAND_PLATE
    sx, sy, sz = STAND_POST
    hz = pz + sz
    parts = [Part("box", (px, py, pz), pos=(0.0, 0.0, -hz + pz))]
    for x in STAND_SADDLES_X:
        for side in (-1, 1):
            parts.append(Part("box", (sx, sy, sz), pos=(x, side * (STAND_GAP + sy), -hz + 2 * pz + sz)))
    # The handle (radius r) rests on the posts' inner top edges (half gap g): its axis is sqrt(r^2 - g^2) above them.
    r_h = MALLET_HANDLE[0]
    axis_z = hz + math.sqrt(r_h * r_h - STAND_GAP * STAND_GAP)
    rest_z = axis_z - MALLET_HEAD  # the mallet's bbox bottom (the head's lowest point) is the head radius below
    return ObjectSpec(
        category="mallet_stand",
        model_id=0,
        parts=tuple(parts),
        appearance=Appearance(_rgba("#5a3a2a"), "flat"),
        mass=0.2,
        half_extents=(px, py, hz),
        words=("stand", "holder", "mallet stand", "brown"),
        descriptions=("mallet stand",),
        points=(NamedPoint("mallet_stand/0", (0.0, 0.0, rest_z), kind="support", radius=0.01),),
    )
