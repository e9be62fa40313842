"""The prompt, assembled from the texts in `prompts/`, the API reference and the task card.

System prompt = contract (the tool, the namespace, feedback and images, limits) + API reference + operating notes for
the X5 station (with the measuring notes of the RGB or the depth variant) + how RoboDojo judges a final scene.
The first user message is the task card. No recipe for any task is written anywhere here.
"""

from __future__ import annotations

import hashlib
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from prompts import load_text, render
from pyrua_dojo.runtime.images import ImageAttachment, encode_image
from pyrua_dojo.runtime.prompt.card import TaskCard
from pyrua_dojo.runtime.prompt.reference import station_facts

__all__ = [
    "CHARS_PER_TOKEN",
    "Prompt",
    "PromptOptions",
    "build_prompt",
    "estimate_tokens",
]

CHARS_PER_TOKEN = 4
"""The estimate used for prompt budgets: one token per 4 characters of English and code."""

def estimate_tokens(text: str) -> int:
    """A character-based token estimate (ceil(chars / 4))."""
    return -(-len(text) // CHARS_PER_TOKEN)

@dataclass(frozen=True)
class PromptOptions:
    """Choices that change the prompt's wording or attachments."""

    depth: bool = False  # the depth variant of the measuring notes
    card_images: bool = True  # attach the first camera images to the card
    images: bool = True  # the model can see images at all (False: text-only models)
    cell_deadline_s: float = 120.0
    calls_left_notice: bool = False  # tool results say how many LLM calls are left
    judging_card: bool = True  # the card says what RoboDojo's success check of this task accepts
    image_format: Literal["jpeg", "png"] = "jpeg"
    jpeg_quality: int = 85
    image_max_side: int | None = 640
    max_images_per_cell: int = 4  # the contract states it (the cells keep the latest this many)


@dataclass(frozen=True)
class Prompt:
    """An assembled prompt: the system text, the card's text and encoded images, and section sizes."""

    system: str
    card: TaskCard
    card_text: str
    card_images: tuple[ImageAttachment, ...]
    sections: Mapping[str, int]  # characters per section: contract, api, notes, judging, card, judging_card (in card)
    options: PromptOptions

    @property
    def text(self) -> str:
        """What prompt.txt holds: the system prompt, then the first user message's text."""
        return f"{self.system}\n\n{_CARD_MARK}\n\n{self.card_text}\n"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def core_tokens(self) -> int:
        """Estimated tokens of contract + API + notes + judging (the part that must stay under budget)."""
        return sum(-(-self.sections[k] // CHARS_PER_TOKEN) for k in ("contract", "api", "notes", "judging"))


_CARD_MARK = "=== first user message: task card ==="


def build_prompt(
    card: TaskCard,
    *,
    api: str | None,
    options: PromptOptions = PromptOptions(),
    facts: Mapping[str, str] | None = None,
) -> Prompt:
    """Assemble the prompt. `api` is the API reference text (`robo_api_reference(...)`); None states that it is
    unavailable (only for inspecting texts before the robot class exists). `facts`: the station's numbers the
    notes state (`station_facts(...)`; default the packaged station's)."""

    images_text = (render("contract_images", max_images=str(options.max_images_per_cell)) if options.images
                   else load_text("contract_no_images"))
    calls_left = load_text("contract_calls_left") if options.calls_left_notice else ""
    contract = render(
        "contract",
        images=images_text,
        cell_deadline_s=_num(options.cell_deadline_s),
        calls_left=calls_left,
    )
    contract = re.sub(r"\n{3,}", "\n\n", contract)
    api_text = "# API reference (the `robo` object)\n\n" + (
        api if api is not None else "(unavailable: the robot class could not be imported)"
    )
    notes = render("notes", measuring=load_text("measure_depth" if options.depth else "measure_rgb"),
                   **(facts if facts is not None else station_facts()))
    judging = load_text("judging")
    system = "\n\n".join([contract, api_text, notes, judging])

    attachments: list[Any] = []
    if options.card_images and options.images:
        for k, im in enumerate(card.images, start=1):
            data, mime, w, h = encode_image(
                im.image, fmt=options.image_format, quality=options.jpeg_quality, max_side=options.image_max_side
            )
            label = f"image {k}: {im.source} @ step {im.step}" + (f", {im.label}" if im.label else "")
            attachments.append(ImageAttachment(label=label, source=im.source, step=im.step, mime=mime, data=data, width=w, height=h))
    if attachments:
        images_line = render("card_images", sources=", ".join(a.source for a in attachments))
    else:
        images_line = load_text("card_no_images")
    if card.back_to_origin is True:
        origin_line = load_text("card_back_to_origin")
    elif card.back_to_origin is False:
        origin_line = load_text("card_no_back_to_origin")
    else:
        origin_line = ""
    judging_card = ""
    if options.judging_card:
        from pyrua_dojo.catalog import TASKS as CATALOGUE
        from pyrua_dojo.runtime.judging_cards import judging_text

        if card.task in CATALOGUE:  # a catalogue task without a text raises; a name outside it has none
            judging_card = "\n" + render("card_judging", text=judging_text(card.task))
    card_text = render(
        "card",
        task=card.task,
        instruction=card.instruction,
        step_limit=card.step_limit,
        seconds=_num(card.step_limit * 0.04),
        back_to_origin=origin_line,
        judging=judging_card,
        images=images_line,
    )
    card_text = re.sub(r"\n{3,}", "\n\n", card_text).strip()
    sections = {
        "contract": len(contract),
        "api": len(api_text),
        "notes": len(notes),
        "judging": len(judging),
        "card": len(card_text),
        "judging_card": len(judging_card.strip()),
    }
    return Prompt(
        system=system,
        card=card,
        card_text=card_text,
        card_images=tuple(attachments),
        sections=types.MappingProxyType(sections),
        options=options,
    )


def _num(x: float) -> str:
    return f"{x:g}"
