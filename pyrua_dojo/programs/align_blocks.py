"""Reference program for align_blocks: "Use the set square to push the three blocks into a straight, aligned row,
then reset the robot arm." (200 steps; fails at once if a block is lifted more than 7 mm)

Written as an LLM would write it: look, choose a row, then slide each block that must move along the table in a
closed grip, turning the wrist on the way so that it arrives square to the row. Measured on the twin:
- A parallel grip does not square a cube it closes on askew (it stays within ~10 % of its angle; at 35 deg the pads
  wedge across two corners), so each grasp is aligned with the block's own faces first and the wrist does the turn.
- The head camera alone gets headings to about 3 deg (up to 15 deg); a wrist camera from just above the block to
  about 0.1 deg, so every block is measured again from above before the grasp (no extra motion: the wrists see it
  from the pose above the block).
- One block measured from above defines the row (its own axis, through its centre) and is not touched at all; the
  two others are slid onto that row, both arms at once (one after the other where one arm alone reaches them, the
  block below it first; the grippers' housings kept apart). The pads turn above the blocks, not on the way down
  (turning there lifts a neighbour), and open less where a neighbour is close. Only where no such row is clear (of
  the set square, the other blocks, the arms' reach and the wrist's range) is a row chosen freely and all three
  slide onto it (a block already on it and square to it within 4 deg stays).
- Arms in each other's way: two arms go above a pair of blocks in one motion (one after the other, the second meets
  the first), the pair at least 11.5 cm apart; an idle arm near the block the other goes to next parks above its
  home in the same motion. Transits stay at or above PRE_Z (lower, the open pads sweep a block along), and a slide
  ends only where the arm can rise 5 cm again (0.48 m from its base; further out it cannot, and the next transit
  from down there lifts a block).
The set square is not used: a top-down parallel grip holds it only across its long leg and the hypotenuse, and in
that wedge grip it slips and turns by 20 degrees or more when the wrist turns it (measured on the twin); a block
held in a closed grip is squared by the wrist instead. It is measured and kept clear of.
"""

# %% look: the three blocks and the set square (head camera; nothing moves)
import itertools

TABLE = robo.TABLE_Z
CUBE = 0.04  # the three blocks are identical 4 cm cubes
cam = np.array(robo.camera_meta("cam_head").position[:2])
HOME = {a: robo.arm(a).tcp for a in ("left", "right")}  # above there an idle arm is out of the other's way


def centre(b):
    """Centre of a block on the table. The head camera sees the front of a block only: a footprint narrower than
    the cube means its back part was hidden, so the centre is that much further from the camera."""
    c = np.array(b.xyz[:2], dtype=float)
    for ang, ext in ((b.heading, b.footprint[0]), (b.heading + math.pi / 2, b.footprint[1])):
        u = np.array([math.cos(ang), math.sin(ang)])
        if u @ (c - cam) < 0:
            u = -u
        c = c + u * max(0.0, CUBE - ext) / 2
    return c


seen = [b for b in robo.locate_all("block", cameras=["cam_head"]) if b.found and max(b.footprint) < 0.075 and b.height < 0.1]
square = robo.locate("set square", cameras=["cam_head"])
blocks = sorted(seen[:3], key=lambda b: b.xyz[0])  # left to right
assert len(blocks) == 3 and square.found, f"need three blocks and the set square, saw {len(seen)} blocks"
P = [centre(b) for b in blocks]
H = [b.heading for b in blocks]
for b, p in zip(blocks, P):
    print(f"block at {np.round(p, 3)}, footprint {b.footprint}, heading {math.degrees(b.heading):.0f} deg, {b.reason[:40]}")

# The set square as a triangle: its right angle at the front left, the long leg (14 cm) facing the robot.
h = square.heading % (math.pi / 2)
if h > math.pi / 4:
    h -= math.pi / 2
u, v = np.array([math.cos(h), math.sin(h)]), np.array([-math.sin(h), math.cos(h)])
e_u, e_v = square.footprint if abs(math.cos(square.heading - h)) > 0.7 else square.footprint[::-1]
corner = np.array(square.xyz[:2]) - u * e_u / 2 - v * e_v / 2
TRI = [corner, corner + u * e_u, corner + v * 0.08]
print("set square corners", [np.round(c, 3).tolist() for c in TRI])

