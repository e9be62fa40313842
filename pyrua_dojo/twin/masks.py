"""The twin's instance masks for the segmentation stand-in: a `MaskOracle` over the images one env rendered.

When segmentation is on, every `get_obs` also renders MuJoCo's segmentation for each camera; the env turns geom ids
into object instances and stores, keyed by the sha256 of the colour image (its C-ordered uint8 bytes, as
`primitives.seg_contract.image_sha256` computes it), a compact instance-id image plus each visible object's
description words. `lookup` rebuilds per-object boolean masks on demand, so a bounded LRU of a few dozen images
costs about 0.3 MB each. One oracle per env; nothing global.

`lookup` returns `pyrua_dojo.seg_service.twin_backend.ObjectMask` objects (the protocol the segmentation service
defines); that module is imported only when a lookup happens.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

# The key the segmentation client and servers use; one definition, so the twin's oracle and the client agree.
from primitives.seg_contract import image_sha256

if TYPE_CHECKING:  # pragma: no cover
    from pyrua_dojo.seg_service.twin_backend import ObjectMask


#: The description words of a gripper finger pad: the pads are segmentable like objects (SAM 3 segments a robot's
#: fingers for "gripper finger" / "fingertip" in a real image), so `robo.fingertips` can find them. No object is
#: described by any of these words, so no object prompt matches or is confused with a pad.
FINGER_PAD_WORDS: frozenset[str] = frozenset({"gripper finger", "fingertip", "robot finger"})


@dataclass(frozen=True)
class InstanceInfo:
    """One object instance in a stored image: its scene label and description words."""

    name: str
    words: frozenset[str]


@dataclass(frozen=True)
class _Entry:
    ids: np.ndarray  # (H, W) uint16: 0 = no object, k = instances[k - 1]
    instances: tuple[InstanceInfo, ...]
    silhouettes: tuple[float, ...]  # per instance: unoccluded silhouette area in px (0 = unknown)


class TwinMaskOracle:
    """A bounded LRU from image sha256 to the instance masks of that image (implements `MaskOracle`)."""

    def __init__(self, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._lock = threading.Lock()
        self._items: OrderedDict[str, _Entry] = OrderedDict()

    def add(
        self,
        image: np.ndarray,
        ids: np.ndarray,
        instances: Sequence[InstanceInfo],
        silhouettes: Sequence[float] | None = None,
    ) -> str:
        """Remember the instance-id image `ids` (0 = background, k = instances[k-1]) for `image`; `silhouettes`:
        per instance, the pixel area it would cover unoccluded (for the segmentation noise; default unknown)."""
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError("image must be a uint8 H x W x 3 RGB array")
        if ids.shape != image.shape[:2]:
            raise ValueError(f"instance ids must be {image.shape[:2]}, got {ids.shape}")
        if len(instances) > np.iinfo(np.uint16).max:
            raise ValueError("too many instances for one image")
        areas = tuple(0.0 for _ in instances) if silhouettes is None else tuple(float(a) for a in silhouettes)
        if len(areas) != len(instances):
            raise ValueError(f"got {len(areas)} silhouette areas for {len(instances)} instances")
        sha = image_sha256(image)
        entry = _Entry(np.ascontiguousarray(ids, dtype=np.uint16), tuple(instances), areas)
        with self._lock:
            self._items[sha] = entry
            self._items.move_to_end(sha)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return sha

    def lookup(self, image: np.ndarray) -> Sequence[ObjectMask] | None:
        """The visible objects of `image` (uint8 H x W x 3) with their masks, or None for an unknown image."""
        sha = image_sha256(image)
        with self._lock:
            entry = self._items.get(sha)
            if entry is not None:
                self._items.move_to_end(sha)
        if entry is None:
            return None
        from pyrua_dojo.seg_service.twin_backend import ObjectMask

        out = []
        for k, (info, area) in enumerate(zip(entry.instances, entry.silhouettes), start=1):
            mask = entry.ids == k
            if mask.any():
                out.append(ObjectMask(words=info.words, mask=mask, name=info.name, silhouette_px=area))
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
