"""Client of the segmentation service: an image and text prompts in, per prompt a tuple of instances out.

The service contract (`shared/reference/sam3.md`, section 6) is one JSON endpoint, `POST /v1/segment`, served
by the SAM 3 server on a GPU or by the twin server from the twin's own instance masks. This module is the
agent's side of it and knows nothing about either server.

Failures are results, not exceptions: a down, slow, broken or overloaded server gives a `SegmentationReply`
with `ok=False` and a `SegmentationFailure` that says why, within the configured timeouts. Bad arguments
(not an RGB uint8 image, no prompts, too many) raise `ValueError` before anything is sent.

Coordinates are continuous pixel coordinates of the image that was sent: pixel (row r, column c) covers
[c, c+1) x [r, r+1), so its centre is (c + 0.5, r + 0.5). `box_xyxy` is in that frame (for a mask-derived
box: [min c, min r, max c + 1, max r + 1]); `centroid_xy` is the mean of the mask's pixel centres.
"""

from __future__ import annotations

import base64
import http.client
import itertools
import json
import math
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit

import cv2
import numpy as np

from primitives import rle
from primitives.seg_contract import (
    DEFAULT_URL,
    ExemplarBox,
    HEALTH_PATH,
    IMAGE_FORMATS,
    image_sha256,
    ImageFormat,
    Instance,
    MASK_FORMATS,
    MaskFormat,
    MAX_BODY_BYTES,
    MAX_EXEMPLAR_BOXES,
    MAX_IMAGE_SIDE,
    MAX_INSTANCES,
    MAX_PROMPT_CHARS,
    MAX_PROMPTS,
    MAX_REPLY_BYTES,
    PromptResult,
    SEGMENT_PATH,
    SegmentationFailure,
    SegmentationReply,
    ServiceHealth,
)

__all__ = ["SegmentationClient"]


# --- the client ------------------------------------------------------------------------------------------------


class _Malformed(Exception):
    """The server answered, but not with a reply this client can trust."""


@dataclass
class _Attempt:
    """What one HTTP attempt produced (internal)."""

    status: int | None = None  # HTTP status, None when no response came back
    body: bytes = b""
    retry_after: float | None = None
    failure: SegmentationFailure | None = None
    retryable: bool = False