# %% geometry for planning: footprints on the table as convex polygons
SPACING = 0.06  # centre to centre along the row
GRASP_Z = TABLE + 0.029  # TCP height of a grasp: the pads' lower edge 4 mm above the table
SPEED = 1.0  # of a slide
ABOVE_Z = TABLE + 0.10  # above a block: from there its wrist camera measures it (and often a neighbour)


def wrap(a, period=math.pi):
    """Angle a wrapped into (-period/2, period/2]."""
    return a - period * math.floor(a / period + 0.5)


def box(c, ang, a, b):
    """Rectangle centred at c, half-length a along heading ang, half-width b across."""
    u = np.array([math.cos(ang), math.sin(ang)])
    w = np.array([-u[1], u[0]])
    c = np.asarray(c, dtype=float)
    return [c + u * a + w * b, c - u * a + w * b, c - u * a - w * b, c + u * a - w * b]


def apart(A, B, gap):
    """Are convex polygons A and B at least gap apart (separated along one of their edge normals)?"""
    for poly in (A, B):
        for k in range(len(poly)):
            e = poly[(k + 1) % len(poly)] - poly[k]
            nrm = np.array([-e[1], e[0]]) / np.linalg.norm(e)
            pa, pb = [nrm @ p for p in A], [nrm @ p for p in B]
            if max(pa) + gap <= min(pb) or max(pb) + gap <= min(pa):
                return True
    return False


def clear(shapes, obstacles, gap=0.003):
    """Is every shape at least gap from every obstacle (the set square's edges are measured better: 3 mm)?"""
    return all(apart(s, o, 0.003 if o is TRI else gap) for s in shapes for o in obstacles)


OPEN_NEAR = 0.7  # a gripper opened this far (62 mm between the pads) still clears a squared-up cube by 11 mm a side
OPEN_TIGHT = 0.6  # 53 mm: 6 mm a side; only where a block sits that close to the set square or another block
RELEASE = 0.6  # how far a slid block is let go


def fingers(c, yaw, frac=1.0):
    """The two open pads around a TCP at c closing along yaw (88 mm * frac between them, 1 cm thick, 2.4 cm wide)."""
    u = np.array([math.cos(yaw), math.sin(yaw)])
    off = 0.044 * frac + 0.005
    return [box(c + u * off, yaw, 0.006, 0.013), box(c - u * off, yaw, 0.006, 0.013)]


def held(c, yaw):
    """A cube held square in closed pads, closing along yaw: the cube and the two pads on its faces."""
    u = np.array([math.cos(yaw), math.sin(yaw)])
    return [box(c, yaw, CUBE / 2, CUBE / 2), box(c + u * 0.025, yaw, 0.005, 0.013), box(c - u * 0.025, yaw, 0.005, 0.013)]


def housing(c, yaw):
    """The gripper's housing above a TCP at c (10 cm along the closing line, 4.8 cm across): two arms working at
    once must keep these apart."""
    return box(c, yaw, 0.05, 0.024)


def cube_at(p, heading):
    return box(p, heading, CUBE / 2 + 0.002, CUBE / 2 + 0.002)


def grasps(i, theta, arm, start, end, wrist_limit=math.radians(85)):
    """(grasp yaw, turn) pairs for block i: pads aligned with its faces, turned by the wrist while sliding so that
    they end across the row or along it (either squares the block to the row). The wrist's last joint turns
    +-90 deg from where the pads close across the arm's reach; turns that would pass its end are left out
    (measured: a line motion there takes 100 steps instead of 10). Cheapest first: the smaller turn, and the grasp closest to
    how the wrist is turned now, if it is above that block."""
    az0, az1 = (math.atan2(*(p - BASE[arm])[::-1]) for p in (start, end))
    now = robo.arm(arm).yaw if math.dist(robo.arm(arm).tcp[:2], start) < 0.01 else None
    out = []
    for k in range(2):
        a = wrap(H[i] + k * math.pi / 2)
        for final in (theta + math.pi / 2, theta):
            turn = wrap(final - a)
            rel0 = wrap(a - az0 - math.pi / 2)  # the last joint's angle, about
            if abs(rel0) <= wrist_limit and abs(rel0 + turn - wrap(az1 - az0)) <= wrist_limit:
                out.append((abs(turn) + (abs(wrap(a - now)) if now is not None else 0.0), a, turn))
    return [(a, turn) for _, a, turn in sorted(out)]


