"""What RoboDojo's success check accepts, per task, in plain words: the judging texts of `prompts/judging_tasks.md`.

Each `## <task>` section of that file is one task's text, written from upstream's `run_reward` and the queries that
fail an episode at once (stages in order, tolerances in cm and degrees, instant failures, arms home, grippers). A
`_random` variant without a section of its own uses its base task's (its check is the same). The agent's task card
carries the text when the policy setting `judging_card` is on (the default).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType

__all__ = ["JUDGING_CARD_TOKEN_BUDGET", "JUDGING_FILE", "judging_text", "judging_texts"]

JUDGING_FILE = "judging_tasks.md"
"""The file under `prompts/` holding one `## <task>` section per task."""

JUDGING_CARD_TOKEN_BUDGET = 300
"""Estimated tokens (chars / 4) one task's judging text may take on the card."""

_SECTION = re.compile(r"^## +(\S+) *$", re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@cache
def judging_texts() -> Mapping[str, str]:
    """Every section of `prompts/judging_tasks.md`, keyed by task name (read once; a duplicate or empty section
    raises ValueError)."""
    raw = resources.files("prompts").joinpath(JUDGING_FILE).read_text(encoding="utf-8")
    raw = _COMMENT.sub("", raw)
    heads = list(_SECTION.finditer(raw))
    texts: dict[str, str] = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(raw)
        name, body = head.group(1), " ".join(raw[head.end():end].split())
        if name in texts:
            raise ValueError(f"prompts/{JUDGING_FILE}: task {name!r} has two sections")
        if not body:
            raise ValueError(f"prompts/{JUDGING_FILE}: the section of {name!r} is empty")
        texts[name] = body
    return MappingProxyType(texts)


def judging_text(task: str) -> str:
    """The judging text of `task` (a `_random` variant falls back to its base task's); KeyError if there is none."""
    from pyrua_dojo.catalog import RANDOM_SUFFIX

    texts = judging_texts()
    if task in texts:
        return texts[task]
    if task.endswith(RANDOM_SUFFIX) and task[: -len(RANDOM_SUFFIX)] in texts:
        return texts[task[: -len(RANDOM_SUFFIX)]]
    raise KeyError(f"no judging text for task {task!r} in prompts/{JUDGING_FILE}")
