"""`pyrua-dojo bench wire`: codec cost and localhost round trips for a RoboDojo-sized observation.

Prints, for one observation of three 480x640 RGB cameras (optionally with float32 depth):
frame size, encode and decode time, and the INFER and HEARTBEAT round trips between our
`ModelClient` and `PolicyServer` over 127.0.0.1 with a model that answers at once (so the
figures are the protocol's own overhead, not the model's).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pyrua_dojo.wire.client import ModelClient
from pyrua_dojo.wire.codec import Frame, MessageType, decode_frame, encode_frame
from pyrua_dojo.wire.server import PolicyServer


def robodojo_observation(rng: np.random.Generator, *, depth: bool) -> dict[str, Any]:
    """The shape of a RoboDojo arx_x5 observation, with random pixels (incompressible, like real ones)."""
    vision: dict[str, Any] = {}
    for camera in ("cam_head", "cam_left_wrist", "cam_right_wrist"):
        entry: dict[str, Any] = {"color": rng.integers(0, 256, (480, 640, 3), dtype=np.uint8), "shape": [480, 640, 3]}
        if depth:
            entry["depth"] = rng.uniform(0.2, 2.0, (480, 640)).astype(np.float32)
            entry["intrinsic_matrix"] = np.array([[288.1, 0, 320], [0, 288.1, 240], [0, 0, 1]])
            entry["extrinsic_matrix"] = np.eye(4)
        vision[camera] = entry
    state = {
        f"{side}_{key}": value
        for side in ("left", "right")
        for key, value in (
            ("arm_joint_state", rng.normal(size=6).astype(np.float32)),
            ("ee_joint_state", [1.0]),
            ("ee_pose", rng.normal(size=7).astype(np.float32)),
        )
    }
    return {
        "vision": vision,
        "state": state,
        "instruction": "stack the blocks",
        "additional_info": {"frequency": 25},
        "data_format_version": "v1.0",
        "env_idx": 0,
    }


class _Echo:
    """Answers every INFER at once with a one-action hold chunk."""

    def __init__(self) -> None:
        self._obs: dict[str, Any] | None = None

    def reset(self) -> None:
        self._obs = None

    def update_obs(self, obs: dict[str, Any]) -> None:
        self._obs = obs

    def get_action(self) -> list[dict[str, Any]]:
        assert self._obs is not None
        state = self._obs["state"]
        return [
            {
                "left_arm_joint_state": state["left_arm_joint_state"],
                "left_ee_joint_state": [1.0],
                "right_arm_joint_state": state["right_arm_joint_state"],
                "right_ee_joint_state": [1.0],
            }
        ]


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def _row(label: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"{label:<34} median {statistics.median(ms):8.2f} ms   p95 {p95:8.2f} ms   (n={len(ms)})"


def main(requests: int = 50, seed: int = 0, depth: bool = False) -> int:
    """Print the figures; returns the process exit status."""
    rng = np.random.default_rng(seed)
    obs = robodojo_observation(rng, depth=depth)
    frame = Frame(MessageType.INFER, evaluation_id="bench", trial_id="bench", payload={"observation": obs})
    data = encode_frame(frame)
    print(f"observation frame: {len(data) / 1e6:.2f} MB (3 cameras 480x640 RGB{' + float32 depth' if depth else ''})")
    print(_row("encode_frame", _timed(lambda: encode_frame(frame), requests)))
    print(_row("decode_frame", _timed(lambda: decode_frame(data), requests)))
    with PolicyServer(_Echo(), host="127.0.0.1", port=0) as server:
        with ModelClient(server.url, evaluation_id="bench", trial_id="bench") as client:
            client.call("reset")
            client.call("get_action", obs)  # warm-up
            print(_row("INFER round trip (127.0.0.1)", _timed(lambda: client.call("get_action", obs), requests)))
            beat = client._client.heartbeat
            loop_run = client._run
            print(_row("HEARTBEAT round trip (127.0.0.1)", _timed(lambda: loop_run(beat()), requests)))
    return 0
