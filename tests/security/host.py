"""The host side of the attack suite: one real `pyrua-dojo play` episode whose "LLM" sends the attack cells.

Run as `python -m tests.security.host SPEC.json` by the test process (tests/security/harness.py), so that an attack
that escapes today's in-process sandbox changes this child, never the test process. The child is the policy
server exactly as `pyrua-dojo play` runs it (our Model behind the websocket server, the twin client and the MuJoCo
twin in the same process, the planted API key in its environment, used by the planner for its requests); the LLM
is a real HTTP server that answers with the attack cells, one `python` tool call per reply, then `finish`.

Before and after the episode it records its process-wide state (`host_state`), then probes the hooks an attack may
have planted (a cv2 error, an audit event), writes everything to SPEC["out"] as JSON and stays alive for
SPEC["linger_s"] so that the test can see whether anything the cells started still runs after the episode.
"""

from __future__ import annotations

import abc
import atexit
import codecs
import collections.abc
import decimal
import gc
import json
import locale
import os
import resource
import signal
import socket
import sys
import textwrap
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import builtins
import cv2
import numpy as np

import primitives.perception  # noqa: F401 - loaded before the "before" snapshot: the episode's Robo imports it, and
#                                      its scipy.optimize import adds warnings filters (the host's own doing, not a cell's)
from pyrua_dojo.evaluate.play import PlayOptions, play
from pyrua_dojo.runtime.trace import read_jsonl
from tests.support.openai_server import FakeOpenAIServer, ToolCalls, finish_call, python_call

_LIB_FUNCTIONS = {"textwrap.shorten": lambda: textwrap.shorten, "json.dumps": lambda: json.dumps,
                  "np.linalg.norm": lambda: np.linalg.norm}


def host_state() -> dict[str, str]:
    """Process-wide state a cell must not be able to change (each value a string, compared before/after)."""
    probes: dict[str, Any] = {
        "abc_mapping_registry": lambda: sorted(
            getattr(ref(), "__name__", "?") for ref in abc._get_dump(collections.abc.Mapping)[0]),
        "decimal_default_context": lambda: repr(decimal.DefaultContext),
        "cv2_num_threads": cv2.getNumThreads,
        "cv2_use_optimized": cv2.useOptimized,
        "warnings_filters": lambda: repr(warnings.filters),
        "recursion_limit": sys.getrecursionlimit,
        "switch_interval": sys.getswitchinterval,
        "int_max_str_digits": sys.get_int_max_str_digits,
        "gc_enabled": gc.isenabled,
        "cwd": os.getcwd,
        "environ_proxy": lambda: os.environ.get("HTTPS_PROXY"),
        "umask": lambda: os.umask(os.umask(0o022)),
        "rlimit_nofile": lambda: resource.getrlimit(resource.RLIMIT_NOFILE),
        "socket_default_timeout": socket.getdefaulttimeout,
        "library_functions": lambda: {k: f"{id(get())}" for k, get in _LIB_FUNCTIONS.items()},
        "builtins_names": lambda: sorted(n for n in vars(builtins) if "attack" in n),
        "attack_modules": lambda: sorted(m for m in sys.modules if "attack" in m),
        "excepthooks": lambda: (repr(sys.excepthook), repr(threading.excepthook)),
        "thread_trace_hooks": lambda: (repr(getattr(threading, "_trace_hook", None)),
                                       repr(getattr(threading, "_profile_hook", None))),
        "locale": lambda: locale.setlocale(locale.LC_ALL),
        "timezone": lambda: (time.timezone, time.tzname),
        "codec_attack": lambda: _lookup_codec("pyrua_attack"),
        "open_fds": lambda: len(os.listdir("/proc/self/fd")) // 500,  # hundreds of leaked descriptors
        "threads": lambda: len(os.listdir("/proc/self/task")) // 100,  # a hundred leaked threads
        "max_rss_gb": lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // (1 << 20),  # KiB -> GiB
    }
    out: dict[str, str] = {}
    for name, probe in probes.items():
        try:
            out[name] = str(probe())
        except Exception as exc:  # noqa: BLE001 - a broken probe is itself a changed state
            out[name] = f"probe failed: {type(exc).__name__}: {exc}"
    return out


