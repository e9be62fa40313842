"""SAM 3 backend glue, served by the real server and called by the real client.

Real weights cannot be loaded here, so a stand-in replaces the neural network: it has the interface of
`sam3.model.sam3_image_processor.Sam3Processor` (set_image, set_text_prompt, reset_all_prompts,
add_geometric_prompt, confidence_threshold; state keys scores / boxes / masks (N, 1, H, W)) and finds
instances by colour. Everything else (the glue, the server, the client) is the real code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from PIL import Image

from primitives.seg_contract import ExemplarBox
from primitives.seg_client import SegmentationClient
from pyrua_dojo.seg_service import Sam3Backend, Sam3Unavailable, SegmentationServer
from pyrua_dojo.seg_service.backend import BackendInfo
from pyrua_dojo.benchmarks.seg import COLOURS

H, W = 96, 128


class StandInProcessor:
    """The processor's interface over a colour matcher; records every call in order."""

    def __init__(self, confidence_threshold: float = 0.05) -> None:
        self.confidence_threshold = confidence_threshold
        self.log: list[tuple[Any, ...]] = []

    def set_image(self, image: Any, state: dict[str, Any] | None = None) -> dict[str, Any]:
        if not isinstance(image, Image.Image):
            raise ValueError("Image must be a PIL image or a tensor")
        self.log.append(("set_image", image.size))
        state = {} if state is None else state
        state["original_width"], state["original_height"] = image.size
        state["backbone_out"] = {"pixels": np.asarray(image)}
        return state

    def reset_all_prompts(self, state: dict[str, Any]) -> None:
        self.log.append(("reset",))
        state["backbone_out"].pop("language_features", None)
        for key in ("geometric_prompt", "boxes", "masks", "masks_logits", "scores"):
            state.pop(key, None)

    def set_text_prompt(self, prompt: str, state: dict[str, Any]) -> dict[str, Any]:
        if "backbone_out" not in state:
            raise ValueError("You must call set_image before set_text_prompt")
        self.log.append(("text", prompt))
        state["backbone_out"]["language_features"] = prompt
        state.setdefault("geometric_prompt", [])
        return self._ground(state)

    def add_geometric_prompt(self, box: list[float], label: bool, state: dict[str, Any]) -> dict[str, Any]:
        self.log.append(("box", [round(v, 6) for v in box], label))
        state.setdefault("geometric_prompt", []).append((box, label))
        return self._ground(state)

    def _ground(self, state: dict[str, Any]) -> dict[str, Any]:
        pixels = state["backbone_out"]["pixels"]
        h, w = state["original_height"], state["original_width"]
        words = state["backbone_out"]["language_features"].split()
        colour = next((COLOURS[c] for c in words if c in COLOURS), None)
        masks: list[np.ndarray] = []
        scores: list[float] = []
        if colour is not None:
            hit = (np.abs(pixels.astype(int) - colour).sum(axis=2) < 30).astype(np.uint8)
            n, labels = cv2.connectedComponents(hit)
            for k in range(1, n):
                m = labels == k
                keep = True
                for (cx, cy, bw, bh), positive in state["geometric_prompt"]:
                    x0, x1, y0, y1 = (cx - bw / 2) * w, (cx + bw / 2) * w, (cy - bh / 2) * h, (cy + bh / 2) * h
                    inside = m[int(y0) : int(np.ceil(y1)), int(x0) : int(np.ceil(x1))].any()
                    keep = keep and (inside if positive else not inside)
                if keep:
                    masks.append(m)
                    scores.append(min(0.95, 0.5 + m.sum() / 1000.0))
        # A weak detection everywhere, as the real model returns: only the processor threshold removes it.
        masks.append(np.ones((h, w), bool))
        scores.append(0.03)
        s = np.asarray(scores)
        keep_idx = s > self.confidence_threshold  # what the real processor does with its threshold
        state["scores"] = s[keep_idx]
        state["masks"] = np.stack(masks)[keep_idx][:, None, :, :]
        state["boxes"] = np.zeros((int(keep_idx.sum()), 4))
        return state


def scene() -> np.ndarray:
    image = np.full((H, W, 3), 128, np.uint8)
    image[10:30, 10:40] = COLOURS["red"]  # 600 px
    image[60:70, 90:100] = COLOURS["red"]  # 100 px
    image[50:80, 20:50] = COLOURS["blue"]  # 900 px
    return image


@pytest.fixture
def stand_in() -> Iterator[tuple[StandInProcessor, list[str], SegmentationServer]]:
    processor = StandInProcessor()
    contexts: list[str] = []

    @contextlib.contextmanager
    def context() -> Iterator[None]:
        contexts.append("enter")
        yield
        contexts.append("exit")

    backend = Sam3Backend(
        processor, info=BackendInfo("sam3", "cd" * 32, "cuda:0", "stand-in"), inference_context=context
    )
    with SegmentationServer(backend) as server:
        assert server.wait_ready(10)
        yield processor, contexts, server


def test_warmup_runs_before_ready(stand_in: tuple[StandInProcessor, list[str], SegmentationServer]) -> None:
    processor, contexts, _ = stand_in
    assert processor.log[:3] == [("set_image", (640, 480)), ("reset",), ("text", "red block")]
    assert contexts == ["enter", "exit"]


