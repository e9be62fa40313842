"""Perception: posed cameras, pixel back-projection and `locate` from segmentation masks (and depth).

Cameras are posed from RoboDojo's camera matrices when the station sends them, otherwise from the calibration
(head camera fixed; wrist cameras = calibrated mount on link6 at the measured joints).

`locate` measures one object from its masks, by the first method the observation allows:

- with a wrist view and no depth, first a solid fit (`primitives.solid_fit`): a box or cylinder on an unknown
  support fitted to the masks of every camera that sees the object (matched along the lead camera's ray through
  it), with the arms' silhouettes (capsules around their skeletons and fingers) marked as places that may hide
  it. This measures stacked, held and partly hidden objects and cups by their rims; an object near the TCP of a
  gripper closed on something, pointing down, is fitted as a box centred between its pads (as wide as they are
  apart: `fit_held_box`), since the fingers hide too much of it for the free fit. When it does not explain the
  masks (under 2 views, rms over 3 px, or half its outline unexplained), the table-plane methods below follow
  (`primitives.mask_geometry`).
  Every result carries a one-sigma uncertainty: the fit's own (Jacobian, hidden share, model mismatch) or a
  per-method floor measured by `pyrua-dojo bench locate`.

- "depth", "head+wrist", "head": the table-plane methods of `primitives.mask_geometry` (depth pixels
  back-projected; mask outlines cast on the table plane).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import cv2
import numpy as np

from calibration import CAMERAS, Camera, Station
from calibration.transforms import FloatArray, quat_to_matrix
from primitives.actions import Observation
from primitives.kinematics import X5Kinematics
from primitives.fingertips import CORRECT_FROM_PX, PAD_HALF, measure_fingertips, reuse_offset
from primitives.mask_geometry import (
    SIDE_ONLY_NOTE,
    Estimate,
    closest_point,
    depth_estimate,
    mask_outline,
    mask_ray,
    outline_estimate,
    rect_sides,
    table_profile,
)
from primitives.results import CameraMeta, Located
from primitives.seg_contract import Instance
from primitives.seg_client import SegmentationClient
from primitives.solid_fit import (
    FitStart,
    NECK_POINTS,
    SolidFit,
    View,
    fit_held_box,
    fit_neck,
    fit_solid,
    hull_view,
    points_above,
)

HEAD = "cam_head"


@dataclass(frozen=True)
class LocateConfig:
    """Tuning of `locate` (host side)."""

    min_area_px: int = 12  # smaller instances are ignored (spurious blobs, slivers)
    border_px: int = 1  # a mask this close to the image edge is cut off by it
    max_border_share: float = 0.2  # a view whose mask has more of its outline on the image border is not fitted
    bins: int = 48  # angular bins of a mask outline around a camera's foot point
    min_bin_points: int = 2
    depth_table_margin_m: float = 0.0015  # depth points this close to the table are table
    depth_cell_m: float = 0.004  # grid cell for keeping the largest connected cluster of depth points
    depth_top_percentile: float = 99.0
    depth_top_band_m: float = 0.003  # top-surface points: within this of the top (or 10 % of the height)
    wrist_min_elevation_deg: float = 20.0  # a wrist view this grazing adds more error than it removes
    match_px: float = 25.0  # a wrist instance must lie this close to the head estimate's projection
    # The wrist images' lower part shows the gripper, which hides whatever lies behind it: a wrist view counts only
    # when the object projects inside this window (fractions of width and height: u from, u to, v to) and its mask
    # stays above `wrist_mask_bottom` (fraction of the height).
    wrist_window: tuple[float, float, float] = (0.08, 0.92, 0.72)
    wrist_mask_bottom: float = 0.8
    top_view_min_elevation_deg: float = 55.0  # a wrist view this steep gives the footprint from above
    top_view_override_m: float = 0.010  # ... and the centre, when the outline estimate is this far from it
    straight_ratio: float = 0.12  # near edge sagitta / chord below this: one face seen
    prior_error_m: float = 0.003  # how far a footprint edge placed by the symmetric prior may be off
    fit_max_rms_px: float = 3.0  # a solid fit matching the masks worse than this is not used
    # Camera model errors (px, one sigma, a rigid image shift) that a fit's and depth's stated uncertainty carry (their
    # own statistics cannot see them: two views with shifted images still fit a solid, at the wrong height): the head
    # camera's; a wrist camera's as a share of its fingertips' offset from the model, or when they were not seen.
    model_px_head: float = 1.5
    model_px_share: float = 0.35
    model_px_unchecked: float = 4.0
    model_px_one_pad: float = 3.0  # added when only one fingertip was seen (its tip alone places the correction)
    model_px_reused: float = 2.0  # added when the fingertips are hidden and the offset seen last is reused
    model_px_cut: float = 2.0  # added for a view whose mask touches its image border (its model is least sure there)
    model_px_sliver: float = 6.0  # ... and this for one that shows the object at the border only (used when alone)
    # A fit's top: uncertainty added per share of a view's silhouette edge (over half, the most of any view) an arm
    # may hide, times the solid's height.
    unseen_top_share: float = 0.3
    # Least uncertainty stated per method (xy, top height), metres: the model error the fit's own statistics miss.
    uncertainty_floor_m: Mapping[str, tuple[float, float]] = field(default_factory=lambda: {
        "fit": (0.0015, 0.0015), "depth": (0.0015, 0.0015), "head+wrist": (0.003, 0.004), "wrist": (0.01, 0.03),
        "head": (0.005, 0.01),
    })

#: The held box's fit is used while at most this share of its outline is hidden: its own wrist camera sees a held
#: block around the fingers only (trial P: 76% hidden), and the stated uncertainty grows with the share hidden.
HELD_MAX_HIDDEN = 0.85


class Perception:
    """Measures the scene from an observation. Stateless apart from its configuration, clients, a cache of the
    latest segmentation replies (keyed by the image itself) and the wrist cameras' fingertip offsets last seen."""

    def __init__(
        self,
        station: Station,
        kinematics: X5Kinematics,
        segmentation: SegmentationClient | None,
        config: LocateConfig = LocateConfig(),
    ) -> None:
        self.station = station
        self.kinematics = kinematics
        self.segmentation = segmentation
        self.config = config
        self._seg_cache: dict[tuple[int, str, float], tuple[np.ndarray, list[Instance] | str]] = {}
        # Inside _measure only: per wrist camera, the xy shift its fingertips measured (see `_measure`).
        self._wrist_shift: dict[str, FloatArray] = {}
        self._tips_cache: dict[str, tuple[np.ndarray, FloatArray | None, float, float, str]] = {}
        # Per wrist camera, the fingertips' offset (px) last seen and its step: reused where they are hidden now.
        self._last_tips: dict[str, tuple[list[float], int]] = {}
        # Inside _measure only: per camera, how far (px) its model may be off near the object (see `_model_px`).
        self._view_model_px: dict[str, float] = {}

    # ------------------------------------------------------------------ cameras
    def env_origin(self, obs: Observation) -> FloatArray | None:
        """Offset of the env frame in the simulator world, from the head camera's matrix (None without matrices).

        RoboDojo's extrinsic matrices are camera-to-world including the env origin; the head camera's pose in
        the env frame is known, so the difference is the origin.
        """
        e = obs.extrinsics.get("cam_head")
        if e is None:
            return None
        known = self.station.fixed_camera("cam_head").position
        return e[:3, 3] - known

    def camera(self, obs: Observation, name: str) -> Camera:
        """The named camera posed at the moment of `obs` (while `_measure` runs, a wrist camera moved by the xy shift
        its fingertips measured)."""
        cam = self._posed_camera(obs, name)
        shift = self._wrist_shift.get(name)
        if shift is None:
            return cam
        moved = cam.world_from_camera.copy()
        moved[:2, 3] += shift  # a ray from the moved centre meets every plane z shift away from the modelled one
        return Camera(cam.name, cam.intrinsics, moved)

    def _posed_camera(self, obs: Observation, name: str) -> Camera:
        """The named camera posed at the moment of `obs`, as the model (or the station's matrices) puts it."""
        origin = self.env_origin(obs)
        if origin is not None:
            world_from_env = np.eye(4)
            world_from_env[:3, 3] = origin
            cam = obs.camera_from_matrices(name, world_from_env)
            if cam is not None:
                return cam
        mount = self.station.cameras[name]
        if mount.arm is None:
            return mount.posed()
        return self.kinematics.arm(mount.arm).wrist_camera(name, obs.joints[mount.arm])

    def camera_meta(self, obs: Observation, name: str) -> CameraMeta:
        cam = self.camera(obs, name)
        k = cam.intrinsics
        return CameraMeta(
            name=name,
            width=k.width,
            height=k.height,
            fx=round(k.fx, 3),
            fy=round(k.fy, 3),
            cx=round(k.cx, 3),
            cy=round(k.cy, 3),
            position=[round(float(v), 4) for v in cam.position],
            forward=[round(float(v), 4) for v in cam.rotation[:, 2]],
            right=[round(float(v), 4) for v in cam.rotation[:, 0]],
            down=[round(float(v), 4) for v in cam.rotation[:, 1]],
            moves_with=self.station.cameras[name].arm,
            has_depth=name in obs.depth,
            from_matrices=name in obs.extrinsics and name in obs.intrinsics,
        )

    def back_project(
        self, obs: Observation, name: str, pixel: tuple[float, float], z: float | None
    ) -> list[float] | None:
        """World point at image point `pixel` (u, v); depth when available and no z given, else plane z."""
        cam = self.camera(obs, name)
        px = np.array(pixel, dtype=float)
        if not bool(cam.in_image(px)):
            raise ValueError(
                f"pixel {pixel} is outside the {cam.intrinsics.width}x{cam.intrinsics.height} image of {name}"
            )
        depth = obs.depth.get(name)
        if z is None and depth is not None:
            d = float(depth[min(int(px[1]), depth.shape[0] - 1), min(int(px[0]), depth.shape[1] - 1)])
            if np.isfinite(d) and d > 0:
                return [round(float(v), 5) for v in cam.deproject(px, d)]
            return None
        plane = self.station.table.top_z if z is None else float(z)
        p = cam.intersect_plane_z(px, plane)
        if not np.all(np.isfinite(p)):
            return None
        return [round(float(v), 5) for v in p]

    # ------------------------------------------------------------------ locate
    def locate(
        self, obs: Observation, text: str, *, cameras: Sequence[str] | None = None, min_score: float = 0.3
    ) -> Located:
        """The best-scoring object matching `text`, measured (see `Located`).

        The head camera leads; when it does not see the object (an arm in front of it, say), each allowed wrist
        camera is tried as the lead in turn.
        """
        allowed = self._allowed(cameras)
        order = ([HEAD] if HEAD in allowed else []) + [c for c in allowed if c != HEAD]
        reasons: list[str] = []
        for primary in order:
            found = self._instances(obs, primary, text, min_score)
            if isinstance(found, str):
                return self._not_found(obs, text, primary, found, 0)
            if not found:
                reasons.append(f"no instance of {text!r} above score {min_score} in {primary}")
                continue
            result = self._measure(obs, text, primary, found[0], len(found), allowed, min_score)
            if result.found and not result.held_by and self._holder(
                    obs, mask_ray(self.camera(obs, primary), np.asarray(found[0].mask, dtype=bool))) is not None:
                # Seen along a holding gripper's TCP but measured elsewhere (on the table, say: trial P, the head
                # seeing part of a held block and none of its wrist views usable): measured between the pads.
                held = self._measure_held(obs, text, min_score, allowed)
                if isinstance(held, Located):
                    return held
                result = replace(result, reason="; ".join([result.reason, "seen in line with a holding gripper: it may "
                                                           "be the object it holds", *held]))
            if result.found:
                if reasons:
                    result = replace(result, reason="; ".join([result.reason, *reasons]).strip("; "))
                return result
            reasons.append(result.reason)
        held = self._measure_held(obs, text, min_score, allowed)
        if isinstance(held, Located):
            return held
        reasons += held
        return self._not_found(obs, text, order[0], "; ".join(reasons), 0)

    def locate_all(
        self,
        obs: Observation,
        text: str,
        *,
        cameras: Sequence[str] | None = None,
        min_score: float = 0.3,
        max_objects: int = 10,
    ) -> list[Located]:
        """Every object matching `text` in the head camera, each measured as by `locate`; best score first."""
        allowed = self._allowed(cameras)
        primary = HEAD if HEAD in allowed else allowed[0]
        found = self._instances(obs, primary, text, min_score)
        if isinstance(found, str) or not found:
            return []
        measured = [
            self._measure(obs, text, primary, inst, len(found), allowed, min_score) for inst in found[:max_objects]
        ]
        return sorted(measured, key=lambda r: not r.found)  # stable: best score first among the measured

    # ------------------------------------------------------------------ internals
    def _allowed(self, cameras: Sequence[str] | None) -> list[str]:
        if cameras is None:
            return list(CAMERAS)
        if isinstance(cameras, str):
            cameras = [cameras]
        names = list(dict.fromkeys(cameras))
        for c in names:
            if c not in CAMERAS:
                raise ValueError(f"unknown camera {c!r}; use one of {CAMERAS}")
        if not names:
            raise ValueError("cameras must name at least one camera")
        return names

    def _instances(self, obs: Observation, cam: str, text: str, min_score: float) -> list[Instance] | str:
        """Usable instances of `text` in one camera's image, best first, or why segmentation gave none."""
        if self.segmentation is None:
            return "segmentation unavailable: no segmentation service is configured"
        # One segmentation per (image, text) within a locate / locate_all: matching every instance against the
        # other cameras would otherwise ask again. The entry keeps the image, so its identity cannot be reused.
        image = obs.images[cam]
        key = (id(image), text, float(min_score))
        hit = self._seg_cache.get(key)
        if hit is not None and hit[0] is image:
            return hit[1]
        out = self._segment(image, text, min_score)
        if len(self._seg_cache) >= 16:
            self._seg_cache.clear()
        self._seg_cache[key] = (image, out)
        return out

    def _segment(self, image: np.ndarray, text: str, min_score: float) -> list[Instance] | str:
        assert self.segmentation is not None
        reply = self.segmentation.segment(image, [text], score_threshold=float(min_score))
        if not reply.ok:
            err = reply.error
            why = f"{err.code}: {err.message}" if err is not None else "unknown error"
            return f"segmentation unavailable ({why})"
        out = [
            i for i in reply.instances(text)
            if i.score >= min_score and i.area_px >= self.config.min_area_px and i.mask is not None
        ]
        out.sort(key=lambda i: (-i.score, -i.area_px))
        return out

    def _not_found(self, obs: Observation, text: str, cam: str, reason: str, n: int) -> Located:
        return Located(
            found=False, text=text, xyz=[], footprint=[], heading=0.0, height=0.0, score=0.0, cameras=[cam],
            method="", instances=n, reason=reason, step=obs.step,
        )

    def _border_share(self, mask: np.ndarray) -> float:
        """The share of a mask's outline (its edge pixels) that lies on the image border (0 when it does not touch)."""
        if not self._touches_border(mask):
            return 0.0
        m = mask.astype(np.uint8)
        edge = m - cv2.erode(m, np.ones((3, 3), np.uint8), borderType=cv2.BORDER_CONSTANT, borderValue=0)
        b = self.config.border_px
        on_border = int(edge[:b].sum() + edge[-b:].sum() + edge[b:-b, :b].sum() + edge[b:-b, -b:].sum())
        return on_border / max(int(edge.sum()), 1)

    def _touches_border(self, mask: np.ndarray) -> bool:
        b = self.config.border_px
        return bool(mask[:b].any() or mask[-b:].any() or mask[:, :b].any() or mask[:, -b:].any())

    def _measure(
        self,
        obs: Observation,
        text: str,
        primary: str,
        inst: Instance,
        n: int,
        allowed: list[str],
        min_score: float,
    ) -> Located:
        """`_measure_as_modelled` with each allowed wrist camera whose fingertips are seen corrected by them: moved by
        `Fingertips.shift_m` (the mount's error near the grasp, measured in the same image; `primitives.fingertips`).
        Where they are hidden now (a held object, the other gripper), the offset they showed last is reused (the
        camera is fixed to the gripper); the reason says which cameras were corrected, how, and which could not be."""
        shifts = {}
        sources: dict[str, str] = {}
        for name in allowed:
            arm = self.station.cameras[name].arm
            if arm is None or self.segmentation is None:
                continue
            image = obs.images[name]
            hit = self._tips_cache.get(name)
            if hit is None or hit[0] is not image:
                camera = self._posed_camera(obs, name)
                tips = measure_fingertips(obs, arm, station=self.station, kinematics=self.kinematics,
                                          camera=camera, segmentation=self.segmentation)
                source = ""
                if tips.found:
                    self._last_tips[name] = (tips.offset_px, tips.step)
                elif name in self._last_tips:
                    # Trial W: a held block hid the fingertips and its tcp_offset came back 6 mm off, unannounced.
                    offset, seen_step = self._last_tips[name]
                    tips = reuse_offset(obs, arm, station=self.station, kinematics=self.kinematics, camera=camera,
                                        offset_px=offset, seen_step=seen_step)
                    source = f"as seen at step {seen_step}, hidden now" if tips.found else ""
                if not tips.found:
                    source = "not corrected: its fingertips are not seen (its model may be 1-2 cm off there)"
                seen = tips.found and math.hypot(*tips.offset_px) >= CORRECT_FROM_PX
                off = math.hypot(*tips.offset_px) if tips.found else math.inf
                # One pad seen: its tip alone, mask noise not averaged over two (about 10 px off on the twin); an
                # offset from an earlier image: the mask noise of that one, and the opening may differ.
                extra = (self.config.model_px_one_pad if tips.reason.startswith("one pad") else 0.0) + (
                    self.config.model_px_reused if tips.reason.startswith("not seen") else 0.0)
                hit = (image, np.array(tips.shift_m) if seen else None, off, extra, source)
                self._tips_cache[name] = hit
            if hit[1] is not None:
                shifts[name] = hit[1]
            sources[name] = hit[4]
            self._view_model_px[name] = self._model_px(hit[2]) + hit[3]
        self._wrist_shift = shifts
        try:
            result = self._measure_as_modelled(obs, text, primary, inst, n, allowed, min_score)
        finally:
            self._wrist_shift = {}
            self._view_model_px = {}
        notes = []
        for c in result.cameras:
            if c in shifts:
                how = f" {sources[c]}" if sources.get(c) else ""
                notes.append(f"{c} corrected by its fingertips{how} ({1000 * shifts[c][0]:+.0f}, "
                             f"{1000 * shifts[c][1]:+.0f} mm)")
            elif sources.get(c, "").startswith("not corrected"):
                notes.append(f"{c} {sources[c]}")
        if result.found and notes:
            result = replace(result, reason=f"{result.reason}; {'; '.join(notes)}".strip("; "))
        return result

    def _holding_palm(self, obs: Observation, est: Estimate, table_z: float) -> float | None:
        """The height of the palm (25 mm above the TCP, where the pads end) of a gripper holding the object measured
        by depth as `est`, when that object's top reaches above it: depth points above it are the gripper's own (a
        mask grown over the pads or the gripper's body; trial Z: a held block's top 21 mm too high, its tcp_offset
        0.042 for 0.021). None when no gripper holds it there."""
        top = np.array([est.xy[0], est.xy[1], table_z + est.height])
        for _, tcp, _, _ in self._holding(obs):
            d = top - tcp
            palm = float(tcp[2]) + PAD_HALF[0] + 0.003
            if math.hypot(float(d[0]), float(d[1])) < 0.035 and float(d[2]) >= -0.02 and top[2] > palm:
                return palm
        return None

    def _with_depth_model_error(
        self,
        obs: Observation,
        est: Estimate,
        clouds: Sequence[tuple[Camera, np.ndarray, np.ndarray]],
        table_z: float,
        max_z: float | None = None,
    ) -> Estimate:
        """A depth estimate's uncertainty with the camera models' share: depth places points through each camera's
        pose, so a model off by p px moves them by p px at their range (the head camera's `model_px_head`, a wrist
        camera's as its fingertips measured, as in a fit); where several cameras see it, also half the largest
        disagreement between what each alone measures (below `max_z`, as the estimate; drawn stations: 5 mm off at 1.5 mm
        stated, 0-50 % covered)."""
        top = np.array([est.xy[0], est.xy[1], table_z + est.height])
        model = 0.0
        singles = []
        for cam, mask, depth in clouds:
            _, dist = cam.project(top)
            px = self.config.model_px_head if cam.name == HEAD else self._view_model_px.get(cam.name, 0.0)
            model = max(model, px * float(dist) / float(cam.intrinsics.fx))
            if len(clouds) > 1:
                single = depth_estimate(self.config, [(cam, mask, depth)], table_z, max_z=max_z)
                if single is not None and SIDE_ONLY_NOTE not in single.notes:
                    singles.append(single)
        spread_xy = max((float(np.linalg.norm(a.xy - b.xy)) for a in singles for b in singles), default=0.0)
        spread_z = max((abs(a.height - b.height) for a in singles for b in singles), default=0.0)
        if not (model or spread_xy or spread_z):
            return est
        note = est.notes
        if spread_xy > 0.003 or spread_z > 0.003:
            note += (f"; the cameras' depth disagrees by {1000 * spread_xy:.0f} mm in xy and {1000 * spread_z:.0f} mm "
                     "in height (camera models): uncertainty raised")
        return replace(est, notes=note, sigma_xy=float(np.sqrt(est.sigma_xy ** 2 + model ** 2 + (spread_xy / 2) ** 2)),
                       sigma_top=float(np.sqrt(est.sigma_top ** 2 + model ** 2 + (spread_z / 2) ** 2)))

    def _model_px(self, tips_offset_px: float) -> float:
        """How far (px, one sigma) a wrist camera's model may be off near the object after the fingertips' correction:
        a share of the offset they measured (a shift corrects the fingertips' plane only; a turned or raised mount
        leaves an error elsewhere that grows with it), or `model_px_unchecked` when they were not seen."""
        if not math.isfinite(tips_offset_px):
            return self.config.model_px_unchecked
        if tips_offset_px < CORRECT_FROM_PX:
            return 0.0
        return self.config.model_px_share * tips_offset_px

    def _measure_as_modelled(
        self,
        obs: Observation,
        text: str,
        primary: str,
        inst: Instance,
        n: int,
        allowed: list[str],
        min_score: float,
    ) -> Located:
        mask = np.asarray(inst.mask, dtype=bool)
        if self._touches_border(mask):
            return self._not_found(
                obs, text, primary, f"the {text!r} instance touches the border of {primary} (partly out of view)", n
            )
        if primary != HEAD and np.nonzero(mask.any(axis=1))[0].max() >= self.config.wrist_mask_bottom * mask.shape[0]:
            return self._not_found(
                obs, text, primary, f"the {text!r} instance in {primary} reaches the gripper's part of the image", n
            )
        table_z = self.station.table.top_z
        cam = self.camera(obs, primary)
        views: dict[str, np.ndarray] = {primary: mask}
        notes: list[str] = []
        est: Estimate | None = None
        # A first estimate from the primary camera alone, to match the object in the other views.
        if primary in obs.depth:
            est = depth_estimate(self.config, [(cam, mask, obs.depth[primary])], table_z)
        if est is None:
            est = self._mask_estimate(obs, {primary: mask})
        if est is None:
            return self._not_found(obs, text, primary, f"the {text!r} mask in {primary} gives no table footprint", n)
        for other in allowed:
            if other == primary:
                continue
            m = self._match(obs, other, text, min_score, est)
            if isinstance(m, str):
                if m:
                    notes.append(m)
                continue
            views[other] = m
        with_depth = [name for name in views if name in obs.depth]
        method = ""
        if with_depth:
            clouds = [(self.camera(obs, c), views[c], obs.depth[c]) for c in with_depth]
            d_est = depth_estimate(self.config, clouds, table_z)
            palm = self._holding_palm(obs, d_est, table_z) if d_est is not None else None
            if palm is not None:
                below = depth_estimate(self.config, clouds, table_z, max_z=palm)
                if below is not None:
                    d_est = replace(below, notes=below.notes + "; points above the holding gripper's palm left out")
            if d_est is not None:
                d_est = self._with_depth_model_error(obs, d_est, clouds, table_z, palm)
                est, method, used = d_est, "depth", with_depth
                top = np.array([est.xy[0], est.xy[1], table_z + est.height])
                mid = top - np.array([0.0, 0.0, est.height / 2])
                if self._held(obs, top, est.height)[0] or any(
                    self._hidden_by_arm(obs, self.camera(obs, c), views[c], mid) for c in with_depth
                ):
                    # An arm may hide part of its top from the depth cameras: the centre comes from a fit of the
                    # masks (which leaves out what the arms may hide), the top's height from depth.
                    # Started from the masks' own estimate too: the depth points of a partly hidden top can start
                    # the fit in another valley (a cylinder 1 cm off where the masks fit a box within 1 mm).
                    fitted = self._fit_estimate(obs, text, min_score, primary, mask, est, allowed,
                                                also_from=self._mask_estimate(obs, {primary: mask}))
                    if fitted is not None and "not quite a" in fitted[0].notes and "held by the" not in fitted[0].notes:
                        # The solid does not explain the masks (a handle, a neck): its centre is no better than the
                        # depth points'; keep those, no surer than the two agree.
                        gap = float(np.linalg.norm(fitted[0].xy - est.xy))
                        est = replace(est, sigma_xy=max(est.sigma_xy, 0.002, gap / 2),
                                      notes=est.notes + f"; an arm may hide part of its top (the masks' centre is "
                                      f"{1000 * gap:.0f} mm away)")
                    elif fitted is not None:
                        # Where depth saw only a side face, the masks' fit (of the same hidden views) is no surer.
                        side_only = est.sigma_xy if SIDE_ONLY_NOTE in est.notes else 0.0
                        est = replace(est, xy=fitted[0].xy, sigma_xy=max(fitted[0].sigma_xy, 0.002, side_only),
                                      notes=est.notes + "; centre from the masks (an arm may hide part of its top)")
                    else:
                        est = replace(est, sigma_xy=max(0.02, max(est.length, est.width) / 2),
                                      notes=est.notes + "; an arm may hide part of its top: centre uncertain")
        if not method:
            seen: list[str] = []
            fitted = self._fit_estimate(obs, text, min_score, primary, mask, est, allowed, slivers_seen=seen)
            if fitted is None and seen:
                # The views that are not slivers do not fit: the slivers too (less sure, as their use says).
                fitted = self._fit_estimate(obs, text, min_score, primary, mask, est, allowed, with_slivers=True)
            if fitted is not None:
                est, used, method, views = fitted
                notes = [n for n in notes if not any(n.startswith(f"{c} not used") for c in used)]
        if not method:
            m_est = self._mask_estimate(obs, views) if len(views) > 1 else est
            if m_est is None:
                m_est, views = est, {primary: mask}
            est, used = m_est, list(views)
            first = "head" if primary == HEAD else "wrist"
            method = "head+wrist" if HEAD in used and len(used) > 1 else first
        if not est.sigma_xy and method != "depth":
            guess = np.array([est.xy[0], est.xy[1], table_z + est.height / 2])
            hidden = [c for c in used if self._hidden_by_arm(obs, self.camera(obs, c), views.get(c, mask), guess)]
            if hidden:
                est = replace(est, notes=est.notes + "; partly hidden by an arm in " + ", ".join(hidden)
                              + ": the hidden part is guessed, uncertainty raised")
        if method in ("head+wrist", "wrist") and not est.sigma_xy:
            est = self._top_face_footprint(obs, views, est, notes)
        elif method in ("head+wrist", "wrist") and not self._held(obs, self._top(est), est.height)[0]:
            # A fitted solid: its centre and top stand; footprint and heading from a steep view of its top face
            # where there is one (the fit's heading leans on the side faces, which a view from above hardly sees).
            # Not for a held box: the gripper hides its top face, and its width is the pads' distance.
            face_notes: list[str] = []
            face = self._top_face_footprint(obs, views, est, face_notes)
            notes += [n for n in face_notes if n.startswith("footprint")]
            est = replace(est, length=face.length, width=face.width, heading=face.heading)
        est = self._with_uncertainty(est, method)
        notes.insert(0, est.notes)
        top = self._top(est)
        held_by, offset = self._held(obs, top, est.height)
        if held_by:
            notes[0] = re.sub(r"rests on [^;]*", f"held by the {held_by} gripper", notes[0])
            notes.append(f"between the {held_by} gripper's fingers: tcp_offset is its top centre minus that TCP")
        return Located(
            found=True,
            text=text,
            xyz=[round(float(v), 4) for v in top],
            footprint=[round(est.length, 4), round(est.width, 4)],
            heading=round(est.heading, 4),
            height=round(est.height, 4),
            score=round(float(inst.score), 4),
            cameras=used,
            method=method,
            instances=n,
            reason="; ".join(x for x in notes if x),
            step=obs.step,
            uncertainty_xy_m=round(est.sigma_xy, 4),
            uncertainty_z_m=round(est.sigma_top, 4),
            outline=self._outline(obs, views, top),
            held_by=held_by,
            tcp_offset=offset,
        )

    def _outline(self, obs: Observation, views: dict[str, np.ndarray], top: FloatArray) -> list[list[float]]:
        """The object's outline seen from the steepest camera, cast on the plane of its top: [[x, y], ...]."""
        best: tuple[float, str] | None = None
        for name, m in views.items():
            rows = np.nonzero(m.any(axis=1))[0]
            if self._touches_border(m) or (name != HEAD and rows.max() >= self.config.wrist_mask_bottom * len(m)):
                continue  # cut by the image or by the gripper
            cam = self.camera(obs, name)
            rel = top - cam.position
            elevation = -rel[2] / max(float(np.linalg.norm(rel)), 1e-9)
            if best is None or elevation > best[0]:
                best = (elevation, name)
        if best is None:
            return []
        pts = mask_outline(views[best[1]])
        if len(pts) < 3:
            return []
        hull = cv2.convexHull(pts.astype(np.float32))
        poly = cv2.approxPolyDP(hull, 1.5, True).reshape(-1, 2).astype(float)
        world = self.camera(obs, best[1]).intersect_plane_z(poly, float(top[2]))
        world = world[np.all(np.isfinite(world), axis=1)]
        return [[round(float(x), 4), round(float(y), 4)] for x, y, _ in world]

    def _holder(
        self, obs: Observation, ray: tuple[FloatArray, FloatArray]
    ) -> tuple[str, FloatArray, FloatArray, float] | None:
        """The arm that seems to hold the object seen along `ray`: its gripper closed on something (value between
        0.03 and 0.9), pointing down, its TCP within 4 cm of the ray. (arm, TCP, closing axis, pad distance)."""
        origin, d = ray
        for arm, tcp, axis, width in self._holding(obs):
            rel = tcp - origin
            if float(np.linalg.norm(rel - (rel @ d) * d)) <= 0.04:
                return arm, tcp, axis, width
        return None

    def _holding(self, obs: Observation) -> list[tuple[str, FloatArray, FloatArray, float]]:
        """The arms whose gripper is closed on something (value between 0.03 and 0.9) and points down: (arm, TCP,
        closing axis, pad distance)."""
        g = self.station.x5.gripper
        out = []
        for arm in self.station.arms:
            value = float(obs.gripper[arm])
            if not 0.03 < value < 0.9:
                continue
            pose = obs.ee_pose[arm]
            rot = quat_to_matrix(pose[3:])
            if rot[2, 0] > -0.9:
                continue  # not pointing down
            tcp = pose[:3] + self.station.x5.tcp_offset * rot[:, 0]
            # Blocked fingers: the rate limiter keeps the command `rate_limit` below the measured opening.
            width = 2.0 * g.finger_from_value(min(1.0, value + g.rate_limit))
            out.append((arm, tcp, rot[:, 1], width))
        return out

    def _measure_held(self, obs: Observation, text: str, min_score: float, allowed: list[str]) -> Located | list[str]:
        """An object between a holding gripper's pads that no lead camera measures (cut by the head image's border,
        reaching into its own wrist camera's gripper part): a box centred between the pads, as wide as they are
        apart, fitted to every camera's mask of it near the TCP. Cut masks count by their seen edges only (the
        image border and the gripper's part of a wrist image say nothing). Else why each holding gripper's object
        that a camera sees is not measured (empty when no camera sees one there)."""
        table_z = self.station.table.top_z
        unmeasured: list[str] = []
        for arm, tcp, axis, width in self._holding(obs):
            views: list[View] = []
            used: list[str] = []
            for name in allowed:
                cam = self.camera(obs, name)
                uv, dist = cam.project(tcp)
                if not (float(dist) > 0.02 and bool(cam.in_image(uv, margin=-0.5 * cam.intrinsics.width))):
                    continue
                found = self._instances(obs, name, text, min_score)
                if isinstance(found, str) or not found:
                    continue
                near = cam.intrinsics.fx * 0.06 / float(dist)  # within 6 cm of the TCP
                best: tuple[float, np.ndarray] | None = None
                for inst in found:
                    m = np.asarray(inst.mask, dtype=bool)
                    rows, cols = np.nonzero(m)
                    gap = float(np.hypot(cols + 0.5 - uv[0], rows + 0.5 - uv[1]).min())
                    if gap <= near and (best is None or gap < best[0]):
                        best = (gap, m)
                if best is None:
                    continue
                own = self.station.cameras[name].arm == arm
                robot = self.robot_mask(obs, cam, float(dist) + 0.05, own_fingers=not own)
                robot = cv2.dilate(robot.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
                v = hull_view(cam, mask_outline(best[1]), robot)
                if v is not None:
                    views.append(v)
                    used.append(name)
            if not views:
                continue
            fit = fit_held_box(views, tcp, axis, width, table_z,
                               pulled=[self.station.cameras[n].arm != arm for n in used])
            if fit is None or fit.rms_px > self.config.fit_max_rms_px or fit.hidden_fraction > HELD_MAX_HIDDEN:
                why = "no box fits it" if fit is None else (
                    f"the box fits it badly (rms {fit.rms_px:.1f} px)" if fit.rms_px > self.config.fit_max_rms_px
                    else f"{100 * fit.hidden_fraction:.0f}% of its outline is hidden (by the fingers)")
                unmeasured.append(
                    f"the {text!r} instance between the {arm} gripper's pads (seen by {', '.join(used)}) is not "
                    f"measured: {why}; it sits centred between the pads along their closing line: move it where "
                    f"the head camera sees it (higher, nearer the table's middle) and locate again")
                continue
            # Model error of the held box (not quite centred, pads not quite parallel), and what one view cannot
            # tell: from its own wrist camera alone the top's height comes from its apparent size.
            extra = 0.002 if len(used) > 1 else 0.004
            sig_xy = math.hypot(fit.sigma_xy, extra, fit.hidden_fraction * max(fit.length, fit.width) / 2)
            sig_top = math.hypot(fit.sigma_top, extra, fit.hidden_fraction * (fit.top - fit.bottom))
            floor_xy, floor_z = self.config.uncertainty_floor_m["fit"]
            sig_xy, sig_top = max(sig_xy, floor_xy), max(sig_top, floor_z)
            top = np.array([fit.centre[0], fit.centre[1], fit.top])
            offset = [round(float(v), 4) for v in top - tcp]
            reason = (
                f"held by the {arm} gripper: no camera sees all of it (cut by an image border or by the gripper "
                f"in its own wrist camera); box fitted to what {', '.join(used)} see of it (rms {fit.rms_px:.1f} px), "
                f"assumed centred between the pads and as wide as they are apart ({1000 * width:.0f} mm); "
                f"between the {arm} gripper's fingers: tcp_offset is its top centre minus that TCP"
            )
            return Located(
                found=True,
                text=text,
                xyz=[round(float(v), 4) for v in top],
                footprint=[round(fit.length, 4), round(fit.width, 4)],
                heading=round(fit.heading, 4),
                height=round(fit.top - table_z, 4),
                score=0.0,
                cameras=used,
                method="head+wrist" if HEAD in used else "wrist",
                instances=1,
                reason=reason,
                step=obs.step,
                uncertainty_xy_m=round(sig_xy, 4),
                uncertainty_z_m=round(sig_top, 4),
                outline=[],
                held_by=arm,
                tcp_offset=offset,
            )
        return unmeasured

    def _top(self, est: Estimate) -> FloatArray:
        """The estimate's top centre in world coordinates."""
        return np.array([est.xy[0], est.xy[1], self.station.table.top_z + est.height])

    def _held(self, obs: Observation, top: FloatArray, height: float) -> tuple[str, list[float]]:
        """The arm holding the object (its gripper closed on something, `_holding`, with its TCP inside the object),
        and top centre minus that TCP. Open fingers around an object just released do not hold it."""
        for arm, tcp, _, _ in self._holding(obs):
            d = top - tcp
            if math.hypot(float(d[0]), float(d[1])) < 0.035 and -0.02 <= float(d[2]) <= height + 0.01:
                return arm, [round(float(v), 4) for v in d]
        return "", []

    def _fit_estimate(
        self,
        obs: Observation,
        text: str,
        min_score: float,
        primary: str,
        mask: np.ndarray,
        est: Estimate,
        allowed: list[str],
        with_slivers: bool = False,
        slivers_seen: list[str] | None = None,
        also_from: Estimate | None = None,
    ) -> tuple[Estimate, list[str], str, dict[str, np.ndarray]] | None:
        """Fit a box or cylinder on an unknown support to the masks of every camera that sees the object (see
        `primitives.solid_fit`), started from `est` (and `also_from`, when given); None when fewer than two cameras
        see it or the fit does not match the masks."""
        table_z = self.station.table.top_z
        cams = {primary: self.camera(obs, primary)}
        masks = {primary: mask}
        rays = {}
        slivers: list[tuple[str, Camera, np.ndarray, float]] = []  # views mostly outside their image
        sliver_used: list[str] = []
        cut: list[str] = []  # views used whose mask touches the image border
        for other in allowed:
            if other == primary:
                continue
            cam = self.camera(obs, other)
            m = self._epipolar_match(obs, cams[primary], mask, cam, other, text, min_score)
            if m is None:
                continue
            share = self._border_share(m)
            if share > self.config.max_border_share:
                # A sliver at the image's edge: most of the object is outside, and a wrist camera's model is least
                # sure there (a turned mount moves the corners most); it would place the support by a few pixels.
                slivers.append((other, cam, m, share))
                if slivers_seen is not None:
                    slivers_seen.append(other)
                if not with_slivers:
                    continue
                sliver_used.append(other)
            cams[other], masks[other] = cam, m
            if share > 0:
                cut.append(other)
        if len(masks) < 2 and slivers and not sliver_used:
            # No better second view: the largest sliver is used, with the uncertainty of a camera model off by
            # `model_px_sliver` there (the support it gives is no more than a hint).
            other, cam, m, _ = max(slivers, key=lambda t: int(t[2].sum()))
            cams[other], masks[other] = cam, m
            cut.append(other)
            sliver_used.append(other)
        refused = [f"{o} not used: the object shows at its image border only ({100 * sh:.0f}% of its outline on the "
                   "border)" for o, _, _, sh in slivers if o not in sliver_used]
        if len(masks) < 2:
            return None
        views: list[View] = []
        view_names: list[str] = []
        hidden_in: list[str] = []
        guess = np.array([est.xy[0], est.xy[1], table_z + est.height / 2])
        holder = self._holder(obs, mask_ray(cams[primary], mask))
        for name, m in masks.items():
            _, dist = cams[name].project(guess)
            # The holding gripper's own camera sees the held object between its pads, not behind them.
            own = holder is None or self.station.cameras[name].arm != holder[0]
            robot = self.robot_mask(obs, cams[name], float(dist) + 0.05, own_fingers=own)
            robot = cv2.dilate(robot.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
            v = hull_view(cams[name], mask_outline(m), robot, mask=m)
            if v is not None:
                views.append(v)
                view_names.append(name)
                rays[name] = mask_ray(cams[name], m)
                if (cv2.dilate(m.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool) & robot).any():
                    hidden_in.append(name)
        if len(views) < 2:
            return None
        centre = closest_point(list(rays.values()))
        fit = None
        if holder is not None:
            # Between a gripper's closed pads: a box centred there, as wide as the pads are apart.
            own_view = [self.station.cameras[n].arm == holder[0] for n in view_names]
            fit = fit_held_box(views, holder[1], holder[2], holder[3], table_z, pulled=[not o for o in own_view])
            # The fingers and the gripper hide much of a held object: a larger hidden share is accepted (the fit has
            # fewer unknowns, and the stated uncertainty grows with the hidden share below).
            if fit is not None and (fit.rms_px > self.config.fit_max_rms_px or fit.hidden_fraction > 0.75):
                fit = None
        if fit is None:
            holder = None
            starts: list[FitStart] = [(e.xy, table_z, table_z + e.height, e.heading, (e.length, e.width))
                                 for e in (est, also_from) if e is not None]
            if centre is not None and centre[2] > table_z:
                h = max(est.height, 0.02)
                starts.append((centre[:2], max(table_z, centre[2] - h / 2), centre[2] + h / 2))
            fit = fit_solid(views, starts, est.heading, (est.length, est.width), table_z)
        if fit is None or fit.rms_px > self.config.fit_max_rms_px or (fit.hidden_fraction > 0.5 and holder is None):
            return None
        neck = fit_neck(views, fit) if holder is None else None
        if neck is not None:
            fit = neck[0]
        support = fit.bottom - table_z
        # The cameras' model errors move the fitted solid: up and down above all, which the residuals do not show.
        model_px = [(self.config.model_px_head if n == HEAD else self._view_model_px.get(n, 0.0))
                    + (self.config.model_px_cut if n in cut else 0.0)
                    + (self.config.model_px_sliver if n in sliver_used else 0.0) for n in view_names]
        m_xy, m_top, m_bottom = fit.model_sigma(model_px)
        sig_bottom = math.hypot(fit.sigma_bottom, m_bottom)
        if support < 0.004 and support + 2 * sig_bottom < 0.01:
            rests = "rests on the table"
        elif support - 2 * sig_bottom >= 0.004:
            rests = f"rests on something {1000 * support:.0f} mm above the table (another object or a gripper)"
        else:
            worst = "on the table" if support < 0.004 else f"{1000 * support:.0f} mm above the table"
            rests = (f"support uncertain: {worst}, +-{1000 * 2 * sig_bottom:.0f} mm (camera model; on the table "
                     f"or on something up to {1000 * (support + 2 * sig_bottom):.0f} mm high)")
        # A sliver decides nothing: the result may be as far off as the lead camera's table-plane estimate is from it.
        sliver_gap = (0.0, 0.0)
        if sliver_used and holder is None:
            sliver_gap = (float(np.linalg.norm(fit.centre - est.xy)), abs(fit.top - (table_z + est.height)))
            if support >= 0.004:
                rests = (f"support uncertain: {1000 * support:.0f} mm above the table by a fit that needs "
                         f"{', '.join(sliver_used)}, which sees it at its image border only; on the table by the "
                         "table-plane estimate")
        if holder is not None:
            rests = (f"held by the {holder[0]} gripper (assumed centred between its pads, as wide as they are apart: "
                     f"{1000 * holder[3]:.0f} mm)")
        notes = [f"{fit.shape} fitted to the masks of {', '.join(masks)} (rms {fit.rms_px:.1f} px): {rests}"]
        edge_only = [n for n in view_names if n != HEAD] and all(n in cut for n in view_names if n != HEAD)
        if edge_only and holder is None and not (sliver_used and support >= 0.004):
            notes.append("the support and the height rest on " + ", ".join(n for n in view_names if n in cut)
                         + " where the object is cut by the image border: less sure (look_at it to measure it)")
        notes += refused
        if neck is not None:
            notes.append(f"a narrower part stands on it (a neck, a knob: {2000 * neck[1]:.0f} mm wide, fitted as a "
                         f"cylinder): the top is its top")
        sig_xy, sig_top = math.hypot(fit.sigma_xy, m_xy), math.hypot(fit.sigma_top, m_top)
        sig_xy, sig_top = max(sig_xy, sliver_gap[0]), max(sig_top, sliver_gap[1])
        if holder is None and fit.unseen:
            # A view bounds the solid only where no arm may hide its edge: beside a gripper much of it is free, and
            # the fit's own statistics do not see it (blocks beside a gripper came back 5-7 mm off their top at
            # 1.5 mm stated, 77-81% of the head view's edge under the arm's outline).
            free = max(0.0, max(fit.unseen) - 0.5)
            sig_top = math.hypot(sig_top, self.config.unseen_top_share * free * (fit.top - fit.bottom))
        if fit.rms_px > 0.5:
            # Silhouettes the solid does not explain (a neck, a handle, a dome, a cup's faceted wall): the top is less
            # sure (a mug fitted at 0.7 px was 5 mm low); named from 0.8 px.
            if fit.rms_px > 0.8:
                notes.append(f"its shape is not quite a {fit.shape} (rms {fit.rms_px:.1f} px): top and centre less sure")
            mismatch = (fit.rms_px - 0.5) * (fit.top - fit.bottom)
            sig_top = math.hypot(sig_top, 0.3 * mismatch)
            sig_xy = math.hypot(sig_xy, 0.1 * mismatch + 0.1 * (fit.rms_px - 0.5) * max(fit.length, fit.width))
        # (Fits over 0.8 px already carry the mismatch above. A neck or a knob on a round body, a dome, may stand
        # where no view from the side sees it: a bottle's neck under the looking gripper in the head image.)
        round_ish = fit.shape == "cylinder" and fit.rms_px <= 0.8 and holder is None and neck is None
        hidden_top = self._top_hidden(views, fit) if round_ish else []
        if hidden_top:
            # No view from the side sees the top of a body that is not quite a cylinder: only the steep views place
            # it, assuming straight sides (a dome, a knob on top would be missed).
            notes.append("its top is hidden by an arm in " + ", ".join(hidden_top)
                         + ": the height assumes straight sides as seen from above (a neck, a knob or a dome on top "
                         "would be missed: look from the side to see it), uncertainty raised")
            sig_top = math.hypot(sig_top, fit.top - fit.bottom)
        if (fit.shape == "cylinder" and holder is None and neck is None and not hidden_top
                and points_above(views, fit) >= NECK_POINTS):
            # Something the cylinder does not model sticks out above it in a side view (a dome, a knob) and no
            # narrower part explained it: the top may be higher by up to about the body's radius.
            notes.append("its outline sticks out above the fitted cylinder (a dome or a knob on top?): the top may be "
                         f"up to {1000 * fit.length / 2:.0f} mm higher, uncertainty raised")
            sig_top = math.hypot(sig_top, 0.6 * fit.length)
        if fit.left_out:
            notes.append(f"{100 * fit.left_out:.0f}% of its outline sticks out of the {fit.shape} (a handle, a spout?) "
                         "and was left out")
        if hidden_in:
            notes.append("an arm may hide part of it in " + ", ".join(hidden_in) + " (those parts are not used)")
        if fit.hidden_fraction > 0.1:
            notes.append(f"{100 * fit.hidden_fraction:.0f}% of its outline hidden by something in front "
                         "(the hidden part is guessed: uncertainty raised)")
            # What is hidden is not measured: the silhouette may extend that far into it.
            sig_xy = math.hypot(sig_xy, fit.hidden_fraction * max(fit.length, fit.width) / 2)
            sig_top = math.hypot(sig_top, fit.hidden_fraction * (fit.top - fit.bottom))
        if holder is not None:
            # Model error of the held box: not quite centred between the pads, pads not quite parallel.
            sig_xy, sig_top = math.hypot(sig_xy, 0.002), math.hypot(sig_top, 0.002)
        used = list(masks)
        method = "head+wrist" if HEAD in used else "wrist"
        out = Estimate(fit.centre, fit.top - table_z, fit.length, fit.width, fit.heading, "; ".join(notes),
                        sigma_xy=sig_xy, sigma_top=sig_top)
        return out, used, method, masks

    def _top_hidden(self, views: Sequence[View], fit: SolidFit) -> list[str]:
        """The cameras seeing the object from the side (under 66 deg elevation: the head camera at up to 62 deg, not a
        wrist camera after look_at at 70) when an arm may hide the top of the fitted solid in every one of them (over
        30 % of its top outline under the arms' silhouettes); else []."""
        if fit.shape == "cylinder":
            ang = np.linspace(0.0, 2 * math.pi, 16, endpoint=False)
            ring = np.stack([np.cos(ang), np.sin(ang)], axis=-1) * fit.length / 2
        else:
            c, s = math.cos(fit.heading), math.sin(fit.heading)
            ring = np.array([[a * fit.length / 2, b * fit.width / 2] for a, b in ((1, 1), (1, -1), (-1, -1), (-1, 1))])
            ring = ring @ np.array([[c, s], [-s, c]])
        top = np.column_stack([ring + fit.centre, np.full(len(ring), fit.top)])
        side, hidden = [], []
        for v in views:
            rel = np.array([fit.centre[0], fit.centre[1], fit.top]) - v.camera.position
            if -rel[2] / float(np.linalg.norm(rel)) > math.sin(math.radians(66.0)) or v.occluded is None:
                continue
            side.append(v.camera.name)
            uv, d = v.camera.project(top)
            k = v.camera.intrinsics
            ok = (d > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < k.width) & (uv[:, 1] >= 0) & (uv[:, 1] < k.height)
            if not ok.any():
                continue
            cols, rows = uv[ok, 0].astype(int), uv[ok, 1].astype(int)
            if float(np.mean(v.occluded[rows, cols])) > 0.3:
                hidden.append(v.camera.name)
        return hidden if side and len(hidden) == len(side) else []

    def _epipolar_match(
        self, obs: Observation, lead: Camera, lead_mask: np.ndarray, cam: Camera, name: str, text: str,
        min_score: float,
    ) -> np.ndarray | None:
        """The instance in another camera nearest the lead camera's ray through the object (None when none is)."""
        origin, direction = mask_ray(lead, lead_mask)
        table_z = self.station.table.top_z
        if direction[2] >= 0:
            return None
        t_table = (table_z - origin[2]) / direction[2]
        pts = origin + np.linspace(0.3, 1.0, 40)[:, None] * t_table * direction
        uv, d = cam.project(pts)
        ok = (d > 0.02) & np.all(np.isfinite(uv), axis=1)
        if ok.sum() < 2:
            return None
        uv = uv[ok]
        if not bool(np.any(cam.in_image(uv, margin=-20.0))):
            return None
        found = self._instances(obs, name, text, min_score)
        if isinstance(found, str) or not found:
            return None
        best: tuple[float, np.ndarray] | None = None
        for inst in found:
            m = np.asarray(inst.mask, dtype=bool)
            rows, cols = np.nonzero(m)
            c = np.array([cols.mean() + 0.5, rows.mean() + 0.5])
            radius = 0.5 * math.hypot(float(np.ptp(cols)), float(np.ptp(rows)))
            dist = float(np.min(np.hypot(*(uv - c).T))) - radius
            if dist <= self.config.match_px and (best is None or dist < best[0]):
                best = (dist, m)
        return None if best is None else best[1]

    def robot_mask(self, obs: Observation, cam: Camera, nearer_than: float, own_fingers: bool = True) -> np.ndarray:
        """Pixels of `cam`'s image where an arm (links, gripper body, fingers) may be, nearer than `nearer_than` m.

        Capsules around the arm's skeleton and the two fingers (generous radii): what lies under them may hide an
        object behind. A wrist camera's own arm contributes only its fingers (the rest is behind the camera), and
        not those when `own_fingers` is False (an object held between them).
        """
        k = cam.intrinsics
        out = np.zeros((k.height, k.width), np.uint8)
        capsules: list[tuple[FloatArray, FloatArray, float]] = []
        for arm in self.station.arms:
            q = obs.joints[arm]
            kin = self.kinematics.arm(arm)
            pts = kin.skeleton(q)
            rot = kin.fk(q, "tcp")[:3, :3]
            ee, tcp = pts[-2], pts[-1]
            tip = tcp + 0.035 * rot[:, 0]
            half = self.station.x5.gripper.finger_from_value(float(obs.gripper[arm])) + 0.008
            own = self.station.cameras[cam.name].arm == arm
            for side in (-1.0, 1.0) if own_fingers or not own else ():
                off = side * half * rot[:, 1]
                capsules.append((ee - 0.07 * rot[:, 0] + off, tip + off, 0.014))
            if self.station.cameras[cam.name].arm != arm:
                capsules += [(a, b, 0.045) for a, b in zip(pts[2:-2], pts[3:-1])]
        if self.station.cameras[cam.name].arm is not None:
            out[int(0.82 * k.height):] = 1  # the gripper's body fills the bottom of a wrist image
        for a, b, radius in capsules:
            seg = a + np.linspace(0.0, 1.0, 12)[:, None] * (b - a)
            uv, d = cam.project(seg)
            for (u, v), dist in zip(uv, d):
                if not (0.03 < dist < nearer_than) or not np.isfinite(u):
                    continue
                r_px = int(math.ceil(k.fx * radius / dist))
                if -r_px <= u <= k.width + r_px and -r_px <= v <= k.height + r_px:
                    cv2.circle(out, (int(round(u)), int(round(v))), r_px, 1, -1)
        return out.astype(bool)

    def _hidden_by_arm(self, obs: Observation, cam: Camera, mask: np.ndarray, est_xyz: FloatArray) -> bool:
        """Whether an arm nearer to the camera touches the object's mask in that image (it may hide a part)."""
        _, dist = cam.project(est_xyz)
        robot = self.robot_mask(obs, cam, float(dist) - 0.01)
        if not robot.any():
            return False
        grown = cv2.dilate(mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        return bool((grown & robot).any())

    def _with_uncertainty(self, est: Estimate, method: str) -> Estimate:
        """Floors of the stated uncertainty (what the bench measures as typical model errors); the outline methods
        get their method's floor, doubled when part of the object was hidden."""
        table = self.config.uncertainty_floor_m
        key = "fit" if est.sigma_xy else method
        fx, fz = table.get(key, table["head"])
        if key != "fit" and "partly hidden by an arm" in est.notes:
            # An arm over it: it may be held or rest on something, which the table-plane outline cannot tell.
            fx, fz = max(3 * fx, 0.02), max(3 * fz, 0.04)
        elif key != "fit" and "partly hidden" in est.notes:
            fx, fz = 2 * fx, 2 * fz
        if key == "head" and "round footprint" in est.notes:
            # A round body seen by the head camera alone: its top may be a dome or a flat disc's rim, and the circle
            # through its visible arc moves with the mask's edge (bench locate, oracle seed 0: a lemon 23 mm off and
            # a coaster's top 38 mm high at 5 and 10 mm stated).
            fx, fz = max(fx, est.length / 4.0), max(fz, est.length / 2.0)
        if key != "fit" and "square-footprint prior" in est.notes:
            # One face seen, its depth assumed: a board seen edge-on may be a third as deep (trial U: a 20.5 x 6 cm
            # board came back 20 x 20 cm, its centre 6 cm off at 1 cm stated). Twice this covers any depth up to
            # twice the width.
            fx = max(fx, est.length / 4.0)
        return replace(est, sigma_xy=max(est.sigma_xy, fx), sigma_top=max(est.sigma_top, fz))

    def _match(self, obs: Observation, cam_name: str, text: str, min_score: float, est: Estimate) -> np.ndarray | str:
        """The mask of the same object in another camera, or why it is not used ("" when simply not in view)."""
        cam = self.camera(obs, cam_name)
        table_z = self.station.table.top_z
        centre = np.array([est.xy[0], est.xy[1], table_z + est.height / 2.0])
        uv, depth = cam.project(centre)
        if not (depth > 0 and bool(cam.in_image(uv))):
            return ""
        rel = centre - cam.position
        elevation = math.degrees(math.asin(max(-1.0, min(1.0, -rel[2] / float(np.linalg.norm(rel))))))
        if cam_name != HEAD:
            if elevation < self.config.wrist_min_elevation_deg:
                return ""
            u0, u1, v1 = self.config.wrist_window
            k = cam.intrinsics
            if not (u0 * k.width <= uv[0] <= u1 * k.width and uv[1] <= v1 * k.height):
                return ""  # near the gripper or the image edge: look_at the object to use this camera
        found = self._instances(obs, cam_name, text, min_score)
        if isinstance(found, str):
            return f"{cam_name} not used: {found}"
        # Radius of the object's image: half its footprint diagonal at that distance, plus the match tolerance.
        radius = cam.intrinsics.fx * 0.5 * math.hypot(est.length, est.width) / float(depth) + self.config.match_px
        best: tuple[float, np.ndarray] | None = None
        for inst in found:
            m = np.asarray(inst.mask, dtype=bool)
            rows, cols = np.nonzero(m)
            d = np.hypot(cols + 0.5 - uv[0], rows + 0.5 - uv[1]).min()
            if d <= radius and (best is None or d < best[0]):
                best = (float(d), m)
        if best is None:
            return f"{cam_name} not used: no {text!r} instance near the head estimate"
        if self._touches_border(best[1]):
            return f"{cam_name} not used: the object is cut by its image border"
        if cam_name != HEAD and np.nonzero(best[1].any(axis=1))[0].max() >= self.config.wrist_mask_bottom * best[1].shape[0]:
            return f"{cam_name} not used: the object reaches the gripper's part of the image"
        return best[1]

    def _top_face_footprint(
        self, obs: Observation, views: dict[str, np.ndarray], est: Estimate, notes: list[str]
    ) -> Estimate:
        """Footprint and heading from a steep wrist view: its mask outline cast on the plane of the object's top.

        Seen from high above (look_at), the top face dominates the silhouette, so its outline on that plane is the
        footprint seen from above; a side view cannot tell length from depth. Sides are a little long toward the
        camera (side faces also show), which errs on the safe side for a grasp.
        """
        table_z = self.station.table.top_z
        top_z = table_z + est.height
        best: tuple[float, str] | None = None
        for name in views:
            if name == HEAD:
                continue
            cam = self.camera(obs, name)
            centre = np.array([est.xy[0], est.xy[1], top_z])
            rel = centre - cam.position
            elevation = math.degrees(math.asin(max(-1.0, min(1.0, -rel[2] / float(np.linalg.norm(rel))))))
            if elevation >= self.config.top_view_min_elevation_deg and (best is None or elevation > best[0]):
                best = (elevation, name)
        if best is None:
            return est
        name = best[1]
        outline = mask_outline(views[name])
        pts = self.camera(obs, name).intersect_plane_z(outline, top_z)[:, :2]
        pts = pts[np.all(np.isfinite(pts), axis=1)]
        if len(pts) < 5:
            return est
        (cx, cy), (w, h), angle = cv2.minAreaRect(pts.astype(np.float32))
        length, width, heading = rect_sides(w, h, angle)
        notes.append(f"footprint and heading from {name}'s view from above ({best[0]:.0f} deg)")
        # The outline's side toward the camera includes the side faces that show below the top: shift the centre
        # away from the camera by half of what they add (a box's near face, height h, adds h / tan(elevation)).
        away = np.array([cx, cy]) - self.camera(obs, name).position[:2]
        away /= max(float(np.linalg.norm(away)), 1e-9)
        centre = np.array([cx, cy]) + 0.5 * est.height / math.tan(math.radians(best[0])) * away
        if float(np.linalg.norm(centre - est.xy)) > self.config.top_view_override_m:
            # The outline model assumes straight sides or a round body; when the view from above disagrees by
            # this much (irregular or flat objects), the view from above is the better measure of the centre.
            notes.append(f"centre from {name}'s view from above (the outline estimate was "
                         f"{1000 * float(np.linalg.norm(centre - est.xy)):.0f} mm away)")
            return replace(est, xy=centre, length=length, width=width, heading=heading)
        return replace(est, length=length, width=width, heading=heading)

    def _mask_estimate(self, obs: Observation, views: dict[str, np.ndarray]) -> Estimate | None:
        table_z = self.station.table.top_z
        profiles = []
        for name, mask in views.items():
            p = table_profile(self.config, self.camera(obs, name), mask, table_z)
            if p is not None:
                profiles.append(p)
        if not profiles:
            return None
        return outline_estimate(self.config, profiles)
