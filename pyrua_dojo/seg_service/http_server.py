"""The segmentation HTTP server: the contract of `shared/reference/sam3.md` section 6 over any backend.

`GET /healthz` says whether the model is loaded (503 with `Retry-After` while it loads); `POST /v1/segment`
takes one image (PNG or JPEG, base64) and up to 16 prompts and answers, per prompt in request order, the
instances above the score threshold with their box, area and centroid computed from the mask, and the mask
as COCO compressed RLE. Every error is `{"request_id", "error": {"code", "message"}}` with the request id
echoed when it could be read.

Threaded stdlib server: requests are parsed and images decoded in parallel, backend calls run one at a time
under a lock (one model per process, one job on the GPU at a time).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cv2
import numpy as np

from primitives import rle
from primitives.seg_contract import (
    HEALTH_PATH,
    IMAGE_FORMATS,
    MASK_FORMATS,
    MAX_BODY_BYTES,
    MAX_EXEMPLAR_BOXES,
    MAX_IMAGE_SIDE,
    MAX_INSTANCES,
    MAX_PROMPT_CHARS,
    MAX_PROMPTS,
    SEGMENT_PATH,
    image_sha256,
)
from pyrua_dojo.seg_service.backend import Detection, ExemplarBoxPx, SegmentationBackend, SegmentationRequestError

__all__ = ["SegmentationServer", "ServerLimits", "decode_image", "instance_json"]

logger = logging.getLogger(__name__)

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class ServerLimits:
    """Request limits; the defaults are the contract's."""

    max_prompts: int = MAX_PROMPTS
    max_side: int = MAX_IMAGE_SIDE
    max_body_bytes: int = MAX_BODY_BYTES
    max_instances: int = MAX_INSTANCES
    max_exemplar_boxes: int = MAX_EXEMPLAR_BOXES
    retry_after_s: int = 5  # what a 503 tells clients while the model loads


class _Reject(Exception):
    """An error reply: HTTP status, contract code, message."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True)
class _Request:
    request_id: str
    image_format: str
    image_data: str
    prompts: tuple[str, ...]
    score_threshold: float
    max_instances: int
    mask_format: str
    exemplar_boxes: tuple[ExemplarBoxPx, ...]


# --- image decoding --------------------------------------------------------------------------------------------


def _peek_size(raw: bytes, fmt: str) -> tuple[int, int]:
    """(width, height) from the PNG or JPEG header, before decoding, so huge images are refused cheaply."""
    if fmt == "png":
        if len(raw) < 24 or raw[:8] != _PNG_MAGIC or raw[12:16] != b"IHDR":
            raise ValueError("data is not a PNG (bad signature or missing IHDR)")
        w, h = struct.unpack(">II", raw[16:24])
        return int(w), int(h)
    if len(raw) < 4 or raw[:2] != b"\xff\xd8":
        raise ValueError("data is not a JPEG (no SOI marker)")
    i = 2
    while i + 4 <= len(raw):
        if raw[i] != 0xFF:
            raise ValueError(f"corrupt JPEG marker stream at byte {i}")
        marker = raw[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        if marker == 0xD9:
            break
        (length,) = struct.unpack(">H", raw[i + 2 : i + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(raw):
                break
            h, w = struct.unpack(">HH", raw[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    raise ValueError("JPEG has no frame header (SOF)")


def decode_image(fmt: str, data: str, max_side: int = MAX_IMAGE_SIDE) -> np.ndarray:
    """Decode a base64 PNG/JPEG into a uint8 H x W x 3 RGB array; ValueError says what is wrong with it."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"image.format must be one of {IMAGE_FORMATS}, got {fmt!r}")
    if not isinstance(data, str) or not data:
        raise ValueError("image.data must be a non-empty base64 string")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"image.data is not valid base64: {exc}") from None
    w, h = _peek_size(raw, fmt)
    if not (1 <= w <= max_side and 1 <= h <= max_side):
        raise ValueError(f"image is {w} x {h} px; each side must be 1..{max_side}")
    flags = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION  # pixels as sent: no EXIF rotation
    bgr = cv2.imdecode(np.frombuffer(raw, np.uint8), flags)
    if bgr is None:
        raise ValueError(f"OpenCV could not decode the {fmt} data ({len(raw)} bytes)")
    if bgr.shape[:2] != (h, w):
        raise ValueError(f"decoded image is {bgr.shape[1]} x {bgr.shape[0]}, its header says {w} x {h}")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


# --- instances -------------------------------------------------------------------------------------------------


