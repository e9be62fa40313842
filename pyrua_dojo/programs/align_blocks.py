"""Reference program for align_blocks: "Use the set square to push the three blocks into a straight, aligned row,
then reset the robot arm." (200 steps; fails at once if a block is lifted more than 7 mm)

Written as an LLM would write it: measure, choose a row the blocks can be pushed into without hitting each other or
the set square, then push each block with a short straight edge flat against its face, so it turns square to the
row as it slides. The edge is the outer face of a closed gripper's pad (2.4 cm wide), closing along the push.

The set square is not held: a top-down parallel grip can only pinch it between its long leg and the hypotenuse
(the other pairs of faces meet at 60 and 90 degrees), and in that wedge grip it slips and turns by 20 degrees or
more when the wrist turns it to face a block (measured on the twin). It is measured, and the row is planned so
that no push starts on top of it.
"""

# %% look: the three blocks and the set square (head camera; nothing moves)
blocks = [b for b in robo.locate_all("block", cameras=["cam_head"]) if b.found and max(b.footprint) < 0.07]
square = robo.locate("set square", cameras=["cam_head"])
for b in blocks:
    print(f"block {b.xyz}, footprint {b.footprint}, heading {math.degrees(b.heading):.0f} deg")
print("set square", square.found, square.xyz, square.footprint, f"{math.degrees(square.heading):.0f} deg", square.method)
assert len(blocks) == 3 and square.found, "need three blocks and the set square"

# %% plan the row: a direction along which the blocks are well apart, pushed away from the robot (toward +y),
# where no push starts over the set square (the head image shows its right angle at the front left, the long leg,
# about 14 cm, facing the robot, the short leg about 8 cm)
TABLE = robo.TABLE_Z
P = np.array([b.xyz[:2] for b in blocks])
h = square.heading % (math.pi / 2)
if h > math.pi / 4:
    h -= math.pi / 2
u, v = np.array([math.cos(h), math.sin(h)]), np.array([-math.sin(h), math.cos(h)])  # along the long leg, toward back
e_u, e_v = square.footprint if abs(math.cos(square.heading - h)) > 0.7 else square.footprint[::-1]
corner = np.array(square.xyz[:2]) - u * e_u / 2 - v * e_v / 2  # the right angle: its front edge is seen well
tri = [corner, corner + u * e_u, corner + v * 0.08]


def over_square(xy, margin=0.01):
    """Is table point xy on (or within margin of) the set square?"""
    for k in range(3):
        a, b, c = tri[k], tri[(k + 1) % 3], tri[(k + 2) % 3]
        edge = b - a
        normal = np.array([-edge[1], edge[0]]) / np.linalg.norm(edge)
        if normal @ (c - a) < 0:
            normal = -normal
        if normal @ (xy - a) < -margin:
            return False
    return True


PAD = 0.010  # half the closed pads' depth along the push (closing along the push: the flat outer face of a pad)
BACK = 0.029 + PAD + 0.005  # TCP behind a block's centre before a push: half its diagonal, the pad, 5 mm


def frame(theta):
    """Row direction d and push direction n (perpendicular, away from the robot)."""
    return np.array([math.cos(theta), math.sin(theta)]), np.array([-math.sin(theta), math.cos(theta)])


def spread(theta):
    """Smallest gap between neighbouring blocks along the row direction."""
    return float(np.min(np.diff(np.sort(P @ frame(theta)[0]))))


def blocked(theta):
    """How many pushes would start with a pad over the set square."""
    d, n = frame(theta)
    return sum(any(over_square(p - n * (BACK + a) + d * b) for a in (-PAD, PAD) for b in (-0.012, 0, 0.012)) for p in P)


thetas = np.radians(np.arange(-40.0, 40.1, 2.5))
theta = max(thetas, key=lambda t: min(spread(t), 0.06) - 0.03 * blocked(t) - 0.06 * abs(t))
d, n = frame(theta)
line = float(np.max(P @ n)) + 0.02  # every block is pushed at least 2 cm, so each one turns square
order = sorted(range(3), key=lambda i: P[i] @ n)  # rearmost first: nothing is ever behind the pusher
print(f"row at {math.degrees(theta):.1f} deg, smallest gap {spread(theta) * 100:.1f} cm, "
      f"{blocked(theta)} pushes over the set square, push to n = {line:.3f}")


# %% push each block onto the row, rearmost first, with the nearer arm; then both arms home
s = P @ d
done = set()


def clear_span(i, half, overhang):
    """Offset along the row of a pusher `half` wide on block i that does not catch a neighbour not pushed yet."""
    lo, hi = -half + overhang, half - overhang
    for j in range(3):
        if j in done or j == i:
            continue
        gap = s[j] - s[i]
        if gap > 0:
            hi = min(hi, gap - 0.029 - half)
        else:
            lo = max(lo, gap + 0.029 + half)
    return min(max(0.0, lo), hi) if lo <= hi else (lo + hi) / 2


def push(i, hand):
    start = P[i] + d * clear_span(i, 0.012, 0.012) - n * BACK
    end = start + n * (line - 0.02 - PAD - start @ n)
    yaw = math.atan2(n[1], n[0])
    a = robo.move_to(hand, [*start, TABLE + 0.07], yaw=yaw, path="joint")
    if not a.planned:
        return a
    robo.close(hand)
    robo.move_to(hand, [*start, TABLE + 0.027], yaw=yaw)
    p = robo.move_to(hand, [*end, TABLE + 0.027], yaw=yaw, speed=0.5)
    robo.move_to(hand, [*(end - n * 0.01), TABLE + 0.07], yaw=yaw)
    return p


for i in order:
    near = "left" if (P[i] - n * BACK)[0] < 0 else "right"
    p = push(i, near)
    if not p.planned:
        p = push(i, "right" if near == "left" else "left")
    done.add(i)
    print(f"block {i} ({p.arm}): pushed {p.reached} ({p.reason}), {robo.steps_left} steps left")
robo.home()
print(robo.state().steps_left, "steps left")