def slide_clear(start, end, yaw0, yaw1, obstacles, mate=None, margin=0.006):
    """How far the gripper may open to come down on a block at start (pads closing along yaw0), slide and turn it to
    end (yaw1) and release it, clear of the obstacles (and of `mate`, another slide (start, end, yaw0, yaw1) made at
    the same time); None if it cannot. Open pads come down with a wider margin (`margin`)."""
    frac = next((f for f in (1.0, OPEN_NEAR, OPEN_TIGHT) if clear(fingers(start, yaw0, f), obstacles, margin)), None)
    if frac is None or not clear(fingers(end, yaw1, RELEASE), obstacles, margin):
        return None
    for f in np.linspace(0.0, 1.0, 7):
        c, yaw = start + (end - start) * f, yaw0 + (yaw1 - yaw0) * f
        if f > 0 and not clear(held(c, yaw), obstacles):  # (where it starts, it is clear of the others as it is)
            return None
        if mate is not None:
            ms, me_, m0, m1 = mate
            mc, myaw = ms + (me_ - ms) * f, m0 + (m1 - m0) * f
            if not clear(held(c, yaw), held(mc, myaw)) or not apart(housing(c, yaw), housing(mc, myaw), 0.02):
                return None
    if mate is not None:  # both open at the end: neither's pads on the other's block
        if not clear(fingers(mate[1], mate[3], RELEASE), [cube_at(end, yaw1)]):
            return None
    return frac


BASE = {"left": np.array([-0.3, -0.45]), "right": np.array([0.3, -0.45])}
REACH = 0.50  # from an arm's base, top-down near the table (10 cm above it: 0.46; 0.49 fails)


REACH_UP = 0.48  # where an arm lets go of a block it must rise 5 cm again (at 0.49 it cannot)
REACH_ABOVE = 0.48  # where an arm starts a slide it must first get above the block, at PRE_Z (at 0.49 it cannot)


def reaches(arm, *points, reach=REACH):
    return all(np.linalg.norm(p - BASE[arm]) <= reach for p in points)


def arm_for(*points, ends=()):
    """The arm on the points' side that reaches all of them (and rises again at the ends), or None."""
    for arm in sorted(BASE, key=lambda a: sum(abs(p[0] - BASE[a][0]) for p in (*points, *ends))):
        if reaches(arm, *points, reach=REACH_ABOVE) and reaches(arm, *ends, reach=REACH_UP):
            return arm
    return None


