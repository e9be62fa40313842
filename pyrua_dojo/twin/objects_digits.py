"""Twin assets of the digit-tile tasks (arrange_largest_number (+ _random), solve_equation): number tiles, operator
tiles and the mats they go on.

RoboDojo's `number`, `plus` / `minus` / `multiplication` / `division` / `equal` and `cube_cushion` assets are meshes
in its (unpublished) Assets, so sizes and colours here are ours: a tile is a 5 x 5 x 2 cm box (large enough that
its printed symbol reads in the head camera, small enough for the gripper's 8.8 cm opening, and it fits on a mat);
a mat (`cube_cushion[1]`) is a 7 x 7 cm fixture 5 mm thick (upstream's mats stand 8.5 cm apart, so a mat is
narrower than that) that collides, since solve_equation places tiles on it (`relative_plane: mat<i>`).

Symbols are printed on the tile's top face (local +z), the symbol's top towards local +y and its right towards
local +x: a tile at yaw 0 reads upright from the robot's side, which is what upstream's checks ask (tile y within
45 degrees of world y, x of world x). A number tile's value is RoboDojo's `model_id % 10`; its texture group
(`model_id // 10`) sets the colours: 0-29 are the three texture groups of arrange_largest_number and
solve_equation, 30-49 the held-out ones of arrange_largest_number_random.
"""

from __future__ import annotations

from pyrua_dojo.twin.objects import (
    Appearance,
    NamedPoint,
    ObjectSpec,
    Part,
    Vec3,
    _rgba,
    symbol_tile,
)

TILE_HALF: Vec3 = (0.025, 0.025, 0.01)
MAT_HALF: Vec3 = (0.035, 0.035, 0.0025)
MAT_TOP = "cube_cushion/0"  # the mat's support point: its top centre (what `relative_plane: mat<i>` rests on)

# texture group (model_id // 10) -> (colour words, paper, ink)
NUMBER_LOOKS: dict[int, tuple[tuple[str, ...], str, str]] = {
    0: (("white", "cream"), "#f2efe6", "#1a1a1a"),
    1: (("blue",), "#2f5fd6", "#ffffff"),
    2: (("yellow",), "#f2c81f", "#1a1a1a"),
    3: (("red",), "#c8302a", "#ffffff"),
    4: (("green",), "#8fd08a", "#1a1a1a"),
}
NUMBER_IDS = tuple(range(10 * len(NUMBER_LOOKS)))

# upstream's operator categories -> (printed symbol, words)
OPERATORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "plus": ("+", ("plus", "add", "addition")),
    "minus": ("-", ("minus", "subtract", "subtraction")),
    "multiplication": ("x", ("multiplication", "multiply", "times")),
    "division": ("/", ("division", "divide", "divided")),
    "equal": ("=", ("equal", "equals")),
}
OPERATOR_PAPER = "#e8e8e8"
OPERATOR_INK = "#1a1a1a"


def number_value(model_id: int) -> int:
    """The digit a number tile shows: RoboDojo's `model_id % 10`."""
    return int(model_id) % 10


def number_tile(model_id: int) -> ObjectSpec:
    """RoboDojo's `number[model_id]`: a tile printed with the digit `model_id % 10` in its texture group's colours."""
    if model_id not in NUMBER_IDS:
        raise ValueError(f"no number tile with index {model_id}; known: 0..{NUMBER_IDS[-1]}")
    colours, paper, ink = NUMBER_LOOKS[model_id // 10]
    digit = str(number_value(model_id))
    spec = symbol_tile("number", model_id, digit, half_extents=TILE_HALF, paper=paper, ink=ink,
                       extra_words=("number tile", "digit", "card", *colours))
    return spec


def operator_tile(category: str) -> ObjectSpec:
    """RoboDojo's `plus`, `minus`, `multiplication`, `division` or `equal` tile (one asset each: index 0)."""
    if category not in OPERATORS:
        raise ValueError(f"no operator tile {category!r}; known: {sorted(OPERATORS)}")
    symbol, words = OPERATORS[category]
    base = symbol_tile(category, 0, symbol, half_extents=TILE_HALF, paper=OPERATOR_PAPER, ink=OPERATOR_INK,
                       extra_words=(*words, "operator", "symbol", "card", "gray", "grey"))
    return base


def mat() -> ObjectSpec:
    """RoboDojo's `cube_cushion[1]` as a mat (a fixture): a dark gray pad with a light border, its top centre the
    support point `cube_cushion/0`."""
    hx, hy, hz = MAT_HALF
    return ObjectSpec(
        category="cube_cushion",
        model_id=1,
        parts=(Part("box", (hx, hy, hz)),),
        appearance=Appearance(_rgba("#3c4452"), "edge", (0.75, 0.78, 0.82)),
        mass=0.05,
        half_extents=MAT_HALF,
        words=("mat", "pad", "cushion", "dark", "gray", "grey", "slot"),
        descriptions=("mat", "pad"),
        points=(NamedPoint(MAT_TOP, (0.0, 0.0, hz), kind="support", radius=min(hx, hy)),),
    )
