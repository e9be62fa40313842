"""The station the twin simulates, from its own file (`station_truth.yml`), never from the agent's defaults.

The agent loads `calibration/station.yml` (what it may assume); the twin loads this package's `station_truth.yml`
(what the simulated station is). Both use the station schema of `calibration.station`, so a drawn or perturbed
truth is an overlay of the same shape as a calibration file.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from calibration.station import Station, load_station

__all__ = ["TRUTH_FILE", "load_truth_station", "truth_path"]

TRUTH_FILE = "station_truth.yml"


def truth_path() -> Path:
    """Path of the twin's station truth (`pyrua_dojo/twin/station_truth.yml`)."""
    return Path(str(resources.files("pyrua_dojo.twin").joinpath(TRUTH_FILE)))


def load_truth_station(overlay: str | Path | Mapping[str, Any] | None = None) -> Station:
    """The twin's true station, optionally overlaid (a file or dict in the station schema)."""
    return load_station(overlay, base=truth_path())