def plan(theta, base, fixed, spacing=SPACING, tight=False, stays=True, wrist_limit=math.radians(85), order=None):
    """Slides that put the blocks in a row through `base` along heading theta. Block `fixed` keeps its place along
    the row (and, if `stays`, stays put altogether when base is its centre); the others go `spacing` apart from it (or further,
    where they already are, unless tight), in the order they are along the row now, or in `order` (tight). Returns
    [(block, start, end, grasp yaw, final yaw, arm, opening)] in the order they move (the first two together when
    they are different arms, left arm first), or None."""
    d = np.array([math.cos(theta), math.sin(theta)])
    s = [d @ (p - base) for p in P]
    tight = tight or order is not None
    order = order or sorted(range(3), key=lambda i: s[i])
    k = order.index(fixed)
    t = {fixed: s[fixed]}
    for j in range(k + 1, 3):
        t[order[j]] = t[order[j - 1]] + spacing if tight else max(s[order[j]], t[order[j - 1]] + spacing)
    for j in range(k - 1, -1, -1):
        t[order[j]] = t[order[j + 1]] - spacing if tight else min(s[order[j]], t[order[j + 1]] - spacing)
    target = {i: base + d * t[i] for i in range(3)}
    movers = sorted((i for i in range(3) if i != fixed), key=lambda i: P[i][0])
    if all(reaches(a, P[i], reach=REACH_ABOVE) and reaches(a, target[i], reach=REACH_UP)
           for a, i in zip(("left", "right"), movers)):
        arms = ["left", "right"]
    else:  # one arm reaches both: one after the other
        one = arm_for(*(P[i] for i in movers), ends=[target[i] for i in movers])
        if one is None:
            return None
        arms = [one, one]
    near = np.linalg.norm(target[fixed] - P[fixed]) < (0.004 if not stays else 0.003)
    if not stays and near and wrist[fixed] and abs(wrap(H[fixed] - theta, math.pi / 2)) < math.radians(4):
        near = stays = True  # on the row already and square to it within 4 deg (measured from above): left alone
    if not stays or not near:
        movers.append(fixed)  # last, alone
        arms.append(arm_for(P[fixed], ends=[target[fixed]]))
        if arms[-1] is None:
            return None
    def slides(movers, arms):
        where = {i: cube_at(P[i], H[i]) for i in range(3)}
        out = []
        for n, i in enumerate(movers):
            together = n == 1 and arms[0] != arms[1]
            mate = out[0][1:5] if together else None  # the second slides together with the first
            if together and math.dist(P[i], P[out[0][0]]) < 0.115:  # closer, the arms meet on the way down to them
                return None
            obstacles = [TRI] + [where[j] for j in range(3) if j != i and (mate is None or j != out[0][0])]
            if mate is not None:
                obstacles.append(cube_at(target[out[0][0]], theta))
            for yaw0, turn in grasps(i, theta, arms[n], P[i], target[i], wrist_limit):
                frac = slide_clear(P[i], target[i], yaw0, yaw0 + turn, obstacles, mate)
                if frac is not None:
                    out.append((i, P[i], target[i], yaw0, yaw0 + turn, arms[n], frac))
                    break
            else:
                return None
            if n == 0 and not (arms[0] != arms[1]):
                where[i] = cube_at(target[i], theta)
            if n == 1:
                where = {j: cube_at(target[j], theta) if j in (out[0][0], i) else where[j] for j in range(3)}
        return out

    orders = [movers]
    if len(arms) == 2 and arms[0] == arms[1] and LOOKED.get(arms[0]) == movers[1]:  # one arm: the block below it
        # first (no transit; with a third block to move as well, that order measured worse)
        orders.insert(0, [LOOKED[arms[0]]] + [i for i in movers if i != LOOKED[arms[0]]])
    if arms[0] == arms[1]:  # one arm: the other order, where a block is too close to grasp until its neighbour moves
        orders.append([movers[1], movers[0], *movers[2:]])
    return next((out for out in map(lambda m: slides(m, arms), orders) if out is not None), None)


def cost(moves):
    """Distance slid and turned, plus the transits: an arm that must go to a block other than the one below it."""
    c = sum(np.linalg.norm(e - s) + 0.03 * abs(y1 - y0) for _, s, e, y0, y1, *_ in moves)
    c += 0.1 * sum(f < 1 for *_, f in moves)  # opening less first: two steps
    if moves[0][5] == moves[1][5]:  # one arm, one after the other: a transit unless it starts at the block below it
        c += 0.5 + 0.3 * (LOOKED.get(moves[0][5]) != moves[0][0])
    else:
        c += 0.3 * (sorted(i for i, *_ in moves[:2]) != sorted(LOOKED.values()))
    return c + 0.6 * (len(moves) > 2)


# %% go above two blocks at once (the outer two where the arms reach them) and measure them again from there
# with the wrist cameras
def yaw_over(i, arm):
    """A grasp yaw aligned with block i that leaves the wrist room to turn either way."""
    az = math.atan2(*(P[i] - BASE[arm])[::-1])
    return min((wrap(H[i] + k * math.pi / 2) for k in range(2)), key=lambda a: abs(wrap(a - az - math.pi / 2)))


# Which arm goes above which block: the outer two if each arm reaches its own; else another pair the arms reach
# (12 cm apart, so that the grippers do not meet); else (all three on one side) one arm above the middle one.
LOOKED = {}
for i, j in ((0, 2), (0, 1), (1, 2)):
    if reaches("left", P[i]) and reaches("right", P[j]) and math.dist(P[i], P[j]) > 0.12:  # housings apart
        for z in (ABOVE_Z, ABOVE_Z - 0.02, ABOVE_Z - 0.04):  # lower where an arm reaches no higher
            m = robo.move_both([*P[i], z], [*P[j], z], left_yaw=yaw_over(i, "left"), right_yaw=yaw_over(j, "right"),
                               path="joint")
            if m.planned:
                LOOKED = {"left": i, "right": j}
                break
    if LOOKED:
        break
