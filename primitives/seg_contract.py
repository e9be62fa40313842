"""The segmentation service's contract, as both sides use it: limits, error codes, the image digest and the
result types (`shared/reference/sam3.md`, section 6). The client (`primitives.seg_client`) and the servers
(`pyrua_dojo.seg_service`) import it, so the two sides agree by construction.

Coordinates are continuous pixel coordinates of the image that was sent: pixel (row r, column c) covers
[c, c+1) x [r, r+1), so its centre is (c + 0.5, r + 0.5). `box_xyxy` is in that frame (for a mask-derived
box: [min c, min r, max c + 1, max r + 1]); `centroid_xy` is the mean of the mask's pixel centres.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Literal

import numpy as np

from primitives import rle

# --- the contract's limits and codes (the servers import these, so both sides agree) --------------------------

DEFAULT_URL = "http://127.0.0.1:8765"
SEGMENT_PATH = "/v1/segment"
HEALTH_PATH = "/healthz"
MAX_PROMPTS = 16
MAX_IMAGE_SIDE = 4096
MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_INSTANCES = 100
MAX_EXEMPLAR_BOXES = 16
MAX_PROMPT_CHARS = 200
MAX_REPLY_BYTES = 64 * 1024 * 1024
IMAGE_FORMATS = ("png", "jpeg")
MASK_FORMATS = ("coco_rle", "png", "none")
# Server codes from the contract, plus `bad_request` (malformed request JSON or fields) and `not_found`.
SERVER_ERROR_CODES = ("bad_request", "bad_image", "too_many_prompts", "model_not_ready", "internal", "not_found")
# Codes the client produces itself when no valid answer came back.
CLIENT_ERROR_CODES = ("unavailable", "timeout", "circuit_open", "malformed_reply")
ERROR_CODES = SERVER_ERROR_CODES + CLIENT_ERROR_CODES

MaskFormat = Literal["coco_rle", "png", "none"]
ImageFormat = Literal["png", "jpeg"]


def image_sha256(image: np.ndarray) -> str:
    """Hex sha256 of an image's pixels: the C-ordered bytes of its uint8 H x W x 3 RGB array.

    The servers report it for the decoded image, the client's cache is keyed on it, and the twin keys its
    instance masks on it, so all three agree on which image is meant (PNG is lossless; JPEG changes it).
    """
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


# --- results ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExemplarBox:
    """An exemplar box for the prompt, in pixels of the sent image; `positive=False` marks a counter-example."""

    xyxy: tuple[float, float, float, float]
    positive: bool = True


@dataclass(frozen=True, eq=False)
class Instance:
    """One segmented instance: score, box and centroid (continuous pixel coordinates), area, and its mask.

    `runs` are the mask's COCO run lengths (column-major, zeros first), already validated against `size`;
    `mask` builds the H x W bool array from them on first use (read-only, shared by cache hits). Both are
    None when the request asked for `mask_format="none"`.
    """

    score: float
    box_xyxy: tuple[float, float, float, float]
    area_px: int
    centroid_xy: tuple[float, float]
    size: tuple[int, int]  # (H, W) of the image
    runs: np.ndarray | None = field(default=None, repr=False)

    @cached_property
    def mask(self) -> np.ndarray | None:
        if self.runs is None:
            return None
        m = rle.mask_from_counts(self.runs, self.size[0], self.size[1])
        m.flags.writeable = False
        return m


@dataclass(frozen=True)
class PromptResult:
    """The instances found for one prompt, highest score first; empty when the concept is absent."""

    prompt: str
    instances: tuple[Instance, ...]


@dataclass(frozen=True)
class SegmentationFailure:
    """Why a segmentation call gave no answer. `code` is one of `ERROR_CODES`."""

    code: str
    message: str
    http_status: int | None = None


@dataclass(frozen=True, eq=False)
class SegmentationReply:
    """The outcome of one `segment` call: per prompt results in request order, or `ok=False` and `error`."""

    ok: bool
    request_id: str
    prompts: tuple[str, ...]
    results: tuple[PromptResult, ...] = ()
    error: SegmentationFailure | None = None
    image_size: tuple[int, int] = (0, 0)  # (H, W)
    image_sha256: str = ""
    model: str = ""
    timing_ms: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    elapsed_ms: float = 0.0  # client wall time for the whole call, retries included
    attempts: int = 0  # HTTP requests made (0 when every prompt came from the cache or the breaker was open)
    cached_prompts: int = 0  # distinct prompts answered from the client's cache

    def instances(self, prompt: str) -> tuple[Instance, ...]:
        """Instances for `prompt` (empty if the reply failed); KeyError if `prompt` was not asked."""
        for r in self.results:
            if r.prompt == prompt:
                return r.instances
        if prompt not in self.prompts:
            raise KeyError(f"prompt {prompt!r} was not part of this request (asked: {list(self.prompts)})")
        return ()

    def best(self, prompt: str) -> Instance | None:
        """The highest-scoring instance for `prompt`, or None."""
        found = self.instances(prompt)
        return found[0] if found else None


@dataclass(frozen=True)
class ServiceHealth:
    """What `GET /healthz` said: reachable at all, ready to segment, and the model it serves."""

    reachable: bool
    ready: bool
    status: str  # "ok", "loading", "failed", or the client's error code
    model: str = ""
    device: str = ""
    checkpoint_sha256: str = ""
    detail: str = ""
