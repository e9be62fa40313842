"""`pyrua-dojo bench seg`: speed of the RLE codec and of the segmentation service over real HTTP.

It renders synthetic 640 x 480 tabletop scenes (coloured blocks and discs with exact instance masks),
serves them with the twin backend on 127.0.0.1, and times the real client against it. The figures are
the service overhead (encode, HTTP, decode, RLE, validation) that every SAM 3 call pays on top of the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import cv2
import numpy as np

from primitives import rle
from primitives.seg_client import SegmentationClient
from pyrua_dojo.seg_service.http_server import SegmentationServer
from pyrua_dojo.seg_service.twin_backend import DictMaskOracle, ObjectMask, TwinBackend, TwinNoise

__all__ = ["COLOURS", "main", "synthetic_scene"]

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 70, 200),
    "yellow": (220, 200, 40),
    "purple": (140, 60, 170),
    "orange": (235, 130, 30),
}


def synthetic_scene(
    rng: np.random.Generator, n_objects: int = 6, hw: tuple[int, int] = (480, 640)
) -> tuple[np.ndarray, list[ObjectMask]]:
    """A table-like image with `n_objects` blocks and discs, and each object's visible (occluded) mask."""
    h, w = hw
    image = np.empty((h, w, 3), np.uint8)
    image[:] = (150, 120, 90)
    image = np.clip(image.astype(np.int16) + rng.integers(-6, 7, size=image.shape), 0, 255).astype(np.uint8)
    drawn: list[tuple[str, str, np.ndarray]] = []
    for _ in range(n_objects):
        colour = list(COLOURS)[int(rng.integers(len(COLOURS)))]
        kind = "block" if rng.random() < 0.7 else "disc"
        m = np.zeros((h, w), np.uint8)
        cx, cy = float(rng.uniform(60, w - 60)), float(rng.uniform(60, h - 60))
        if kind == "block":
            size = float(rng.uniform(25, 60))
            box = cv2.boxPoints(((cx, cy), (size, size), float(rng.uniform(0, 90))))
            cv2.fillPoly(m, [np.round(box).astype(np.int32)], 1)
        else:
            cv2.circle(m, (int(cx), int(cy)), int(rng.uniform(15, 35)), 1, thickness=-1)
        mask = m.astype(bool)
        image[mask] = COLOURS[colour]
        for j, (_, _, earlier) in enumerate(drawn):  # later objects hide earlier ones
            drawn[j] = (drawn[j][0], drawn[j][1], earlier & ~mask)
        drawn.append((colour, kind, mask))
    objects = [ObjectMask(frozenset({c, kind}), mask, f"{c}_{kind}_{k}") for k, (c, kind, mask) in enumerate(drawn)]
    return image, objects


def _stats(values: list[float]) -> str:
    a = np.asarray(values)
    return f"median {np.median(a):7.2f} ms   p95 {np.percentile(a, 95):7.2f} ms   (n={a.size})"


def _time(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def main(requests: int = 40, seed: int = 0) -> int:
    """Print the figures; returns 0, or 1 if any request failed."""
    rng = np.random.default_rng(seed)
    image, objects = synthetic_scene(rng)
    object_mask = max(objects, key=lambda o: int(o.mask.sum())).mask
    noise_mask = rng.random((480, 640)) < 0.5
    print("RLE codec, 640 x 480 masks (numpy, no pycocotools)")
    for name, m in (("object mask", object_mask), ("random 50% mask (worst case)", noise_mask)):
        enc = rle.encode(m)
        print(f"  {name:30s} {len(enc['counts']):7d} chars")
        print(f"    encode  {_stats(_time(partial(rle.encode, m), 30))}")
        print(f"    decode  {_stats(_time(partial(rle.decode, enc), 30))}")

    oracle = DictMaskOracle(capacity=requests * 3 + 8)
    scenes = []
    for _ in range(requests):
        img, objs = synthetic_scene(rng)
        oracle.add(img, objs)
        scenes.append(img)
    failures = 0
    prompt_sets = {
        1: ["red block"],
        4: ["red block", "blue block", "green disc", "yellow block"],
        16: [f"{c} {k}" for c in COLOURS for k in ("block", "disc")] + ["block", "disc", "red", "blue"],
    }
    for label, noise in (
        ("twin backend, clean", TwinNoise()),
        (
            "twin backend, noise (grow 2 px, miss 0.1, spurious 0.2)",
            TwinNoise(grow_px=2, miss_prob=0.1, spurious_prob=0.2),
        ),
    ):
        with SegmentationServer(TwinBackend(oracle, noise=noise, seed=seed)) as server:
            server.wait_ready(10)
            client = SegmentationClient(server.url, cache_size=0)
            print(f"\nService round trip over HTTP on 127.0.0.1, {label}, 640 x 480 PNG, cache off")
            for n, prompts in prompt_sets.items():
                elapsed: list[float] = []
                server_total: list[float] = []
                found = 0
                for img in scenes:
                    reply = client.segment(img, prompts)
                    if not reply.ok:
                        failures += 1
                        print(f"  request failed: {reply.error}")
                        continue
                    elapsed.append(reply.elapsed_ms)
                    server_total.append(reply.timing_ms.get("total", float("nan")))
                    found += sum(len(r.instances) for r in reply.results)
                if elapsed:
                    print(
                        f"  {n:2d} prompt(s): client {_stats(elapsed)}; server {np.median(server_total):6.2f} ms; "
                        f"{found / len(elapsed):.1f} instances/request"
                    )
    with SegmentationServer(TwinBackend(oracle)) as server:
        server.wait_ready(10)
        client = SegmentationClient(server.url)
        client.segment(scenes[0], prompt_sets[4])
        hits = _time(lambda: client.segment(scenes[0], prompt_sets[4]), requests)
        print(f"\nCache hit (4 prompts, same image): {_stats(hits)}")
    return 1 if failures else 0