else:
    arm = arm_for(*P) or arm_for(P[1]) or "left"
    for z in (ABOVE_Z, ABOVE_Z - 0.02, ABOVE_Z - 0.04):
        m = robo.move_to(arm, [*P[1], z], yaw=yaw_over(1, arm), path="joint")
        if m.planned:
            LOOKED = {arm: 1}
            break
print("above the blocks", LOOKED, m.reached, m.reason, m.steps_used, "steps")
wrist = [False] * 3


def remeasure():
    """Headings of the blocks a wrist camera sees now. A neighbour, seen from the side, only where its heading agrees
    with the one known (within 15 deg; measured: a neighbour's came back 0 for a block turned 30 deg)."""
    below = [robo.arm(a).tcp[:2] for a in ("left", "right")]
    for b in robo.locate_all("block"):
        if not b.found or b.method != "head+wrist" or max(b.footprint) > 0.06:
            continue
        i = min(range(3), key=lambda k: math.dist(b.xyz[:2], P[k]))
        if math.dist(b.xyz[:2], P[i]) < 0.03:
            above_it = min(math.dist(t, P[i]) for t in below) < 0.02
            if above_it or abs(wrap(b.heading - H[i], math.pi / 2)) < math.radians(15):
                H[i], wrist[i] = b.heading, True


remeasure()
print("headings", [f"{math.degrees(a):.1f}" for a in H], "measured from above:", wrist)

# %% choose the row: along the axis of a block measured from above, through its centre (that block stays put),
# if the other two can slide there; otherwise the best free row, and all three slide
options = []
for i in range(3):
    if wrist[i]:
        for th in (wrap(H[i], math.pi / 2), wrap(wrap(H[i], math.pi / 2) + math.pi / 2, math.pi)):  # along either pair of its faces
            for sp, tight in ((SPACING, False), (SPACING, True), (SPACING + 0.02, False)):
                mv = plan(th, P[i], i, sp, tight)
                if mv is not None:
                    options.append((cost(mv), th, mv))
            # the others in another order along the row (both on one side of it, say: the set square or the arms'
            # reach may leave room on one side only)
            for order in itertools.permutations(range(3)):
                mv = plan(th, P[i], i, SPACING, order=list(order))
                if mv is not None:
                    options.append((cost(mv), th, mv))
def free_rows():
    """Rows through (near) the middle block at any heading, all three blocks sliding: the cheapest first."""
    out = []
    for limit in (math.radians(85), math.pi):  # past the wrist's end only if nothing else works (slow, not blocked)
        if out:
            break
        axes = [wrap(H[i], math.pi / 2) for i in range(3) if wrist[i]]  # rows square to a block measured from above
        for th in [math.radians(deg) for deg in range(-40, 41, 5)] + [a for a in axes if abs(a) <= math.radians(40)]:
            n = np.array([-math.sin(th), math.cos(th)])
            for off in (0.0, -0.015, 0.015, -0.03, 0.03, -0.045, 0.045, -0.06, 0.06):
                for sp, tight in ((SPACING, False), (SPACING, True), (SPACING + 0.02, False)):
                    mv = plan(th, P[1] + n * off, 1, sp, tight, stays=False, wrist_limit=limit)
                    if mv is not None:
                        out.append((cost(mv) + 0.5 * (limit > 2), th, mv))
    return sorted(out, key=lambda o: o[0])


options.sort(key=lambda o: o[0])
options += free_rows()  # also where none of the rows above can be started
assert options, "no row the blocks can slide into"
_, theta, moves = options[0]
print(f"row at {math.degrees(theta):.1f} deg:", [(i, arm, np.round(e, 3).tolist(), f"turn {math.degrees(y1 - y0):.0f}", f)
                                                for i, s, e, y0, y1, arm, f in moves])


# %% slide the blocks: two at once where two arms move (the left arm the one more to the left), else one by one:
# above the block (measured again), the pads turned while still above the blocks, straight down, close, slide and
# turn, open
PRE_Z = TABLE + 0.075  # the pads' lower edge 1 cm above the blocks' tops: turning there touches nothing


def refine(i, yaw0, yaw1):
    """Grasp and final yaw from a heading measured just now from above (the same final direction)."""
    a = min((yaw0 + wrap(H[i] - yaw0 + k * math.pi / 2) for k in range(4)), key=lambda a: abs(a - yaw0))
    return a, yaw1


