"""What the segmentation server asks of a model: the `SegmentationBackend` protocol and its error type.

A backend turns one decoded RGB image and a list of prompts into, per prompt, a list of (score, mask)
detections. The server does everything else (HTTP, validation, limits, filtering, boxes, RLE), so a backend
is only the model glue: SAM 3 (`sam3_backend`) or the twin's own instance masks (`twin_backend`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["BackendInfo", "Detection", "ExemplarBoxPx", "SegmentationBackend", "SegmentationRequestError"]

# (score in [0, 1], bool H x W mask at the image's resolution)
Detection = tuple[float, np.ndarray]
# ((x0, y0, x1, y1) in pixels of the image, positive)
ExemplarBoxPx = tuple[tuple[float, float, float, float], bool]


@dataclass(frozen=True)
class BackendInfo:
    """What the health endpoint and every reply say about the model being served."""

    name: str  # "sam3", "twin", ...
    checkpoint_sha256: str = ""
    device: str = "cpu"
    code: str = ""  # the code that runs it, e.g. "sam3==0.1.4"


class SegmentationRequestError(Exception):
    """A request the backend cannot answer because of its input; the server replies with `code` and `status`.

    Backends raise it for a problem with the request (for example `bad_image` for an image the twin never
    rendered); any other exception becomes an `internal` 500 error.
    """

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@runtime_checkable
class SegmentationBackend(Protocol):
    """A model the server can serve. Calls are serialised by the server (one at a time).

    `segment` returns one list per prompt, in prompt order, of (score, bool H x W mask). It may return
    detections under `score_threshold` or more than `max_instances`: the server filters, sorts and cuts.
    If `timing` is given, the backend records the milliseconds it spent as `timing["backbone"]` (image
    encoding) and `timing["prompts"]` (all prompts). A backend may also have `warmup()`, which the server
    runs once before it reports ready.
    """

    @property
    def info(self) -> BackendInfo: ...

    def segment(
        self,
        image: np.ndarray,
        prompts: Sequence[str],
        score_threshold: float,
        max_instances: int,
        exemplar_boxes: Sequence[ExemplarBoxPx],
        timing: dict[str, float] | None = None,
    ) -> list[list[Detection]]: ...
