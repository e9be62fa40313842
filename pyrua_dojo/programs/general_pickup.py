"""Reference program for general_pickup: "Pick up the <target> by 10 cm." (200 steps)."""

# %% find the object the instruction names, then measure it close up with a wrist camera
import re

target = re.search(r"[Pp]ick up the (.+?) by 10 cm", robo.instruction).group(1)
obj = robo.locate(target)
print(target, "->", obj.found, obj.xyz, obj.footprint, obj.method)
assert obj.found, obj.reason
arm = "left" if obj.xyz[0] < 0 else "right"
view = robo.look_at(arm, obj.xyz)
near = robo.locate(target)
print("close up:", view.reached, near.found, near.xyz, near.footprint, round(near.heading, 2), near.method)
if near.found:
    obj = near

# %% grasp it from above (leaning out when it is far), then lift it well past 10 cm
x, y, z = obj.xyz
grasp_z = max(z - min(obj.height / 2, 0.03), robo.TABLE_Z + 0.029)
# Close across the narrow side; the wrist turns only so far, so where that is out of reach try the long side if
# it fits between the fingers (then leaning out, which reaches farther).
yaws = [obj.heading + math.pi / 2] + ([obj.heading] if obj.footprint[0] < 0.075 else [])
for tilt in (0.0, 0.35, 0.7):
    for yaw in yaws:
        above = robo.move_to(arm, [x, y, grasp_z + 0.06], yaw=yaw, tilt=tilt, path="joint")
        if above.planned:
            break
    if above.planned:
        break
print("above:", above.reached, "tilt", tilt, above.reason)
down = robo.move_to(arm, [x, y, grasp_z], yaw=yaw, tilt=tilt)
g = robo.close(arm)
print("down:", down.reached, g)
# Up and back toward the base; lean the fingers out if straight down is out of reach that high.
for lift_tilt in (tilt, 0.5, 0.9):
    for dy in (0.05, 0.12):
        m = robo.move_to(arm, [x, y - dy, grasp_z + 0.13], yaw=yaw, tilt=lift_tilt, path="joint")
        if m.planned:
            break
    if m.planned:
        break
print("lifted:", m.reached, m.tcp, "steps left", m.steps_left)
