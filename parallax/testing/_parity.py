"""`check_training_parity`: the variant that trains is the env that passed the battery.

A trainer does not run the env the way the battery does: it jits the rollout with its
state buffer donated, vmaps whole runs over seeds, and splits the batch over devices with
`parallax.shard_rollout`. Each of those must give bit-identical trajectories to the plain
jitted batched rollout, or what the battery proved does not transfer to training. An env
whose step reads Python-side state (a global counter, a cache), or whose result depends on
the batch size or on how the batch is split, fails here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import rng
from .._actions import random_actions
from .._core import MARLState
from .._rollout import rollout
from .._sharding import batch_mesh, shard_batch, shard_rollout
from .._wrappers.autoreset import VmapAutoResetWrapper
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import as_typed_key
from ._trees import flatten, to_numpy

__all__ = ["check_training_parity"]

_OWNER = "check_training_parity"


def _policy(space: Any, num_envs: int) -> Callable[[Any, Any], Any]:
    """Uniform random actions for the batch, drawn from the step's key."""
    sample = random_actions(space, num_envs)

    def policy(key: Any, state: Any) -> Any:
        return sample(rng.episode_key(key), jnp.uint32(0))

    return policy


def _compare(variant: str, want: Any, got: Any, what: str, num_steps: int) -> None:
    """Raise a `CheckError` at the first (step, env, field) where `got` differs from `want`.

    `want` and `got` are `(final_state, trajectory)`; the trajectory is compared first.
    """
    expected = {f"trajectory.{k}": v for k, v in flatten(want[1]).items()}
    expected.update({f"final_state.{k}": v for k, v in flatten(want[0]).items()})
    actual = {f"trajectory.{k}": v for k, v in flatten(got[1]).items()}
    actual.update({f"final_state.{k}": v for k, v in flatten(got[0]).items()})
    if list(expected) != list(actual):
        raise CheckError(
            f"{_OWNER}/{variant}",
            f"{what}: the trajectory's structure differs from the plain jitted rollout's",
            expected=sorted(expected),
            got=sorted(actual),
        )
    for path, leaf in expected.items():
        a, b = to_numpy(leaf), to_numpy(actual[path])
        if a.shape != b.shape or a.dtype != b.dtype:
            raise CheckError(
                f"{_OWNER}/{variant}",
                f"{what}: shape or dtype differs",
                field=path,
                expected=f"{a.dtype}{list(a.shape)}",
                got=f"{b.dtype}{list(b.shape)}",
            )
        same = a == b
        if np.issubdtype(a.dtype, np.floating):
            same = same | (np.isnan(a) & np.isnan(b))
        if not np.all(same):
            index = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0])
            if path.startswith("trajectory."):  # (time, env, ...); transition t makes state t+1
                step, env, rest = index[0] + 1, index[1] if len(index) > 1 else None, index[2:]
            else:  # (env, ...)
                step, env, rest = num_steps, index[0] if index else None, index[1:]
            raise CheckError(
                f"{_OWNER}/{variant}",
                f"{what} is not bit-identical to the plain jitted batched rollout (the "
                "env depends on Python-side state, the batch size or its split)",
                step=step,
                env_index=env,
                field=f"{path}[{', '.join(map(str, rest))}]" if rest else path,
                expected=a[index],
                got=b[index],
            )


