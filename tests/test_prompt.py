"""Prompt assembly: the API reference generated from a live class, the texts from prompts/, the card, the size
budget, the depth variant, and the `prompt` command."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from importlib import resources

import cv2
import numpy as np
import pytest

from primitives.results import CapturedImage
from pyrua_dojo.catalog import TASKS
from pyrua_dojo.cli import main as cli_main
from pyrua_dojo.runtime.images import encode_image
from pyrua_dojo.runtime.prompt.command import CORE_TOKEN_BUDGET, run_cli
from pyrua_dojo.runtime.prompt.assemble import PromptOptions, build_prompt, estimate_tokens
from pyrua_dojo.runtime.prompt.card import TaskCard
from pyrua_dojo.runtime.prompt.reference import api_reference, referenced_types, robo_api_reference
from prompts import load_text, render

# -- a small robot class of our own, to test the generator ---------------------------------------------------------


@dataclass(frozen=True)
class Pose:
    """A position and heading."""

    xyz: tuple[float, float, float]  # metres, env frame
    yaw: float  # radians

    @property
    def height(self) -> float:
        """Height above the floor."""
        return self.xyz[2]


@dataclass(frozen=True)
class Reach:
    """Outcome of a reach."""

    reached: bool
    final: Pose | None  # where the tool ended, None if nothing moved
    _secret: int = 0

    def explain(self, verbose: bool = False) -> str:
        """A sentence about the outcome."""
        return "ok"


def _host_only(f):
    f.__prompt_hidden__ = True
    return f


class Bot:
    """A toy robot. Arms are "a" and "b"."""

    ARMS = ("a", "b")
    LIMIT = 3
    __prompt_hidden__ = ("backend",)

    def reach(self, arm: str, xyz: tuple[float, float, float], *, speed: float = 1.0) -> Reach:
        """Reach xyz with the tool.

        Fails without moving when out of range.
        """
        raise NotImplementedError

    def a_method_with_a_very_long_signature(
        self, first_argument: float, second_argument: float, *, third_keyword: str = "default", fourth: int = 4
    ) -> list[Pose]:
        """Long."""
        raise NotImplementedError

    @property
    def pose(self) -> Pose:
        """The current pose."""
        raise NotImplementedError

    @staticmethod
    def clamp(x: float, /, lo: float = 0.0) -> float:
        """Clamp."""
        return max(x, lo)

    def backend(self) -> object:
        """Host side."""

    @_host_only
    def ledger(self) -> object:
        """Host side."""

    def _private(self) -> None:
        """Private."""


def test_api_reference_renders_the_live_class():
    text = api_reference(Bot, referenced_types(Bot, globals()))
    assert text.startswith('A toy robot. Arms are "a" and "b".')
    assert "Constants:\nrobo.ARMS = ('a', 'b')\nrobo.LIMIT = 3" in text
    assert "robo.reach(arm: str, xyz: tuple[float, float, float], *, speed: float = 1.0) -> Reach\n    Reach xyz with the tool.\n\n    Fails without moving" in text
    long_sig = (
        "robo.a_method_with_a_very_long_signature(\n    first_argument: float,\n    second_argument: float,\n    *,\n"
        "    third_keyword: str = 'default',\n    fourth: int = 4,\n) -> list[Pose]"
    )
    assert long_sig in text
    assert "robo.pose -> Pose  (property)\n    The current pose." in text
    assert "robo.clamp(x: float, /, lo: float = 0.0) -> float" in text
    for hidden in ("backend", "ledger", "_private", "_secret"):
        assert hidden not in text
    # result types: found through the signatures, fields with their source comments, properties, methods
    assert "Result types (frozen dataclasses; read fields as attributes):" in text
    assert "class Reach:\n    Outcome of a reach.\n    reached: bool\n    final: Pose | None  # where the tool ended, None if nothing moved" in text
    assert "    explain(verbose: bool = False) -> str\n        A sentence about the outcome." in text
    assert "class Pose:" in text and "    xyz: tuple[float, float, float]  # metres, env frame" in text
    assert "    height: float  (property)  # Height above the floor." in text


def test_referenced_types_follows_signatures_and_fields():
    assert set(referenced_types(Bot, globals())) == {Reach, Pose}


def test_real_robo_reference_is_complete():
    text = robo_api_reference()
    assert text is not None, "primitives.robot.Robo could not be imported"
    from primitives.robot import Robo

    for name, value in vars(Robo).items():
        if name.startswith("_") or name in getattr(Robo, "__prompt_hidden__", ()):
            continue
        if callable(value) or isinstance(value, property):
            assert f"robo.{name}" in text, name
    assert "CapturedImage" not in text


def test_every_robo_name_in_the_texts_exists():
    """The hand-written texts may only mention robo members that exist."""
    from primitives.robot import Robo

    root = resources.files("prompts")
    for entry in root.iterdir():
        if entry.name.endswith(".md"):
            for name in re.findall(r"robo\.([A-Za-z_]\w*)", entry.read_text(encoding="utf-8")):
                assert hasattr(Robo, name), f"prompts/{entry.name} mentions robo.{name}, which Robo lacks"


# -- texts, card, assembly --------------------------------------------------------------------------------------------


def _card(**kw) -> TaskCard:
    images = tuple(CapturedImage(c, 0, np.full((480, 640, 3), v, np.uint8)) for c, v in (("cam_head", 10), ("cam_left_wrist", 20)))
    return TaskCard.for_task("stack_blocks_by_language", kw.pop("instruction", "stack the blocks from bottom to top in the order ofred, green, and blue, then reset the robot arm."), images=images, **kw)


def _api() -> str:
    return robo_api_reference() or api_reference(Bot, referenced_types(Bot, globals()))


@pytest.mark.parametrize("depth", [False, True])
def test_contract_api_notes_stay_under_the_token_budget(depth):
    prompt = build_prompt(_card(), api=_api(), options=PromptOptions(depth=depth))
    core = sum(prompt.sections[k] for k in ("contract", "api", "notes", "judging"))
    assert estimate_tokens("x" * core) <= prompt.core_tokens + 4
    assert prompt.core_tokens < CORE_TOKEN_BUDGET
    assert len(prompt.system) == core + 3 * 2  # sections joined by blank lines


def test_card_has_the_instruction_verbatim_the_limit_and_the_images():
    instruction = "stack the blocks from bottom to top in the order ofred, green, and blue, then reset the robot arm."
    prompt = build_prompt(_card(instruction=instruction), api=_api())
    assert f"Instruction (verbatim; it is authoritative): {instruction}\n" in prompt.card_text
    assert "Task: stack_blocks_by_language" in prompt.card_text
    assert "Step limit: 400 steps of 40 ms (16 s of robot motion)." in prompt.card_text
    assert "both arms back near their start pose" in prompt.card_text
    assert "cam_head, cam_left_wrist at step 0" in prompt.card_text
    assert [a.label for a in prompt.card_images] == ["image 1: cam_head @ step 0", "image 2: cam_left_wrist @ step 0"]
    assert prompt.card_images[0].mime == "image/jpeg" and (prompt.card_images[0].width, prompt.card_images[0].height) == (640, 480)
    assert prompt.text.startswith(prompt.system) and prompt.text.endswith(prompt.card_text + "\n")
    no_images = build_prompt(_card(), api=_api(), options=PromptOptions(card_images=False))
    assert no_images.card_images == () and "No images are attached" in no_images.card_text


def test_card_from_the_catalogue_and_its_checks():
    card = TaskCard.for_task("insert_key")
    assert card.step_limit == 300 and card.back_to_origin is False
    assert card.instruction == TASKS["insert_key"].instruction
    assert "does not check where the arms end" in build_prompt(card, api="x").card_text
    with pytest.raises(ValueError, match="unknown RoboDojo task"):
        TaskCard.for_task("insert_keys")
    with pytest.raises(ValueError, match="instruction is empty"):
        TaskCard("t", "  ", 10)
    with pytest.raises(ValueError, match="step_limit"):
        TaskCard("t", "do", 0)


def test_depth_variant_swaps_only_the_measuring_notes():
    rgb = build_prompt(_card(), api=_api())
    depth = build_prompt(_card(), api=_api(), options=PromptOptions(depth=True))
    assert load_text("measure_rgb") in rgb.system and load_text("measure_rgb") not in depth.system
    assert load_text("measure_depth") in depth.system and load_text("measure_depth") not in rgb.system
    assert rgb.system.replace(load_text("measure_rgb"), "") == depth.system.replace(load_text("measure_depth"), "")


def test_no_placeholder_is_left_and_no_task_recipe_is_given():
    for options in (PromptOptions(), PromptOptions(depth=True, images=False, calls_left_notice=True)):
        prompt = build_prompt(_card(), api=_api(), options=options)
        assert not re.search(r"\$\{?[A-Za-z_]", prompt.text)
        # the system prompt is the same for every task: it names none of them and quotes no instruction
        for name, spec in TASKS.items():
            assert name not in prompt.system, name
            assert spec.instruction[:40] not in prompt.system, name


def test_mode_dependent_wording():
    on = build_prompt(_card(), api="x")
    off = build_prompt(_card(), api="x", options=PromptOptions(images=False, calls_left_notice=True, cell_deadline_s=45))
    assert "robo.show(camera)" in on.system and "You receive no images" in off.system
    assert off.card_images == () and "number of LLM calls left" in off.system
    assert "longer than 45 s of wall time" in off.system
    # the image limit per cell is the one the cells apply (trial U: crops beyond the fourth were dropped unannounced)
    assert "at most 4 per cell" in on.system
    assert "at most 2 per cell" in build_prompt(_card(), api="x", options=PromptOptions(max_images_per_cell=2)).system


def test_the_policy_config_states_its_image_limit_in_the_prompt():
    from pyrua_dojo.plugin.config import PolicyConfig

    cfg = PolicyConfig.from_model_cfg({"task_name": "stack_blocks", "max_images_per_cell": 3})
    assert cfg.cells.max_images_per_cell == 3 and cfg.prompt.max_images_per_cell == 3


def test_render_refuses_a_missing_value():
    with pytest.raises(ValueError, match=r"needs a value for \$images"):
        render("contract", cell_deadline_s=1, calls_left="")
    with pytest.raises(FileNotFoundError, match="prompts/nope.md"):
        load_text("nope")


def test_encode_image_downscales_and_round_trips():
    img = np.zeros((480, 640, 3), np.uint8)
    img[:, :320] = (255, 0, 0)
    data, mime, w, h = encode_image(img, fmt="png", max_side=320)
    assert (mime, w, h) == ("image/png", 320, 240)
    back = cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    assert tuple(back[10, 10]) == (255, 0, 0) and tuple(back[10, 300]) == (0, 0, 0)
    assert encode_image(img, fmt="jpeg", max_side=None)[1:] == ("image/jpeg", 640, 480)
    with pytest.raises(ValueError, match="uint8 HxWx3"):
        encode_image(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="'jpeg' or 'png'"):
        encode_image(img, fmt="gif")  # type: ignore[arg-type]


# -- the command -----------------------------------------------------------------------------------------------------


def test_prompt_command_prints_prompt_and_size():
    out, err = io.StringIO(), io.StringIO()
    assert run_cli("stack_blocks", out=out, err=err) == 0
    text = out.getvalue()
    assert "Instruction (verbatim; it is authoritative): Stack the three blocks with different textures." in text
    assert "# How RoboDojo judges" in text and "[3 images attached to the card" in text
    assert re.search(r"contract \+ api \+ notes \+ judging ~[\d,]+ tokens: within the 8,000 budget", text)
    out = io.StringIO()
    assert run_cli("stack_blocks", depth=True, size_only=True, out=out, err=err) == 0
    assert out.getvalue().startswith("prompt size (depth variant")


def test_prompt_command_rejects_an_unknown_task(capsys):
    assert cli_main(["prompt", "--task", "stak_blocks"]) == 2
    assert "did you mean stack_blocks" in capsys.readouterr().err
    assert cli_main(["prompt", "--task", "general_pickup", "--instruction", "Pick up the red mug by 10 cm.", "--size-only"]) == 0


def test_the_api_reference_and_notes_take_their_numbers_from_the_station_and_config() -> None:
    """One owner per fact: move the table and a base, widen the reach tolerance; the texts follow, none is left
    unfilled."""
    import dataclasses

    from calibration import load_station
    from primitives.robot import RoboConfig
    from pyrua_dojo.runtime.prompt.reference import station_facts

    packaged = load_station()
    station = dataclasses.replace(
        packaged,
        table=dataclasses.replace(packaged.table, top_z=0.8),
        arms={**packaged.arms, "left": dataclasses.replace(packaged.arms["left"], base_position=(-0.31, -0.46, 0.8))},
    )
    api = robo_api_reference(station, RoboConfig(reach_tolerance_m=0.007))
    assert api is not None and "$" not in api
    assert "table top z = 0.8)" in api and "left base is at (-0.31, -0.46)" in api and "within 7 mm and 3 deg" in api
    assert "0.765" not in api and "(-0.3, -0.45)" not in api
    card = TaskCard.for_task("stack_blocks", "stack the blocks", images=[], step_limit=550, seed=0)
    system = build_prompt(card, api=api, facts=station_facts(station)).system
    assert "Table top: z = 0.8;" in system and "at left (-0.31, -0.46) and right (0.3, -0.45)" in system
    default = build_prompt(card, api=robo_api_reference()).system
    assert "Table top: z = 0.765;" in default and "the pads open to 88 mm apart" in default