class SegmentationClient:
    """HTTP client of the segmentation service, with timeouts, retries, a circuit breaker and an LRU cache.

    - Each attempt connects within `connect_timeout`; the reply must start within `read_timeout` and is
      abandoned (`timeout`) once it has taken longer than that (so an attempt ends within about
      connect_timeout + 2 x read_timeout, whatever the server does).
    - Connection errors and 5xx replies are retried up to `retries` times with jittered exponential backoff
      (honouring a server's `Retry-After` up to `max_backoff_s`); 4xx replies, read timeouts and malformed
      replies are not.
    - After `breaker_threshold` consecutive failed calls the breaker opens: calls fail at once with
      `circuit_open` for `breaker_cooldown_s`, then one trial call is let through (success closes it).
    - Successful answers are cached per (image sha256, prompt, threshold, max_instances, mask format,
      exemplar boxes), at most `cache_size` entries; a call sends only the prompts it has not seen.

    Thread-safe; one client can serve several episodes. `clock` (monotonic seconds) drives only the breaker.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        connect_timeout: float = 2.0,
        read_timeout: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
        breaker_threshold: int = 3,
        breaker_cooldown_s: float = 30.0,
        cache_size: int = 128,
        image_format: ImageFormat = "png",
        request_prefix: str | None = None,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"segmentation url must be http(s)://host[:port][/base], got {url!r}")
        for name, value in (("connect_timeout", connect_timeout), ("read_timeout", read_timeout)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if not (isinstance(retries, int) and retries >= 0):
            raise ValueError(f"retries must be an int >= 0, got {retries!r}")
        if not (isinstance(breaker_threshold, int) and breaker_threshold >= 1):
            raise ValueError(f"breaker_threshold must be an int >= 1, got {breaker_threshold!r}")
        if not (isinstance(cache_size, int) and cache_size >= 0):
            raise ValueError(f"cache_size must be an int >= 0, got {cache_size!r}")
        if backoff_s < 0 or max_backoff_s < 0 or breaker_cooldown_s < 0:
            raise ValueError("backoff_s, max_backoff_s and breaker_cooldown_s must be >= 0")
        if image_format not in IMAGE_FORMATS:
            raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self.retries = retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.breaker_threshold = breaker_threshold
        self.breaker_cooldown_s = float(breaker_cooldown_s)
        self.cache_size = cache_size
        self.image_format: ImageFormat = image_format
        self._prefix = request_prefix or f"seg-{uuid.uuid4().hex[:8]}"
        self._ids = itertools.count(1)
        self._rng = random.Random(seed)
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[Any, ...], tuple[Instance, ...]] = OrderedDict()
        self._hits = 0
        self._misses = 0
        self._failures = 0  # consecutive failed calls
        self._opened_at: float | None = None  # breaker open since (clock), None when closed
        self._trial_running = False

    # -- public -----------------------------------------------------------------------------------------------

    @property
    def breaker_state(self) -> Literal["closed", "open", "half_open"]:
        """ "closed" (normal), "open" (failing fast) or "half_open" (cooldown over, next call is a trial)."""
        with self._lock:
            if self._opened_at is None:
                return "closed"
            if self._trial_running or self._clock() - self._opened_at >= self.breaker_cooldown_s:
                return "half_open"
            return "open"

    @property
    def cache_info(self) -> tuple[int, int, int]:
        """(hits, misses, entries) of the per-prompt cache."""
        with self._lock:
            return self._hits, self._misses, len(self._cache)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def segment(
        self,
        image: np.ndarray,
        prompts: str | Sequence[str],
        *,
        score_threshold: float = 0.5,
        max_instances: int = 20,
        mask_format: MaskFormat = "coco_rle",
        exemplar_boxes: Sequence[ExemplarBox] = (),
        request_id: str | None = None,
    ) -> SegmentationReply:
        """Segment every instance of each prompt in `image` (uint8 H x W x 3 RGB).

        Returns a reply whose `results` follow the order of `prompts`; an absent concept has no instances.
        Never raises for a server problem (see `ok` / `error`); raises ValueError for bad arguments.
        """
        t0 = time.monotonic()
        prompt_list = self._check_args(image, prompts, score_threshold, max_instances, mask_format, exemplar_boxes)
        rid = request_id if request_id is not None else f"{self._prefix}-{next(self._ids)}"
        if not isinstance(rid, str) or not rid:
            raise ValueError(f"request_id must be a non-empty str, got {rid!r}")
        h, w = int(image.shape[0]), int(image.shape[1])
        sha = image_sha256(image)
        boxes = tuple((tuple(float(v) for v in b.xyxy), bool(b.positive)) for b in exemplar_boxes)
        keys = {p: (sha, p, float(score_threshold), int(max_instances), mask_format, boxes) for p in prompt_list}

        found: dict[str, tuple[Instance, ...]] = {}
        with self._lock:
            for p in prompt_list:
                hit = self._cache.get(keys[p]) if self.cache_size else None
                if hit is not None:
                    self._cache.move_to_end(keys[p])
                    found[p] = hit
            missing = [p for p in dict.fromkeys(prompt_list) if p not in found]
            n_cached = len(found)
            self._hits += n_cached
            self._misses += len(missing)

        def reply(**kw: Any) -> SegmentationReply:
            return SegmentationReply(
                request_id=rid,
                prompts=tuple(prompt_list),
                image_size=(h, w),
                image_sha256=sha,
                elapsed_ms=(time.monotonic() - t0) * 1000.0,
                cached_prompts=n_cached,
                **kw,
            )

        if not missing:
            return reply(ok=True, results=tuple(PromptResult(p, found[p]) for p in prompt_list))

        body = self._request_body(rid, image, missing, score_threshold, max_instances, mask_format, boxes)
        refusal = self._admit()
        if refusal is not None:
            return reply(ok=False, error=refusal)

        attempts = 0
        outcome = _Attempt()
        model = ""
        timing: dict[str, float] = {}
        server_up: bool | None = None  # no verdict if the call is interrupted
        try:
            while True:
                attempts += 1
                outcome = self._post(self._base + SEGMENT_PATH, body)
                if outcome.failure is None or not outcome.retryable or attempts > self.retries:
                    break
                time.sleep(self._backoff(attempts, outcome.retry_after))
            if outcome.failure is None:
                try:
                    fresh, model, timing = _parse_reply(
                        outcome.body, rid, missing, (h, w), sha, mask_format, self.image_format
                    )
                except _Malformed as exc:
                    outcome = _Attempt(
                        status=outcome.status, failure=SegmentationFailure("malformed_reply", str(exc), outcome.status)
                    )
                else:
                    found.update(fresh)
            # A 4xx means the server is up and judged the request: it does not count against the breaker.
            server_up = outcome.failure is None or (outcome.status is not None and 400 <= outcome.status < 500)
        finally:
            self._settle(server_up)  # also on an interruption (a cell deadline): a trial never sticks
        if outcome.failure is not None:
            return reply(ok=False, error=outcome.failure, attempts=attempts)
        with self._lock:
            if self.cache_size:
                for p in missing:
                    self._cache[keys[p]] = found[p]
                    self._cache.move_to_end(keys[p])
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return reply(
            ok=True,
            results=tuple(PromptResult(p, found[p]) for p in prompt_list),
            model=model,
            timing_ms=MappingProxyType(timing),
            attempts=attempts,
        )

    def health(self) -> ServiceHealth:
        """Ask `GET /healthz` once (no retries, no effect on the breaker)."""
        out = self._send("GET", self._base + HEALTH_PATH, None)
        if out.status is None:
            assert out.failure is not None
            return ServiceHealth(False, False, out.failure.code, detail=out.failure.message)
        try:
            payload = json.loads(out.body)
            if not isinstance(payload, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return ServiceHealth(True, False, "malformed_reply", detail=f"health reply is not a JSON object: {exc}")
        model = payload.get("model", "")
        return ServiceHealth(
            reachable=True,
            ready=out.status == 200 and payload.get("ready") is True,
            status=str(payload.get("status", "")),
            model=model if isinstance(model, str) else "",
            device=str(payload.get("device", "")),
            checkpoint_sha256=str(payload.get("checkpoint_sha256", "")),
            detail=str(payload.get("error", "")),
        )

    # -- arguments and request --------------------------------------------------------------------------------

    @staticmethod
    def _check_args(
        image: np.ndarray,
        prompts: str | Sequence[str],
        score_threshold: float,
        max_instances: int,
        mask_format: str,
        exemplar_boxes: Sequence[ExemplarBox],
    ) -> list[str]:
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            got = f"{image.dtype} {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
            raise ValueError(f"image must be a uint8 H x W x 3 RGB array, got {got}")
        h, w = image.shape[:2]
        if not (1 <= h <= MAX_IMAGE_SIDE and 1 <= w <= MAX_IMAGE_SIDE):
            raise ValueError(f"image sides must be 1..{MAX_IMAGE_SIDE} px, got {w} x {h}")
        plist = [prompts] if isinstance(prompts, str) else list(prompts)
        if not plist:
            raise ValueError("at least one prompt is required")
        if len(plist) > MAX_PROMPTS:
            raise ValueError(f"at most {MAX_PROMPTS} prompts per call, got {len(plist)}")
        for p in plist:
            if not isinstance(p, str) or not p.strip() or len(p) > MAX_PROMPT_CHARS:
                raise ValueError(f"each prompt must be a non-empty str of at most {MAX_PROMPT_CHARS} chars, got {p!r}")
        if not (isinstance(score_threshold, (int, float)) and 0.0 <= score_threshold <= 1.0):
            raise ValueError(f"score_threshold must be in [0, 1], got {score_threshold!r}")
        if not (
            isinstance(max_instances, int)
            and not isinstance(max_instances, bool)
            and 1 <= max_instances <= MAX_INSTANCES
        ):
            raise ValueError(f"max_instances must be an int in 1..{MAX_INSTANCES}, got {max_instances!r}")
        if mask_format not in MASK_FORMATS:
            raise ValueError(f"mask_format must be one of {MASK_FORMATS}, got {mask_format!r}")
        if len(exemplar_boxes) > MAX_EXEMPLAR_BOXES:
            raise ValueError(f"at most {MAX_EXEMPLAR_BOXES} exemplar boxes, got {len(exemplar_boxes)}")
        for b in exemplar_boxes:
            if not isinstance(b, ExemplarBox) or len(b.xyxy) != 4 or not all(math.isfinite(float(v)) for v in b.xyxy):
                raise ValueError(f"exemplar boxes must be ExemplarBox((x0, y0, x1, y1), positive), got {b!r}")
            x0, y0, x1, y1 = (float(v) for v in b.xyxy)
            if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
                raise ValueError(f"exemplar box {b.xyxy} is empty or outside the {w} x {h} image")
        return plist

    def _request_body(
        self,
        rid: str,
        image: np.ndarray,
        prompts: list[str],
        score_threshold: float,
        max_instances: int,
        mask_format: str,
        boxes: tuple[tuple[tuple[float, ...], bool], ...],
    ) -> bytes:
        bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
        if self.image_format == "png":
            ok, buf = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, 1])
        else:
            ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])
        if not ok:
            raise ValueError(f"OpenCV could not encode the image as {self.image_format}")
        payload = {
            "request_id": rid,
            "image": {"format": self.image_format, "data": base64.b64encode(buf.tobytes()).decode("ascii")},
            "prompts": prompts,
            "score_threshold": float(score_threshold),
            "max_instances": int(max_instances),
            "mask_format": mask_format,
            "exemplar_boxes": [{"xyxy": list(xyxy), "positive": pos} for xyxy, pos in boxes],
        }
        body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        if len(body) > MAX_BODY_BYTES:
            raise ValueError(f"request body is {len(body)} bytes, over the service limit of {MAX_BODY_BYTES}")
        return body

    # -- circuit breaker --------------------------------------------------------------------------------------

    def _admit(self) -> SegmentationFailure | None:
        """None if a call may go out now; else the `circuit_open` failure to return."""
        with self._lock:
            if self._opened_at is None:
                return None
            waited = self._clock() - self._opened_at
            if waited >= self.breaker_cooldown_s and not self._trial_running:
                self._trial_running = True  # half-open: exactly one trial call
                return None
            left = max(0.0, self.breaker_cooldown_s - waited)
            return SegmentationFailure(
                "circuit_open",
                f"segmentation service at {self.url} failed {self._failures} calls in a row; "
                f"not calling it for another {left:.1f} s (perception unavailable)",
            )

    def _settle(self, success: bool | None) -> None:
        """Record a call's verdict: success closes the breaker, failure counts; None only ends a trial."""
        with self._lock:
            trial = self._trial_running
            self._trial_running = False
            if success is None:
                return
            if success:
                self._failures = 0
                self._opened_at = None
                return
            self._failures += 1
            if trial or self._failures >= self.breaker_threshold:
                self._opened_at = self._clock()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_backoff_s, max(0.0, retry_after))
        base = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return base * self._rng.uniform(0.5, 1.5)

    # -- HTTP -------------------------------------------------------------------------------------------------

    def _post(self, path: str, body: bytes) -> _Attempt:
        out = self._send("POST", path, body)
        if out.status is None or out.status == 200:
            return out
        code, message = _error_of(out.body, out.status)
        out.failure = SegmentationFailure(code, message, out.status)
        out.retryable = out.status >= 500
        return out

    def _send(self, method: str, path: str, body: bytes | None) -> _Attempt:
        """One HTTP exchange; network problems come back as a failure, never as an exception."""
        where = f"{self.url}{path[len(self._base) :]}"
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.connect_timeout)
        try:
            try:
                conn.connect()
            except TimeoutError:  # socket.timeout is an alias
                return _Attempt(
                    failure=SegmentationFailure(
                        "unavailable", f"no connection to {where} within {self.connect_timeout:g} s"
                    ),
                    retryable=True,
                )
            except OSError as exc:
                return _Attempt(
                    failure=SegmentationFailure("unavailable", f"cannot connect to {where}: {exc.strerror or exc}"),
                    retryable=True,
                )
            # Each socket operation waits at most read_timeout, and the body is cut once the deadline has
            # passed, so a reply that trickles in still ends within about twice read_timeout.
            conn.sock.settimeout(self.read_timeout)
            deadline = time.monotonic() + self.read_timeout
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            chunks: list[bytes] = []
            size = 0
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError
                chunk = resp.read1(65536)  # at most one recv, so the deadline is checked often
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_REPLY_BYTES:
                    return _Attempt(
                        status=resp.status,
                        failure=SegmentationFailure(
                            "malformed_reply", f"reply from {where} exceeds {MAX_REPLY_BYTES} bytes", resp.status
                        ),
                    )
                chunks.append(chunk)
            if resp.length:  # bytes the Content-Length promised that never came
                return _Attempt(
                    status=resp.status,
                    failure=SegmentationFailure(
                        "malformed_reply", f"reply from {where} was truncated after {size} bytes", resp.status
                    ),
                )
            retry_after = _seconds(resp.getheader("Retry-After"))
            return _Attempt(status=resp.status, body=b"".join(chunks), retry_after=retry_after)
        except TimeoutError:  # socket.timeout is an alias
            return _Attempt(
                failure=SegmentationFailure("timeout", f"no complete reply from {where} within {self.read_timeout:g} s")
            )
        except (ConnectionError, http.client.RemoteDisconnected) as exc:
            return _Attempt(
                failure=SegmentationFailure("unavailable", f"connection to {where} dropped: {exc}"), retryable=True
            )
        except (http.client.HTTPException, OSError) as exc:
            return _Attempt(failure=SegmentationFailure("malformed_reply", f"bad HTTP reply from {where}: {exc!r}"))
        finally:
            conn.close()


