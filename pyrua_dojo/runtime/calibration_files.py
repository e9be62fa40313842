"""The files of a calibration run: its record (`calibration.jsonl`) read back and fitted, and the calibration file
(station-schema YAML with a provenance comment) that `load_station(path)` and the policy's `calibration_file` setting
layer over the packaged defaults.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from calibration import ARMS, Station, load_station
from calibration.fit import CalibrationFit, PoseSample, fit_station
from calibration.transforms import FloatArray, pose_to_transform
from primitives.kinematics import X5Kinematics
from pyrua_dojo.runtime.trace import read_jsonl
from pyrua_dojo.runtime.atomic_files import replacing

__all__ = [
    "RECORD_SCHEMA",
    "calibration_document",
    "fit_run",
    "load_samples",
    "write_calibration_file",
]

RECORD_SCHEMA = "pyrua-dojo-calibration-v1"
RECORD_FILE = "calibration.jsonl"
#: Fitted ee-offset components smaller than this (10 um) are written as 0: `primitives.kinematics` solves IK in
#: closed form only for an ee link straight along link6 x.
EE_SNAP_M = 1e-5

# -------------------------------------------------------------------------------------- reading a run back


def _record_path(run: Path | str) -> Path:
    path = Path(run)
    if path.is_dir():
        path = path / RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no calibration record at {path} (expected a run directory with {RECORD_FILE})")
    return path


def load_samples(run: Path | str, station: Station | None = None) -> tuple[dict[str, Any], list[PoseSample]]:
    """The header and the recorded poses of a calibration run (a run directory or its calibration.jsonl), with
    link6 poses from forward kinematics of the measured joints on `station`'s chain (default: the packaged one)."""
    path = _record_path(run)
    records = read_jsonl(path)
    headers = [r for r in records if r.get("kind") == "header"]
    if not headers:
        raise ValueError(f"{path}: no header record; not a calibration run")
    header = headers[0]
    if header.get("schema") != RECORD_SCHEMA:
        raise ValueError(f"{path}: schema {header.get('schema')!r}, expected {RECORD_SCHEMA!r}")
    kin = X5Kinematics(station if station is not None else load_station())
    samples: list[PoseSample] = []
    for rec in records:
        if rec.get("kind") != "pose":
            continue
        label = str(rec.get("label", f"pose{len(samples)}"))
        try:
            link6 = {arm: kin.arm(arm).link6(np.asarray(rec["joints"][arm], dtype=float)) for arm in ARMS}
            ee = {arm: pose_to_transform(np.asarray(rec["ee_pose"][arm], dtype=float)) for arm in ARMS}
            extr: dict[str, FloatArray] = {}
            intr: dict[str, FloatArray] = {}
            sizes: dict[str, tuple[int, int]] = {}
            for cam, entry in (rec.get("cameras") or {}).items():
                if "extrinsic_matrix" in entry:
                    extr[cam] = np.asarray(entry["extrinsic_matrix"], dtype=float).reshape(4, 4)
                if "intrinsic_matrix" in entry:
                    intr[cam] = np.asarray(entry["intrinsic_matrix"], dtype=float).reshape(3, 3)
                if "size" in entry:
                    w, h = entry["size"]
                    sizes[cam] = (int(w), int(h))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: pose {label!r} is malformed: {exc}") from None
        samples.append(PoseSample(label, link6, ee, extr, intr, sizes))
    if not samples:
        raise ValueError(f"{path}: the run recorded no poses")
    return header, samples


def fit_run(run: Path | str, station: Station | None = None) -> CalibrationFit:
    """Fit a recorded calibration run (see `calibration.fit.fit_station`) on `station`'s chain and head camera."""
    st = station if station is not None else load_station()
    header, samples = load_samples(run, st)
    recorded = header.get("wrist_parents") or {}
    wrist = {c: m.parent for c, m in st.cameras.items() if m.arm is not None}
    for cam, parent in recorded.items():
        if cam in wrist and wrist[cam] != parent:
            raise ValueError(f"{cam}: the run says it is mounted on {parent}, the station on {wrist[cam]}")
    head = st.fixed_camera("cam_head")
    return fit_station(samples, wrist_parents=wrist, head_camera="cam_head", head_pose=head.usd_extrinsic)


# ---------------------------------------------------------------------------------------- the calibration file


def _numbers(values: Sequence[float] | FloatArray, digits: int) -> list[float]:
    return [round(float(v), digits) + 0.0 for v in values]