def instance_json(score: float, mask: np.ndarray, mask_format: str) -> dict[str, Any]:
    """One contract instance from a non-empty mask: box, area and centroid in continuous pixel coordinates."""
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    ys, xs = np.nonzero(mask)
    out: dict[str, Any] = {
        "score": round(float(score), 4),
        "box_xyxy": [float(cols[0]), float(rows[0]), float(cols[-1] + 1), float(rows[-1] + 1)],
        "area_px": int(xs.size),
        "centroid_xy": [round(float(xs.mean()) + 0.5, 3), round(float(ys.mean()) + 0.5, 3)],
    }
    if mask_format == "coco_rle":
        out["mask"] = rle.encode(mask)
    elif mask_format == "png":
        ok, buf = cv2.imencode(".png", mask.astype(np.uint8) * 255)
        if not ok:
            raise RuntimeError("OpenCV could not encode a mask as PNG")
        out["mask"] = {
            "size": [int(mask.shape[0]), int(mask.shape[1])],
            "png": base64.b64encode(buf.tobytes()).decode("ascii"),
        }
    return out


def _select(
    dets: Sequence[Detection], hw: tuple[int, int], threshold: float, limit: int, where: str
) -> list[Detection]:
    """Check a backend's detections, keep those >= threshold with a non-empty mask, best first, at most `limit`."""
    kept: list[Detection] = []
    for k, det in enumerate(dets):
        if not (isinstance(det, (tuple, list)) and len(det) == 2):
            raise TypeError(f"backend returned {type(det).__name__} for {where} detection {k}, not (score, mask)")
        score, mask = float(det[0]), np.asarray(det[1])
        if not math.isfinite(score):
            raise ValueError(f"backend returned score {score} for {where} detection {k}")
        if mask.shape != hw:
            raise ValueError(f"backend returned a {mask.shape} mask for {where} detection {k}; the image is {hw}")
        if score >= threshold:
            m = mask if mask.dtype == bool else mask > 0
            if m.any():
                kept.append((min(1.0, max(0.0, score)), m))
    kept.sort(key=lambda d: -d[0])
    return kept[:limit]


# --- request parsing -------------------------------------------------------------------------------------------


def _bad(message: str, code: str = "bad_request", status: int = 400) -> _Reject:
    return _Reject(status, code, message)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _parse_request(payload: dict[str, Any], rid: str, limits: ServerLimits) -> _Request:
    img = payload.get("image")
    if not isinstance(img, dict):
        raise _bad("'image' must be an object {format, data}", "bad_image")
    fmt = img.get("format")
    if fmt not in IMAGE_FORMATS:
        raise _bad(f"image.format must be one of {list(IMAGE_FORMATS)}, got {fmt!r}", "bad_image")
    data = img.get("data")
    if not isinstance(data, str) or not data:
        raise _bad("image.data must be a non-empty base64 string", "bad_image")
    prompts = payload.get("prompts")
    if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
        raise _bad("'prompts' must be a list of strings")
    if not prompts:
        raise _bad("'prompts' is empty; send at least one noun phrase")
    if len(prompts) > limits.max_prompts:
        raise _bad(f"{len(prompts)} prompts; at most {limits.max_prompts} per request", "too_many_prompts")
    for p in prompts:
        if not p.strip() or len(p) > MAX_PROMPT_CHARS:
            raise _bad(f"each prompt must be non-blank and at most {MAX_PROMPT_CHARS} characters, got {p!r:.60}")
    thr = payload.get("score_threshold", 0.5)
    if not _finite(thr) or not 0.0 <= thr <= 1.0:
        raise _bad(f"score_threshold must be a number in [0, 1], got {thr!r}")
    limit = payload.get("max_instances", 20)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= limits.max_instances:
        raise _bad(f"max_instances must be an int in 1..{limits.max_instances}, got {limit!r}")
    mask_format = payload.get("mask_format", "coco_rle")
    if mask_format not in MASK_FORMATS:
        raise _bad(f"mask_format must be one of {list(MASK_FORMATS)}, got {mask_format!r}")
    raw_boxes = payload.get("exemplar_boxes", [])
    if not isinstance(raw_boxes, list) or len(raw_boxes) > limits.max_exemplar_boxes:
        raise _bad(f"exemplar_boxes must be a list of at most {limits.max_exemplar_boxes} boxes")
    boxes: list[ExemplarBoxPx] = []
    for k, b in enumerate(raw_boxes):
        xyxy = b.get("xyxy") if isinstance(b, dict) else None
        positive = b.get("positive", True) if isinstance(b, dict) else None
        if not (isinstance(xyxy, list) and len(xyxy) == 4 and all(_finite(v) for v in xyxy)) or not isinstance(
            positive, bool
        ):
            raise _bad(f"exemplar_boxes[{k}] must be {{'xyxy': [x0, y0, x1, y1], 'positive': bool}}, got {b!r:.80}")
        x0, y0, x1, y1 = (float(v) for v in xyxy)
        if not (x0 < x1 and y0 < y1):
            raise _bad(f"exemplar_boxes[{k}] is empty: {xyxy}")
        boxes.append(((x0, y0, x1, y1), positive))
    return _Request(rid, fmt, data, tuple(prompts), float(thr), limit, mask_format, tuple(boxes))


