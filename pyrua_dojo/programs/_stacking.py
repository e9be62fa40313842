"""Helpers the stacking programs share (stack_blocks and stack_blocks_by_language include this file's cells).

They are cells like any other: `robo`, `math`, the block height `H` and its uncertainty `H_SIGMA` come from the
program's earlier cells.
"""

# %% helpers: move over-then-down, pick (leaning out when far), place with a guarded descent
TABLE = robo.TABLE_Z
BASE = {"left": (-0.3, -0.45), "right": (0.3, -0.45)}
SITE = [0.0, -0.27]  # free middle of the table, near the robot: both arms reach it straight down, high
GRASP_Z = max(TABLE + H / 2, TABLE + 0.029)  # grasp height: the fingertips stay clear of the table
grip = {}  # arm -> (yaw, tilt, lean heading) of its current grasp
widths = []  # the finger opening of every block held so far
placed_at = {}  # "xy": where the last block was set down (a first block moves over where something is under SITE)
SITE_ALTERNATIVES = ([0.0, 0.06], [0.07, 0.0], [-0.07, 0.0])  # offsets from a site found occupied


def side(x):
    return "left" if x < 0 else "right"


def size():
    """The blocks' size: the lower median of the finger openings on those held so far and the height seen from afar
    (one grip on a block turned between the pads reads wide: seed 23 layout 4 read 60 mm on a 50 mm cube, and every
    later grip was put back as something else); that height only while it is sure (H_SIGMA within 5 mm) or nothing
    was held yet."""
    sizes = widths + [H] if H_SIGMA <= 0.005 or not widths else widths
    return sorted(sizes)[(len(sizes) - 1) // 2]


def alike(width):
    """Whether a grip this wide holds one of the blocks, not a neighbour: within 6 mm of their size; at first within
    what the measured height allows (2.5 sigma, at least 16 mm: seed 26 layout 1 on a drawn station read 28 mm from
    the head for 50 mm cubes and put every grip back), and narrower than a first grip that may have read a block
    turned between the pads."""
    near_h = abs(width - H) <= max(0.016, 2.5 * H_SIGMA)
    return near_h if not widths else abs(width - size()) <= 0.006 or (width < size() and near_h)


def tall():
    """The blocks' height for clearances: the larger of the grip's and the head's (too low leaves fingers in a block)."""
    return max(H, size())


def outward(arm, xy):
    """Heading (rad) from the arm's base toward xy: the direction a tilted gripper leans."""
    return math.atan2(xy[1] - BASE[arm][1], xy[0] - BASE[arm][0])


def off_segment(p, a, b):
    """Horizontal distance from point p to the segment a-b."""
    ax, ay, bx, by = a[0], a[1], b[0], b[1]
    L2 = (bx - ax) ** 2 + (by - ay) ** 2
    t = 0.0 if L2 == 0 else max(0.0, min(1.0, ((p[0] - ax) * (bx - ax) + (p[1] - ay) * (by - ay)) / L2))
    return math.dist(p[:2], [ax + t * (bx - ax), ay + t * (by - ay)])


def go(arm, xyz, **kw):
    """Move over, then down: up first (where the arm cannot rise that high, up along a line to a point at that
    height beside the goal), across in joint space at the higher of the two heights (fast; nothing is below that
    height), then straight down.
    """
    here = robo.arm(arm).tcp
    high = max(here[2], xyz[2])
    if high > here[2] + 1e-3 and not robo.move_to(arm, [here[0], here[1], high], path="line").reached:
        # Too far out to rise that high here: rise on the way instead, along a line to a point at that height beside
        # the goal (clear of what stands there), so that a held block passes over the stack, never into it.
        r = H + 0.06
        best = None
        for k in range(16):
            w = [xyz[0] + r * math.cos(k * math.pi / 8), xyz[1] + r * math.sin(k * math.pi / 8), high]
            if off_segment(xyz, here, w) < r - 0.01 or not robo.check_move(arm, w, path="line", **kw).feasible:
                continue
            if best is None or math.dist(here[:2], w[:2]) < math.dist(here[:2], best[:2]):
                best = w
        if best is not None:
            robo.move_to(arm, best, path="line", **kw)
    z = high  # across as high as the reach allows there (an unplannable move costs nothing: try lower)
    while True:
        m = robo.move_to(arm, [xyz[0], xyz[1], z], path="joint", **kw)
        if m.planned or z <= xyz[2] + 1e-3:
            break
        z = max(xyz[2], z - 0.02)
    if m.planned and m.tcp[2] > xyz[2] + 1e-3:
        m = robo.move_to(arm, xyz, path="line", **kw)
    return m


def pick(arm, b, others=()):
    """Grasp block b from above and lift it; True if held. Closes across the faces whose sides are clearer of
    the `others` (xy of blocks nearby), so that no finger comes down on a neighbour."""
    x, y, _ = b.xyz
    above = TABLE + H + 0.03  # fingertips (2.5 cm below the TCP) clear of the block's top
    robo.open(arm)
    # A cube can be held across either pair of faces. Straight down first; leaning out reaches farther, and then
    # the fingers close across the lean (so that the same lean can set it down upright).
    lean = outward(arm, [x, y])
    faces = [b.heading + k * math.pi / 2 for k in range(2)]

    def room(a):
        """Distance from the two fingers (5 cm either side along heading a) to the nearest other block."""
        fingers = [[x + s * 0.05 * math.cos(a), y + s * 0.05 * math.sin(a)] for s in (1, -1)]
        return min([math.dist(f, o) for f in fingers for o in others] or [1.0])

    options = []
    for tilt in (0.0, 0.35, 0.6):
        if tilt == 0:
            yaws = sorted(faces, key=room, reverse=True)
        else:
            yaws = sorted(faces, key=lambda a: abs(math.sin(a - lean)))
        options += [(yaw, tilt) for yaw in yaws]
    for yaw, tilt in options:
        if not go(arm, [x, y, above], yaw=yaw, tilt=tilt).planned:
            continue
        down = robo.move_to(arm, [x, y, GRASP_Z], yaw=yaw, tilt=tilt)
        if not down.reached:
            # A finger came down on something (a neighbour, or the block's own edge, which may have moved it): lift,
            # measure the block again close up, and try the other faces there.
            robo.move_to(arm, [x, y, above])
            robo.look_at(arm, [x, y, TABLE + 0.03])
            seen = [o for o in robo.locate_all("block") if o.found and max(o.footprint) < 0.09]
            seen = [o for o in seen if math.dist(o.xyz[:2], [x, y]) < 0.04]
            if seen:
                x, y = min(seen, key=lambda o: math.dist(o.xyz[:2], [x, y])).xyz[:2]
            continue
        g = robo.close(arm)
        # The blocks are alike: one that closes the fingers much narrower or wider than the blocks held so far (than
        # the measured height, at first) is something else, a neighbour: put it back, try the other faces.
        if g.held and not alike(g.width_m):
            robo.open(arm)
            robo.move_to(arm, [x, y, above])
            continue
        robo.move_to(arm, [x, y, above + 0.01])
        if not g.held:
            robo.open(arm)
            return False
        a = robo.arm(arm).approach
        grip[arm] = (yaw, tilt, math.atan2(a[1], a[0]))
        widths.append(g.width_m)
        return True
    return False


def place(arm, xy, top_z):
    """Lower the held block onto the surface at height top_z below xy, release, lift clear. Returns the
    released block's top height, or None."""
    x, y = xy
    below = GRASP_Z - TABLE  # the held block's bottom below the TCP
    yaw, tilt, lean = grip[arm]
    released_top = top_z + tall()
    if tilt == 0:
        yaws = [yaw + k * math.pi / 2 for k in range(2)]  # a cube turned a quarter is the same cube
        clear = [x, y, released_top + 0.03]  # the TCP over the released block: fingertips 5 mm above its top
        if not any(robo.check_move(arm, clear, yaw=a, path="joint").feasible for a in yaws):
            # Too high to lift out straight up: the fingers will slide out along their pads instead, so close them
            # across y: they then slide out along x toward the arm's own side, away from the stack on the way home.
            yaws.sort(key=lambda a: abs(math.cos(a)))
    else:
        yaws = [yaw + outward(arm, xy) - lean]  # turn the whole grasp about the vertical: the block stays upright
    for margin in (0.02, 0.01):  # the held block's bottom this far above the surface, lower where out of reach
        for yaw in yaws:
            m = go(arm, [x, y, top_z + below + margin], yaw=yaw, tilt=tilt)
            if m.planned:
                break
        if m.planned:
            break
    if not m.planned:
        return None
    d = robo.descend(arm, z=top_z + below - 0.005, speed=0.08)  # deeper would push the block up in the grip
    if top_z <= TABLE + 1e-3 and d.stopped_by == "contact" and d.tcp[2] > top_z + below + 0.005:
        # Onto the table, yet something met the block well above it: an object no prompt named lies under the site.
        # Back up and set it down a little further along (the first block decides where the stack goes).
        robo.move_to(arm, [d.tcp[0], d.tcp[1], d.tcp[2] + 0.03])
        for dx, dy in SITE_ALTERNATIVES:
            x, y = xy[0] + dx, xy[1] + dy
            if not go(arm, [x, y, top_z + below + 0.02], yaw=robo.arm(arm).yaw, tilt=tilt).planned:
                continue
            d = robo.descend(arm, z=top_z + below - 0.005, speed=0.08)
            if not (d.stopped_by == "contact" and d.tcp[2] > top_z + below + 0.005):
                break
            robo.move_to(arm, [d.tcp[0], d.tcp[1], d.tcp[2] + 0.03])
        print("the site was occupied: set down at", [round(x, 3), round(y, 3)])
    placed_at["xy"] = [x, y]
    robo.open(arm)
    released_top = d.tcp[2] - below + tall()
    # The open fingers still surround the block: clear its top before moving sideways. Too high to reach? Then
    # slide out along the pads (across the closing line), toward the arm's own side first, and far enough that the
    # fingers are clear of the stack: going home from there does not sweep through it.
    if not robo.move_to(arm, [x, y, released_top + 0.03]).reached:
        robo.wait(5)  # let the fingers finish opening: they must not drag the block along
        a, h = robo.arm(arm).yaw, robo.arm(arm).tcp[2]
        out = 1 if arm == "right" else -1  # the arm's own side: +x for the right arm
        dist = tall() / 2 + 0.05  # the pads' far edges past the block's side
        for s in sorted((1, -1), key=lambda s: s * out * math.sin(a)):  # the sign whose slide goes that way first
            if robo.move_to(arm, [x - s * dist * math.sin(a), y + s * dist * math.cos(a), h]).planned:
                break
    return released_top