def calibration_document(fit: CalibrationFit, station: Station | None = None) -> dict[str, Any]:
    """The station-schema overlay of a fit: x5.ee_offset (with tcp_offset moved so the grasp centre stays put on
    link6), each fitted wrist mount and, when the env origin came from the wrist cameras, the head camera's pose
    (position, USD quaternion), and each camera's sent intrinsics (width, height, fx, and fy when not square).
    Only what was fitted appears."""
    st = station if station is not None else load_station()
    doc: dict[str, Any] = {"schema": 1}
    if fit.ee is not None:
        # Components below EE_SNAP_M are written as exact zeros: the closed-form IK needs an offset along link6 x.
        offset = [0.0 if abs(v) < EE_SNAP_M else v for v in fit.ee.position]
        # The grasp centre is a property of the fingers (fixed on link6), not of the reported ee frame: keep it
        # where the station put it, ee_offset.x + tcp_offset along link6 x, whatever the ee link turns out to be.
        grasp_x = st.x5.ee_offset[0] + st.x5.tcp_offset
        doc["x5"] = {"ee_offset": _numbers(offset, 7), "tcp_offset": round(float(grasp_x - offset[0]), 7) + 0.0}
    cams: dict[str, dict[str, Any]] = {}
    for cam, k in sorted(fit.intrinsics.items()):
        if cam not in st.cameras:
            continue
        entry: dict[str, Any] = {"width": k.width, "height": k.height, "fx": round(k.fx, 6)}
        if not k.square:
            entry["fy"] = round(k.fy, 6)
        cams[cam] = entry
    fitted = sorted(fit.mounts) + (["cam_head"] if fit.head is not None and "cam_head" in st.cameras else [])
    for cam in fitted:
        position, quat = fit.mount_usd(cam)
        cams.setdefault(cam, {}).update({"position": _numbers(position, 7), "quat": _numbers(quat, 10)})
    if cams:
        doc["cameras"] = cams
    return doc


def _provenance(fit: CalibrationFit, source: str, when: str) -> list[str]:
    lines = [
        "pyrua-dojo calibration file: fitted station parameters, layered over calibration/station.yml by",
        "calibration.load_station(path) and by the policy setting `calibration_file`.",
        f"fitted: {when}",
        f"source run: {source} ({fit.poses} poses)",
    ]
    if fit.ee is not None:
        e = fit.ee
        lines.append(f"ee offset components below {EE_SNAP_M * 1e6:.0f} um are written as 0")
        lines.append(
            f"ee link (link6 -> ee, both arms, {e.used}/{e.poses} poses): rms {e.rms_mm:.4f} mm / {e.rms_deg:.4f} deg, "
            f"worst {e.max_mm:.4f} mm / {e.max_deg:.4f} deg"
        )
    for cam, m in sorted(fit.mounts.items()):
        lines.append(
            f"{cam} on {fit.mount_parents[cam]} ({m.used}/{m.poses} poses): rms {m.rms_mm:.4f} mm / "
            f"{m.rms_deg:.4f} deg, worst {m.max_mm:.4f} mm / {m.max_deg:.4f} deg"
        )
    if fit.head is not None:
        h = fit.head
        lines.append(f"cam_head in the env frame, origin from the wrist cameras ({h.used}/{h.poses} poses): rms "
                     f"{h.rms_mm:.4f} mm / {h.rms_deg:.4f} deg")
    for cam, k in sorted(fit.intrinsics.items()):
        lines.append(f"{cam} intrinsics as sent: fx {k.fx:.4f} fy {k.fy:.4f} cx {k.cx:.3f} cy {k.cy:.3f}")
    if fit.env_origin is not None:
        lines.append(f"env origin (from the {fit.env_origin_from or 'head camera'}): "
                     f"{[round(float(v), 6) for v in fit.env_origin]}")
    for note in fit.notes:
        lines.append(f"note: {note}")
    return lines


class _CalibrationDumper(yaml.SafeDumper):
    """Block mappings with one-line number lists, as station.yml is written."""


_CalibrationDumper.add_representer(
    list, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)
)


def write_calibration_file(
    fit: CalibrationFit,
    path: Path | str,
    *,
    source: str,
    station: Station | None = None,
    when: str | None = None,
) -> Path:
    """Write the fit as a calibration YAML (provenance comment + `calibration_document`), atomically.

    The text is loaded back with `load_station` before it replaces `path`, so a file that would not load is never
    written. Returns the path.
    """
    out = Path(path)
    stamp = when or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = calibration_document(fit, station)
    comment = "".join(f"# {line}\n" for line in _provenance(fit, source, stamp))
    body = yaml.dump(doc, Dumper=_CalibrationDumper, sort_keys=False, default_flow_style=False, width=120)
    text = comment + body
    out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
        load_station(tmp)  # refuses anything the station loader would refuse
    return out
