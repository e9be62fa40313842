"""The cell executor used by loop tests: the real kernel executor (`pyrua_dojo.kernel.host.KernelExecutor`, one
confined kernel process per episode), configured to keep images lossless and full size so that tests can compare
them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from primitives.errors import CancelToken
from primitives.results import CapturedImage
from pyrua_dojo.runtime.cells import CellConfig
from pyrua_dojo.kernel.host import KernelExecutor

__all__ = ["make_executor"]


def make_executor(
    namespace: Mapping[str, Any],
    *,
    workspace: Path,
    cancel: CancelToken,
    drain_images: Callable[[], Sequence[CapturedImage]] | None = None,
    on_event: Callable[..., None] | None = None,
) -> KernelExecutor:
    """A KernelExecutor over `namespace`, writing into `workspace` (created if missing)."""
    workspace.mkdir(parents=True, exist_ok=True)
    return KernelExecutor(namespace, workspace=workspace, config=CellConfig(image_format="png", image_max_side=None),
                          cancel=cancel, drain_images=drain_images, on_event=on_event)