def flips(yaw0, yaw1):
    """The same grasp with the wrist turned half a turn (the pads close along the same line)."""
    return [(yaw0, yaw1), (yaw0 + math.pi, yaw1 + math.pi)]


PARK_NEAR = 0.2  # an idle arm this close to a slide goes home first: an arm reaching down near the robot swings its
# elbow across (measured: the right arm's elbow met the left gripper 14 cm from the block it went down to)


def idle_near(arm, s, e):
    """Is the other arm away from its home pose and within PARK_NEAR of this arm's slide from s to e?"""
    other = "right" if arm == "left" else "left"
    theirs = robo.arm(other).tcp
    return math.dist(theirs[:2], HOME[other][:2]) > 0.03 and min(math.dist(theirs[:2], p) for p in (s, e)) < PARK_NEAR


def above(arm, i, s, e, y0, y1, park=False):
    """Bring an arm above block i (rising clear first if it is low), measure it again; the refined yaws. With park,
    the other arm (idle) goes out of the way if it is near."""
    other = "right" if arm == "left" else "left"
    mine, theirs = robo.arm(arm).tcp, robo.arm(other).tcp
    in_way = theirs[2] < PRE_Z and min(math.dist(theirs[:2], p) for p in (s, e)) < (PARK_NEAR if park else 0.14)
    risen = False
    for up in (0.1, 0.07, 0.045) if in_way else ():  # the other arm, still down at the block it let go, rises out of
        # this one's way (both straight up; as far as it reaches)
        mv = [mine[0], mine[1], max(mine[2], PRE_Z)], [theirs[0], theirs[1], theirs[2] + up]
        risen = robo.move_both(*(mv if arm == "left" else mv[::-1]), path="line").planned
        if risen:
            break
    if not risen and mine[2] < PRE_Z - 0.005:
        for z in (PRE_Z, PRE_Z - 0.005, PRE_Z - 0.01):  # as high as the arm reaches there
            if robo.move_to(arm, [mine[0], mine[1], z], path="line").planned:
                break
    # the other arm, idle above or near this block's slide, goes home in the same motion (the housings meet)
    theirs = robo.arm(other).tcp
    near = park and idle_near(arm, s, e)
    turns = (robo.arm(other).yaw, 0.0)  # pointing down there, turned as now or across the table
    spots = [([*HOME[other][:2], z], yaw) for z in (ABOVE_Z, theirs[2]) for yaw in turns] if near else []

    def go_above(ya):
        for z in (ABOVE_Z, ABOVE_Z - 0.02, PRE_Z):  # lower where the arm reaches no higher (not below PRE_Z: the
            # open pads would sweep the blocks on the way)
            for spot, yaw in spots:
                mv = [*s, z], spot
                yaws = {f"{arm}_yaw": ya, f"{other}_yaw": yaw}
                m = robo.move_both(*(mv if arm == "left" else mv[::-1]), **yaws, path="joint")
                if m.planned:
                    return m
            m = robo.move_to(arm, [*s, z], yaw=ya, path="joint")
            if m.planned:
                return m
        return None

    for ya, yb in flips(y0, y1):  # the wrist turned half a turn where the planned turn is past a joint's limit
        m = go_above(ya)
        if m is not None:
            y0, y1 = ya, yb
            break
    else:
        return None, None
    if not m.reached and math.dist(robo.arm(arm).tcp[:2], s) > 0.008:
        return None, None  # blocked on the way: coming down from here would land on a block
    remeasure()  # the wrist turned as planned above it: the turn stays within the wrist's range
    return refine(i, y0, y1)


def opening(arm, frac):
    if abs(robo.arm(arm).gripper - frac) > 0.05:
        robo.open(arm, frac)


def turned(arm, yaw):
    return abs(wrap(robo.arm(arm).yaw - yaw)) > math.radians(8)


