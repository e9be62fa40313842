"""`pyrua-dojo bench cells` (in-process part): the cell executor's overheads: cell round trip, guarded attribute
reads, interruption latency, many executors at once."""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from pyrua_dojo.runtime.cells import CellConfig, CellExecutor


def main(cells: int = 200, executors: int = 20) -> int:
    """Print the executor's overheads: cell round trip, guarded attribute reads, interruption latency."""
    with tempfile.TemporaryDirectory() as tmp:
        ex = CellExecutor({}, workspace=Path(tmp) / "ws", config=CellConfig(deadline_s=5.0, interrupt_grace_s=2.0))
        ex.run("x = 0")
        trips = []
        for _ in range(cells):
            t0 = time.perf_counter()
            ex.run("x = x + 1\nx")
            trips.append(time.perf_counter() - t0)
        loop = "t0 = time.thread_time()\nfor i in range(200000):\n    v = {expr}\ntime.thread_time() - t0"  # CPU s
        plain = float(ex.run(loop.format(expr="i")).value or "nan")
        arr = np.zeros(3)
        ex.namespace["a"] = arr
        guarded = float(ex.run(loop.format(expr="a.shape")).value or "nan")
        t0 = time.perf_counter()
        stop = ex.run("while True:\n    pass", deadline_s=0.5)
        interrupt = time.perf_counter() - t0 - 0.5
        ex.close()

        def one(k: int, out: list[float]) -> None:
            e = CellExecutor({}, workspace=Path(tmp) / f"ws{k}")
            t = time.perf_counter()
            for j in range(20):
                e.run(f"print({k}, {j})")
            out.append(time.perf_counter() - t)
            e.close()

        spans: list[float] = []
        t0 = time.perf_counter()
        threads = [threading.Thread(target=one, args=(k, spans)) for k in range(executors)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    print(f"cell round trip (trivial cell): median {statistics.median(trips) * 1e3:.2f} ms, "
          f"p95 {sorted(trips)[int(0.95 * len(trips)) - 1] * 1e3:.2f} ms over {cells} cells")
    print(f"200k attribute reads in a loop (thread CPU time): {guarded * 1e3:.0f} ms guarded (a.shape) vs "
          f"{plain * 1e3:.0f} ms for the loop alone -> {(guarded - plain) / 200000 * 1e9:.0f} ns per guarded read")
    print(f"busy loop interrupted {interrupt * 1e3:.0f} ms after a 0.5 s deadline (status {stop.status})")
    print(f"{executors} executors x 20 cells concurrently: {wall:.2f} s wall, "
          f"{executors * 20 / wall:.0f} cells/s")
    return 0

