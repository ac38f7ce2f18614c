"""Robots from URDF and MJCF files, read through MuJoCo's model compiler (Todorov, Erez & Tassa,
2012), which parses both formats and resolves their frames (URDF origins and ``rpy``; MJCF
``pos``/``quat``/``euler``/``axisangle``, defaults and includes).

From the compiled body tree:

- a link with a hinge (URDF ``revolute``/``continuous``) or slide (``prismatic``) joint becomes
  a difflie body whose frame is the link frame: ``com`` is the centre of mass in the link frame
  and ``inertia`` the full inertia about it in link axes; the joint becomes a revolute or
  prismatic constraint (5 rows) to its parent;
- an MJCF body with two or three hinges about one point is one body on a spherical joint
  (three hinges; 3 rows) or a universal joint that keeps the angle of its axes (two; 4 rows),
  its hinges read as MuJoCo applies them, one after the other (``difflie.hinges``); so is a
  URDF chain of two or three revolute joints about one point through massless links (the URDF
  way of writing such a joint), the massless links folded into the link with mass;
- an MJCF ball joint is a spherical joint (3 rows); its coordinates are MuJoCo's: the
  quaternion of the child's rotation relative to its reference orientation in the parent, and
  the angular velocity of child relative to parent in the child's axes
  (``difflie.joint_space.BallJoints``). Its damping ``-c omega_rel`` and rotor inertia
  (``armature``: the kinetic energy ``I |omega_rel|^2 / 2``) are those of three 1-DOF joints
  about orthonormal axes fixed in the parent, which sum to the same torque; its ``stiffness``
  a ``BallSpring``, its ``joint_torques`` (a 3-vector in the child's axes) a ``BallTorque``;
- a link without a joint (URDF ``fixed``) is merged rigidly into its parent: masses add, the
  COM is the mass-weighted mean and inertias move to it by the parallel-axis theorem
  ``J = sum R_b J_b R_b^T + m_b (|d_b|^2 I - d_b d_b^T)``; links merged into the world are the
  ground. Each link's inertial is the file's, as Pinocchio reads it, also where MuJoCo's
  compiler refuses it (a placeholder inertia that is not positive definite, a massless link);
  each merged group must be a rigid body, and MuJoCo's corrections (``boundmass``,
  ``boundinertia``, ``balanceinertia``) apply where the file or ``load_robot`` asks;
- MJCF equality constraints ``connect`` (a point of one body on a point of another: a
  spherical joint, 3 rows) and ``weld`` (their relative pose fixed: 6 rows), between bodies or
  sites, close loops; they hold exactly, where MuJoCo keeps them softly (``solref``,
  ``solimp``). A body ``connect`` keeps MuJoCo's anchors (the second computed at ``qpos0``), a
  body ``weld`` its ``relpose`` (body 2 in body 1's frame; a ``torquescale`` of 0 leaves the
  rotation free, as MuJoCo's limit); site constraints make the sites (their frames, for a weld)
  coincide. Joint positions that open a loop are closed by the solvers' consistent start;
- a free joint (MJCF) or ``floating_base=True`` (URDF, which has no notation for it: like
  Pinocchio and MuJoCo, a URDF's root link is fixed unless asked) gives a floating base: no
  constraint;
- URDF ``<dynamics damping>`` and MJCF joint ``damping`` become viscous joint damping, MJCF
  joint ``stiffness`` (about ``springref``) linear joint springs (``JointSpring``), MJCF
  ``armature`` the joints' rotor inertias (``JointInertia``), and ``joint_torques`` the
  actuation (``JointForce``);
- with ``joint_limits=True``, the limits of hinges and slides become one-sided
  spring-dampers (``JointLimits``) with the stiffness and damping of MuJoCo's soft limits, those
  of balls (their largest angle) the same law of the ball's angle (``BallLimits``), and
  with ``joint_friction=True`` their ``frictionloss`` saturating dampers (``JointFriction``)
  that creep as MuJoCo's soft friction does, on each of a ball's three axes in the child
  (``BallFriction``);
- the springs and dampers of fixed tendons (MJCF ``<tendon><fixed>``: a length that is a linear
  combination of joint coordinates) act on their joints as MuJoCo applies them (``Tendons``),
  their ``armature`` as a rotor inertia along their length (``JointInertia``), and with
  ``joint_limits`` / ``joint_friction`` their limits and friction as the joints'; spatial
  tendons through sites and pulleys (MJCF ``<tendon><spatial>``) the same laws of their path's
  length, as forces along its segments (``SpatialTendons``);
- with ``joint_couplings=True``, joint couplings (URDF ``mimic``, MJCF ``<equality><joint>``:
  a joint's position a polynomial of another's) hold as softly as MuJoCo holds them
  (``JointCouplings``, from ``solref`` and ``solimp``), and a follower that
  ``joint_positions`` / ``joint_velocities`` leave out starts on its coupling;
- with ``controls``, an MJCF file's actuators on hinges, slides and tendons
  (``motor``, ``position``, ``velocity``, ``general`` without activation dynamics) drive their
  joints as MuJoCo's do (``Actuators``: gear, gain and bias, control and force ranges, the
  joints' and tendons' ``actuatorfrcrange``);
- MJCF gravity compensation (``gravcomp``: ``-c m g`` at a link's COM) is a constant world
  force at a point of each body (``difflie.forces.DeadLoad``), routed through actuators
  (``actuatorgravcomp``) or not;
- what the file's ``<option><flag .../>`` disables (gravity, springs, dampers, limits,
  friction, equality constraints, actuation, the clipping of controls) is off, as in MuJoCo;
- what is not modelled (joint and tendon limits, friction and joint couplings unless asked,
  actuators without ``controls`` and those of other transmissions or dynamics, contacts,
  spatial tendons that wrap around geoms and the armature of spatial tendons, tendon
  equalities, inactive equality constraints, fluid forces, flexible bodies, plugins, the
  override flag) is named in one ``RobotModelWarning``, as are MuJoCo's own warnings.

Joints keep the order of the compiled tree, which is the file's order where the file lists
parents before children. The initial state comes from forward kinematics at
``joint_positions`` / ``joint_velocities`` (by joint name; the file's reference pose
elsewhere), so it satisfies the constraints exactly. Meshes do not enter the dynamics; their
file names and poses are kept in ``model.joints``.
"""

from .compiler import RobotModelWarning as RobotModelWarning
from .reader import ROBOT_EXTENSIONS as ROBOT_EXTENSIONS
from .reader import load_robot as load_robot
