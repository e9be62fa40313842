"""Ways to run a segmentation server: `serve_sam3` (the `pyrua-dojo serve-sam3` command, foreground) and
`serve_twin` (a background server over the twin's masks, for a twin env in the same process)."""

from __future__ import annotations

import logging
import sys

from pyrua_dojo.seg_service.sam3_backend import DEFAULT_PROCESSOR_THRESHOLD, Sam3Backend
from pyrua_dojo.seg_service.http_server import SegmentationServer
from pyrua_dojo.seg_service.twin_backend import MaskOracle, TwinBackend, TwinNoise

__all__ = ["serve_sam3", "serve_twin"]


def serve_twin(
    oracle: MaskOracle, *, noise: TwinNoise = TwinNoise(), seed: int = 0, host: str = "127.0.0.1", port: int = 0
) -> SegmentationServer:
    """Start a twin segmentation server in background threads and return it, ready (close() it when done)."""
    server = SegmentationServer(TwinBackend(oracle, noise=noise, seed=seed), host=host, port=port).start()
    server.wait_ready()
    return server


def serve_sam3(
    checkpoint: str,
    bpe: str,
    *,
    device: str = "cuda",
    host: str = "127.0.0.1",
    port: int = 8765,
    processor_threshold: float = DEFAULT_PROCESSOR_THRESHOLD,
    hash_checkpoint: bool = True,
    warmup: bool = True,
) -> int:
    """Serve SAM 3 until interrupted; exit status 2 for a missing file, 1 if the model cannot be loaded.

    The port opens at once and `/healthz` answers 503 (`Retry-After`) while the model loads and warms up.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    try:
        Sam3Backend.check_files(checkpoint, bpe)
    except FileNotFoundError as exc:
        print(f"serve-sam3: {exc}", file=sys.stderr)
        return 2

    def load() -> Sam3Backend:
        return Sam3Backend.load(
            checkpoint, bpe, device=device, processor_threshold=processor_threshold, hash_checkpoint=hash_checkpoint
        )

    try:
        server = SegmentationServer(loader=load, host=host, port=port, warmup=warmup)
    except OSError as exc:
        print(f"serve-sam3: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    server.start()
    print(f"serve-sam3: listening on {server.url} (loading the model; /healthz says 503 until ready)", flush=True)
    try:
        if not server.wait_ready():
            print(f"serve-sam3: the model failed to load: {server.load_error}", file=sys.stderr)
            return 1
        info = "ready" if server.state == "ready" else server.state
        print(f"serve-sam3: {info} on {server.url}", flush=True)
        server.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
