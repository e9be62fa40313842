"""Figures of the agent loop against the local fake OpenAI server: `python -m tests.support.bench_loop`.

Prints the loop's own overhead per reply (HTTP round trip through the real `openai` client + a trivial cell + the
trace), how long `Agent.cancel()` takes to return `run()` while a request is in flight, and the wall time of 20
concurrent episodes. These are not speed targets; they say how much of an episode's wall time is ours.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

from pyrua_dojo.runtime.agent import AgentConfig
from tests.support.episode import build_episode, openai_planner
from tests.support.openai_server import FakeOpenAIServer, Slow, ToolCalls, finish_call, python_call


def main() -> int:
    with FakeOpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = 100
        server.script([ToolCalls((python_call("x = 1"),))] * n + [ToolCalls((finish_call(),))], route="overhead")
        ep = build_episode(root, openai_planner(server.base_url("overhead")), name="overhead", config=AgentConfig(max_llm_calls=n + 1))
        t0 = time.perf_counter()
        result = ep.agent.run()
        wall = time.perf_counter() - t0
        print(f"loop overhead: {n + 1} replies in {wall:.2f} s = {1000 * wall / (n + 1):.1f} ms per reply "
              f"(HTTP + cell + trace; LLM latency {1000 * result.llm_s / result.llm_requests:.1f} ms per request, "
              f"the conversation grows to {len(server.requests('overhead')[-1].messages)} messages)")

        latencies = []
        for k in range(10):
            route = f"cancel{k}"
            server.script([Slow(60.0, ToolCalls((finish_call(),)))], route=route)
            ep = build_episode(root, openai_planner(server.base_url(route)), name=route)
            done = threading.Event()
            threading.Thread(target=lambda ep=ep, done=done: (ep.agent.run(), done.set()), daemon=True).start()
            server.wait_for_requests(1, route=route)
            t0 = time.perf_counter()
            ep.agent.cancel("reset")
            done.wait(30)
            latencies.append(time.perf_counter() - t0)
        print(f"cancel while a request is in flight: run() returns after median {1000 * statistics.median(latencies):.0f} ms, "
              f"max {1000 * max(latencies):.0f} ms (10 trials); the server saw {server.disconnects} disconnects")

        m = 20
        eps = []
        for k in range(m):
            route = f"conc{k}"
            server.script([ToolCalls((python_call(f"robo.move('left', steps={k + 1})"),))] * 5 + [ToolCalls((finish_call(),))], route=route)
            eps.append(build_episode(root, openai_planner(server.base_url(route)), name=route))
        threads = [threading.Thread(target=e.agent.run) for e in eps]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"{m} concurrent episodes x 6 replies: {time.perf_counter() - t0:.2f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
