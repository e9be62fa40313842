"""`pyrua-dojo bench cells` (kernel part): kernel start, a no-motion robo call's round trip, a trivial cell.

Targets (issue 12): kernel start under 1.5 s, `robo.state()` round trip median under 1 ms, trivial cell median
under 10 ms. `robo` is the real `Robo` on a twin `stack_blocks` episode (state() computes both arms' TCPs from
the last observation); the start and concurrency figures use a host object without a twin.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

from primitives.results import ArmState, RobotState
from pyrua_dojo.runtime.cells import CellConfig
from pyrua_dojo.kernel.confine import summary
from pyrua_dojo.kernel.host import KernelExecutor


class _StateOnly:
    """Answers state() with a RobotState, as the real Robo does, without a bridge."""

    def __init__(self) -> None:
        arm = ArmState([0.0] * 6, [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.9], [0.0, 0.0, -1.0], 0.0, 1.0)
        self._state = RobotState(0, 600, arm, arm, "stack the blocks")

    def state(self) -> RobotState:
        return self._state


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(cells: int = 200, starts: int = 5, executors: int = 20) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start_s: list[float] = []
        layers = ""
        for k in range(starts):
            ex = KernelExecutor({"robo": _StateOnly()}, workspace=root / f"start{k}",
                                config=CellConfig(deadline_s=10.0))
            ex.wait_ready()
            start_s.extend(ex.start_times)
            layers = summary(ex.layers)
            ex.close()
        from calibration import load_station
        from primitives.robot import Robo
        from pyrua_dojo.runtime.stepping import EnvBridge
        from pyrua_dojo.twin.env import TwinEnv

        env = TwinEnv()
        env.reset("stack_blocks", 0, 0)
        bridge = EnvBridge(env)
        robo = Robo(bridge, bridge.first_observation(), station=load_station(), step_limit=env.step_lim)
        ex = KernelExecutor({"robo": robo}, workspace=root / "ws", config=CellConfig(deadline_s=10.0))
        ex.run("x = 0")
        loop = ("t = []\nfor i in range({n}):\n    t0 = time.perf_counter()\n    s = robo.state()\n"
                "    t.append(time.perf_counter() - t0)\nt.sort()\n(t[len(t) // 2], t[int(0.99 * len(t))])")
        res = ex.run(loop.format(n=cells * 5))
        state_med, state_p99 = (float(v) for v in (res.value or "(nan, nan)").strip("()").split(","))
        trips = []
        for _ in range(cells):
            t0 = time.perf_counter()
            ex.run("x = x + 1\nx")
            trips.append(time.perf_counter() - t0)
        stop_t0 = time.perf_counter()
        stop = ex.run("while True:\n    pass", deadline_s=0.5)
        interrupt = time.perf_counter() - stop_t0 - 0.5
        ex.close()
        env.close()

        def one(k: int) -> None:
            e = KernelExecutor({"robo": _StateOnly()}, workspace=root / f"ws{k}")
            for j in range(20):
                e.run(f"print({k}, {j})")
            e.close()

        t0 = time.perf_counter()
        threads = [threading.Thread(target=one, args=(k,)) for k in range(executors)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    print(f"kernel layers: {layers}")
    print(f"kernel start (spawn to ready, alone): median {statistics.median(start_s):.2f} s, "
          f"max {max(start_s):.2f} s over {len(start_s)} starts (target < 1.5 s)")
    print(f"robo.state() (the real Robo on the twin) round trip from a kernel cell: median {state_med * 1e3:.3f} ms, p99 {state_p99 * 1e3:.3f} ms "
          f"over {cells * 5} calls (target median < 1 ms)")
    print(f"kernel cell round trip (trivial cell): median {statistics.median(trips) * 1e3:.2f} ms, "
          f"p95 {_pct(trips, 0.95) * 1e3:.2f} ms over {cells} cells (target median < 10 ms)")
    print(f"kernel busy loop interrupted {interrupt * 1e3:.0f} ms after a 0.5 s deadline (status {stop.status})")
    print(f"{executors} kernels started at once x 20 cells each: {wall:.2f} s wall including the starts, "
          f"{executors * 20 / wall:.0f} cells/s")
    return 0
