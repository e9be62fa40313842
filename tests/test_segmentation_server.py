"""The segmentation server's HTTP contract, spoken to with raw http.client requests (no project client)."""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import cv2
import numpy as np
import pytest

from primitives import rle
from primitives.seg_contract import image_sha256
from pyrua_dojo.seg_service import BackendInfo, SegmentationRequestError, SegmentationServer, ServerLimits
from pyrua_dojo.seg_service.backend import Detection, ExemplarBoxPx, SegmentationBackend
from pyrua_dojo.seg_service.http_server import decode_image, instance_json

H, W = 40, 60


def square(r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    m = np.zeros((H, W), bool)
    m[r0:r1, c0:c1] = True
    return m


class FixedBackend:
    """Answers every prompt with the same planned detections; records calls and how many run at once."""

    def __init__(self, dets: Sequence[Detection] = (), delay: float = 0.0, fail: Exception | None = None) -> None:
        self.dets = list(dets)
        self.delay = delay
        self.fail = fail
        self.calls: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self._count_lock = threading.Lock()

    @property
    def info(self) -> BackendInfo:
        return BackendInfo(name="fixed", checkpoint_sha256="ab" * 32, device="cpu", code="test")

    def segment(
        self,
        image: np.ndarray,
        prompts: Sequence[str],
        score_threshold: float,
        max_instances: int,
        exemplar_boxes: Sequence[ExemplarBoxPx],
        timing: dict[str, float] | None = None,
    ) -> list[list[Detection]]:
        with self._count_lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            self.calls.append(
                {
                    "shape": image.shape,
                    "sha": image_sha256(image),
                    "prompts": list(prompts),
                    "boxes": list(exemplar_boxes),
                    "threshold": score_threshold,
                    "max_instances": max_instances,
                }
            )
            if self.delay:
                time.sleep(self.delay)
            if self.fail is not None:
                raise self.fail
            return [list(self.dets) for _ in prompts]
        finally:
            with self._count_lock:
                self.active -= 1


def png_b64(image: np.ndarray) -> str:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    assert ok
    return base64.b64encode(buf.tobytes()).decode()


def sample_image() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, size=(H, W, 3), dtype=np.uint8)


def request(**overrides: Any) -> dict[str, Any]:
    req: dict[str, Any] = {
        "request_id": "ep1-step1-head",
        "image": {"format": "png", "data": png_b64(sample_image())},
        "prompts": ["red block"],
    }
    req.update(overrides)
    return req


def call(
    url: str, method: str, path: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, dict[str, str], Any]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data is not None else {})
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, dict(resp.getheaders()), json.loads(payload)
    finally:
        conn.close()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[SegmentationServer] = []

    def make(backend: SegmentationBackend | None = None, **kwargs: Any) -> SegmentationServer:
        server = SegmentationServer(backend, **kwargs).start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.close()


def test_health_when_ready(serve: Any) -> None:
    server = serve(FixedBackend())
    assert server.wait_ready(5)
    status, _, body = call(server.url, "GET", "/healthz")
    assert status == 200
    assert body == {
        "status": "ok",
        "model": "fixed",
        "checkpoint_sha256": "ab" * 32,
        "device": "cpu",
        "code": "test",
        "ready": True,
    }


def test_loading_then_ready(serve: Any) -> None:
    release = threading.Event()
    backend = FixedBackend()
    warmed: list[bool] = []

    def loader() -> FixedBackend:
        release.wait(10)
        backend.warmup = lambda: warmed.append(True)  # type: ignore[attr-defined]
        return backend

    server = serve(loader=loader)
    status, headers, body = call(server.url, "GET", "/healthz")
    assert (status, body["status"], body["ready"], headers["Retry-After"]) == (503, "loading", False, "5")
    status, headers, body = call(server.url, "POST", "/v1/segment", request())
    assert status == 503 and headers["Retry-After"] == "5"
    assert body == {
        "request_id": "ep1-step1-head",
        "error": {"code": "model_not_ready", "message": "the model is still loading"},
    }
    release.set()
    assert server.wait_ready(5)
    assert warmed == [True]  # the warm-up ran before the server said ready
    assert call(server.url, "GET", "/healthz")[0] == 200
    assert call(server.url, "POST", "/v1/segment", request())[0] == 200


def test_failed_load_is_reported(serve: Any) -> None:
    def loader() -> FixedBackend:
        raise FileNotFoundError("no sam3.pt at /x")

    server = serve(loader=loader)
    assert not server.wait_ready(5)
    status, _, body = call(server.url, "GET", "/healthz")
    assert status == 500 and body["status"] == "failed" and "no sam3.pt at /x" in body["error"]
    status, _, body = call(server.url, "POST", "/v1/segment", request())
    assert status == 500 and body["error"]["code"] == "internal" and "no sam3.pt" in body["error"]["message"]


