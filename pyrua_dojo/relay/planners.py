"""The relay and console planners of `play` / `eval`: an episode whose LLM is whoever answers its relay.

The episode's Model runs the ordinary `openai` planner against a relay started for that episode alone (its state
directory is `<run_root>/relay`), with settings for an answerer who thinks for minutes: one attempt per reply
(a turn left unanswered for `answer_timeout_s` ends the episode with status planner_error), an HTTP timeout past
the answer timeout, no wall budget (set `episode_wall_budget_s` to have one), and a twin that waits as long.
At the end the outcome goes into relay.json (what `relay show` reports) and the relay directory, transcript
included, is copied into the episode's run directory as `relay/`.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

from pyrua_dojo.runtime.agent import describe_end
from pyrua_dojo.relay.server import Relay

__all__ = ["end_relay", "play_console", "relay_model_cfg", "start_relay"]

RELAY_DIR = "relay"


def relay_model_cfg(url: str, answer_timeout_s: float) -> dict[str, Any]:
    """The Model settings that point the openai planner at a relay."""
    return {
        "planner": "openai",
        "model": "relay",
        "base_url": url,
        "llm": {
            "model": "relay",
            "base_url": url,
            "api_key": "relay",
            "request_timeout_s": answer_timeout_s + 60.0,
            "retry": {"max_attempts": 1},
        },
        "episode_wall_budget_s": None,
    }


def start_relay(options: Any, run_root: Path) -> Relay:
    """Start the episode's relay and print (to stderr, also from eval's workers) the command that shows turn 1."""
    label = f"{options.task} seed {options.seed} layout {options.layout}"
    relay = Relay(Path(run_root) / RELAY_DIR, answer_timeout_s=options.answer_timeout_s, label=label).start()
    relay.update(run_root=str(Path(run_root).resolve()), task=options.task, seed=options.seed, layout=options.layout)
    if options.planner == "relay":
        print(f"relay: {label}: the episode's LLM is whoever answers this relay ({relay.url})\n"
              f"  show the first turn: pyrua-dojo relay show --relay {relay.dir.path}", file=sys.stderr, flush=True)
    return relay


def end_relay(relay: Relay, agent_dir: Path | None, **episode: Any) -> None:
    """Record the outcome (agent status, twin verdict, run directory), close the relay, copy it into the run dir."""
    outcome: dict[str, Any] = {"status": "unknown"}
    if agent_dir is not None:
        try:
            result = json.loads((Path(agent_dir) / "result.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            result = {}
        outcome["status"] = result.get("status", "unknown")
        counts = result.get("counts") if isinstance(result.get("counts"), dict) else {}
        for key, value in (("reason", result.get("reason")), ("finish", result.get("finish")),
                           ("llm_calls", counts.get("llm_calls")), ("cells", counts.get("cells")),
                           ("agent_error", result.get("error"))):
            if value is not None:
                outcome[key] = value
        if isinstance(result.get("steps_used"), int):
            outcome["agent_steps"] = result["steps_used"]
        last = _last_cell_text(Path(agent_dir))
        if last is not None:
            outcome["last_cell"] = last
        outcome["run_dir"] = str(Path(agent_dir).resolve())
        outcome["transcript"] = str(Path(agent_dir).resolve() / RELAY_DIR / "transcript.md")
    outcome.update({k: v for k, v in episode.items() if v is not None})
    verdict = "success" if episode.get("success") else "not solved"
    status = str(outcome["status"])
    how = ("a turn went unanswered or the relay failed" if status == "planner_error"
           else describe_end(status, episode.get("success")) if status != "unknown" else "")
    outcome["detail"] = f"twin verdict: {verdict}" + (f"; {how}" if how else "")
    relay.end(outcome)
    if agent_dir is not None and Path(agent_dir).is_dir():
        target = Path(agent_dir) / RELAY_DIR
        if not target.exists() and relay.dir.path != target:
            shutil.copytree(relay.dir.path, target)


LAST_CELL_CHARS = 4000


def _last_cell_text(agent_dir: Path) -> str | None:
    """The last cell's output when the episode ended inside it (the model never got that turn's result)."""
    try:
        lines = (agent_dir / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            turn = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(turn, dict) or "status" not in turn:
            continue
        if turn.get("status") != "episode_finished" or not isinstance(turn.get("text"), str):
            return None
        text = turn["text"]
        return text if len(text) <= LAST_CELL_CHARS else text[:LAST_CELL_CHARS] + "\n[... cut]"
    return None


def play_console(options: Any, play: Callable[..., Any]) -> Any:
    """`play --planner console`: the episode (`play(options, echo=...)`, the caller's `pyrua_dojo.evaluate.play.play`) in a
    background thread, the person at the terminal in this one."""
    import tempfile
    import threading
    import time
    from dataclasses import replace

    from pyrua_dojo.relay.commands import console_loop

    run_root = Path(options.run_root) if options.run_root else Path(tempfile.mkdtemp(prefix="pyrua-console-"))
    options = replace(options, run_root=run_root)
    outcome: dict[str, Any] = {}

    def episode() -> None:
        try:
            outcome["result"] = play(options, echo=lambda line: None)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=episode, name="pyrua-console-episode", daemon=True)
    thread.start()
    state = run_root / RELAY_DIR / "relay.json"
    while not state.exists() and thread.is_alive():
        time.sleep(0.1)
    if state.exists():
        print(f"console: {options.task} seed {options.seed} layout {options.layout}; you are the model "
              f"(relay {run_root / RELAY_DIR})", flush=True)
        console_loop(run_root / RELAY_DIR)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