def start_pair(moves):
    """Above the two blocks that move together (measured again), pads turned, down to grasp height: the arms and
    refined (grasp, final) yaws, or None when an arm cannot get there (nothing touched yet)."""
    arms = {mv[5]: list(mv[:5]) + [mv[6]] for mv in moves[:2]}
    away = [a for a, (i, s, *_) in arms.items() if LOOKED.get(a) != i or math.dist(robo.arm(a).tcp[:2], s) > 0.01]
    if len(away) == 2:  # both above their blocks in one motion (one after the other, the second can meet the first)
        (_, sl, _, yl, *_), (_, sr, _, yr, *_) = arms["left"], arms["right"]
        for z in (ABOVE_Z, ABOVE_Z - 0.02, PRE_Z):
            m = robo.move_both([*sl, z], [*sr, z], left_yaw=yl, right_yaw=yr, path="joint")
            if m.planned:
                break
        if m.planned and all(math.dist(robo.arm(a).tcp[:2], arms[a][1]) < 0.008 for a in arms):
            remeasure()
            for a in arms:
                arms[a][3:5] = refine(arms[a][0], arms[a][3], arms[a][4])
    for arm, (i, s, e, y0, y1, _f) in arms.items():
        if LOOKED.get(arm) != i or math.dist(robo.arm(arm).tcp[:2], s) > 0.01:
            arms[arm][3:5] = above(arm, i, s, e, y0, y1)
            if arms[arm][3] is None:
                return None
        else:
            arms[arm][3:5] = refine(i, y0, y1)
    (_, sl, el, al, bl, fl), (_, sr, er, ar, br, fr) = arms["left"], arms["right"]
    for yl in flips(al, bl):
        for yr in flips(ar, br):
            if turned("left", yl[0]) or turned("right", yr[0]):
                if not robo.move_both([*sl, PRE_Z], [*sr, PRE_Z], left_yaw=yl[0], right_yaw=yr[0], path="joint").planned:
                    continue
            opening("left", fl)
            opening("right", fr)
            down = robo.move_both([*sl, GRASP_Z], [*sr, GRASP_Z], left_yaw=yl[0], right_yaw=yr[0], path="line")
            if down.planned:
                print("down:", down.reached, down.reason, down.steps_used, "steps")
                return (sl, el, yl), (sr, er, yr)
    return None


def start_one(i, s, e, y0, y1, arm, f):
    """Above one block (measured again), the other arm parked if it is near, pads turned, down to grasp height: the
    (grasp, final) yaws, or None."""
    if math.dist(robo.arm(arm).tcp[:2], s) > 0.01 or idle_near(arm, s, e):
        y0, y1 = above(arm, i, s, e, y0, y1, park=True)
    else:
        y0, y1 = refine(i, y0, y1)
    if y0 is None:
        return None
    for ya, yb in flips(y0, y1):
        if turned(arm, ya) and not robo.move_to(arm, [*s, PRE_Z], yaw=ya, path="joint").planned:
            continue
        opening(arm, f)
        if robo.move_to(arm, [*s, GRASP_Z], yaw=ya).planned:
            return ya, yb
    return None


def release(arm, i, e, yb):
    """Let go of block i at e: wide open where that clears the others (where they were and will be), so that the
    next grasp needs no opening first; else only as far as RELEASE."""
    others = [TRI] + [cube_at(p, a) for j, p, e2, *_ in moves if j != i for p, a in ((p, H[j]), (e2, theta))]
    others += [cube_at(P[j], H[j]) for j in range(3) if j != i]
    robo.open(arm, 1.0 if clear(fingers(e, yb, 1.0), others, 0.006) else RELEASE)


def slide_one(i, s, e, arm, ya, yb):
    g1 = robo.close(arm)
    slide = robo.move_to(arm, [*e, GRASP_Z], yaw=yb, speed=SPEED)
    release(arm, i, e, yb)
    print(f"block {i}: held", g1.held, "slide", slide.reached, slide.reason, robo.steps_left, "steps left")


for _, theta, moves in options:  # the cheapest plan whose first grasp the arms reach
    pair = len(moves) >= 2 and moves[0][5] != moves[1][5]
    started = start_pair(moves) if pair else start_one(*moves[0])
    if started is not None:
        break
    print("cannot start the row at", round(math.degrees(theta), 1), "deg; the next plan")
