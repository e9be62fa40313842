"""`twin eval`: start a policy directory's server the way RoboDojo does, run the twin client against it, stop it.

RoboDojo's `run_policy_eval.sh` picks a free port, starts `<policy_dir>/setup_eval_policy_server.sh <bench> <task>
<ckpt> <env_cfg> <action_type> <seed> <policy_gpu> <policy_env> <port>` from inside the policy directory, waits up
to 600 s for the port (failing if the server dies), runs the env client, and kills the server on exit.

`PolicyServerProcess` does the same with two ways to start the server:
- "script": the directory's own `setup_eval_policy_server.sh` with those positional arguments (what RoboDojo runs;
  XPolicyLab's scripts need conda and an XPolicyLab checkout around the directory);
- "python": `python -m pyrua_dojo.harness.policy_server` (our stand-in for XPolicyLab's `setup_policy_server.py`)
  with the policy's deploy.yml and the same nine overrides;
- "auto" (default): "script" when `conda` is on PATH and the directory sits in an XPolicyLab checkout, else
  "python".
Extra `key=value` overrides go to the "python" server directly and to a script through `PYRUA_OVERRIDES` (which
our own plugin's script reads). The server's output goes to `<run_dir>/_policy_server.log`. With
`twin_segmentation` a twin segmentation server runs in this process and its URL reaches the policy as the
override `segmentation_url` (our agent's setting).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Literal

from pyrua_dojo.harness.eval_client import ClientReport, ClientSettings, TwinEvalClient
from pyrua_dojo.harness.policydir import PolicyDir, robodojo_overrides

__all__ = ["PolicyServerError", "PolicyServerProcess", "ServerLaunch", "free_port", "run_twin_eval"]

ServerMode = Literal["auto", "script", "python"]
SERVER_LOG = "_policy_server.log"


class PolicyServerError(RuntimeError):
    """The policy server did not come up (it exited, or its port never opened); the message has its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (XPolicyLab's get_free_port.sh does the same, with the same race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ServerLaunch:
    """How to start one policy server: the command, its working directory and extra environment."""

    mode: Literal["script", "python"]
    argv: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def plan(
        cls,
        policy: PolicyDir,
        *,
        mode: ServerMode,
        port: int,
        task: str,
        seed: int,
        ckpt_name: str,
        action_type: str,
        env_cfg: str = "arx_x5",
        policy_gpu: str = "0",
        policy_env: str | None = None,
        extra_overrides: Sequence[str] = (),
    ) -> ServerLaunch:
        """The launch RoboDojo would make (see module docstring); ValueError if `mode` cannot work here."""
        for item in extra_overrides:
            if "=" not in item or item.startswith(("-", "=")):
                raise ValueError(f"an override is key=value, got {item!r}")
        script = policy.server_script
        if mode == "auto":
            in_checkout = policy.xpolicylab_root is not None
            mode = "script" if script is not None and in_checkout and shutil.which("conda") else "python"
        if mode == "script":
            if script is None:
                raise ValueError(f"{policy.path} has no setup_eval_policy_server.sh; use --server-mode python")
            conda_env = policy_env or os.environ.get("CONDA_DEFAULT_ENV") or "base"
            argv: tuple[str, ...] = (
                "bash", str(script), "RoboDojo", task, ckpt_name, env_cfg, action_type, str(seed),
                str(policy_gpu), conda_env, str(port),
            )
            env: tuple[tuple[str, str], ...] = (
                (("PYRUA_OVERRIDES", " ".join(extra_overrides)),) if extra_overrides else ()
            )
            return cls("script", argv, policy.path, env)
        if mode != "python":
            raise ValueError(f"server mode must be auto, script or python, got {mode!r}")
        overrides = robodojo_overrides(
            port=port, task=task, seed=seed, policy_name=policy.name, ckpt_name=ckpt_name,
            action_type=action_type, env_cfg_type=env_cfg,
        )
        argv = (
            sys.executable, "-m", "pyrua_dojo.harness.policy_server",
            "--config_path", str(policy.path / "deploy.yml"),
            "--overrides", *overrides, *extra_overrides,
        )
        env = (("PYTHONWARNINGS", "ignore::UserWarning"), ("CUDA_VISIBLE_DEVICES", str(policy_gpu)))
        return cls("python", argv, policy.path, env)


class PolicyServerProcess:
    """A policy server child process in its own session, stopped (SIGTERM, then SIGKILL) on `stop()`."""

    def __init__(self, launch: ServerLaunch, port: int, log_path: Path) -> None:
        self.launch = launch
        self.port = port
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"ws://localhost:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ)
        env.update(dict(self.launch.env))
        env.setdefault("PYTHON", sys.executable)  # scripts that honour it use this interpreter
        self._proc = subprocess.Popen(
            list(self.launch.argv),
            cwd=self.launch.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stop() reaches the script's children too
        )

    def exit_reason(self) -> str | None:
        """None while the server runs; otherwise how it ended."""
        if self._proc is None:
            return "the policy server was never started"
        rc = self._proc.poll()
        return None if rc is None else f"the policy server exited with status {rc} (log: {self.log_path})"

    def wait_ready(self, timeout_s: float = 600.0, poll_s: float = 0.2) -> None:
        """Block until the port accepts connections; PolicyServerError if the server exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            reason = self.exit_reason()
            if reason is not None:
                raise PolicyServerError(f"{reason}\n{self.log_tail()}")
            with contextlib.suppress(OSError), socket.create_connection(("localhost", self.port), timeout=1.0):
                return
            if time.monotonic() > deadline:
                raise PolicyServerError(
                    f"the policy server did not open port {self.port} within {timeout_s:g} s\n{self.log_tail()}"
                )
            time.sleep(poll_s)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop the server's process group; returns its exit status."""
        proc = self._proc
        try:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(grace_s)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(grace_s)
            return None if proc is None else proc.returncode
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    def __enter__(self) -> PolicyServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_twin_eval(
    settings: ClientSettings,
    *,
    mode: ServerMode = "auto",
    policy_gpu: str = "0",
    policy_env: str | None = None,
    extra_overrides: Sequence[str] = (),
    server_timeout_s: float = 600.0,
    port: int | None = None,
    twin_segmentation: bool = False,
) -> ClientReport:
    """Start the policy's server, run the client against it, stop the server. `settings.url` is replaced.

    twin_segmentation: also serve the twin's instance masks of the current scene over the segmentation HTTP
    contract (in this process) and pass its URL to the policy as the override `segmentation_url`.
    """
    if settings.policy_dir is None:
        raise ValueError("twin eval needs a policy directory")
    policy = PolicyDir.load(settings.policy_dir)
    port = port or free_port()
    settings = replace(settings, url=f"ws://localhost:{port}", segmentation=settings.segmentation or twin_segmentation)
    client = TwinEvalClient(settings)  # checks the settings and imports deploy.py before anything starts
    overrides = list(extra_overrides)
    seg_server, oracle = None, None
    if twin_segmentation:
        from pyrua_dojo.harness.scene_oracle import start_twin_segmentation

        seg_server, oracle = start_twin_segmentation()
        overrides.append(f"segmentation_url={seg_server.url}")
    try:
        launch = ServerLaunch.plan(
            policy, mode=mode, port=port, task=settings.task, seed=settings.seed, ckpt_name=settings.ckpt_name,
            action_type=settings.action_type, env_cfg=settings.env_cfg, policy_gpu=policy_gpu,
            policy_env=policy_env, extra_overrides=overrides,
        )
        server = PolicyServerProcess(launch, port, client.run_dir / SERVER_LOG)
        print(f"twin eval: starting {policy.name}'s server ({launch.mode}) on port {port}; log {server.log_path}",
              flush=True)
        with server:
            server.wait_ready(server_timeout_s)
            print(f"twin eval: server ready (pid {server.pid})", flush=True)
            report = client.run(on_reset=oracle.follow if oracle is not None else None, stop_check=server.exit_reason)
            died = server.exit_reason()
    finally:
        if seg_server is not None:
            seg_server.close()
    print(f"twin eval: {died or 'server stopped'}; results: {report.result_path}", flush=True)
    return report
