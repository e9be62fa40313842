"""Reference program for stack_blocks: "Stack the three blocks with different textures." (550 steps)

Written as an LLM would write it: look, plan where to build, then pick and place with a check after every step.
The stack goes up in the free middle of the table near the robot (RoboDojo keeps that area clear of blocks),
which both arms reach pointing straight down up to about 17 cm: each arm brings the blocks on its own side, so
no block changes hands.
"""

# %% look at the blocks (head camera; the wrists at home see the table only past their own grippers)
def plausible(b):
    return b.found and max(b.footprint) < 0.09 and 0.02 < b.height < 0.09


seen = [b for b in robo.locate_all("block", cameras=["cam_head"]) if b.found]
blocks = [b for b in seen if plausible(b)]
if len(blocks) < 3:
    # Something hides part of a block from the head camera (an arm at home, usually): look at the doubtful ones
    # (or, if a block is missing altogether, at both sides) with a wrist camera.
    doubtful = [b.xyz for b in seen if not plausible(b)] or [[-0.36, -0.17, robo.TABLE_Z], [0.36, -0.17, robo.TABLE_Z]]
    for xyz in doubtful:
        arm = "left" if xyz[0] < 0 else "right"
        robo.look_at(arm, [xyz[0], xyz[1], robo.TABLE_Z], distance=0.35)
        for b in robo.locate_all("block"):
            if plausible(b) and all(math.dist(b.xyz[:2], o.xyz[:2]) > 0.04 for o in blocks):
                blocks.append(b)
    robo.home()
blocks = blocks[:3]
for b in blocks:
    print(f"top {b.xyz}, footprint {b.footprint}, height {b.height:.3f}, {b.method}")
assert len(blocks) == 3, f"expected 3 blocks, found {len(blocks)}"

# %% helpers: move over-then-down, measure close up, pick (leaning out when far), place with a guarded descent
TABLE = robo.TABLE_Z
BASE = {"left": (-0.3, -0.45), "right": (0.3, -0.45)}
SITE = [0.0, -0.27]  # free middle of the table, near the robot: both arms reach it straight down, high
grip = {}  # arm -> (yaw, tilt, lean heading) of its current grasp


def side(x):
    return "left" if x < 0 else "right"


def outward(arm, xy):
    """Heading (rad) from the arm's base toward xy: the direction a tilted gripper leans."""
    return math.atan2(xy[1] - BASE[arm][1], xy[0] - BASE[arm][0])


def go(arm, xyz, **kw):
    """Move over, then down: up first, across in joint space at the higher of the two heights (fast; nothing
    is below that height), then straight down.
    """
    here = robo.arm(arm).tcp
    high = max(here[2], xyz[2])
    if high > here[2] + 1e-3:
        robo.move_to(arm, [here[0], here[1], high], path="line")  # straight up first
    z = high  # across as high as the reach allows there (an unplannable move costs nothing: try lower)
    while True:
        m = robo.move_to(arm, [xyz[0], xyz[1], z], path="joint", **kw)
        if m.planned or z <= xyz[2] + 1e-3:
            break
        z = max(xyz[2], z - 0.02)
    if m.planned and m.tcp[2] > xyz[2] + 1e-3:
        m = robo.move_to(arm, xyz, path="line", **kw)
    return m


def measure(arm, xy, z=TABLE + 0.03):
    """Look at a spot with the arm's wrist camera and re-measure the block there (None if none)."""
    robo.look_at(arm, [xy[0], xy[1], z])
    seen = [b for b in robo.locate_all("block") if b.found and max(b.footprint) < 0.09 and math.dist(b.xyz[:2], xy[:2]) < 0.06]
    return min(seen, key=lambda b: math.dist(b.xyz[:2], xy[:2])) if seen else None


