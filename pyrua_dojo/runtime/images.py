"""Images for the LLM: the attachment type and one encoder, for the task card's camera views and the images a cell
captures."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class ImageAttachment:
    """An encoded image returned after a cell's text, labelled for the LLM ("image 1: cam_head @ step 17")."""

    label: str
    source: str
    step: int
    mime: str
    data: bytes = field(repr=False)
    width: int
    height: int


def encode_image(
    image: np.ndarray,
    *,
    fmt: Literal["jpeg", "png"] = "jpeg",
    quality: int = 85,
    max_side: int | None = 640,
) -> tuple[bytes, str, int, int]:
    """Encode a uint8 image, RGB HxWx3 or grey HxW, downscaled so that its longer side is at most `max_side`;
    returns (bytes, mime type, width, height)."""
    import cv2  # here, not at the top: a cell kernel is ready before OpenCV has loaded

    arr = np.asarray(image)
    if arr.dtype != np.uint8 or not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)) or 0 in arr.shape:
        raise ValueError(f"an image must be uint8 HxWx3 RGB or HxW grey, got {arr.dtype} {arr.shape}")
    if fmt not in ("jpeg", "png"):
        raise ValueError(f"image format must be 'jpeg' or 'png', got {fmt!r}")
    h, w = arr.shape[:2]
    if max_side is not None and max(h, w) > max_side:
        scale = max_side / max(h, w)
        w, h = max(1, round(w * scale)), max(1, round(h * scale))
        arr = cv2.resize(arr, (w, h), interpolation=cv2.INTER_AREA)
    if arr.ndim == 3:
        arr = cv2.cvtColor(arr, cv2.COLOR_RGB2BGR)
    if fmt == "jpeg":
        ok, buf = cv2.imencode(".jpg", arr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    else:
        ok, buf = cv2.imencode(".png", arr)
    if not ok:
        raise ValueError("OpenCV could not encode the image")
    return buf.tobytes(), ("image/jpeg" if fmt == "jpeg" else "image/png"), w, h


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of PNG or JPEG bytes, read from their headers; None when neither header is found (or a JPEG's
    frame header is missing)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3):
                h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                return int(w), int(h)
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            seg = struct.unpack(">H", data[i + 2 : i + 4])[0]
            i += 2 + seg
    return None