def test_segment_reply_follows_the_contract(serve: Any) -> None:
    dets = [
        (0.3, square(0, 5, 0, 5)),  # under the threshold
        (0.7, square(10, 20, 30, 50)),
        (0.95, square(2, 4, 2, 3)),
        (0.9, np.zeros((H, W), bool)),  # empty mask: dropped
        (0.8, square(30, 31, 0, 60)),
    ]
    server = serve(FixedBackend(dets))
    server.wait_ready(5)
    status, _, body = call(
        server.url, "POST", "/v1/segment", request(prompts=["red block", "mug"], max_instances=2, score_threshold=0.5)
    )
    assert status == 200
    assert body["request_id"] == "ep1-step1-head"
    assert body["image"] == {"width": W, "height": H, "sha256": image_sha256(sample_image())}
    assert body["model"] == {"name": "fixed", "checkpoint_sha256": "ab" * 32, "code": "test"}
    assert set(body["timing_ms"]) == {"decode", "backbone", "prompts", "encode", "total"}
    assert [r["prompt"] for r in body["results"]] == ["red block", "mug"]
    insts = body["results"][0]["instances"]
    assert [i["score"] for i in insts] == [0.95, 0.8]  # best first, cut to max_instances
    assert insts[0]["box_xyxy"] == [2.0, 2.0, 3.0, 4.0] and insts[0]["area_px"] == 2
    assert insts[0]["centroid_xy"] == [2.5, 3.0]
    assert insts[1]["box_xyxy"] == [0.0, 30.0, 60.0, 31.0] and insts[1]["centroid_xy"] == [30.0, 30.5]
    assert np.array_equal(rle.decode(insts[1]["mask"]), square(30, 31, 0, 60))


def test_request_defaults_and_fields_reach_the_backend(serve: Any) -> None:
    backend = FixedBackend([(0.6, square(10, 20, 30, 50))])
    server = serve(backend)
    server.wait_ready(5)
    boxes = [{"xyxy": [1, 2, 30, 20], "positive": True}, {"xyxy": [5, 5, 9, 9], "positive": False}]
    status, _, body = call(server.url, "POST", "/v1/segment", request(exemplar_boxes=boxes))
    assert status == 200 and len(body["results"][0]["instances"]) == 1  # default threshold 0.5
    call_ = backend.calls[0]
    assert call_["shape"] == (H, W, 3) and call_["sha"] == image_sha256(sample_image())
    assert call_["threshold"] == 0.5 and call_["max_instances"] == 20
    assert call_["boxes"] == [((1.0, 2.0, 30.0, 20.0), True), ((5.0, 5.0, 9.0, 9.0), False)]


def test_jpeg_and_mask_formats(serve: Any) -> None:
    server = serve(FixedBackend([(0.9, square(10, 20, 30, 50))]))
    server.wait_ready(5)
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(sample_image(), cv2.COLOR_RGB2BGR))
    jpeg = {"format": "jpeg", "data": base64.b64encode(buf.tobytes()).decode()}
    status, _, body = call(server.url, "POST", "/v1/segment", request(image=jpeg, mask_format="png"))
    assert status == 200 and body["image"]["width"] == W and body["image"]["height"] == H
    png = body["results"][0]["instances"][0]["mask"]
    assert png["size"] == [H, W]
    decoded = cv2.imdecode(np.frombuffer(base64.b64decode(png["png"]), np.uint8), cv2.IMREAD_GRAYSCALE) > 0
    assert np.array_equal(decoded, square(10, 20, 30, 50))
    status, _, body = call(server.url, "POST", "/v1/segment", request(mask_format="none"))
    assert status == 200 and "mask" not in body["results"][0]["instances"][0]


def _huge_png() -> str:
    ok, buf = cv2.imencode(".png", np.zeros((1, 4097, 3), np.uint8))
    return base64.b64encode(buf.tobytes()).decode()


