"""One episode in a child process, for the kill test: `python -m tests.support.episode_child BASE_URL RUN_DIR`."""

from __future__ import annotations

import sys
from pathlib import Path

from pyrua_dojo.runtime.agent import AgentConfig
from tests.support.episode import build_episode, openai_planner


def main(base_url: str, run_dir: str) -> int:
    path = Path(run_dir)
    ep = build_episode(path.parent, openai_planner(base_url), name=path.name, config=AgentConfig(max_llm_calls=10_000, wall_budget_s=300.0))
    print("started", flush=True)
    result = ep.agent.run()
    print(result.status, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
