"""Reference program for stack_blocks: "Stack the three blocks with different textures." (550 steps)

Written as an LLM would write it: look, plan where to build, then pick and place with a check after every step.
The stack goes up in the middle of the table near the robot, just in front of the area RoboDojo keeps clear of blocks,
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
    doubtful = [b.xyz for b in seen if not plausible(b)]
    hidden = [[-0.4, -0.2, robo.TABLE_Z], [0.4, -0.2, robo.TABLE_Z]]  # under the grippers at home
    for xyz in doubtful + hidden:
        if len(blocks) >= 3:
            break
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
# The three blocks are the same size (they look alike): their median height is surer than any one of them.
H = sorted(b.height for b in blocks)[1]
H_SIGMA = sorted(b.uncertainty_z_m for b in blocks)[1]  # how sure that height is (a head-only one: 1-2 cm)
print(f"block height {H:.3f}")

# %% include _stacking

# %% build: a block already near the site is the base; each arm brings the blocks on its side, then both go home
def measure(arm, xy, z=TABLE + 0.03, top=False):
    """Look at a spot with the arm's wrist camera and re-measure the block there (None if none); top=True: the
    highest block there (a stack's top, wherever it rests)."""
    robo.look_at(arm, [xy[0], xy[1], z])
    seen = [b for b in robo.locate_all("block") if b.found and max(b.footprint) < 0.09 and math.dist(b.xyz[:2], xy[:2]) < 0.06]
    if top:
        sure = [b for b in seen if b.method in ("head+wrist", "depth") and b.uncertainty_z_m < 0.004]
        return max(sure, key=lambda b: b.xyz[2]) if sure else None
    return min(seen, key=lambda b: math.dist(b.xyz[:2], xy[:2])) if seen else None


base = min(blocks, key=lambda b: math.dist(b.xyz[:2], SITE))
if math.dist(base.xyz[:2], SITE) > 0.07:
    base = None
# Blocks of one side one after the other, so each arm goes home once; the side with more blocks first.
rest = [b for b in blocks if b is not base]
first = max(("left", "right"), key=lambda s: sum(side(b.xyz[0]) == s for b in rest))
rest.sort(key=lambda b: side(b.xyz[0]) != first)
where, top_z = SITE, TABLE
if base is not None:
    where, top_z = base.xyz[:2], TABLE + H  # it stays where it is (measured close up below)
active = None
waiting = list(rest)  # blocks still where they were
for b in rest:
    waiting.remove(b)
    others = [o.xyz[:2] for o in waiting] + ([where] if top_z > TABLE else [])
    arm = side(b.xyz[0])
    if active is not None and active != arm:
        robo.home(active)
    active = arm
    if top_z > TABLE:
        # Where the stack's top really is decides where this block goes: measure it close up before every placement.
        near = measure(arm, where, top_z, top=True)
        if near is not None and abs(near.xyz[2] - top_z) < 0.02:
            where, top_z = near.xyz[:2], near.xyz[2]
            print("stack top measured at", near.xyz, f"+-{near.uncertainty_xy_m:.3f} / {near.uncertainty_z_m:.3f}")
    close_up = measure(arm, b.xyz)  # where the block sits exactly decides where it lands on the stack
    released = place(arm, where, top_z) if pick(arm, close_up or b, others) else None
    if released is None:  # dropped or missed: look again close up and retry once
        again = measure(arm, b.xyz)
        if again is not None:
            released = place(arm, where, top_z) if pick(arm, again, others) else None
    print("placed" if released else "FAILED", b.xyz, "on", where, round(top_z, 3), "steps left", robo.state().steps_left)
    if released:
        top_z, where = released, placed_at["xy"]
robo.home()
print(robo.state().steps_left, "steps left")
