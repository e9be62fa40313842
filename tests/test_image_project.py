"""robo.image and robo.project against the twin's rendering: a projected object lands on its rendered mask to half
a pixel, and back_project inverts project to a millimetre, in all three cameras, with a block on the table and held
in a gripper (issue 17 items 3 and 4)."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Iterator  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from calibration import load_station  # noqa: E402
from calibration.transforms import quat_to_matrix  # noqa: E402
from primitives.robot import Robo  # noqa: E402
from pyrua_dojo.runtime.stepping import EnvBridge  # noqa: E402
from pyrua_dojo.twin.env import TwinConfig, TwinEnv  # noqa: E402

STATION = load_station()
CAMS = ("cam_head", "cam_left_wrist", "cam_right_wrist")


@pytest.fixture(scope="module")
def twin() -> Iterator[tuple[TwinEnv, Robo]]:
    env = TwinEnv(TwinConfig(segmentation=True, depth=True))
    env.reset("stack_blocks", 0, 0)
    bridge = EnvBridge(env)
    yield env, Robo(bridge, bridge.first_observation(), station=STATION, step_limit=env.step_lim)
    env.close()


def _masks(env: TwinEnv, robo: Robo, camera: str) -> dict[str, np.ndarray]:
    found = env.truth(0).mask_oracle.lookup(robo.image(camera)) or []
    return {m.name: np.asarray(m.mask, bool) for m in found}


def _corners(env: TwinEnv, label: str) -> np.ndarray:
    truth = env.truth(0)
    pose = truth.object_poses()[label]
    return truth.scene.objects[label].spec.bbox_vertices @ quat_to_matrix(pose[3:]).T + pose[:3]


def _check_camera(env: TwinEnv, robo: Robo, camera: str, label: str, sides: tuple[str, ...]) -> None:
    """The projected box's extreme u / v agree with its rendered mask's edges on the unhidden sides (0.5 px)."""
    mask = _masks(env, robo, camera)[label]
    rows, cols = np.nonzero(mask)
    uv = np.array(robo.project(camera, _corners(env, label).tolist()))
    edges = {"left": (uv[:, 0].min(), cols.min()), "right": (uv[:, 0].max(), cols.max() + 1),
             "top": (uv[:, 1].min(), rows.min()), "bottom": (uv[:, 1].max(), rows.max() + 1)}
    for side in sides:
        projected, rendered = edges[side]
        assert abs(projected - rendered) <= 0.55, (camera, side, projected, rendered)
    # back_project inverts project: the pixel of a true corner, cut at the corner's height, is that corner.
    corners = _corners(env, label)
    uvs = np.array(robo.project(camera, corners.tolist()))
    inside = (uvs[:, 0] > 0) & (uvs[:, 0] < mask.shape[1]) & (uvs[:, 1] > 0) & (uvs[:, 1] < mask.shape[0])
    assert inside.any()
    top = corners[inside][np.argmax(corners[inside][:, 2])]
    px = robo.project(camera, top.tolist())
    assert px is not None
    back = robo.back_project(camera, px, z=float(top[2]))
    assert back is not None and np.linalg.norm(np.array(back) - top) < 0.001
    # With depth: the depth pixel under a point of the top face gives that point (within the pixel's footprint).
    depth = robo.image(camera, depth=True)
    assert depth.shape == mask.shape and depth.dtype == np.float32
    centre = _corners(env, label).mean(axis=0)
    centre[2] = top[2] - 1e-4
    u, v = robo.project(camera, centre.tolist())
    col, row = int(u), int(v)
    if mask[row, col]:
        got = robo.back_project(camera, [col + 0.5, row + 0.5])
        assert got is not None and abs(got[2] - centre[2]) < 0.001


def test_image_is_the_latest_rgb_and_depth(twin: tuple[TwinEnv, Robo]) -> None:
    env, robo = twin
    for cam in CAMS:
        img = robo.image(cam)
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
        img[:] = 0  # a copy: the observation is untouched
        assert robo.image(cam).any()
    with pytest.raises(ValueError):
        robo.image("cam_top")
    with pytest.raises(ValueError):
        robo.project("cam_head", [0.0, 0.0])
    assert robo.project("cam_head", [0.0, -2.0, 0.9]) is None  # behind the head camera


def test_project_agrees_with_the_rendering_on_the_table_and_in_the_gripper(twin: tuple[TwinEnv, Robo]) -> None:
    env, robo = twin
    b = env.truth(0).object_poses()["block_0"]
    _check_camera(env, robo, "cam_head", "block_0", ("left", "right", "top", "bottom"))
    assert robo.move_to("right", [b[0], b[1], b[2] + 0.12], yaw=0.0, path="joint").reached
    _check_camera(env, robo, "cam_right_wrist", "block_0", ("left", "right", "top"))
    robo.move_to("right", [b[0], b[1], b[2] + 0.07], yaw=0.0, path="joint")
    robo.move_to("right", [b[0], b[1], b[2] + 0.005], yaw=0.0)
    assert robo.close("right").held
    assert robo.move_to("right", [b[0], b[1], b[2] + 0.15]).reached
    # Held: the gripper hides the block's top edge from the head and its lower part from the wrist camera.
    _check_camera(env, robo, "cam_head", "block_0", ("left", "right", "bottom"))
    _check_camera(env, robo, "cam_right_wrist", "block_0", ("left", "right", "top"))
    # The left wrist camera, pointed at the held block: the right gripper hides all but its bottom.
    held = _corners(env, "block_0").mean(axis=0)
    assert robo.look_at("left", held.tolist(), distance=0.3).planned
    assert "block_0" in _masks(env, robo, "cam_left_wrist")
    _check_camera(env, robo, "cam_left_wrist", "block_0", ("bottom",))


@pytest.mark.parametrize("camera", CAMS)
def test_camera_meta_axes_say_which_way_the_image_grows(twin: tuple[TwinEnv, Robo], camera: str) -> None:
    """right / down are the world directions of +u / +v: a point moved along them projects right of / below centre."""
    _, robo = twin
    meta = robo.camera_meta(camera)
    f, r, d = (np.array(v) for v in (meta.forward, meta.right, meta.down))
    assert np.allclose(np.cross(r, d), f, atol=1e-3)  # a right-handed camera frame, z forward
    ahead = np.array(meta.position) + 0.5 * f
    (u0, v0), (u1, v1), (u2, v2) = robo.project(camera, [ahead.tolist(), (ahead + 0.05 * r).tolist(),
                                                         (ahead + 0.05 * d).tolist()])
    assert abs(u0 - meta.cx) < 1 and abs(v0 - meta.cy) < 1
    assert u1 > u0 + 10 and abs(v1 - v0) < 1
    assert v2 > v0 + 10 and abs(u2 - u0) < 1