# --- reply parsing ---------------------------------------------------------------------------------------------


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _error_of(body: bytes, status: int) -> tuple[str, str]:
    """(code, message) from an error reply; a non-JSON error body still gives a clear message."""
    try:
        payload = json.loads(body)
        err = payload["error"]
        code, message = err["code"], err["message"]
        if isinstance(code, str) and isinstance(message, str):
            return code, message
    except (ValueError, KeyError, TypeError):
        pass
    text = body[:200].decode("utf-8", errors="replace")
    return ("internal" if status >= 500 else "bad_request"), f"HTTP {status} without a contract error body: {text!r}"


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Malformed(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _parse_reply(
    body: bytes,
    request_id: str,
    prompts: list[str],
    hw: tuple[int, int],
    sha: str,
    mask_format: str,
    image_format: str,
) -> tuple[dict[str, tuple[Instance, ...]], str, dict[str, float]]:
    """Validate a 200 reply against the contract; raise `_Malformed` saying what is wrong."""
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise _Malformed(f"reply is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise _Malformed("reply is not a JSON object")
    if payload.get("request_id") != request_id:
        raise _Malformed(f"reply is for request {payload.get('request_id')!r}, not {request_id!r}")
    img = payload.get("image")
    if not isinstance(img, dict) or img.get("width") != hw[1] or img.get("height") != hw[0]:
        raise _Malformed(f"reply image {img!r} does not match the sent {hw[1]} x {hw[0]} image")
    if image_format == "png" and img.get("sha256") not in (None, sha):
        raise _Malformed("the server decoded different pixels than were sent (sha256 mismatch)")
    results = payload.get("results")
    if not isinstance(results, list) or len(results) != len(prompts):
        raise _Malformed(f"reply must have one result per prompt ({len(prompts)}), got {results!r:.80}")
    out: dict[str, tuple[Instance, ...]] = {}
    for i, (entry, prompt) in enumerate(zip(results, prompts, strict=True)):
        if not isinstance(entry, dict) or entry.get("prompt") != prompt or not isinstance(entry.get("instances"), list):
            raise _Malformed(f"result {i} must be {{'prompt': {prompt!r}, 'instances': [...]}}")
        out[prompt] = tuple(
            _parse_instance(inst, f"result {i} instance {j}", hw, mask_format)
            for j, inst in enumerate(entry["instances"])
        )
    model = payload.get("model")
    model_name = model.get("name", "") if isinstance(model, dict) else ""
    timing_raw = payload.get("timing_ms")
    timing = (
        {str(k): float(v) for k, v in timing_raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if isinstance(timing_raw, dict)
        else {}
    )
    return out, str(model_name), timing


def _parse_instance(inst: Any, where: str, hw: tuple[int, int], mask_format: str) -> Instance:
    if not isinstance(inst, dict):
        raise _Malformed(f"{where} is not an object")
    score = _num(inst.get("score"), f"{where} score")
    if not 0.0 <= score <= 1.0:
        raise _Malformed(f"{where} score {score} is outside [0, 1]")
    box = inst.get("box_xyxy")
    if not isinstance(box, list) or len(box) != 4:
        raise _Malformed(f"{where} box_xyxy must be [x0, y0, x1, y1], got {box!r}")
    box_t = tuple(_num(v, f"{where} box_xyxy") for v in box)
    cen = inst.get("centroid_xy")
    if not isinstance(cen, list) or len(cen) != 2:
        raise _Malformed(f"{where} centroid_xy must be [x, y], got {cen!r}")
    cen_t = tuple(_num(v, f"{where} centroid_xy") for v in cen)
    area = inst.get("area_px")
    if isinstance(area, bool) or not isinstance(area, int) or area < 0:
        raise _Malformed(f"{where} area_px must be an int >= 0, got {area!r}")
    runs: np.ndarray | None = None
    if mask_format != "none":
        mask = inst.get("mask")
        if not isinstance(mask, dict) or list(mask.get("size", ())) != [hw[0], hw[1]]:
            raise _Malformed(f"{where} mask must have size [{hw[0]}, {hw[1]}], got {str(mask)[:80]!r}")
        try:
            if mask_format == "coco_rle":
                counts = mask.get("counts")
                if not isinstance(counts, str):
                    raise ValueError(f"counts must be a COCO RLE string, got {type(counts).__name__}")
                runs = np.asarray(rle.counts_from_string(counts), dtype=np.int64)
            else:
                runs = rle.counts_from_mask(_png_mask(mask.get("png"), hw))
        except (rle.RLEError, ValueError) as exc:
            raise _Malformed(f"{where} mask does not decode: {exc}") from None
        if int(runs.sum()) != hw[0] * hw[1]:
            raise _Malformed(f"{where} mask runs cover {int(runs.sum())} pixels, the image has {hw[0] * hw[1]}")
        if int(runs[1::2].sum()) != area:
            raise _Malformed(f"{where} area_px {area} disagrees with its mask ({int(runs[1::2].sum())} px)")
    return Instance(
        score=score,
        box_xyxy=box_t,  # type: ignore[arg-type]
        area_px=area,
        centroid_xy=cen_t,  # type: ignore[arg-type]
        size=hw,
        runs=runs,
    )


def _png_mask(data: Any, hw: tuple[int, int]) -> np.ndarray:
    if not isinstance(data, str):
        raise ValueError("png mask data must be a base64 str")
    raw = base64.b64decode(data, validate=True)
    img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_GRAYSCALE)
    if img is None or img.shape != hw:
        raise ValueError(f"png mask is not a {hw[1]} x {hw[0]} grayscale PNG")
    return img > 127
