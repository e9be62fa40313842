"""SegmentationClient against real HTTP servers on 127.0.0.1: the twin server, and deliberately broken ones."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from primitives import rle
from primitives.seg_contract import ExemplarBox, image_sha256
from primitives.seg_client import SegmentationClient
from pyrua_dojo.seg_service import DictMaskOracle, ObjectMask, SegmentationServer, TwinBackend

H, W = 48, 64


def _scene() -> tuple[np.ndarray, list[ObjectMask]]:
    image = np.full((H, W, 3), 90, np.uint8)
    red = np.zeros((H, W), bool)
    red[5:15, 10:30] = True
    green = np.zeros((H, W), bool)
    green[30:40, 40:50] = True
    image[red] = (200, 30, 30)
    image[green] = (30, 200, 30)
    return image, [
        ObjectMask(frozenset({"red", "block"}), red, "red1"),
        ObjectMask(frozenset({"green", "block"}), green, "green1"),
    ]


@pytest.fixture
def twin() -> Iterator[tuple[SegmentationServer, np.ndarray]]:
    image, objects = _scene()
    oracle = DictMaskOracle()
    oracle.add(image, objects)
    with SegmentationServer(TwinBackend(oracle)) as server:
        assert server.wait_ready(10)
        yield server, image


# --- a scripted server: each request gets the next planned answer -------------------------------------------------

Plan = Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes, float]]


class Scripted:
    """A real HTTP server whose answers are planned by the test (status, headers, body, delay before answering)."""

    def __init__(self, plans: list[Plan]) -> None:
        self.plans = plans
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = json.loads(body)
                outer.requests.append(req)
                plan = outer.plans[min(len(outer.requests), len(outer.plans)) - 1]
                status, headers, payload, delay = plan(req)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    if "Content-Length" not in headers:
                        self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted() -> Iterator[Callable[[list[Plan]], Scripted]]:
    servers: list[Scripted] = []

    def make(plans: list[Plan]) -> Scripted:
        servers.append(Scripted(plans))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def valid_reply(req: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A correct reply with one 3 x 4 px instance per prompt."""
    mask = np.zeros((H, W), bool)
    mask[2:5, 3:7] = True
    inst = {
        "score": 0.8,
        "box_xyxy": [3.0, 2.0, 7.0, 5.0],
        "area_px": 12,
        "centroid_xy": [5.0, 3.5],
        "mask": rle.encode(mask),
    }
    reply = {
        "request_id": req["request_id"],
        "image": {"width": W, "height": H},
        "model": {"name": "scripted", "checkpoint_sha256": "", "code": "test"},
        "timing_ms": {"decode": 1.0, "backbone": 2.0, "prompts": 3.0, "encode": 0.5},
        "results": [{"prompt": p, "instances": [dict(inst)]} for p in req["prompts"]],
    }
    reply.update(overrides)
    return reply


def ok(req: dict[str, Any]) -> tuple[int, dict[str, str], bytes, float]:
    return 200, {}, json.dumps(valid_reply(req)).encode(), 0.0


def error(status: int, code: str, headers: dict[str, str] | None = None) -> Plan:
    def plan(req: dict[str, Any]) -> tuple[int, dict[str, str], bytes, float]:
        body = {"request_id": req["request_id"], "error": {"code": code, "message": f"planned {code}"}}
        return status, headers or {}, json.dumps(body).encode(), 0.0

    return plan