def pick(arm, b):
    """Grasp block b from above; returns the TCP depth below its top, or None."""
    x, y, z = b.xyz
    robo.open(arm)
    # A cube can be held across either pair of faces. Straight down first; leaning out reaches farther, and then
    # the fingers close across the lean (they lean along the pads) so that the same lean can set it down again.
    lean = outward(arm, [x, y])
    across = [b.heading + k * math.pi / 2 for k in range(2)]
    for tilt in (0.0, 0.35, 0.6):
        yaws = across if tilt == 0 else sorted(across, key=lambda a: abs(math.sin(a - lean)))
        for yaw in yaws:
            if go(arm, [x, y, z + 0.03], yaw=yaw, tilt=tilt).planned:
                break
        else:
            continue
        break
    else:
        return None
    grasp_z = max(z - b.height / 2, TABLE + 0.029)
    robo.move_to(arm, [x, y, grasp_z], yaw=yaw, tilt=tilt)
    g = robo.close(arm)
    robo.move_to(arm, [x, y, z + 0.04])
    if not g.held:
        robo.open(arm)
        return None
    a = robo.arm(arm).approach
    grip[arm] = (yaw, tilt, math.atan2(a[1], a[0]))
    return z - grasp_z


def place(arm, top_xyz, height, depth):
    """Lower the held block onto the surface whose top centre is top_xyz, release, lift clear of it."""
    x, y, z = top_xyz
    clearance = height - depth  # held block bottom below the TCP
    yaw, tilt, lean = grip[arm]
    if tilt == 0:
        yaws = [yaw + k * math.pi / 2 for k in range(2)]  # a cube turned a quarter is the same cube
    else:
        yaws = [yaw + outward(arm, [x, y]) - lean]  # turn the whole grasp about the vertical: the block stays upright
    for yaw in yaws:
        m = go(arm, [x, y, z + clearance + 0.015], yaw=yaw, tilt=tilt)
        if m.planned:
            break
    if not m.planned:
        return None
    d = robo.descend(arm, z=z + clearance - 0.008, speed=0.08)
    robo.open(arm)
    # The open fingers still surround the block: clear its top before moving sideways. Too high to reach? Then
    # slide out along the pads (across the closing line), whichever way the arm reaches.
    released_top = d.tcp[2] + depth
    if not robo.move_to(arm, [x, y, released_top + 0.03]).reached:
        a, h = robo.arm(arm).yaw, robo.arm(arm).tcp[2]
        for s in (1, -1):
            if robo.move_to(arm, [x - s * 0.07 * math.sin(a), y + s * 0.07 * math.cos(a), h]).planned:
                break
    return d


def bring(b, arm, onto):
    """Pick block b with `arm` (re-measured close up first) and set it on the surface whose top centre is onto."""
    close_up = measure(arm, b.xyz)
    if close_up is not None:
        b = close_up
    depth = pick(arm, b)
    if depth is None:
        return None
    return place(arm, onto, b.height, depth)

# %% build: a block already near the site is the base; each arm brings the blocks on its side, then both go home
base = min(blocks, key=lambda b: math.dist(b.xyz[:2], SITE))
if math.dist(base.xyz[:2], SITE) > 0.07:
    base = None
# Blocks of one side one after the other, so each arm goes home once; the side with more blocks first.
rest = [b for b in blocks if b is not base]
first = max(("left", "right"), key=lambda s: sum(side(b.xyz[0]) == s for b in rest))
rest.sort(key=lambda b: side(b.xyz[0]) != first)
top = list(base.xyz) if base is not None else [SITE[0], SITE[1], TABLE]
active, measured = None, False
for b in rest:
    arm = side(b.xyz[0])
    if active is not None and active != arm:
        robo.home(active)
    active = arm
    if top[2] > TABLE + 0.005 and not measured:
        measured = True
        # Where the base really is decides where the next blocks go.
        near = measure(arm, top, top[2])
        if near is not None and abs(near.xyz[2] - top[2]) < 0.03:
            top = list(near.xyz)
    d = bring(b, arm, top)
    print("placed" if d is not None else "FAILED", b.xyz, "on", top, "steps left", robo.state().steps_left)
    if d is not None:
        top = [top[0], top[1], top[2] + b.height] if top[2] > TABLE + 0.005 else [top[0], top[1], TABLE + b.height]
robo.home()
print(robo.state().steps_left, "steps left")
