"""Reference program for stack_blocks_by_language:
"stack the blocks from bottom to top in the order of{c0}, {c1}, and {c2}, then reset the robot arm." (400 steps)

The same way as stack_blocks: the stack goes up where the bottom block lies if the arm that brings the others
reaches above it, else in the free middle of the table near the robot, which both arms reach straight down; each
arm brings the blocks on its own side, so no block changes hands.
"""

# %% read the order and find the three blocks (head camera; a wrist camera for what the head cannot see well)
import re

order = re.search(r"order of\s*(\w+),\s*(\w+),\s*and\s+(\w+)", robo.instruction).groups()
names = [f"{c} block" for c in order]


def plausible(b):
    """A block's size, as far as its measurement is sure (a head-only height on a drawn station may be 3 cm off)."""
    sz, sxy = 2 * b.uncertainty_z_m, 2 * b.uncertainty_xy_m
    return b.found and max(b.footprint) < 0.07 + sxy and 0.02 < b.height + sz and b.height - sz < 0.07


def side(x):
    return "left" if x < 0 else "right"


blocks = [robo.locate(n, cameras=["cam_head"]) for n in names]
if not all(plausible(b) for b in blocks):
    # Something hides part of a block from the head camera (an arm at home, usually): look where it was seen,
    # or under the grippers at home, with a wrist camera.
    for i, b in enumerate(blocks):
        spots = [b.xyz] if b.found else [[-0.4, -0.2, robo.TABLE_Z], [0.4, -0.2, robo.TABLE_Z]]
        for xyz in spots:
            if plausible(blocks[i]):
                break
            robo.look_at(side(xyz[0]), [xyz[0], xyz[1], robo.TABLE_Z], distance=0.35)
            again = robo.locate(names[i])
            if plausible(again):
                blocks[i] = again
    robo.home()
for n, b in zip(names, blocks):
    print(f"{n}: top {b.xyz}, footprint {b.footprint}, height {b.height:.3f}, {b.method}")
assert all(plausible(b) for b in blocks), "not every block was found"
# The three blocks are the same size: their median height is surer than any one of them.
H = sorted(b.height for b in blocks)[1]
H_SIGMA = sorted(b.uncertainty_z_m for b in blocks)[1]  # how sure that height is (a head-only one: 1-2 cm)

# %% include _stacking

# %% build in order: bottom block where it lies when the others' arm reaches above it, else in the middle
def measure(arm, text, xy, z=TABLE + 0.03):
    """Look at a spot with the arm's wrist camera and re-measure the block `text` there (None if not seen)."""
    robo.look_at(arm, [xy[0], xy[1], z])
    b = robo.locate(text)
    return b if b.found and max(b.footprint) < 0.07 and math.dist(b.xyz[:2], xy[:2]) < 0.06 else None


base, rest = blocks[0], blocks[1:]
x, y = base.xyz[:2]
stays = math.dist([x, y], SITE) < 0.07 or (
    all(side(b.xyz[0]) == side(x) for b in rest) and 0.05 <= abs(x) <= 0.45 and y <= -0.08
)
todo = rest if stays else blocks
where, top_z = (base.xyz[:2], TABLE + H) if stays else (SITE, TABLE)
active = None
top_name = names[0] if stays else None  # the block on top of the stack
waiting = list(todo)  # blocks still where they were
for n, b in zip(names[3 - len(todo):], todo):
    waiting.remove(b)
    others = [o.xyz[:2] for o in waiting] + ([where] if top_z > TABLE else [])
    arm = side(b.xyz[0])
    if active is not None and active != arm:
        robo.home(active)
    active = arm
    if top_z > TABLE and top_name is not None:
        # Where the stack's top block really is decides where this one goes: measure it close up every time.
        near = measure(arm, top_name, where, top_z)
        if near is not None and near.method in ("head+wrist", "depth") and abs(near.xyz[2] - top_z) < 0.02:
            where, top_z = near.xyz[:2], near.xyz[2]
            print("stack top", top_name, "measured at", near.xyz)
    # Where the block sits exactly decides where it lands on the stack: look close up unless the head camera
    # saw a whole, square 4 cm footprint (then its centre is good to a few mm).
    whole = max(b.footprint) < 0.047 and min(b.footprint) > 0.037 and b.footprint[0] - b.footprint[1] < 0.005
    close_up = None if whole else measure(arm, n, b.xyz)
    released = place(arm, where, top_z) if pick(arm, close_up or b, others) else None
    if released is None:  # dropped or missed: look again close up and retry once
        again = measure(arm, n, b.xyz)
        if again is not None:
            released = place(arm, where, top_z) if pick(arm, again, others) else None
    print("placed" if released else "FAILED", n, "on", where, round(top_z, 3), "steps left", robo.state().steps_left)
    if released:
        top_z, top_name, where = released, n, placed_at["xy"]
robo.home()
print(robo.state().steps_left, "steps left")
