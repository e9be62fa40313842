"""The SAM 3 segmentation backend: glue between the server and the official `sam3` image processor.

Per request the image backbone runs once (`set_image`), then each prompt is answered with
`reset_all_prompts` + `set_text_prompt` (plus `add_geometric_prompt` for exemplar boxes), which reuses the
image features. The processor's `confidence_threshold` is processor-wide state, so it is fixed low at
construction (default 0.05) and never changed; each request filters by its own `score_threshold` (the
effective threshold is the larger of the two).

torch and sam3 are imported only by `Sam3Backend.load`, so the base install never needs them. Loading
never downloads anything: the checkpoint (`sam3.pt`) and the BPE vocabulary (`bpe_simple_vocab_16e6.txt.gz`,
missing from the PyPI `sam3` wheel) are local files given on the command line, and the model is built with
`load_from_HF=False`. `sam3` 0.1.4 runs on CUDA only (CPU paths hard-code "cuda").
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from pyrua_dojo.seg_service.backend import BackendInfo, Detection, ExemplarBoxPx

__all__ = ["DEFAULT_PROCESSOR_THRESHOLD", "Sam3Backend", "Sam3Unavailable", "pil_image"]

DEFAULT_PROCESSOR_THRESHOLD = 0.05


class Sam3Unavailable(RuntimeError):
    """SAM 3 cannot be served here: the `sam3` extra is missing, no CUDA device, or no weights."""


def pil_image(image: np.ndarray) -> Any:
    """The processor's preferred input: a PIL image. (An H x W x 3 ndarray would be misread as C x H x W.)"""
    from PIL import Image

    return Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8))


def _to_numpy(x: Any) -> np.ndarray:
    """A torch tensor (any device, any dtype, bf16 included) or an array-like, as a numpy array."""
    if hasattr(x, "detach"):
        x = x.detach()
        if x.is_floating_point():
            x = x.float()
        return x.cpu().numpy()
    return np.asarray(x)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


