"""`pyrua-dojo prompt`: print the prompt an episode of a task would get and its size per section against the token
budgets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from primitives.results import CapturedImage
from pyrua_dojo.runtime.prompt.assemble import CHARS_PER_TOKEN, PromptOptions, build_prompt, estimate_tokens
from pyrua_dojo.runtime.prompt.card import TaskCard
from pyrua_dojo.runtime.prompt.reference import robo_api_reference

__all__ = [
    "CORE_TOKEN_BUDGET",
    "run_cli",
]


CORE_TOKEN_BUDGET = 8000
"""Contract + API reference + notes + judging must stay under this many estimated tokens."""


def run_cli(
    task: str,
    *,
    depth: bool = False,
    instruction: str | None = None,
    step_limit: int | None = None,
    size_only: bool = False,
    judging_card: bool = True,
    out: Any = None,
    err: Any = None,
) -> int:
    """Print the prompt an episode of `task` would get (the card as with the three step-0 images attached), then
    its size per section. Exit status 0; 1 when contract + API + notes exceed CORE_TOKEN_BUDGET or the task's judging
    text exceeds JUDGING_CARD_TOKEN_BUDGET; 2 on bad input."""
    from pyrua_dojo.runtime.judging_cards import JUDGING_CARD_TOKEN_BUDGET

    import sys

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    cameras = ("cam_head", "cam_left_wrist", "cam_right_wrist")
    blank = tuple(CapturedImage(c, 0, np.zeros((480, 640, 3), np.uint8)) for c in cameras)
    try:
        card = TaskCard.for_task(task, instruction, images=blank, step_limit=step_limit)
    except ValueError as exc:
        print(f"pyrua-dojo prompt: {exc}", file=err)
        return 2
    api = robo_api_reference()
    if api is None:
        print("pyrua-dojo prompt: primitives.robot.Robo is not available; the API reference is left out", file=err)
    prompt = build_prompt(card, api=api, options=PromptOptions(depth=depth, judging_card=judging_card))
    if not size_only:
        print(prompt.text, file=out)
        labels = ", ".join(a.label for a in prompt.card_images)
        print(f"[{len(prompt.card_images)} images attached to the card: {labels}]\n", file=out)
    print(f"prompt size ({'depth' if depth else 'RGB'} variant; tokens estimated as chars / {CHARS_PER_TOKEN}):", file=out)
    for name, chars in prompt.sections.items():
        if name == "judging_card":
            continue
        print(f"  {name:<10} {chars:>7,} chars  ~{estimate_tokens('x' * chars):>6,} tokens", file=out)
    jc = prompt.sections["judging_card"]
    jc_tokens = estimate_tokens("x" * jc)
    jc_ok = jc_tokens <= JUDGING_CARD_TOKEN_BUDGET
    jc_state = f"{'within' if jc_ok else 'OVER'} the {JUDGING_CARD_TOKEN_BUDGET:,} budget" if judging_card else "off"
    print(f"    judging card (in card) {jc:>5,} chars  ~{jc_tokens:>4,} tokens: {jc_state}", file=out)
    total = len(prompt.text)
    print(f"  {'total':<10} {total:>7,} chars  ~{estimate_tokens(prompt.text):>6,} tokens  sha256 {prompt.sha256[:16]}", file=out)
    ok = prompt.core_tokens <= CORE_TOKEN_BUDGET
    verdict = "within" if ok else "OVER"
    print(f"  contract + api + notes + judging ~{prompt.core_tokens:,} tokens: {verdict} the {CORE_TOKEN_BUDGET:,} budget", file=out)
    return 0 if ok and jc_ok else 1
