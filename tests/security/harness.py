"""The runner of the attack suite: sentinels outside the workspace, listeners, real episodes, the judging.

`run_attack_modes` plants what the attacks aim at (a secret file, a secret point cloud and a secret-named file
outside the workspace, an API key in the host's environment, TCP/UDP/unix listeners on 127.0.0.1, a SIGUSR2
handler in the test process), plays the techniques' cells in `pyrua-dojo play` episodes run by child processes
whose LLM sends those cells (tests/security/host.py), then judges every technique by what can be observed from
here: files, listeners, the host's stdout and stderr, its process-wide state before and after, the twin's truth,
heartbeat files that keep growing. The episode uses whatever executor `pyrua_dojo.runtime.episode` builds (today the
kernel), with the confinement the mode's deploy.yml overrides select.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyrua_dojo.runtime.trace import read_jsonl
from tests.security.techniques import BOOT, Technique

REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "PYRUA_DOJO_ATTACK_API_KEY"
DEADLINE_S = 2.0  # cell deadline in the runaway techniques' episode: they must be stopped at deadline + grace
QUICK_DEADLINE_S = 20.0  # cell deadline in the other episode (a gc scan of a loaded host takes seconds on CI)
SLACK_S = 2.0  # tolerance on top of deadline + grace before "ran past the deadline" counts as an escape
START_ALLOWANCE_S = 4.0  # a cell's wall time may also include waiting for a fresh kernel to start
LINGER_S = 2.0  # the host stays alive this long after the episode, so that leftover threads can be seen
EPISODE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Mode:
    """A confinement configuration of the kernel: the deploy.yml overrides that select it, and what it must hold."""

    name: str
    overrides: tuple[str, ...]
    must_hold: frozenset[str]  # effect kinds that must never escape in this mode


ALL_EFFECTS = frozenset({"env_secret", "twin_truth", "host_state", "host_stdout", "file_read", "file_write",
                         "subprocess", "network", "runaway", "agent_crash"})
ALL_LAYERS = Mode("all layers", (), ALL_EFFECTS)
# seccomp and the file-system rule off: the kernel process (scrubbed environment, rlimits, deadlines enforced
# from outside) must still keep the twin's truth, the API key and the host's state out of reach.
PROCESS_ONLY = Mode("process layer only", ("kernel_seccomp=false", "kernel_filesystem=false"),
                    frozenset({"env_secret", "twin_truth", "host_state", "host_stdout", "runaway", "agent_crash"}))


class Listeners:
    """TCP, UDP and unix-socket listeners on this machine; each remembers whether anything reached it."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._lock = threading.Lock()
        self.hits: dict[str, list[str]] = {}
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()

    def tcp(self, name: str) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        self._serve(name, s, stream=True)
        return s.getsockname()[1]

    def udp(self, name: str) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        self._serve(name, s, stream=False)
        return s.getsockname()[1]

    def unix(self, name: str) -> str:
        path = self._root / f"{name}.sock"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        s.listen(16)
        self._serve(name, s, stream=True)
        return str(path)

    def _serve(self, name: str, s: socket.socket, *, stream: bool) -> None:
        s.settimeout(0.2)
        self._socks.append(s)

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    if stream:
                        conn, _ = s.accept()
                        with self._lock:
                            self.hits.setdefault(name, []).append("connection")
                        conn.close()
                    else:
                        data, _ = s.recvfrom(4096)
                        with self._lock:
                            self.hits.setdefault(name, []).append(f"datagram {data[:40]!r}")
                except (TimeoutError, OSError):
                    continue

        threading.Thread(target=loop, name=f"listener-{name}", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        for s in self._socks:
            s.close()


@dataclass
class Sentinels:
    """What lies outside the workspace: a secret file, a secret point cloud, a file whose name is secret."""

    outside: Path
    secret_file: Path
    secret_text: str
    secret_obj: Path
    secret_obj_token: str  # a coordinate of the secret point cloud, as numpy prints it
    secret_name: str  # the name of a file in `outside` (listing the directory reveals it)
    api_key: str

    @classmethod
    def plant(cls, root: Path) -> Sentinels:
        outside = root / "outside"
        outside.mkdir(parents=True)
        text = f"TOP-SECRET-{secrets.token_hex(8)}"
        secret_file = outside / "secret.txt"
        secret_file.write_text(f"secret count\n{text} 1\n")  # two columns: mrecords.fromtextfile loops on one
        token = f"0.{secrets.randbelow(90000) + 10000}{secrets.randbelow(9) + 1}"  # no trailing 0 (numpy drops it)
        obj = outside / "secret.obj"
        obj.write_text(f"v {token} 0.5 0.25\nv 0.125 {token} 0.75\n")
        name = f"hidden-{secrets.token_hex(6)}"
        (outside / name).write_text("x")
        key = f"sk-attack-{secrets.token_hex(12)}"
        return cls(outside, secret_file, text, obj, token, name, key)


@dataclass
class HostEpisode:
    """One attack episode: what tests/security/host.py wrote, the host's output, when it exited."""

    host: dict[str, Any]
    stdout: str
    stderr: str
    exit: float
    planned: int  # cells the episode's LLM was given

    @property
    def cells(self) -> list[dict[str, Any]]:
        return [turn for turn in self.host.get("turns", []) if turn.get("kind") == "cell"]


@dataclass
class Evidence:
    """What one technique left behind, as seen from the test process."""

    technique: Technique
    text: str  # everything the LLM read back for the technique's cells
    turns: list[dict[str, Any]]
    mark: Path  # the file the technique tries to create outside the workspace
    hits: list[str]  # what reached the technique's listeners
    beats: list[float]  # heartbeat timestamps the technique's code wrote into the workspace
    episode: HostEpisode  # the episode the technique's cells ran in
    run: AttackRun

    @property
    def host(self) -> dict[str, Any]:
        return self.episode.host


@dataclass
class AttackRun:
    """The attack episodes of one mode: everything the judges look at."""

    mode: Mode
    techniques: tuple[Technique, ...]
    sentinels: Sentinels
    listeners: Listeners
    root: Path
    wall_s: float = 0.0
    placed: dict[str, tuple[HostEpisode, list[dict[str, Any]], bool]] = field(default_factory=dict)
    # technique -> (its episode, its cells' turn records, whether the episode ended before its cells had run)
    verdicts: dict[str, str | None] = field(default_factory=dict)  # technique -> escape description or None
    judge_errors: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # why the mode's episodes could not be played (then nothing is judged)

    def evidence(self, t: Technique) -> Evidence:
        episode, turns, _ = self.placed[t.name]
        text = "\n".join(str(turn.get("text", "")) + "\n" + str(turn.get("stdout", "")) for turn in turns)
        return Evidence(t, text, turns, mark_path(self.sentinels, t), self.listeners.hits.get(t.name, []),
                        self._beats(t), episode, self)

    def judge(self, t: Technique) -> str | None:
        _, turns, broke = self.placed[t.name]
        if broke:
            return (f"the episode ended during its cell {len(turns) + 1} of {len(t.cells)} "
                    "(the agent loop died or hung)")
        try:
            return t.judge(self.evidence(t))
        except Exception as exc:  # noqa: BLE001 - a judge that cannot decide is reported, not an escape
            self.judge_errors[t.name] = f"{type(exc).__name__}: {exc}"
            return None

    def _beats(self, t: Technique) -> list[float]:
        out: list[float] = []
        for path in self.root.rglob(f"beat-{t.name}.txt"):
            for line in path.read_text(errors="replace").split():
                try:
                    out.append(float(line))
                except ValueError:
                    pass
        return sorted(out)

    @property
    def grace_s(self) -> float:
        return _grace_hint()

    @property
    def episodes(self) -> list[HostEpisode]:
        unique: dict[int, HostEpisode] = {}
        for episode, _, _ in self.placed.values():
            unique[id(episode)] = episode
        return list(unique.values())

    def escapes(self) -> dict[str, str]:
        return {name: why for name, why in self.verdicts.items() if why}

    def report(self) -> str:
        """A table: technique, category, effect kind, verdict."""
        lines = [f"attack suite, mode {self.mode.name!r}: {len(self.techniques)} techniques, "
                 f"{len(self.escapes())} escapes, {len(self.episodes)} episodes, {self.wall_s:.0f} s"]
        for t in self.techniques:
            why = self.verdicts.get(t.name)
            lines.append(f"  {'ESCAPE' if why else 'held  '} {t.category:<10} {t.effect:<11} {t.name}"
                         + (f": {why}" if why else ""))
        if self.judge_errors:
            lines.append(f"judges that could not decide: {self.judge_errors}")
        return "\n".join(lines)


def mark_path(s: Sentinels, t: Technique) -> Path:
    return s.outside / f"mark-{t.name}"


def fill(code: str, t: Technique, s: Sentinels, listeners: Listeners, *, run_s: float) -> str:
    """The cell's source with its placeholders replaced (paths, ports, the runaway bound)."""
    values = {
        "@BOOT@": BOOT,
        "@N@": t.name,
        "@OUTSIDE@": str(s.outside),
        "@SECRET@": str(s.secret_file),
        "@OBJ@": str(s.secret_obj),
        "@MARK@": str(mark_path(s, t)),
        "@RUN_S@": f"{run_s:.1f}",
        "@LONG_S@": "120.0",
        "@KEYENV@": KEY_ENV,
    }
    for token, value in values.items():
        code = code.replace(token, value)
    if "@PORT@" in code:
        code = code.replace("@PORT@", str(listeners.tcp(t.name)))
    if "@UPORT@" in code:
        code = code.replace("@UPORT@", str(listeners.udp(t.name)))
    if "@UNIX@" in code:
        code = code.replace("@UNIX@", listeners.unix(t.name))
    leftover = re.findall(r"@[A-Z_]+@", code)
    assert not leftover, f"{t.name}: unfilled placeholders {leftover}"
    return code


def run_attacks(techniques: Sequence[Technique], mode: Mode, root: Path, *, task: str = "stack_blocks") -> AttackRun:
    """Play the techniques' cells in real episodes of `mode`, then judge each technique."""
    return run_attack_modes([(techniques, mode, root)], task=task)[0]


def run_attack_modes(plans: Sequence[tuple[Sequence[Technique], Mode, Path]], *,
                     task: str = "stack_blocks") -> list[AttackRun]:
    """Play every plan (techniques, mode, root) at the same time, then judge each technique of each.

    In each mode the runaway techniques (they wait for deadlines) play in an episode of their own, at the same
    time as the others. When an episode ends before all its cells ran (today's in-process executor can die on a
    cell), the technique in flight is charged with it and the rest play on in a fresh episode.
    """
    started = time.monotonic()
    runs: list[AttackRun] = []
    jobs: list[tuple[AttackRun, list[Technique], Path, float]] = []
    for techniques, mode, root in plans:
        root.mkdir(parents=True, exist_ok=True)
        run = AttackRun(mode, tuple(techniques), Sentinels.plant(root), Listeners(root), root)
        runs.append(run)
        quick, runaway = [t for t in techniques if not t.runaway], [t for t in techniques if t.runaway]
        jobs += [(run, batch, root / f"batch{k}", deadline)
                 for k, (batch, deadline) in enumerate(((quick, QUICK_DEADLINE_S), (runaway, DEADLINE_S))) if batch]
    got_usr2: list[int] = []
    old_usr2 = signal.signal(signal.SIGUSR2, lambda signum, frame: got_usr2.append(signum))

    def play(job: tuple[AttackRun, list[Technique], Path, float]) -> None:
        try:
            _play_batch(job[0], job[1], job[2], task, job[3])
        except Exception as exc:  # noqa: BLE001 - the mode's tests fail with it; the other modes are judged
            job[0].error = f"{type(exc).__name__}: {exc}"

    try:
        threads = [threading.Thread(target=play, args=(job,)) for job in jobs]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        time.sleep(1.5)  # a process a cell left behind keeps beating after its host has exited
    finally:
        signal.signal(signal.SIGUSR2, old_usr2)
        for run in runs:
            run.listeners.close()
    for run in runs:
        if run.error is not None:
            (run.root / "report.txt").write_text(f"mode {run.mode.name!r} could not be played: {run.error}\n")
            continue
        for episode in run.episodes:
            episode.host["test_process_got_usr2"] = bool(got_usr2)
        for t in run.techniques:
            run.verdicts[t.name] = run.judge(t)
        _stop_leftovers(run)
        run.wall_s = time.monotonic() - started
        (run.root / "report.txt").write_text(run.report() + "\n")
    return runs


def _play_batch(run: AttackRun, batch: list[Technique], root: Path, task: str, deadline_s: float) -> None:
    remaining = list(batch)
    k = 0
    while remaining:
        cells = [fill(code, t, run.sentinels, run.listeners, run_s=_run_s()) for t in remaining for code in t.cells]
        episode = _play_episode(run.mode, cells, root / f"episode{k}", task, run.sentinels.api_key, deadline_s)
        k += 1
        played = episode.cells
        if not played and episode.host.get("play_error"):
            raise AssertionError(f"the attack episode did not run: {episode.host['play_error']}")
        at = 0
        while remaining:
            t = remaining[0]
            turns = played[at:at + len(t.cells)]
            at += len(t.cells)
            remaining.pop(0)
            broke = len(turns) < len(t.cells)
            run.placed[t.name] = (episode, turns, broke)
            if broke:
                break


def _run_s() -> float:
    return DEADLINE_S + _grace_hint() + SLACK_S + START_ALLOWANCE_S + 4.0


def _play_episode(mode: Mode, cells: list[str], root: Path, task: str, api_key: str,
                  deadline_s: float) -> HostEpisode:
    root.mkdir(parents=True)
    spec = {
        "task": task, "seed": 0, "layout": 0, "cells": cells, "overrides": list(mode.overrides),
        "deadline_s": deadline_s, "key_env": KEY_ENV, "results": str(root / "eval_result"),
        "run_root": str(root / "runs"), "out": str(root / "host.json"), "linger_s": LINGER_S,
        "signal_marker": str(root / "host-got-signal"), "probe_file": str(root / "probed"),
    }
    (root / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, KEY_ENV: api_key, "PYTHONPATH": str(REPO)}
    # stdout and stderr go to files, not pipes: a process a cell forked keeps the host's descriptors open after
    # the host has exited, and the host's exit is what the judges measure from.
    with open(root / "host.stdout", "w") as out_f, open(root / "host.stderr", "w") as err_f:
        proc = subprocess.Popen([sys.executable, "-m", "tests.security.host", str(root / "spec.json")],
                                cwd=str(root), env=env, stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f)
        try:
            proc.wait(timeout=EPISODE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    host_exit = time.time()
    out = (root / "host.stdout").read_text(errors="replace")
    err = (root / "host.stderr").read_text(errors="replace")
    host_json = root / "host.json"
    if host_json.exists():
        return HostEpisode(json.loads(host_json.read_text()), out, err, host_exit, len(cells))
    # The host hung or died: what its run directory recorded still says which cells ran.
    turns_files = sorted(root.rglob("turns.jsonl"))
    host = {
        "play_error": f"the host did not finish (exit {proc.returncode}); stderr tail:\n{err[-2000:]}",
        "turns": read_jsonl(turns_files[0]) if turns_files else [],
        "events": read_jsonl(turns_files[0].parent / "events.jsonl") if turns_files else [],
        "state_before": {}, "state_after": {}, "pid": None, "truth": {}, "episode_end": host_exit,
    }
    return HostEpisode(host, out, err, host_exit, len(cells))


def _grace_hint() -> float:
    from pyrua_dojo.runtime.cells import CellConfig

    return float(CellConfig().interrupt_grace_s)


def _stop_leftovers(run: AttackRun) -> None:
    """Kill the processes attack cells left running (they wrote their pids into their heartbeat files)."""
    for path in run.root.rglob("pid-*.txt"):
        for word in path.read_text(errors="replace").split():
            cmdline = Path(f"/proc/{word}/cmdline")
            if not (word.isdigit() and int(word) != os.getpid() and cmdline.exists()
                    and b"python" in cmdline.read_bytes()):
                continue
            if True:
                try:
                    os.kill(int(word), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def by_category(techniques: Iterable[Technique]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in techniques:
        out.setdefault(t.category, []).append(t.name)
    return out