# --- the server ------------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    app: SegmentationServer


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    server_version = "pyrua-dojo-seg/1"
    timeout = 30.0  # seconds per socket operation: a stalled client cannot hold a thread forever

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        if self.path.split("?", 1)[0] != HEALTH_PATH:
            self._reply(
                404, {"request_id": None, "error": {"code": "not_found", "message": f"no route GET {self.path}"}}
            )
            return
        status, payload, headers = self.server.app.health()
        self._reply(status, payload, headers)

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0] != SEGMENT_PATH:
            self._reply(
                404, {"request_id": None, "error": {"code": "not_found", "message": f"no route POST {self.path}"}}
            )
            return
        status, payload, headers = self.server.app.handle_segment(self.headers.get("Content-Length"), self.rfile)
        self._reply(status, payload, headers)

    def _reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            logger.info("client went away before the reply to %s was sent", self.path)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        logger.debug("%s %s", self.address_string(), format % args)


class SegmentationServer:
    """Serves one backend over HTTP. Give either a ready `backend` or a `loader` that builds one.

    With a loader, the server listens at once and answers `model_not_ready` (503, `Retry-After`) until the
    loader (then the backend's `warmup()`, if any and `warmup=True`) has finished in a background thread.
    The port is bound in the constructor (`port=0` picks a free one; see `url`); `start()` begins serving.
    """

    def __init__(
        self,
        backend: SegmentationBackend | None = None,
        *,
        loader: Callable[[], SegmentationBackend] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ServerLimits = ServerLimits(),
        warmup: bool = True,
    ) -> None:
        if (backend is None) == (loader is None):
            raise ValueError("give exactly one of backend= or loader=")
        self.limits = limits
        self._loader: Callable[[], SegmentationBackend]
        if loader is not None:
            self._loader = loader
        else:
            ready = backend
            assert ready is not None
            self._loader = lambda: ready
        self._warmup = warmup
        self._backend: SegmentationBackend | None = None
        self._state = "loading"
        self._load_error = ""
        self._loaded = threading.Event()
        self._model_lock = threading.Lock()
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.app = self
        self._threads: list[threading.Thread] = []
        self._closed = False

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    @property
    def state(self) -> str:
        """ "loading", "ready" or "failed"."""
        return self._state

    @property
    def load_error(self) -> str:
        return self._load_error

    def start(self) -> SegmentationServer:
        """Serve in a background thread and load the backend in another; returns self."""
        if self._threads:
            raise RuntimeError("server already started")
        serve = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="seg-http", daemon=True
        )
        load = threading.Thread(target=self._load, name="seg-load", daemon=True)
        self._threads = [serve, load]
        serve.start()
        load.start()
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until loading ends; True if the backend is ready, False if it failed or `timeout` passed."""
        self._loaded.wait(timeout)
        return self._state == "ready"

    def join(self) -> None:
        """Block until the server is closed (for the command line)."""
        if self._threads:
            self._threads[0].join()

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._threads:
            self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> SegmentationServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self) -> None:
        try:
            backend = self._loader()
            warm = getattr(backend, "warmup", None)
            if self._warmup and callable(warm):
                t0 = time.monotonic()
                warm()
                logger.info("backend %s warmed up in %.0f ms", backend.info.name, (time.monotonic() - t0) * 1000)
            self._backend = backend
            self._state = "ready"
        except Exception as exc:  # the error is reported by /healthz and every request
            logger.exception("segmentation backend failed to load")
            self._load_error = f"{type(exc).__name__}: {exc}"
            self._state = "failed"
        finally:
            self._loaded.set()

    # -- endpoints (called from handler threads) --------------------------------------------------------------

    def health(self) -> tuple[int, dict[str, Any], dict[str, str]]:
        if self._state == "ready" and self._backend is not None:
            info = self._backend.info
            return (
                200,
                {
                    "status": "ok",
                    "model": info.name,
                    "checkpoint_sha256": info.checkpoint_sha256,
                    "device": info.device,
                    "code": info.code,
                    "ready": True,
                },
                {},
            )
        if self._state == "failed":
            return 500, {"status": "failed", "ready": False, "error": self._load_error}, {}
        return 503, {"status": "loading", "ready": False}, {"Retry-After": str(self.limits.retry_after_s)}

    def handle_segment(self, content_length: str | None, stream: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Answer one `POST /v1/segment`: (status, JSON payload, extra headers)."""
        rid: Any = None
        t_start = time.perf_counter()
        try:
            body = self._read_body(content_length, stream)
            try:
                payload = json.loads(body)
            except ValueError as exc:
                raise _bad(f"request body is not JSON: {exc}") from None
            if not isinstance(payload, dict):
                raise _bad("request body must be a JSON object")
            rid = payload.get("request_id")
            if not isinstance(rid, str) or not rid or len(rid) > 256:
                bad_rid, rid = rid, None
                raise _bad(f"request_id must be a non-empty string of at most 256 characters, got {bad_rid!r:.60}")
            req = _parse_request(payload, rid, self.limits)
            backend = self._backend
            if self._state == "failed":
                raise _Reject(500, "internal", f"the model failed to load: {self._load_error}")
            if backend is None:
                raise _Reject(
                    503,
                    "model_not_ready",
                    "the model is still loading",
                    {"Retry-After": str(self.limits.retry_after_s)},
                )
            return 200, self._segment(req, backend, t_start), {}
        except _Reject as rej:
            logger.info("request %s rejected: %s %s", rid, rej.code, rej.message)
            return rej.status, {"request_id": rid, "error": {"code": rej.code, "message": rej.message}}, rej.headers
        except Exception as exc:
            logger.exception("request %s failed", rid)
            return (
                500,
                {"request_id": rid, "error": {"code": "internal", "message": f"{type(exc).__name__}: {exc}"}},
                {},
            )

    def _read_body(self, content_length: str | None, stream: Any) -> bytes:
        if content_length is None:
            raise _bad("Content-Length is required", status=411)
        try:
            n = int(content_length)
        except ValueError:
            raise _bad(f"bad Content-Length {content_length!r}") from None
        if n < 0:
            raise _bad(f"bad Content-Length {content_length!r}")
        if n > self.limits.max_body_bytes:
            raise _bad(f"request body is {n} bytes; the limit is {self.limits.max_body_bytes}", status=413)
        body = stream.read(n)
        if len(body) != n:
            raise _bad(f"request body ended after {len(body)} of {n} bytes")
        return body

    def _segment(self, req: _Request, backend: SegmentationBackend, t_start: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            image = decode_image(req.image_format, req.image_data, self.limits.max_side)
        except ValueError as exc:
            raise _bad(str(exc), "bad_image") from None
        h, w = image.shape[:2]
        for k, ((x0, y0, x1, y1), _) in enumerate(req.exemplar_boxes):
            if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
                raise _bad(f"exemplar_boxes[{k}] {[x0, y0, x1, y1]} lies outside the {w} x {h} image")
        sha = image_sha256(image)
        t1 = time.perf_counter()
        timing: dict[str, float] = {}
        try:
            with self._model_lock:
                t_model = time.perf_counter()
                raw = backend.segment(
                    image, list(req.prompts), req.score_threshold, req.max_instances, list(req.exemplar_boxes), timing
                )
                model_ms = (time.perf_counter() - t_model) * 1000.0
        except SegmentationRequestError as exc:
            raise _Reject(exc.status, exc.code, exc.message) from None
        t2 = time.perf_counter()
        if not isinstance(raw, (list, tuple)) or len(raw) != len(req.prompts):
            got = f"{type(raw).__name__} of length {len(raw)}" if hasattr(raw, "__len__") else type(raw).__name__
            raise RuntimeError(f"backend returned {got} for {len(req.prompts)} prompts")
        results = []
        for prompt, dets in zip(req.prompts, raw, strict=True):
            kept = _select(dets, (h, w), req.score_threshold, req.max_instances, repr(prompt))
            results.append({"prompt": prompt, "instances": [instance_json(s, m, req.mask_format) for s, m in kept]})
        t3 = time.perf_counter()
        info = backend.info
        backbone = timing.get("backbone", model_ms)
        return {
            "request_id": req.request_id,
            "image": {"width": int(w), "height": int(h), "sha256": sha},
            "model": {"name": info.name, "checkpoint_sha256": info.checkpoint_sha256, "code": info.code},
            "timing_ms": {
                "decode": round((t1 - t0) * 1000.0, 3),
                "backbone": round(backbone, 3),
                "prompts": round(timing.get("prompts", model_ms - backbone), 3),
                "encode": round((t3 - t2) * 1000.0, 3),
                "total": round((t3 - t_start) * 1000.0, 3),
            },
            "results": results,
        }