def _lookup_codec(name: str) -> str:
    try:
        return repr(codecs.lookup(name))
    except LookupError:
        return "none"


def _probe_hooks(spec: dict[str, Any]) -> None:
    """Give hooks a cell may have planted in this process a chance to run (they leave marker files)."""
    try:
        cv2.resize(np.zeros((0, 0), np.uint8), (1, 1))  # a cv2 error: cv2.redirectError's callback runs
    except cv2.error:
        pass
    sys.audit("pyrua.attack.probe")  # an audit hook a cell added runs
    Path(spec["probe_file"]).write_text("probed")


def _twin_truth(task: str, seed: int, layout: int) -> dict[str, list[float]]:
    """The objects' true poses at the start of this layout (the robot does not move in the attack episode)."""
    from pyrua_dojo.twin.env import TwinEnv

    with TwinEnv() as env:
        env.reset(task, seed=seed, layout_id=layout)
        return {label: [float(v) for v in pose] for label, pose in env.truth(0).object_poses().items()}


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    signal_marker = Path(spec["signal_marker"])

    def on_usr2(signum: int, frame: Any) -> None:
        signal_marker.write_text(f"host {os.getpid()} got signal {signum}")

    signal.signal(signal.SIGUSR2, on_usr2)
    out: dict[str, Any] = {"pid": os.getpid()}
    cells: list[str] = spec["cells"]
    overrides = tuple(spec["overrides"]) + (f"llm_call_budget={len(cells) + 5}", "hold_steps=100",
                                            f"cell_deadline_s={spec['deadline_s']}")
    with FakeOpenAIServer() as llm:
        llm.script([ToolCalls((python_call(code),)) for code in cells] + [ToolCalls((finish_call(),))])
        out["state_before"] = host_state()
        out["started"] = time.time()
        try:
            result = play(PlayOptions(
                task=spec["task"], seed=spec["seed"], layout=spec["layout"], planner="openai", model="fake-model",
                base_url=llm.base_url(), api_key_env=spec["key_env"], segmentation="none",
                results=Path(spec["results"]), run_root=Path(spec["run_root"]), overrides=overrides,
                request_timeout_s=1800.0,
            ), echo=lambda line: None)
            out["agent_dir"] = str(result.agent_dir) if result.agent_dir else None
            out["play_error"] = result.error
        except Exception:  # noqa: BLE001 - recorded for the test, which fails on it
            out["agent_dir"] = None
            out["play_error"] = traceback.format_exc()
        out["episode_end"] = time.time()
        out["state_after"] = host_state()
    out["truth"] = _twin_truth(spec["task"], spec["seed"], spec["layout"])  # after the episode: no twin of ours in it
    agent_dir = Path(out["agent_dir"]) if out["agent_dir"] else None
    out["turns"] = read_jsonl(agent_dir / "turns.jsonl") if agent_dir else []
    out["events"] = read_jsonl(agent_dir / "events.jsonl") if agent_dir else []
    out["config"] = json.loads((agent_dir / "result.json").read_text()).get("config") if agent_dir else None
    out["interrupt_grace_s"] = _interrupt_grace_s()
    _probe_hooks(spec)
    out["written"] = time.time()
    Path(spec["out"]).write_text(json.dumps(out, default=str))
    sys.stdout.flush()
    time.sleep(float(spec["linger_s"]))
    # Exit now: threads a cell left behind (a thread pool's worker is joined at exit) must not keep this host
    # alive. atexit handlers run first (a cell may have registered one).
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _interrupt_grace_s() -> float:
    """How long the executor the episode uses lets an interrupted cell stop before it is abandoned or killed."""
    from pyrua_dojo.runtime.cells import CellConfig

    return float(CellConfig().interrupt_grace_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
