"""The twin's station truth is its own file: the agent's defaults changed do not change the twin, and the twin's
truth changed does not change what the agent assumes."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

import calibration.station as station_module
from calibration import load_station
from pyrua_dojo.twin import TwinEnv
from pyrua_dojo.twin.scene import build_mjcf
from pyrua_dojo.twin.station_truth import load_truth_station, truth_path


def _camera_pos(mjcf: str, name: str) -> tuple[float, ...]:
    match = re.search(rf'<camera name="{name}"[^>]*pos="([^"]+)"', mjcf)
    assert match, f"{name} not in the MJCF"
    return tuple(float(v) for v in match.group(1).split())


def test_the_truth_is_a_file_of_its_own_with_provenance() -> None:
    path = truth_path()
    assert path.name == "station_truth.yml" and path.parent.name == "twin"
    assert path.resolve() != station_module.default_station_path().resolve()
    text = path.read_text()
    for tag in ("[robodojo]", "[arx]", "[assumed]"):
        assert tag in text
    truth = load_truth_station()
    assert truth.source == str(path)
    # The same numbers as the agent's defaults today (the two files part when the evidence does).
    agent = load_station()
    assert truth.table == agent.table and truth.x5 == agent.x5
    assert {c: (m.position, m.quat) for c, m in truth.cameras.items()} == \
        {c: (m.position, m.quat) for c, m in agent.cameras.items()}


def test_the_agents_file_changed_leaves_the_twin_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = yaml.safe_load(station_module.default_station_path().read_text())
    doc["cameras"]["cam_left_wrist"]["position"] = [0.07, 0.01, 0.05]
    doc["table"]["top_z"] = 0.70
    changed = tmp_path / "station.yml"
    changed.write_text(yaml.safe_dump(doc))
    before = build_mjcf(TwinEnv().station)
    monkeypatch.setattr(station_module, "default_station_path", lambda: changed)  # the agent's packaged file, edited

    agent = load_station()
    assert agent.cameras["cam_left_wrist"].position == (0.07, 0.01, 0.05) and agent.table.top_z == 0.70
    env = TwinEnv()
    assert env.station.cameras["cam_left_wrist"].position == (0.04, 0.0, 0.065)
    assert env.station.table.top_z == pytest.approx(0.765)
    assert build_mjcf(env.station) == before


def test_the_twins_truth_changed_moves_the_simulated_camera_and_not_the_agent() -> None:
    truth = load_truth_station({"cameras": {"cam_left_wrist": {"position": [0.05, 0.0, 0.06]}}})
    assert truth.source.startswith(str(truth_path()))
    default_mjcf = build_mjcf(load_truth_station())
    moved_mjcf = build_mjcf(TwinEnv(station=truth).station)
    assert np.allclose(_camera_pos(moved_mjcf, "cam_left_wrist"), (0.05, 0.0, 0.06))
    assert not np.allclose(_camera_pos(default_mjcf, "cam_left_wrist"), (0.05, 0.0, 0.06))
    assert load_station().cameras["cam_left_wrist"].position == (0.04, 0.0, 0.065)