def image() -> np.ndarray:
    return _scene()[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- against the twin server ---------------------------------------------------------------------------------------


def test_segment_against_the_twin_server(twin: tuple[SegmentationServer, np.ndarray]) -> None:
    server, img = twin
    client = SegmentationClient(server.url)
    reply = client.segment(img, ["red block", "blocks", "blue block"], request_id="ep1-step3-head")
    assert reply.ok and reply.error is None
    assert reply.request_id == "ep1-step3-head"
    assert reply.prompts == ("red block", "blocks", "blue block")
    assert reply.image_size == (H, W) and reply.image_sha256 == image_sha256(img)
    assert reply.model == "twin" and reply.attempts == 1
    assert set(reply.timing_ms) >= {"decode", "backbone", "prompts", "encode"}
    red = reply.best("red block")
    assert red is not None
    assert red.box_xyxy == (10.0, 5.0, 30.0, 15.0)
    assert red.area_px == 200 and red.centroid_xy == (20.0, 10.0)
    assert np.array_equal(red.mask, _scene()[1][0].mask)
    assert len(reply.instances("blocks")) == 2
    assert reply.instances("blue block") == ()  # absent concept: an empty tuple, not an error
    with pytest.raises(KeyError):
        reply.instances("yellow block")


def test_masks_are_decoded_lazily_and_read_only(twin: tuple[SegmentationServer, np.ndarray]) -> None:
    server, img = twin
    inst = SegmentationClient(server.url).segment(img, "red block").best("red block")
    assert inst is not None
    assert "mask" not in inst.__dict__  # not built until asked for
    mask = inst.mask
    assert mask is inst.mask and mask.dtype == bool and mask.shape == (H, W)
    with pytest.raises(ValueError):
        mask[0, 0] = True


def test_mask_formats_png_and_none(twin: tuple[SegmentationServer, np.ndarray]) -> None:
    server, img = twin
    client = SegmentationClient(server.url, cache_size=0)
    png = client.segment(img, "green block", mask_format="png").best("green block")
    assert png is not None and np.array_equal(png.mask, _scene()[1][1].mask)
    bare = client.segment(img, "green block", mask_format="none").best("green block")
    assert bare is not None and bare.mask is None and bare.runs is None
    assert bare.box_xyxy == (40.0, 30.0, 50.0, 40.0) and bare.area_px == 100


def test_jpeg_upload_is_decoded_but_unknown_to_the_twin(twin: tuple[SegmentationServer, np.ndarray]) -> None:
    server, img = twin
    reply = SegmentationClient(server.url, image_format="jpeg").segment(img, "red block")
    assert not reply.ok and reply.error is not None
    assert reply.error.code == "bad_image" and reply.error.http_status == 400
    assert "JPEG" in reply.error.message
    assert reply.attempts == 1  # a 4xx is not retried


def test_cache_hits_and_partial_hits(twin: tuple[SegmentationServer, np.ndarray]) -> None:
    server, img = twin
    client = SegmentationClient(server.url)
    first = client.segment(img, ["red block", "green block"])
    assert first.ok and first.cached_prompts == 0 and first.attempts == 1
    again = client.segment(img.copy(), ["red block", "green block"])
    assert again.ok and again.cached_prompts == 2 and again.attempts == 0
    assert again.best("red block") is first.best("red block")
    partial = client.segment(img, ["green block", "blocks"])
    assert partial.ok and partial.cached_prompts == 1 and partial.attempts == 1
    assert [r.prompt for r in partial.results] == ["green block", "blocks"]
    assert len(partial.instances("blocks")) == 2
    other_threshold = client.segment(img, ["red block"], score_threshold=0.6)
    assert other_threshold.cached_prompts == 0
    assert client.cache_info == (3, 4, 4)


def test_cache_is_lru_bounded(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([ok])
    client = SegmentationClient(server.url, cache_size=2)
    img = image()
    for p in ("a", "b", "c"):
        assert client.segment(img, p).ok
    assert client.segment(img, "c").cached_prompts == 1
    assert client.segment(img, "a").cached_prompts == 0  # evicted
    assert client.cache_info[2] == 2


def test_exemplar_boxes_are_sent_in_pixels(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([ok])
    client = SegmentationClient(server.url)
    reply = client.segment(
        image(), "mug", exemplar_boxes=[ExemplarBox((1, 2, 10, 20)), ExemplarBox((3, 4, 5, 6), positive=False)]
    )
    assert reply.ok
    assert server.requests[0]["exemplar_boxes"] == [
        {"xyxy": [1.0, 2.0, 10.0, 20.0], "positive": True},
        {"xyxy": [3.0, 4.0, 5.0, 6.0], "positive": False},
    ]


# --- failures are results --------------------------------------------------------------------------------------------


def test_down_server_gives_an_unavailable_result() -> None:
    client = SegmentationClient(f"http://127.0.0.1:{free_port()}", retries=1, backoff_s=0.01)
    reply = client.segment(image(), "red block")
    assert not reply.ok and reply.error is not None
    assert reply.error.code == "unavailable" and "cannot connect" in reply.error.message
    assert reply.attempts == 2 and reply.results == ()
    assert reply.instances("red block") == ()
    health = client.health()
    assert not health.reachable and health.status == "unavailable"


def test_slow_server_times_out_without_retrying(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([lambda req: (200, {}, json.dumps(valid_reply(req)).encode(), 1.5)])
    client = SegmentationClient(server.url, read_timeout=0.3, retries=2)
    reply = client.segment(image(), "red block")
    assert not reply.ok and reply.error is not None
    assert reply.error.code == "timeout" and reply.attempts == 1


def test_trickling_reply_is_cut_at_the_deadline() -> None:
    """A server that sends its headers and then one byte at a time cannot hold the client."""
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1 << 20)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(100):
                if stop.wait(0.05):
                    break
                try:
                    conn.sendall(b" ")
                except OSError:
                    break

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        client = SegmentationClient(f"http://127.0.0.1:{listener.getsockname()[1]}", read_timeout=0.3, retries=0)
        reply = client.segment(image(), "red block")
        assert not reply.ok and reply.error is not None and reply.error.code == "timeout"
    finally:
        stop.set()
        t.join(5)
        listener.close()


def test_retries_on_500_then_succeeds(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([error(500, "internal"), error(503, "model_not_ready", {"Retry-After": "0"}), ok])
    client = SegmentationClient(server.url, retries=2, backoff_s=0.01, seed=1)
    reply = client.segment(image(), "red block", request_id="r-1")
    assert reply.ok and reply.attempts == 3
    assert [r["request_id"] for r in server.requests] == ["r-1"] * 3  # the same, idempotent request


def test_gives_up_after_the_last_retry(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([error(500, "internal")])
    reply = SegmentationClient(server.url, retries=1, backoff_s=0.01).segment(image(), "red block")
    assert not reply.ok and reply.error is not None
    assert (reply.error.code, reply.error.http_status, reply.error.message) == ("internal", 500, "planned internal")
    assert reply.attempts == 2 and len(server.requests) == 2


def test_4xx_is_not_retried(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([error(400, "too_many_prompts")])
    reply = SegmentationClient(server.url, retries=3).segment(image(), "red block")
    assert reply.error is not None and reply.error.code == "too_many_prompts"
    assert reply.attempts == 1 and len(server.requests) == 1


def _bad_json(req: dict[str, Any]) -> bytes:
    return b"{not json"


def _with(**overrides: Any) -> Callable[[dict[str, Any]], bytes]:
    return lambda req: json.dumps(valid_reply(req, **overrides)).encode()


def _instance_with(**fields: Any) -> Callable[[dict[str, Any]], bytes]:
    def body(req: dict[str, Any]) -> bytes:
        reply = valid_reply(req)
        reply["results"][0]["instances"][0].update(fields)
        return json.dumps(reply).encode()

    return body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_bad_json, "not JSON"),
        (lambda req: b"[1, 2]", "not a JSON object"),
        (_with(request_id="someone-else"), "reply is for request"),
        (_with(results=[]), "one result per prompt"),
        (_with(image={"width": W + 1, "height": H}), "does not match the sent"),
        (_with(image={"width": W, "height": H, "sha256": "0" * 64}), "sha256 mismatch"),
        (
            lambda req: json.dumps(valid_reply(req, results=[{"prompt": "other", "instances": []}])).encode(),
            "result 0 must be",
        ),
        (_instance_with(score=1.5), "outside"),
        (_instance_with(score="high"), "finite number"),
        (_instance_with(box_xyxy=[1, 2, 3]), "box_xyxy"),
        (_instance_with(centroid_xy=[1, float("nan")]), "finite"),
        (_instance_with(area_px=-1), "area_px"),
        (_instance_with(mask={"size": [H, W + 1], "counts": "0"}), "mask must have size"),
        (_instance_with(mask={"size": [H, W], "counts": "1 2"}), "does not decode"),
        (_instance_with(mask={"size": [H, W], "counts": "12"}), "cover 3 pixels"),
        (_instance_with(area_px=13), "disagrees with its mask"),
    ],
)
def test_malformed_replies_give_a_clear_error(
    scripted: Callable[[list[Plan]], Scripted], body: Callable[[dict[str, Any]], bytes], message: str
) -> None:
    server = scripted([lambda req: (200, {}, body(req), 0.0)])
    reply = SegmentationClient(server.url, retries=2).segment(image(), "red block")
    assert not reply.ok and reply.error is not None
    assert reply.error.code == "malformed_reply"
    assert message in reply.error.message
    assert reply.attempts == 1  # retrying a broken server does not help


def test_truncated_reply_is_malformed(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([lambda req: (200, {"Content-Length": "5000"}, b'{"request_id":', 0.0)])
    reply = SegmentationClient(server.url, retries=0).segment(image(), "red block")
    assert not reply.ok and reply.error is not None
    assert reply.error.code == "malformed_reply" and "truncated after 14 bytes" in reply.error.message


def test_error_without_contract_body_is_still_clear(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([lambda req: (502, {}, b"<html>bad gateway</html>", 0.0)])
    reply = SegmentationClient(server.url, retries=0).segment(image(), "red block")
    assert reply.error is not None and reply.error.code == "internal" and reply.error.http_status == 502
    assert "HTTP 502" in reply.error.message and "bad gateway" in reply.error.message


# --- circuit breaker ------------------------------------------------------------------------------------------------


def test_circuit_breaker_opens_fails_fast_and_recovers(scripted: Callable[[list[Plan]], Scripted]) -> None:
    failing = error(500, "internal")
    plans: list[Plan] = [failing] * 3 + [ok]
    server = scripted(plans)
    now = [100.0]
    client = SegmentationClient(
        server.url, retries=0, breaker_threshold=2, breaker_cooldown_s=30.0, cache_size=0, clock=lambda: now[0]
    )
    img = image()
    assert client.segment(img, "a").error.code == "internal"  # type: ignore[union-attr]
    assert client.breaker_state == "closed"
    assert client.segment(img, "a").error.code == "internal"  # type: ignore[union-attr]
    assert client.breaker_state == "open"
    fast = client.segment(img, "a")
    assert fast.error is not None and fast.error.code == "circuit_open" and fast.attempts == 0
    assert "perception unavailable" in fast.error.message
    assert len(server.requests) == 2  # nothing was sent while open

    now[0] += 30.0
    assert client.breaker_state == "half_open"
    trial = client.segment(img, "a")  # the trial call fails: open again at once
    assert trial.error is not None and trial.error.code == "internal"
    assert client.breaker_state == "open" and len(server.requests) == 3

    now[0] += 31.0
    recovered = client.segment(img, "a")
    assert recovered.ok and client.breaker_state == "closed"
    assert len(server.requests) == 4


def test_client_errors_do_not_trip_the_breaker(scripted: Callable[[list[Plan]], Scripted]) -> None:
    server = scripted([error(400, "bad_image")])
    client = SegmentationClient(server.url, retries=0, breaker_threshold=1)
    for _ in range(3):
        assert client.segment(image(), "a").error.code == "bad_image"  # type: ignore[union-attr]
    assert client.breaker_state == "closed" and len(server.requests) == 3


def test_down_server_trips_the_breaker() -> None:
    client = SegmentationClient(f"http://127.0.0.1:{free_port()}", retries=0, breaker_threshold=2)
    client.segment(image(), "a")
    client.segment(image(), "a")
    reply = client.segment(image(), "a")
    assert reply.error is not None and reply.error.code == "circuit_open" and reply.attempts == 0


# --- arguments ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"image": np.zeros((4, 4), np.uint8)}, "H x W x 3"),
        ({"image": np.zeros((4, 4, 3), np.float32)}, "uint8"),
        ({"image": np.zeros((4097, 2, 3), np.uint8)}, "1..4096"),
        ({"prompts": []}, "at least one prompt"),
        ({"prompts": [f"p{i}" for i in range(17)]}, "at most 16"),
        ({"prompts": ["  "]}, "non-empty"),
        ({"prompts": [3]}, "non-empty str"),
        ({"score_threshold": 1.5}, "score_threshold"),
        ({"max_instances": 0}, "max_instances"),
        ({"mask_format": "bitmap"}, "mask_format"),
        ({"exemplar_boxes": [ExemplarBox((5, 5, 4, 9))]}, "empty or outside"),
        ({"exemplar_boxes": [ExemplarBox((0, 0, W + 1, 9))]}, "empty or outside"),
        ({"request_id": ""}, "request_id"),
    ],
)
def test_bad_arguments_raise_before_sending(
    scripted: Callable[[list[Plan]], Scripted], kwargs: dict[str, Any], message: str
) -> None:
    server = scripted([ok])
    client = SegmentationClient(server.url)
    args: dict[str, Any] = {"image": image(), "prompts": ["red block"]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        client.segment(args.pop("image"), args.pop("prompts"), **args)
    assert server.requests == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"url": "ftp://x"},
        {"url": "http://"},
        {"read_timeout": 0},
        {"retries": -1},
        {"breaker_threshold": 0},
        {"cache_size": -1},
    ],
)
def test_bad_client_settings_raise(kwargs: dict[str, Any]) -> None:
    settings: dict[str, Any] = {"url": "http://127.0.0.1:1"}
    settings.update(kwargs)
    with pytest.raises(ValueError):
        SegmentationClient(settings.pop("url"), **settings)
