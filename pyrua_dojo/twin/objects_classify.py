"""Twin assets of the sorting and tidying tasks: the three baskets and the object categories of classify_objects and
classify_objects_by_language, and the desk fixtures and items of organize_table.

RoboDojo's meshes are not published and its configs give only category names and indices, so every object here is
ours, built from primitives: a few distinct instances per category (colour and proportions vary with the index),
named by upstream's category (`ObjectSpec.category`, RoboDojo's `model_name`, which classify_objects_by_language
writes into its instruction verbatim), with description words that include that name, so the instruction and the
segmentation masks agree. Roots are bbox centres, as everywhere in the twin. The sizes are plausible desk-object
sizes (none is stated upstream) chosen so three instances of any category fit one basket; the comments say what
fixed the sizes the checks read.
"""

from __future__ import annotations

import math

from pyrua_dojo.twin.objects import Appearance, ObjectSpec, Part, Pattern, Vec3, _rgba

_X90 = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)  # cylinder axis (local z) along y
_Y90 = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # cylinder axis (local z) along x
DARK = "#262626"


def _spec(
    category: str,
    model_id: int,
    parts: tuple[Part, ...],
    colour: tuple[str, str],
    half: Vec3,
    kind_words: tuple[str, ...],
    mass: float,
    pattern: Pattern = "flat",
    rgb2: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> ObjectSpec:
    word, hexcol = colour
    name = category.replace("_", " ")
    return ObjectSpec(
        category=category,
        model_id=model_id,
        parts=parts,
        appearance=Appearance(_rgba(hexcol), pattern, rgb2),
        mass=mass,
        half_extents=half,
        words=tuple(dict.fromkeys((*word.split(), category, name, *kind_words))),
        descriptions=(f"{word} {name}",),
    )


def _pick(table: dict[int, tuple[str, str]], category: str, model_id: int) -> tuple[str, str]:
    if model_id not in table:
        raise ValueError(f"no {category} with index {model_id}; known: {sorted(table)}")
    return table[model_id]


# ------------------------------------------------------------------------------------------------------ baskets
# An open box basket, 22 x 16 cm and 7 cm tall with 6 mm walls: three stand 28 cm apart along x (upstream's basket
# positions) with 6 cm between them, and three pens (14 cm) or watches (12 cm) lie flat inside one. A fixture, as
# upstream's baskets are Geometry. The check reads only its bbox (the object's root inside its xy footprint and
# above its bottom; the object's root less than 1 cm above its top).

BASKET_HALF: Vec3 = (0.11, 0.08, 0.035)
BASKET_WALL = 0.006
BASKET_LOOKS: dict[int, tuple[str, str]] = {2: ("blue", "#3a64b8"), 3: ("green", "#3a9a58"), 4: ("orange", "#e0862a")}


def basket(model_id: int) -> ObjectSpec:
    """RoboDojo's `basket[i]` (a fixture): an open box, mouth up."""
    colour = _pick(BASKET_LOOKS, "basket", model_id)
    hx, hy, hz = BASKET_HALF
    w = BASKET_WALL / 2.0
    parts = (
        Part("box", (hx, hy, w), pos=(0.0, 0.0, -hz + w)),
        Part("box", (w, hy, hz), pos=(-hx + w, 0.0, 0.0)),
        Part("box", (w, hy, hz), pos=(hx - w, 0.0, 0.0)),
        Part("box", (hx - 2 * w, w, hz), pos=(0.0, -hy + w, 0.0)),
        Part("box", (hx - 2 * w, w, hz), pos=(0.0, hy - w, 0.0)),
    )
    return _spec("basket", model_id, parts, colour, BASKET_HALF, ("basket", "box", "bin", "container"), 1.0,
                 "speckle", (0.2, 0.15, 0.1))


# --------------------------------------------------------------------------------------------------- categories


def _car(category: str, model_id: int, colour: tuple[str, str], half_len: float, words: tuple[str, ...]) -> ObjectSpec:
    """A toy car on four wheels, long axis local x: body, cabin and wheels (radius 1.1 cm) fill a bbox
    2 half_len x 4.8 x 4.2 cm. The wheels are drawn only; the body reaches down to the wheels' bottom and takes the
    contacts (a box on the table: 4 contact points, where four cylinders cost general convex collisions)."""
    hz, hy, r = 0.021, 0.024, 0.011
    dark = _rgba(DARK)
    parts = (
        Part("box", (half_len, 0.02, 0.013), pos=(0.0, 0.0, -0.008)),
        Part("box", (half_len * 0.5, 0.018, 0.008), pos=(-0.1 * half_len, 0.0, 0.013), rgba=_rgba("#bcd8f0")),
        *(Part("cylinder", (r, 0.004), pos=(sx * half_len * 0.62, sy * (hy - 0.004), -hz + r), quat=_X90, rgba=dark,
               collide=False)
          for sx in (-1, 1) for sy in (-1, 1)),
    )
    return _spec(category, model_id, parts, colour, (half_len, hy, hz), words, 0.08)


TOY_CAR_LOOKS: dict[int, tuple[str, str]] = {
    0: ("red", "#d83a2a"), 1: ("blue", "#2f5fd6"), 2: ("yellow", "#e8c82a"), 3: ("green", "#3aa84a"), 4: ("orange", "#f0802a"),
}


def toy_car(model_id: int) -> ObjectSpec:
    """RoboDojo's `toy_car[i]` (classify_objects: 0-4): a 9 cm toy car."""
    return _car("toy_car", model_id, _pick(TOY_CAR_LOOKS, "toy_car", model_id), 0.045, ("car", "toy", "toy car", "vehicle"))


CAR_LOOKS: dict[int, tuple[str, str]] = {
    10: ("white", "#ececec"), 11: ("black", "#303030"), 12: ("silver", "#a8acb4"), 13: ("red", "#b8202a"),
    14: ("blue", "#1a3a8a"), 15: ("green", "#2a6a3a"),
}


def car(model_id: int) -> ObjectSpec:
    """RoboDojo's `car[i]` (classify_objects_by_language: 10-15): an 11 cm model car."""
    return _car("car", model_id, _pick(CAR_LOOKS, "car", model_id), 0.055, ("car", "model car", "vehicle"))


ACTION_CAMERA_LOOKS: dict[int, tuple[str, str]] = {0: ("black", "#2a2a2a"), 1: ("silver", "#b4b8c0"), 2: ("orange", "#f08a2a")}


def action_camera(model_id: int) -> ObjectSpec:
    """RoboDojo's `action_camera[i]` (every index upstream; the twin has 0-2): a 6 x 4.2 x 4 cm box with a lens on
    its -y face."""
    colour = _pick(ACTION_CAMERA_LOOKS, "action_camera", model_id)
    parts = (
        Part("box", (0.03, 0.021, 0.02), pos=(0.0, 0.004, 0.0)),
        Part("cylinder", (0.011, 0.004), pos=(0.01, -0.021, 0.0), quat=_X90, rgba=_rgba("#101418")),
    )
    return _spec("action_camera", model_id, parts, colour, (0.03, 0.025, 0.02), ("camera", "action camera", "gopro"), 0.1)


PEN_LOOKS: dict[int, tuple[str, str]] = {0: ("blue", "#2a4ad0"), 1: ("red", "#d02a2a"), 4: ("black", "#1e1e1e")}


def pen(model_id: int) -> ObjectSpec:
    """RoboDojo's `pen[i]` (classify_objects: 0, 1, 4): a 14 cm pen of square section (it does not roll), its tip
    at local +x."""
    colour = _pick(PEN_LOOKS, "pen", model_id)
    parts = (
        Part("box", (0.06, 0.005, 0.005), pos=(-0.01, 0.0, 0.0)),
        Part("box", (0.01, 0.003, 0.003), pos=(0.06, 0.0, 0.0), rgba=_rgba("#d8d8d8")),
    )
    return _spec("pen", model_id, parts, colour, (0.07, 0.005, 0.005), ("pen", "marker", "ballpoint"), 0.02)


WATCH_LOOKS: dict[int, tuple[str, str]] = {
    0: ("black", "#262626"), 1: ("brown", "#7a4a2a"), 2: ("blue", "#2a4a9a"), 4: ("red", "#b8302a"),
    5: ("green", "#2a7a4a"), 6: ("white", "#e8e8e2"), 7: ("pink", "#e88ab0"),
}


def watch(model_id: int) -> ObjectSpec:
    """RoboDojo's `watch[i]` (classify_objects: 0-2; classify_objects_by_language: 4-7): a wristwatch lying flat,
    a 4 cm face on a 12 cm strap along local y."""
    colour = _pick(WATCH_LOOKS, "watch", model_id)
    parts = (  # the face is drawn; a square inside it takes its contacts (boxes: cheap, stable contacts)
        Part("cylinder", (0.02, 0.006), pos=(0.0, 0.0, 0.0), rgba=_rgba("#d8dce0"), collide=False),
        Part("box", (0.014, 0.014, 0.006), pos=(0.0, 0.0, 0.0), rgba=_rgba("#d8dce0")),
        Part("box", (0.011, 0.06, 0.003), pos=(0.0, 0.0, -0.003)),
    )
    return _spec("watch", model_id, parts, colour, (0.02, 0.06, 0.006), ("watch", "wristwatch", "clock"), 0.05)


GARAGE_LOOKS: dict[int, tuple[str, str]] = {
    5: ("red", "#c83a3a"), 6: ("blue", "#3a5ac8"), 7: ("yellow", "#e0c03a"), 8: ("purple", "#8a4ac0"),
    11: ("green", "#3a9a4a"), 14: ("pink", "#e07ab0"), 15: ("cyan", "#3ab8c8"),
}


def garage(model_id: int) -> ObjectSpec:
    """RoboDojo's `garage[i]` (organize_table's figurine: 5, 6, 7, 8, 11; classify_objects: 14, 15): a 7.2 cm
    figurine standing on a 4 cm round base, upright along local +z."""
    colour = _pick(GARAGE_LOOKS, "garage", model_id)
    hz = 0.036
    parts = (  # the round base is drawn; a square plate inside it takes the contacts
        Part("cylinder", (0.02, 0.004), pos=(0.0, 0.0, -hz + 0.004), rgba=_rgba("#404040"), collide=False),
        Part("box", (0.014, 0.014, 0.004), pos=(0.0, 0.0, -hz + 0.004), rgba=_rgba("#404040")),
        Part("box", (0.012, 0.009, 0.02), pos=(0.0, 0.0, -hz + 0.028)),
        Part("sphere", (0.012,), pos=(0.0, 0.0, hz - 0.012), rgba=_rgba("#f0c8a0")),
    )
    return _spec("garage", model_id, parts, colour, (0.02, 0.02, hz), ("figurine", "figure", "toy", "statue"), 0.06)


def _wood(parts: tuple[Part, ...], model_id: int, half: Vec3, colour: tuple[str, str]) -> ObjectSpec:
    return _spec("wooden_toy", model_id, parts, colour, half, ("wooden", "wood", "toy", "wooden toy", "block"), 0.05,
                 "speckle", (0.45, 0.3, 0.18))


def wooden_toy(model_id: int) -> ObjectSpec:
    """RoboDojo's `wooden_toy[i]` (classify_objects_by_language: 0-4): a wooden shape per index - a standing
    cylinder, a brick, a plus sign, a ball on a cube, a stepped block."""
    light, dark = ("light", "#d8b27a"), ("natural", "#c08a52")
    if model_id == 0:
        return _wood((Part("cylinder", (0.02, 0.025)),), 0, (0.02, 0.02, 0.025), light)
    if model_id == 1:
        return _wood((Part("box", (0.04, 0.02, 0.015)),), 1, (0.04, 0.02, 0.015), dark)
    if model_id == 2:
        return _wood((Part("box", (0.035, 0.01, 0.012)), Part("box", (0.01, 0.035, 0.012))), 2, (0.035, 0.035, 0.012),
                     light)
    if model_id == 3:
        return _wood((Part("box", (0.018, 0.018, 0.018), pos=(0.0, 0.0, -0.015)),
                      Part("sphere", (0.015,), pos=(0.0, 0.0, 0.018))), 3, (0.018, 0.018, 0.033), dark)
    if model_id == 4:
        return _wood((Part("box", (0.03, 0.02, 0.01), pos=(0.0, 0.0, -0.01)),
                      Part("box", (0.015, 0.02, 0.01), pos=(-0.015, 0.0, 0.01))), 4, (0.03, 0.02, 0.02), light)
    raise ValueError(f"no wooden_toy with index {model_id}; known: [0, 1, 2, 3, 4]")


PEPPER_LOOKS: dict[int, tuple[str, str]] = {0: ("red", "#d0281e"), 1: ("green", "#3a9a2a"), 2: ("yellow", "#f0c81e")}


def pepper(model_id: int) -> ObjectSpec:
    """RoboDojo's `pepper[i]` (every index upstream; the twin has 0-2): a bell pepper, 7 cm across, with a stem."""
    colour = _pick(PEPPER_LOOKS, "pepper", model_id)
    hz = 0.038
    parts = (
        Part("ellipsoid", (0.035, 0.035, 0.03), pos=(0.0, 0.0, -hz + 0.03)),
        Part("cylinder", (0.005, 0.008), pos=(0.0, 0.0, hz - 0.008), rgba=_rgba("#3a6a1e")),
    )
    return _spec("pepper", model_id, parts, colour, (0.035, 0.035, hz), ("pepper", "bell pepper", "vegetable"), 0.08)


CHOCOLATE_LOOKS: dict[int, tuple[str, str]] = {
    0: ("brown", "#5a321e"), 1: ("purple", "#5a2a8a"), 2: ("red", "#b82a2a"), 3: ("blue", "#2a4ab0"), 4: ("gold", "#d0a82a"),
}


def chocolate_bar(model_id: int) -> ObjectSpec:
    """RoboDojo's `chocolate_bar[i]` (classify_objects_by_language: 0-4): a wrapped 12 x 5 x 1.2 cm bar."""
    colour = _pick(CHOCOLATE_LOOKS, "chocolate_bar", model_id)
    parts = (Part("box", (0.06, 0.025, 0.006)),)
    return _spec("chocolate_bar", model_id, parts, colour, (0.06, 0.025, 0.006), ("chocolate", "chocolate bar", "bar",
                                                                                  "candy"), 0.05)


CATEGORY_BUILDERS = {
    "toy_car": toy_car,
    "action_camera": action_camera,
    "pen": pen,
    "watch": watch,
    "garage": garage,
    "car": car,
    "wooden_toy": wooden_toy,
    "pepper": pepper,
    "chocolate_bar": chocolate_bar,
}


def category_object(category: str, model_id: int) -> ObjectSpec:
    """The twin's instance `model_id` of an upstream category."""
    if category not in CATEGORY_BUILDERS:
        raise ValueError(f"no category {category!r}; known: {sorted(CATEGORY_BUILDERS)}")
    return CATEGORY_BUILDERS[category](model_id)


# ------------------------------------------------------------------------------------------------ organize_table
# A desk: five fixtures (RoboDojo's Geometry: a chest of drawers, the figurine's stand, a monitor, a mouse mat and
# the keyboard's frame) and four items (mouse, alarm clock, keyboard, figurine). What fixed the sizes the check
# reads: the clock must end 22.5-30 cm above the drawer's root; roots are bbox centres in the twin, so a 38 cm chest
# and an 11 cm clock put it 24.5 cm up when it stands on top. The figurine on the 5 cm stand is 6.1 cm above the
# stand's root (the check wants 0.5-10 cm). The keyboard (30 x 10 cm) in its frame covers the check's region
# x 0..0.2, y -0.03..0.03 with 5 cm to spare in x and 1.5 cm in y. The mouse lies with its long side along its
# local x; the check wants its local y along world x, i.e. the long side along the table's depth (as in use).

DRAWER_HALF: Vec3 = (0.08, 0.1, 0.19)


def drawer() -> ObjectSpec:
    """RoboDojo's `drawer` (a fixture here: upstream's drawer opens, but the check never reads it): a 16 x 20 x
    38 cm chest with two drawer fronts and handles on its -y face, a flat top."""
    hx, hy, hz = DRAWER_HALF
    front = _rgba("#e8e0d0")
    handle = _rgba("#505050")
    parts: list[Part] = [Part("box", (hx, hy - 0.002, hz), pos=(0.0, 0.002, 0.0))]
    for zc in (-hz / 2.0, hz / 2.0):
        parts.append(Part("box", (hx - 0.008, 0.002, hz / 2.0 - 0.01), pos=(0.0, -hy + 0.002, zc), rgba=front,
                          collide=False))
        parts.append(Part("box", (0.03, 0.0015, 0.006), pos=(0.0, -hy + 0.0015, zc + 0.04), rgba=handle,
                          collide=False))
    return _spec("drawer", 0, tuple(parts), ("white", "#d8d0c0"), DRAWER_HALF,
                 ("drawer", "drawers", "chest of drawers", "cabinet", "nightstand"), 5.0)


CUSHION_HALF: Vec3 = (0.04, 0.04, 0.025)


def cube_cushion(model_id: int = 2) -> ObjectSpec:
    """RoboDojo's `cube_cushion[2]` (a fixture): the figurine's stand, an 8 x 8 x 5 cm block."""
    if model_id != 2:
        raise ValueError(f"no cube_cushion with index {model_id}; known: [2]")
    return _spec("cube_cushion", 2, (Part("box", CUSHION_HALF),), ("grey", "#8a8e96"), CUSHION_HALF,
                 ("cushion", "cube cushion", "stand", "pedestal", "block"), 0.5)


MONITOR_HALF: Vec3 = (0.16, 0.06, 0.16)


def monitor() -> ObjectSpec:
    """RoboDojo's `monitor` (a fixture, decor): a 32 x 22 cm screen on a neck and foot, 32 cm tall."""
    hx, hy, hz = MONITOR_HALF
    dark = _rgba("#1e1e22")
    parts = (
        Part("box", (0.08, hy, 0.005), pos=(0.0, 0.0, -hz + 0.005)),
        Part("box", (0.015, 0.01, 0.05), pos=(0.0, 0.02, -hz + 0.06)),
        Part("box", (hx, 0.012, 0.11), pos=(0.0, 0.0, hz - 0.11), rgba=dark),
        Part("box", (hx - 0.008, 0.001, 0.102), pos=(0.0, -0.0125, hz - 0.11), rgba=_rgba("#2a3a5a"), collide=False),
    )
    return _spec("monitor", 0, parts, ("black", "#2a2a2e"), MONITOR_HALF, ("monitor", "screen", "display"), 3.0)


MOUSEMAT_HALF: Vec3 = (0.1, 0.08, 0.002)


def mousemat() -> ObjectSpec:
    """RoboDojo's `mousemat` (a fixture): a 20 x 16 cm pad, 4 mm thick."""
    return _spec("mousemat", 0, (Part("box", MOUSEMAT_HALF),), ("dark blue", "#23305a"), MOUSEMAT_HALF,
                 ("mousemat", "mouse mat", "mouse pad", "mousepad", "pad", "mat"), 0.1)


FRAME_CAVITY = (0.155, 0.055)  # inner half extents: the keyboard's 15 x 5 cm plus 5 mm
FRAME_WALL = (0.004, 0.0075)  # half thickness, half height


def frame() -> ObjectSpec:
    """RoboDojo's `frame` (a fixture): a U of 1.5 cm walls around a 31 x 11 cm bay, open towards -y (the robot), so
    the keyboard is pushed in from the front. The bbox is centred on the walls: the bay's centre is 4 mm below
    (-y of) the root."""
    cx, cy = FRAME_CAVITY
    t, h = FRAME_WALL
    hy = cy + t  # the bay plus the back wall's thickness, halved (y from -cy to cy + 2t)
    off = -t  # the bay's centre in the frame's coordinates
    parts = (
        Part("box", (cx + 2 * t, t, h), pos=(0.0, off + cy + t, 0.0)),
        Part("box", (t, cy, h), pos=(-cx - t, off, 0.0)),
        Part("box", (t, cy, h), pos=(cx + t, off, 0.0)),
    )
    return _spec("frame", 0, parts, ("grey", "#6a6e76"), (cx + 2 * t, hy, h), ("frame", "keyboard frame", "tray"), 0.3)


MOUSE_LOOKS: dict[int, tuple[str, str]] = {4: ("black", "#262626"), 6: ("white", "#ececec"), 7: ("grey", "#8a8a8a")}


def mouse(model_id: int) -> ObjectSpec:
    """RoboDojo's `mouse[i]` (4, 6, 7): an 11 x 6 x 4 cm computer mouse, its long side along local x, a flat sole."""
    colour = _pick(MOUSE_LOOKS, "mouse", model_id)
    hz = 0.02
    parts = (
        Part("box", (0.048, 0.026, 0.005), pos=(0.0, 0.0, -hz + 0.005)),
        Part("ellipsoid", (0.055, 0.03, 0.02), pos=(0.0, 0.0, -hz + 0.02)),
    )
    return _spec("mouse", model_id, parts, colour, (0.055, 0.03, hz), ("mouse", "computer mouse"), 0.08)


def alarm() -> ObjectSpec:
    """RoboDojo's `alarm`: an alarm clock 9 x 5.4 x 11 cm, its round face towards -y, two bells on top, flat feet."""
    hz = 0.055
    parts = (
        Part("box", (0.03, 0.02, 0.005), pos=(0.0, 0.0, -hz + 0.005), rgba=_rgba("#303030")),
        Part("cylinder", (0.045, 0.025), pos=(0.0, 0.0, -hz + 0.055), quat=_X90),
        Part("cylinder", (0.038, 0.001), pos=(0.0, -0.026, -hz + 0.055), quat=_X90, rgba=_rgba("#f4f4f0"),
             collide=False),
        Part("sphere", (0.012,), pos=(-0.025, 0.0, hz - 0.012), rgba=_rgba("#c0c0c8")),
        Part("sphere", (0.012,), pos=(0.025, 0.0, hz - 0.012), rgba=_rgba("#c0c0c8")),
    )
    return _spec("alarm", 0, parts, ("red", "#c8302a"), (0.045, 0.027, hz), ("alarm", "alarm clock", "clock"), 0.2)


KEYBOARD_HALF: Vec3 = (0.15, 0.05, 0.01)


def keyboard() -> ObjectSpec:
    """RoboDojo's `keyboard`: a 30 x 10 x 2 cm keyboard, its long side along local x, keys drawn on top."""
    hx, hy, hz = KEYBOARD_HALF
    keys = _rgba("#e8e8e8")
    parts: list[Part] = [Part("box", (hx, hy, hz - 0.002), pos=(0.0, 0.0, -0.002))]
    for row in range(4):
        parts.append(Part("box", (hx - 0.01, 0.008, 0.002), pos=(0.0, -hy + 0.016 + row * 0.023, hz - 0.002),
                          rgba=keys, collide=False))
    return _spec("keyboard", 0, tuple(parts), ("black", "#2a2a2a"), KEYBOARD_HALF, ("keyboard", "computer keyboard"),
                 0.5)
