"""The ids that ship with Parallax, as static tables: what `parallax list` prints.

Importing this module imports nothing heavy (no jax, no adapter library), so that
`parallax list` answers at once:

- `BUILTIN_IDS`: the ids `parallax._registry` registers at import time.
- `NAMESPACES`: for each adapter namespace, the module whose presence means "installed" and
  the names its `*_names()` lister returns for the library version noted next to it.
- `UNSUPPORTED`: listed ids that cannot run with the pinned versions, with the reason.
- `NEEDS_DATA`: builtin ids that need an argument with no default (`data=`), and what.
- `listed_ids(include_namespaces)`: the builtin ids, then the namespaced ids of the
  installed libraries (found with `importlib.util.find_spec`, nothing imported).

`tests/test_cli.py` compares both tables with the live registry, so they cannot drift from
the installed libraries unnoticed; after upgrading one, regenerate its tuple from
`parallax.adapters._registry.<namespace>_names()`.
"""

from __future__ import annotations

import importlib.util

__all__ = ["BUILTIN_IDS", "NAMESPACES", "NEEDS_DATA", "UNSUPPORTED", "installed", "listed_ids"]

BUILTIN_IDS = (
    "GridWorld-v0",
    "LimitOrderBook-v0",
    "LimitOrderBookMarket-v0",
    "LimitOrderBookReplay-v0",
    "LimitOrderBookReplayExecution-v0",
    "MarketMaking-v0",
    "MaskedGridWorld-v0",
    "OptimalExecution-v0",
    "Portfolio-v0",
    "Race-v0",
    "Trading-v0",
)
"""The ids of `parallax._registry._register_builtins`, sorted."""

NAMESPACES: dict[str, tuple[str, tuple[str, ...]]] = {
    # brax 0.14.2: the order of parallax.adapters._registry.brax_names()
    "brax": (
        "brax",
        (
            "ant",
            "fast",
            "halfcheetah",
            "hopper",
            "humanoid",
            "humanoidstandup",
            "inverted_double_pendulum",
            "inverted_pendulum",
            "pusher",
            "reacher",
            "swimmer",
            "walker2d",
        ),
    ),
    # gymnax 1.0.1: the order of parallax.adapters._registry.gymnax_names()
    "gymnax": (
        "gymnax",
        (
            "CartPole-v1",
            "Pendulum-v1",
            "Acrobot-v1",
            "MountainCar-v0",
            "MountainCarContinuous-v0",
            "Asterix-MinAtar",
            "Breakout-MinAtar",
            "Freeway-MinAtar",
            "Seaquest-MinAtar",
            "SpaceInvaders-MinAtar",
            "Catch-bsuite",
            "DeepSea-bsuite",
            "MemoryChain-bsuite",
            "UmbrellaChain-bsuite",
            "DiscountingChain-bsuite",
            "MNISTBandit-bsuite",
            "SimpleBandit-bsuite",
            "FourRooms-misc",
            "MetaMaze-misc",
            "PointRobot-misc",
            "BernoulliBandit-misc",
            "GaussianBandit-misc",
            "Reacher-misc",
            "Swimmer-misc",
            "Pong-misc",
            "FrozenLake-misc",
        ),
    ),
    # playground 0.2.0: the order of parallax.adapters._registry.mjx_names()
    "mjx": (
        "mujoco_playground",
        (
            "AcrobotSwingup",
            "AcrobotSwingupSparse",
            "BallInCup",
            "CartpoleBalance",
            "CartpoleBalanceSparse",
            "CartpoleSwingup",
            "CartpoleSwingupSparse",
            "CheetahRun",
            "FingerSpin",
            "FingerTurnEasy",
            "FingerTurnHard",
            "FishSwim",
            "HopperHop",
            "HopperStand",
            "HumanoidStand",
            "HumanoidWalk",
            "HumanoidRun",
            "PendulumSwingup",
            "PointMass",
            "ReacherEasy",
            "ReacherHard",
            "SwimmerSwimmer6",
            "WalkerRun",
            "WalkerStand",
            "WalkerWalk",
            "ApolloJoystickFlatTerrain",
            "BarkourJoystick",
            "BerkeleyHumanoidJoystickFlatTerrain",
            "BerkeleyHumanoidJoystickRoughTerrain",
            "G1JoystickFlatTerrain",
            "G1JoystickRoughTerrain",
            "Go1JoystickFlatTerrain",
            "Go1JoystickRoughTerrain",
            "Go1Getup",
            "Go1Handstand",
            "Go1Footstand",
            "H1InplaceGaitTracking",
            "H1JoystickGaitTracking",
            "Op3Joystick",
            "SpotFlatTerrainJoystick",
            "SpotGetup",
            "SpotJoystickGaitTracking",
            "T1JoystickFlatTerrain",
            "T1JoystickRoughTerrain",
            "AlohaHandOver",
            "AlohaSinglePegInsertion",
            "PandaPickCube",
            "PandaPickCubeOrientation",
            "PandaPickCubeCartesian",
            "PandaOpenCabinet",
            "PandaRobotiqPushCube",
            "LeapCubeReorient",
            "LeapCubeRotateZAxis",
            "AeroCubeRotateZAxis",
        ),
    ),
}
"""namespace -> (top-level module of its library, the names it lists)."""


UNSUPPORTED: dict[str, str] = {
    "brax/swimmer": (
        "brax 0.14.2's fluid drag (brax.fluid, used by swimmer only) calls "
        "jnp.clip(a_min=...), a keyword the pinned JAX no longer has, so its first step "
        "fails; make() refuses it while that is so"
    ),
}
"""Listed ids that cannot run with the pinned library versions, and why."""

NEEDS_DATA: dict[str, str] = {
    env_id: "data=, a LOBSTER day from parallax.finance.lob.load_lobster(...)"
    for env_id in ("LimitOrderBookReplay-v0", "LimitOrderBookReplayExecution-v0")
}
"""Builtin ids that `make` builds only with a keyword argument no default can supply."""


def installed(module: str) -> bool:
    """Whether the top-level `module` can be imported (found on the path, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a module without a spec
        return False


def listed_ids(include_namespaces: bool = True) -> list[str]:
    """The builtin ids, then `namespace/NAME` for every name of each installed library.

    The same list, in the same order, as `parallax.registered_ids()` in a fresh process.

    Example:
        >>> from parallax._ids import listed_ids
        >>> listed_ids(include_namespaces=False)[:2]
        ['GridWorld-v0', 'MarketMaking-v0']
    """
    ids = list(BUILTIN_IDS)
    if include_namespaces:
        for namespace, (module, names) in sorted(NAMESPACES.items()):
            if installed(module):
                ids.extend(f"{namespace}/{name}" for name in names)
    return ids