@pytest.mark.parametrize(
    ("overrides", "code", "message"),
    [
        ({"prompts": [f"p{i}" for i in range(17)]}, "too_many_prompts", "at most 16"),
        ({"prompts": []}, "bad_request", "empty"),
        ({"prompts": "red block"}, "bad_request", "list of strings"),
        ({"prompts": ["  "]}, "bad_request", "non-blank"),
        ({"image": {"format": "gif", "data": "AAAA"}}, "bad_image", "image.format"),
        ({"image": {"format": "png", "data": "not base64!"}}, "bad_image", "base64"),
        (
            {"image": {"format": "png", "data": base64.b64encode(b"hello world, not a png").decode()}},
            "bad_image",
            "not a PNG",
        ),
        ({"image": {"format": "jpeg", "data": png_b64(sample_image())}}, "bad_image", "not a JPEG"),
        ({"image": {"format": "png", "data": _huge_png()}}, "bad_image", "1..4096"),
        ({"image": {"format": "png", "data": png_b64(sample_image())[:200]}}, "bad_image", "could not decode"),
        ({"image": "abc"}, "bad_image", "'image' must be an object"),
        ({"score_threshold": 2}, "bad_request", "score_threshold"),
        ({"max_instances": 0}, "bad_request", "max_instances"),
        ({"max_instances": True}, "bad_request", "max_instances"),
        ({"mask_format": "bitmap"}, "bad_request", "mask_format"),
        ({"exemplar_boxes": [{"xyxy": [1, 2, 3]}]}, "bad_request", "exemplar_boxes[0]"),
        ({"exemplar_boxes": [{"xyxy": [5, 5, 4, 9]}]}, "bad_request", "empty"),
        ({"exemplar_boxes": [{"xyxy": [0, 0, W + 5, 9]}]}, "bad_request", "outside"),
    ],
)
def test_validation_errors_echo_the_request_id(serve: Any, overrides: dict[str, Any], code: str, message: str) -> None:
    backend = FixedBackend()
    server = serve(backend)
    server.wait_ready(5)
    status, _, body = call(server.url, "POST", "/v1/segment", request(**overrides))
    assert status == 400
    assert body["request_id"] == "ep1-step1-head"
    assert body["error"]["code"] == code and message in body["error"]["message"]
    assert backend.calls == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [(b"{nope", "not JSON"), (b"[1]", "JSON object"), (json.dumps({"image": {}}).encode(), "request_id")],
)
def test_unreadable_requests(serve: Any, raw: bytes, message: str) -> None:
    server = serve(FixedBackend())
    server.wait_ready(5)
    status, _, body = call(server.url, "POST", "/v1/segment", raw=raw)
    assert status == 400 and body["request_id"] is None
    assert body["error"]["code"] == "bad_request" and message in body["error"]["message"]


def test_body_limit_is_checked_before_reading(serve: Any) -> None:
    server = serve(FixedBackend())
    server.wait_ready(5)
    conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=10)
    try:
        conn.putrequest("POST", "/v1/segment")
        conn.putheader("Content-Length", str(10 * 1024 * 1024 + 1))
        conn.endheaders()
        resp = conn.getresponse()
        body = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 413 and "limit" in body["error"]["message"]


def test_limits_are_configurable(serve: Any) -> None:
    server = serve(FixedBackend(), limits=ServerLimits(max_prompts=2, max_side=32))
    server.wait_ready(5)
    assert (
        call(server.url, "POST", "/v1/segment", request(prompts=["a", "b", "c"]))[2]["error"]["code"]
        == "too_many_prompts"
    )
    status, _, body = call(server.url, "POST", "/v1/segment", request())
    assert status == 400 and body["error"]["code"] == "bad_image" and "1..32" in body["error"]["message"]


def test_unknown_route(serve: Any) -> None:
    server = serve(FixedBackend())
    assert call(server.url, "GET", "/v2/nothing")[0] == 404
    assert call(server.url, "POST", "/segment", request())[2]["error"]["code"] == "not_found"


def test_backend_errors(serve: Any) -> None:
    server = serve(FixedBackend(fail=RuntimeError("CUDA out of memory")))
    server.wait_ready(5)
    status, _, body = call(server.url, "POST", "/v1/segment", request())
    assert status == 500 and body["request_id"] == "ep1-step1-head"
    assert body["error"] == {"code": "internal", "message": "RuntimeError: CUDA out of memory"}

    server = serve(FixedBackend(fail=SegmentationRequestError("bad_image", "never rendered")))
    server.wait_ready(5)
    status, _, body = call(server.url, "POST", "/v1/segment", request())
    assert status == 400 and body["error"] == {"code": "bad_image", "message": "never rendered"}


def test_backend_output_is_checked(serve: Any) -> None:
    server = serve(FixedBackend([(0.9, np.ones((H + 1, W), bool))]))
    server.wait_ready(5)
    status, _, body = call(server.url, "POST", "/v1/segment", request())
    assert status == 500 and body["error"]["code"] == "internal" and "mask" in body["error"]["message"]


def test_backend_calls_are_serialised(serve: Any) -> None:
    backend = FixedBackend([(0.9, square(1, 5, 1, 5))], delay=0.05)
    server = serve(backend)
    server.wait_ready(5)
    statuses: list[int] = []

    def worker(k: int) -> None:
        statuses.append(call(server.url, "POST", "/v1/segment", request(request_id=f"r{k}"))[0])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert statuses == [200] * 6
    assert len(backend.calls) == 6 and backend.max_active == 1


def test_server_needs_exactly_one_backend_source() -> None:
    with pytest.raises(ValueError):
        SegmentationServer()
    with pytest.raises(ValueError):
        SegmentationServer(FixedBackend(), loader=FixedBackend)


def test_decode_image_round_trips_rgb() -> None:
    img = sample_image()
    assert np.array_equal(decode_image("png", png_b64(img)), img)


def test_instance_json_geometry() -> None:
    inst = instance_json(0.5, square(10, 20, 30, 50), "coco_rle")
    assert inst["box_xyxy"] == [30.0, 10.0, 50.0, 20.0]
    assert inst["area_px"] == 200 and inst["centroid_xy"] == [40.0, 15.0]
