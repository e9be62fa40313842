"""The task card, the first user message of an episode: the task, its instruction verbatim, the step limit, whether
the arms must end at their start pose, and the first camera images.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from primitives.results import CapturedImage

__all__ = [
    "TaskCard",
]


@dataclass(frozen=True)
class TaskCard:
    """What the agent is told about this episode: the task, the instruction verbatim, the step limit, whether the
    arms must end at their start pose, and the first camera images (step 0)."""

    task: str
    instruction: str
    step_limit: int
    back_to_origin: bool | None = None  # None: unknown (not in the catalogue)
    images: tuple[CapturedImage, ...] = field(default=(), repr=False)
    seed: int | None = None
    layout: int | None = None

    def __post_init__(self) -> None:
        if not self.task or not isinstance(self.task, str):
            raise ValueError("a task card needs a task name")
        if not isinstance(self.instruction, str) or not self.instruction.strip():
            raise ValueError(f"task card {self.task}: the instruction is empty")
        if isinstance(self.step_limit, bool) or not isinstance(self.step_limit, int) or self.step_limit <= 0:
            raise ValueError(f"task card {self.task}: step_limit must be a positive int, got {self.step_limit!r}")

    @classmethod
    def for_task(
        cls,
        task: str,
        instruction: str | None = None,
        *,
        images: Sequence[CapturedImage] = (),
        step_limit: int | None = None,
        seed: int | None = None,
        layout: int | None = None,
    ) -> TaskCard:
        """A card from the task catalogue: step limit and back-to-origin from the catalogue; the instruction is
        the one the episode received (verbatim), else the catalogue's text."""
        from pyrua_dojo.catalog import get_task

        spec = get_task(task)
        return cls(
            task=task,
            instruction=instruction if instruction is not None else spec.instruction,
            step_limit=step_limit if step_limit is not None else spec.step_limit,
            back_to_origin=spec.back_to_origin,
            images=tuple(images),
            seed=seed,
            layout=layout,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "instruction": self.instruction,
            "step_limit": self.step_limit,
            "back_to_origin": self.back_to_origin,
            "seed": self.seed,
            "layout": self.layout,
            "images": [{"source": im.source, "step": im.step, "label": im.label, "shape": list(im.image.shape)} for im in self.images],
        }
