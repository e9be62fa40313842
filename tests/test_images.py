"""images.image_size reads width and height from real PNG and JPEG headers and gives None for anything else."""

from __future__ import annotations

import numpy as np
import pytest

from pyrua_dojo.runtime.images import encode_image, image_size


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_image_size_reads_the_encoded_header(fmt: str) -> None:
    data, _, w, h = encode_image(np.zeros((37, 91, 3), np.uint8), fmt=fmt, max_side=None)
    assert (w, h) == (91, 37)
    assert image_size(data) == (91, 37)


def test_image_size_of_other_or_cut_short_bytes_is_none() -> None:
    data, *_ = encode_image(np.zeros((8, 8, 3), np.uint8), fmt="jpeg")
    assert image_size(b"GIF89a" + bytes(20)) is None
    assert image_size(data[:2] + b"\xff\xc0\x00") is None  # a JPEG whose frame header is cut short