class Sam3Backend:
    """`SegmentationBackend` over a `sam3.model.sam3_image_processor.Sam3Processor` (or anything with its interface).

    Build it with `Sam3Backend.load(checkpoint, bpe)` for the real model. The constructor takes a ready
    processor, the context every call runs in (inference mode + bf16 autocast for the real model), and the
    conversion of the RGB array into the processor's image type.
    """

    def __init__(
        self,
        processor: Any,
        *,
        info: BackendInfo = BackendInfo(name="sam3"),
        inference_context: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
        to_model_image: Callable[[np.ndarray], Any] = pil_image,
    ) -> None:
        for method in ("set_image", "set_text_prompt", "reset_all_prompts", "add_geometric_prompt"):
            if not callable(getattr(processor, method, None)):
                raise TypeError(f"processor has no {method}(): not a Sam3Processor")
        self.processor = processor
        self.processor_threshold = float(getattr(processor, "confidence_threshold", 0.0))
        self._info = info
        self._context = inference_context
        self._to_model_image = to_model_image

    @property
    def info(self) -> BackendInfo:
        return self._info

    @staticmethod
    def check_files(checkpoint_path: str | Path, bpe_path: str | Path) -> tuple[Path, Path]:
        """The checkpoint and BPE paths, or FileNotFoundError saying which is missing (nothing is downloaded)."""
        ckpt, bpe = Path(checkpoint_path).expanduser(), Path(bpe_path).expanduser()
        if not ckpt.is_file():
            raise FileNotFoundError(
                f"SAM 3 checkpoint {ckpt} does not exist; provision sam3.pt (gated hub repo facebook/sam3) ahead of "
                "time: this server never downloads weights"
            )
        if not bpe.is_file():
            raise FileNotFoundError(
                f"BPE vocabulary {bpe} does not exist; pass the CLIP bpe_simple_vocab_16e6.txt.gz "
                "(the PyPI sam3 wheel does not ship it)"
            )
        return ckpt, bpe

    @classmethod
    def load(
        cls,
        checkpoint_path: str | Path,
        bpe_path: str | Path,
        *,
        device: str = "cuda",
        processor_threshold: float = DEFAULT_PROCESSOR_THRESHOLD,
        hash_checkpoint: bool = True,
    ) -> Sam3Backend:
        """Build the official SAM 3 image model from local files on a CUDA device (never downloads)."""
        ckpt, bpe = cls.check_files(checkpoint_path, bpe_path)
        if not 0.0 <= processor_threshold < 1.0:
            raise ValueError(f"processor_threshold must be in [0, 1), got {processor_threshold}")
        if device != "cuda" and not device.startswith("cuda:"):
            raise Sam3Unavailable(f"device {device!r}: the sam3 package runs on CUDA only ('cuda' or 'cuda:N')")
        try:
            import torch
            from sam3 import __version__ as sam3_version
            from sam3.model.sam3_image_processor import Sam3Processor
            from sam3.model_builder import build_sam3_image_model
        except ImportError as exc:
            raise Sam3Unavailable(
                f"the SAM 3 backend needs the 'sam3' extra (pip install 'pyrua-dojo[sam3]'): {exc}"
            ) from exc
        if not torch.cuda.is_available():
            raise Sam3Unavailable("no CUDA device is visible to torch; the sam3 package cannot run on CPU")
        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        if not 0 <= index < torch.cuda.device_count():
            raise Sam3Unavailable(f"device {device!r} does not exist ({torch.cuda.device_count()} CUDA devices)")
        # sam3 moves the model with .cuda() and allocates on "cuda": select the device rather than pass "cuda:N".
        torch.cuda.set_device(index)
        sha = _sha256_file(ckpt) if hash_checkpoint else ""
        model = build_sam3_image_model(bpe_path=str(bpe), device="cuda", checkpoint_path=str(ckpt), load_from_HF=False)
        processor = Sam3Processor(model, device="cuda", confidence_threshold=processor_threshold)

        def inference_context() -> AbstractContextManager[Any]:
            stack = contextlib.ExitStack()
            stack.enter_context(torch.inference_mode())
            stack.enter_context(torch.autocast("cuda", dtype=torch.bfloat16))
            return stack

        info = BackendInfo(name="sam3", checkpoint_sha256=sha, device=f"cuda:{index}", code=f"sam3=={sam3_version}")
        return cls(processor, info=info, inference_context=inference_context)

    def warmup(self) -> None:
        """One request on a small synthetic image, so the first real request does not pay for lazy set-up."""
        image = np.full((480, 640, 3), 127, np.uint8)
        image[200:280, 280:360] = (200, 40, 40)
        self.segment(image, ["red block"], 0.5, 1, [])

    def segment(
        self,
        image: np.ndarray,
        prompts: Sequence[str],
        score_threshold: float,
        max_instances: int,
        exemplar_boxes: Sequence[ExemplarBoxPx],
        timing: dict[str, float] | None = None,
    ) -> list[list[Detection]]:
        """Encode the image once, then answer each prompt; detections best first, at most `max_instances`."""
        h, w = image.shape[:2]
        threshold = max(score_threshold, self.processor_threshold)
        # Exemplar boxes in the processor's convention: normalised [cx, cy, w, h].
        boxes = [
            ([(x0 + x1) / 2.0 / w, (y0 + y1) / 2.0 / h, (x1 - x0) / w, (y1 - y0) / h], bool(positive))
            for (x0, y0, x1, y1), positive in exemplar_boxes
        ]
        out: list[list[Detection]] = []
        with self._context():
            t0 = time.perf_counter()
            state = self.processor.set_image(self._to_model_image(image))
            t1 = time.perf_counter()
            for prompt in prompts:
                self.processor.reset_all_prompts(state)
                state = self.processor.set_text_prompt(prompt=prompt, state=state)
                for box, positive in boxes:
                    state = self.processor.add_geometric_prompt(box=box, label=positive, state=state)
                out.append(self._detections(state, threshold, max_instances, (h, w)))
            t2 = time.perf_counter()
        if timing is not None:
            timing["backbone"] = (t1 - t0) * 1000.0
            timing["prompts"] = (t2 - t1) * 1000.0
        return out

    @staticmethod
    def _detections(state: dict[str, Any], threshold: float, limit: int, hw: tuple[int, int]) -> list[Detection]:
        """Best-first detections from the processor state; only the kept masks leave the device."""
        for key in ("scores", "masks"):
            if key not in state:
                raise RuntimeError(f"processor state has no {key!r} after set_text_prompt")
        scores = _to_numpy(state["scores"]).astype(np.float64).reshape(-1)
        order = np.argsort(-scores, kind="stable")
        keep = [int(i) for i in order if scores[i] >= threshold][:limit]
        if not keep:
            return []
        masks = _to_numpy(state["masks"][keep]).astype(bool)
        if masks.size != len(keep) * hw[0] * hw[1]:
            raise RuntimeError(f"processor masks have shape {masks.shape}, expected ({len(keep)}, 1, {hw[0]}, {hw[1]})")
        masks = masks.reshape(len(keep), hw[0], hw[1])
        return [(float(scores[i]), masks[n]) for n, i in enumerate(keep)]
