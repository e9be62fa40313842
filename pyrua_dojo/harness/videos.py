"""Episode videos as RoboDojo writes them: one mp4 per camera per episode, one frame per observation.

RoboDojo (`EvalEnv._stream_vision`, `save_video`) streams every camera's RGB frame of every `get_obs` of a running
env (plus one last frame when the env ends) into `<run_dir>/_stream/env<i>_<cam>.tmp.mp4` (the twin adds its process
id, as several twin processes may write one run), and once the episode is
booked renames it to `<run_dir>/episode_<index:07d>_<cam>_<success|fail>.mp4` at 25 fps. The twin does the same
with OpenCV's `mp4v` encoder (RoboDojo uses an ffmpeg pipe; the file names, frame count and rate match).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cv2
import numpy as np

__all__ = ["EpisodeVideos", "check_video_support", "video_name"]

FPS = 25
STREAM_DIR = "_stream"
_FOURCC = cv2.VideoWriter.fourcc(*"mp4v")


def video_name(index: int, camera: str, success: bool) -> str:
    """RoboDojo's file name: `episode_0000007_cam_head_success.mp4`."""
    return f"episode_{index:07d}_{camera}_{'success' if success else 'fail'}.mp4"


def check_video_support(directory: Path) -> None:
    """Fail early, with a clear message, if OpenCV cannot write mp4 files here."""
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f"_probe-{os.getpid()}.tmp.mp4"
    writer = cv2.VideoWriter(str(probe), _FOURCC, FPS, (16, 16))
    try:
        if not writer.isOpened():
            raise RuntimeError(f"OpenCV cannot write mp4 (mp4v) video in {directory}; run without --videos")
        writer.write(np.zeros((16, 16, 3), np.uint8))
    finally:
        writer.release()
        probe.unlink(missing_ok=True)


class _Stream:
    def __init__(self, path: Path, height: int, width: int) -> None:
        self.path = path
        self.size = (width, height)
        self.frames = 0
        self._writer = cv2.VideoWriter(str(path), _FOURCC, FPS, self.size)
        if not self._writer.isOpened():
            raise RuntimeError(f"cannot open a video writer for {path}")

    def append(self, rgb: np.ndarray) -> None:
        if (rgb.shape[1], rgb.shape[0]) != self.size:
            raise ValueError(f"{self.path.name}: frame size {rgb.shape[1]}x{rgb.shape[0]} != {self.size}")
        self._writer.write(cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR))
        self.frames += 1

    def close(self) -> None:
        self._writer.release()


class EpisodeVideos:
    """Per-env, per-camera streams of one batch of episodes, written under `run_dir`."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.stream_dir = self.run_dir / STREAM_DIR
        self._streams: dict[int, dict[str, _Stream]] = {}

    def append(self, env_idx: int, obs: Mapping[str, Any]) -> None:
        """Add the colour image of every camera in `obs["vision"]` to env `env_idx`'s streams."""
        vision = obs.get("vision")
        if not isinstance(vision, Mapping):
            return
        streams = self._streams.setdefault(env_idx, {})
        for cam, data in vision.items():
            color = data.get("color") if isinstance(data, Mapping) else None
            if not isinstance(color, np.ndarray) or color.ndim != 3 or color.shape[2] != 3:
                continue
            stream = streams.get(cam)
            if stream is None:
                self.stream_dir.mkdir(parents=True, exist_ok=True)
                path = self.stream_dir / f"{os.getpid()}-env{env_idx}_{cam}.tmp.mp4"  # workers may share a run
                stream = streams[cam] = _Stream(path, color.shape[0], color.shape[1])
            stream.append(color)

    def frames(self, env_idx: int) -> dict[str, int]:
        """Frames written so far per camera of env `env_idx`."""
        return {cam: s.frames for cam, s in self._streams.get(env_idx, {}).items()}

    def save(self, env_idx: int, index: int, success: bool) -> tuple[Path, ...]:
        """Finish env `env_idx`'s videos under RoboDojo's names for episode `index`; returns their paths."""
        saved = []
        for cam, stream in self._streams.pop(env_idx, {}).items():
            stream.close()
            final = self.run_dir / video_name(index, cam, success)
            os.replace(stream.path, final)
            saved.append(final)
        self._tidy()
        return tuple(saved)

    def abort(self, env_idx: int | None = None) -> None:
        """Drop the partial videos of one env (or all)."""
        keys = list(self._streams) if env_idx is None else [env_idx]
        for key in keys:
            for stream in self._streams.pop(key, {}).values():
                stream.close()
                stream.path.unlink(missing_ok=True)
        self._tidy()

    def _tidy(self) -> None:
        if not self._streams:
            with contextlib.suppress(OSError):
                self.stream_dir.rmdir()