def check_training_parity(
    env: Any,
    *,
    num_envs: int = 8,
    num_steps: int = 16,
    num_seeds: int = 2,
    key: Any = None,
) -> CheckReport:
    """Check that the ways a trainer runs `env` give bit-identical trajectories.

    The baseline is `parallax.rollout` of `VmapAutoResetWrapper(env, num_envs)` (the
    training stack; a vector env is used as it is) under a plain `jax.jit`, from a jitted
    reset, with uniformly random actions (`parallax.random_actions`), once per seed. The
    variants, each compared with it leaf by leaf, bit for bit:

    - `donation`: the same rollout jitted with the state buffer donated;
    - `vmap_seeds`: reset and rollout of every seed in one `jax.jit(jax.vmap(...))`;
    - `shard_rollout`: `parallax.shard_rollout` with the batch split over the most
      devices that divide `num_envs` evenly.

    A multi-agent env (whose `MARLState` `rollout` does not take) is rolled out by a
    jitted `lax.scan` of `step` that keeps every state, and its third variant is
    `sharded_state`: that scan on a reset state split over the devices (`shard_batch`).

    Args:
        env: a single- or multi-agent env, or a vector env (then `num_envs` is its own).
        num_envs: the batch size of a single env (positive int).
        num_steps: steps per rollout (positive int).
        num_seeds: seeds of the `vmap_seeds` variant (int >= 2).
        key: a PRNG key (typed or raw); `jax.random.key(0)` by default.

    Returns:
        A `CheckReport` whose `passed` lists the variants and `stats` the sizes.

    Raises:
        CheckError: at the first variant, step, env and field that differs.

    Example:
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import check_training_parity
        >>> check_training_parity(GridWorld(), num_envs=4, num_steps=4).passed
        ['donation', 'vmap_seeds', 'shard_rollout']
    """
    for name, value, least in (("num_envs", num_envs, 1), ("num_steps", num_steps, 1),
                               ("num_seeds", num_seeds, 2)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{_OWNER}: {name} must be an int >= {least}, got {value!r}")
    key = as_typed_key(key, _OWNER)
    if isinstance(getattr(env, "num_envs", None), int):  # a vector env runs as it is
        venv, num_envs = env, env.num_envs
    else:
        venv = VmapAutoResetWrapper(env, num_envs)
    # the most devices that split the batch evenly
    devices = max(d for d in range(1, len(jax.devices()) + 1) if num_envs % d == 0)
    mesh = batch_mesh(jax.devices()[:devices])
    policy = _policy(venv.action_space, num_envs)

    marl = isinstance(jax.eval_shape(lambda: venv.reset(key=key)), MARLState)

    def run(k: Any, state: Any) -> Any:
        if not marl:
            return rollout(venv, policy, k, num_steps, state=state)

        # `rollout` runs single-agent states: a multi-agent env's whole states are compared
        def body(s: Any, k_t: Any) -> tuple[Any, Any]:
            s = venv.step(s, policy(k_t, s))
            return s, s

        return jax.lax.scan(body, state, jax.random.split(k, num_steps))

    def from_seed(k: Any) -> Any:
        k_reset, k_run = jax.random.split(k)
        return run(k_run, venv.reset(key=k_reset))

    reset = jax.jit(lambda k: venv.reset(key=k))
    plain = jax.jit(run)
    seeds = jax.random.split(key, num_seeds)
    baseline = []
    for seed in seeds:
        k_reset, k_run = jax.random.split(seed)
        baseline.append(plain(k_run, reset(k_reset)))
    k_reset, k_run = jax.random.split(seeds[0])

    with warnings.catch_warnings():
        # backends that cannot reuse a donated buffer say so; the result is what matters
        warnings.filterwarnings("ignore", message=".*donated buffers were not usable.*")
        donated = jax.jit(run, donate_argnums=1)(k_run, reset(k_reset))
    _compare("donation", baseline[0], donated, "the rollout jitted with a donated state", num_steps)

    # on the host (keys as key data, as `_compare` reads them): no eager slice per leaf
    vmapped = jax.tree.map(to_numpy, jax.jit(jax.vmap(from_seed))(seeds))
    for s in range(num_seeds):
        one = jax.tree.map(lambda x, s=s: x[s], vmapped)
        _compare(
            "vmap_seeds", baseline[s], one, f"seed {s} of the run vmapped over seeds", num_steps
        )

    if marl:  # the same jitted scan, its batch split over the mesh
        sharded, variant = plain(k_run, shard_batch(reset(k_reset), mesh)), "sharded_state"
        what = f"the rollout with its batch split over {devices} device(s)"
    else:
        sharded = shard_rollout(venv, policy, k_run, num_steps, state=reset(k_reset), mesh=mesh)
        variant, what = "shard_rollout", f"shard_rollout over {devices} device(s)"
    _compare(variant, baseline[0], sharded, what, num_steps)

    report = CheckReport(_OWNER, passed=["donation", "vmap_seeds", variant])
    report.stats.update(
        {"num_envs": num_envs, "num_steps": num_steps, "num_seeds": num_seeds, "devices": devices}
    )
    return report