assert started is not None, "no plan the arms can start"
if pair:
    (sl, el, yl), (sr, er, yr) = started
    g = [robo.close("left"), robo.close("right")]
    print("held:", [x.held for x in g], "widths", [x.width_m for x in g])
    slide = robo.move_both([*el, GRASP_Z], [*er, GRASP_Z], left_yaw=yl[1], right_yaw=yr[1], path="line", speed=SPEED)
    print("slide:", slide.reached, slide.reason, slide.steps_used, "steps")
    queue = moves[2:]
    block_of = {mv[5]: mv[0] for mv in moves[:2]}
    for arm, (e, y) in {"left": (el, yl[1]), "right": (er, yr[1])}.items():
        i = block_of[arm]
        if queue and queue[0][5] == arm:  # the arm that moves the third block next
            release(arm, i, e, y)
        else:
            robo.open(arm, RELEASE)
else:
    slide_one(moves[0][0], moves[0][1], moves[0][2], moves[0][5], *started)
    queue = moves[1:]
print(robo.steps_left, "steps left")

# %% the blocks that move one by one: the arm planned for each, measured from above
for mv in queue:
    ys = start_one(*mv)
    if ys is not None:
        slide_one(mv[0], mv[1], mv[2], mv[5], *ys)

# %% before going home, the row checked from above the block that stayed: a block that a neighbour's slide turned
# or pushed off it (seed 27 layout 9: the block that stays turned from -15 to +13 deg) slides back onto it, where the
# steps allow
CHECK_FROM = 90  # steps left to look at all: the look (about 15), one correction (about 45) and home (about 30)
FIX_FROM = 75  # ... and, after the look, to correct one block
ROW_DIR = np.array([math.cos(theta), math.sin(theta)])
ROW_AT = np.array(moves[0][2], dtype=float)  # a point of the row: where the first slide ended
for i, _, e, *_ in moves:
    P[i], H[i] = np.array(e, dtype=float), theta  # where the slides left them, as planned


def row_error(i):
    """Block i's distance from the row (m) and its turn from square to it (rad)."""
    rel = P[i] - ROW_AT
    return abs(ROW_DIR[0] * rel[1] - ROW_DIR[1] * rel[0]), abs(wrap(H[i] - theta, math.pi / 2))


if robo.steps_left >= CHECK_FROM:
    # Above the block that stayed (else the middle one), with the arm nearer to it: the wrist camera measures its
    # heading from above (a neighbour's, seen from the side, is less sure) and the neighbours' places.
    moved = [mv[0] for mv in moves]
    look = next((i for i in range(3) if i not in moved),
                sorted(range(3), key=lambda i: ROW_DIR @ (P[i] - ROW_AT))[1])
    looker = min(("left", "right"), key=lambda a: math.dist(robo.arm(a).tcp[:2], P[look]))
    ya, _ = above(looker, look, P[look], P[look], robo.arm(looker).yaw, robo.arm(looker).yaw)
    if ya is not None:
        for b in robo.locate_all("block"):
            if b.found and b.method == "head+wrist" and max(b.footprint) <= 0.06:
                i = min(range(3), key=lambda k: math.dist(b.xyz[:2], P[k]))
                if math.dist(b.xyz[:2], P[i]) < 0.03:
                    P[i] = np.array(b.xyz[:2], dtype=float)
        errors = {i: row_error(i) for i in range(3)}
        shown = {i: (round(1000 * float(d), 1), round(math.degrees(a), 1)) for i, (d, a) in errors.items()}
        print("row check (mm, deg):", shown, robo.steps_left, "steps left")
        worst = max(range(3), key=lambda i: max(errors[i][0] / 0.005, errors[i][1] / math.radians(5)))
        off, turn = errors[worst]
        if (off > 0.005 or turn > math.radians(5)) and robo.steps_left >= FIX_FROM:
            target = ROW_AT + ROW_DIR * (ROW_DIR @ (P[worst] - ROW_AT))
            arm = arm_for(P[worst], ends=[target])
            obstacles = [TRI] + [cube_at(P[j], H[j]) for j in range(3) if j != worst]
            # Its neighbours now stand in the row 2 cm from it: open pads come down with half the usual margin.
            for y0, t in grasps(worst, theta, arm, P[worst], target) if arm else ():
                frac = slide_clear(P[worst], target, y0, y0 + t, obstacles, margin=0.003)
                if frac is None:
                    continue
                print("block", worst, "back onto the row with the", arm, "arm")
                ys = start_one(worst, P[worst], target, y0, y0 + t, arm, frac)
                if ys is not None:
                    slide_one(worst, P[worst], target, arm, *ys)
                break
robo.home()
print(robo.state().steps_left, "steps left")