def test_one_image_encoding_then_reset_and_prompt_per_prompt(
    stand_in: tuple[StandInProcessor, list[str], SegmentationServer],
) -> None:
    processor, contexts, server = stand_in
    processor.log.clear()
    contexts.clear()
    client = SegmentationClient(server.url)
    reply = client.segment(scene(), ["red block", "blue block", "green block"], score_threshold=0.5)
    assert reply.ok and reply.model == "sam3"
    assert processor.log == [
        ("set_image", (W, H)),
        ("reset",),
        ("text", "red block"),
        ("reset",),
        ("text", "blue block"),
        ("reset",),
        ("text", "green block"),
    ]
    assert contexts == ["enter", "exit"]  # the whole request runs inside the inference context
    assert processor.confidence_threshold == 0.05  # never changed per request
    red = reply.instances("red block")
    assert [i.area_px for i in red] == [600, 100]  # best first
    assert red[0].box_xyxy == (10.0, 10.0, 40.0, 30.0)
    assert reply.best("blue block").area_px == 900  # type: ignore[union-attr]
    assert reply.instances("green block") == ()
    health = client.health()
    assert (
        health.ready and health.model == "sam3" and health.device == "cuda:0" and health.checkpoint_sha256 == "cd" * 32
    )


def test_threshold_and_max_instances_are_per_request(
    stand_in: tuple[StandInProcessor, list[str], SegmentationServer],
) -> None:
    _, _, server = stand_in
    client = SegmentationClient(server.url, cache_size=0)
    # scores: 600 px -> 0.95 (capped), 100 px -> 0.6, the weak full-image detection 0.03 is under the processor's 0.05
    assert len(client.segment(scene(), "red block", score_threshold=0.0).instances("red block")) == 2
    assert len(client.segment(scene(), "red block", score_threshold=0.7).instances("red block")) == 1
    assert len(client.segment(scene(), "red block", score_threshold=0.0, max_instances=1).instances("red block")) == 1


def test_exemplar_boxes_become_normalised_cxcywh(
    stand_in: tuple[StandInProcessor, list[str], SegmentationServer],
) -> None:
    processor, _, server = stand_in
    processor.log.clear()
    client = SegmentationClient(server.url)
    reply = client.segment(scene(), "red block", exemplar_boxes=[ExemplarBox((88, 58, 104, 72))])
    assert processor.log[-1] == ("box", [round(v, 6) for v in (96 / W, 65 / H, 16 / W, 14 / H)], True)
    assert processor.log[-2] == ("text", "red block")  # boxes follow the text prompt they refine
    assert [i.area_px for i in reply.instances("red block")] == [100]  # only the instance in the box
    reply = client.segment(scene(), "red block", exemplar_boxes=[ExemplarBox((88, 58, 104, 72), positive=False)])
    assert [i.area_px for i in reply.instances("red block")] == [600]


def test_glue_accepts_torch_like_outputs() -> None:
    """Tensors are moved with detach().cpu().numpy(), floats converted first (bf16 has no numpy dtype)."""

    class FakeTensor:
        def __init__(self, a: np.ndarray) -> None:
            self.a = a
            self.calls: list[str] = []

        def detach(self) -> FakeTensor:
            return self

        def is_floating_point(self) -> bool:
            return self.a.dtype.kind == "f"

        def float(self) -> FakeTensor:
            return FakeTensor(self.a.astype(np.float32))

        def cpu(self) -> FakeTensor:
            return self

        def numpy(self) -> np.ndarray:
            return self.a

        def __getitem__(self, idx: Any) -> FakeTensor:
            return FakeTensor(self.a[idx])

    class TensorProcessor(StandInProcessor):
        def _ground(self, state: dict[str, Any]) -> dict[str, Any]:
            state = super()._ground(state)
            state["scores"] = FakeTensor(state["scores"].astype(np.float16))
            state["masks"] = FakeTensor(state["masks"])
            return state

    backend = Sam3Backend(TensorProcessor())
    (dets,) = backend.segment(scene(), ["red"], 0.5, 5, [])
    assert [int(m.sum()) for _, m in dets] == [600, 100]
    assert all(m.dtype == bool and m.shape == (H, W) for _, m in dets)


def test_processor_interface_is_checked() -> None:
    with pytest.raises(TypeError, match="not a Sam3Processor"):
        Sam3Backend(object())


def test_load_refuses_missing_files(tmp_path: Path) -> None:
    bpe = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    bpe.write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        Sam3Backend.load(tmp_path / "sam3.pt", bpe)
    ckpt = tmp_path / "sam3.pt"
    ckpt.write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="BPE vocabulary"):
        Sam3Backend.load(ckpt, tmp_path / "missing.txt.gz")


def test_load_refuses_cpu_and_a_missing_extra(tmp_path: Path) -> None:
    ckpt, bpe = tmp_path / "sam3.pt", tmp_path / "bpe.txt.gz"
    ckpt.write_bytes(b"x")
    bpe.write_bytes(b"x")
    with pytest.raises(Sam3Unavailable, match="CUDA only"):
        Sam3Backend.load(ckpt, bpe, device="cpu")
    try:
        import sam3  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(Sam3Unavailable, match=r"pip install 'pyrua-dojo\[sam3\]'"):
            Sam3Backend.load(ckpt, bpe)
    else:
        pytest.skip("torch and sam3 are installed here; the missing-extra message cannot be shown")


def test_server_with_a_failing_loader_reports_why(tmp_path: Path) -> None:
    with SegmentationServer(loader=lambda: Sam3Backend.load(tmp_path / "sam3.pt", tmp_path / "bpe")) as server:
        assert not server.wait_ready(10)
        health = SegmentationClient(server.url).health()
        assert health.reachable and not health.ready and health.status == "failed"
        assert "sam3.pt does not exist" in health.detail
