"""Rollouts over every device: the batch axis of a vector env split with `jax.sharding`.

- `batch_mesh`: a one-axis `Mesh` over all (or the given) devices.
- `shard_batch`: place a batched pytree (a vector env's state) on a mesh, split on axis 0.
- `shard_rollout`: `rollout` with the env batch split over the mesh.

The same code runs on one CPU, one GPU, the 8 cores of a TPU host or many hosts: the mesh
covers `jax.devices()`, which after `jax.distributed.initialize()` lists the devices of
every process. Environments are independent along the batch axis, so XLA's SPMD
partitioner runs each device's slice of the batch locally; only batch-wide reductions
(the shared statistics of `NormalizeObservation`, a policy's batch statistics) become
all-reduces. Every env draws its randomness from its own key, so results do not depend on
how the batch is split.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import PRNGKeyArray, PyTree

from ._rollout import Policy, Trajectory, _rollout
from ._wrappers.base import check_positive_int

__all__ = ["batch_mesh", "shard_batch", "shard_rollout"]


def batch_mesh(devices: Sequence[Any] | None = None, axis_name: str = "batch") -> Mesh:
    """A one-dimensional `Mesh` named `axis_name` over `devices` (default: all devices).

    Args:
        devices: the devices to use; None means `jax.devices()`, every device of every
            process in a multi-host run.
        axis_name: the mesh axis the env batch is split along.

    Example:
        >>> import parallax
        >>> mesh = parallax.batch_mesh()
        >>> mesh.axis_names
        ('batch',)
    """
    if not isinstance(axis_name, str) or not axis_name:
        raise ValueError(f"batch_mesh: axis_name must be a non-empty string, got {axis_name!r}")
    devs = list(jax.devices() if devices is None else devices)
    if not devs:
        raise ValueError("batch_mesh: devices must not be empty")
    return Mesh(np.array(devs), (axis_name,))


def _axis(mesh: Mesh, axis_name: str) -> int:
    if axis_name not in mesh.axis_names:
        raise ValueError(
            f"the mesh has axes {mesh.axis_names}, not axis_name={axis_name!r}; build it with "
            "parallax.batch_mesh()"
        )
    return int(mesh.shape[axis_name])


def shard_batch(tree: PyTree, mesh: Mesh | None = None, axis_name: str = "batch") -> PyTree:
    """Put every leaf of `tree` on `mesh`, split along its leading (batch) axis.

    For a vector env's state: every leaf leads with `num_envs`, which must be divisible by
    the number of devices on the axis. In a multi-host run (a mesh over the devices of
    several processes) every process passes the same whole batch and keeps only its own
    rows; nothing is sent between processes. When each process holds only its own rows,
    build the global arrays with `jax.make_array_from_process_local_data` instead (or let
    `shard_rollout` reset the env on the mesh, which needs no host data).

    Example:
        >>> import jax, parallax
        >>> env = parallax.make_vec("GridWorld-v0", num_envs=8)
        >>> state = parallax.shard_batch(env.reset(key=jax.random.key(0)))
        >>> state.observation.sharding.spec
        P('batch',)
    """
    mesh = batch_mesh(axis_name=axis_name) if mesh is None else mesh
    _axis(mesh, axis_name)
    sharding = NamedSharding(mesh, P(axis_name))
    if sharding.is_fully_addressable:
        return jax.device_put(tree, sharding)
    return jax.tree.map(lambda leaf: _global_from_host(leaf, sharding), tree)


def _global_from_host(leaf: Any, sharding: NamedSharding) -> Any:
    """A global array from a value every process holds whole (multi-process meshes).

    `jax.device_put` would compare the value across processes first (a collective, and one
    that reports NaN fields, common in env states, as a mismatch); every process builds its
    own shards from its copy instead.
    """
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        return jax.device_put(leaf, sharding)  # already global: reshard
    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        data = _global_from_host(jax.random.key_data(leaf), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf))
    host = np.asarray(leaf)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


@functools.lru_cache(maxsize=64)
def _compiled(
    env: Any,
    policy: Policy,
    num_steps: int,
    mesh: Mesh,
    axis_name: str,
    has_aux: bool,
    keep_info: bool,
    unroll: int,
) -> Callable[[PRNGKeyArray, Any], tuple[Any, Trajectory]]:
    batch = NamedSharding(mesh, P(axis_name))
    time_batch = NamedSharding(mesh, P(None, axis_name))

    def constrain(state: Any) -> Any:
        return jax.lax.with_sharding_constraint(state, batch)

    def run(key: PRNGKeyArray, state: Any) -> tuple[Any, Trajectory]:
        state, trajectory = _rollout(
            env, policy, key, num_steps, state, has_aux, keep_info, unroll, constrain
        )
        return state, jax.lax.with_sharding_constraint(trajectory, time_batch)

    return jax.jit(run, out_shardings=(batch, time_batch))


def shard_rollout(
    env: Any,
    policy: Policy,
    key: PRNGKeyArray,
    num_steps: int,
    *,
    state: Any = None,
    mesh: Mesh | None = None,
    axis_name: str = "batch",
    has_aux: bool = False,
    keep_info: bool = True,
    unroll: int = 1,
) -> tuple[Any, Trajectory]:
    """`parallax.rollout` with the vector env's batch split over the devices of `mesh`.

    The result equals `rollout(env, policy, key, num_steps, state=state, ...)` (bit for
    bit when nothing reduces across the batch); the final state is split along the batch
    axis (`PartitionSpec(axis_name)`) and the trajectory along its second axis
    (`PartitionSpec(None, axis_name)`), ready to be passed back as `state=`. The jitted
    program is cached per `(env, policy, num_steps, mesh, ...)`; it also works inside an
    outer `jit`.

    An env whose step has batch-wide operations (the limit order book's staged flow loop)
    synchronises the devices at each of them. On a multi-core CPU presented as several
    devices (`parallax.set_cpu_devices`) such an env runs faster split with `jax.shard_map`,
    each device stepping its slice alone (see the performance page, "Two devices on two
    cores"); with one CPU pool thread its devices can even wait on each other for ever.

    Args:
        env: a vector env (`VmapWrapper`, `make_vec`) whose `num_envs` is divisible by the
            number of devices on the mesh axis; every leaf of its state leads with
            `num_envs`.
        policy: `policy(key, state) -> action`, as for `rollout` (batched).
        key: a PRNG key (the same on every process of a multi-host run).
        num_steps: positive int.
        state: the state to continue from (as returned by a previous call); None resets
            the env on the mesh.
        mesh: a mesh with an axis `axis_name`; default `batch_mesh()` (all devices).
        axis_name: the mesh axis to split the batch along.
        has_aux, keep_info, unroll: as for `rollout`.

    Returns:
        `(final_state, trajectory)`, both sharded over the mesh.

    Example:
        >>> import jax, parallax
        >>> env = parallax.make_vec("GridWorld-v0", num_envs=8, max_episode_steps=5)
        >>> policy = lambda key, state: jax.random.randint(key, (8,), 0, 4)
        >>> state, traj = parallax.shard_rollout(env, policy, jax.random.key(0), 10)
        >>> traj.reward.shape, traj.reward.sharding.spec
        ((10, 8), P(None, 'batch'))
    """
    if not callable(policy):
        raise TypeError(f"shard_rollout: policy must be callable, got {type(policy).__name__}")
    num_steps = check_positive_int(num_steps, "num_steps", "shard_rollout")
    unroll = check_positive_int(unroll, "unroll", "shard_rollout")
    mesh = batch_mesh(axis_name=axis_name) if mesh is None else mesh
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_rollout: mesh must be a jax.sharding.Mesh, got {mesh!r}")
    size = _axis(mesh, axis_name)
    num_envs = getattr(env, "num_envs", None)
    if not isinstance(num_envs, int):
        raise TypeError(
            "shard_rollout: env must be a vector env with an int `num_envs` (VmapWrapper, "
            f"make_vec), got {type(env).__name__}"
        )
    if num_envs % size:
        raise ValueError(
            f"shard_rollout: num_envs={num_envs} must be divisible by the {size} devices on "
            f"mesh axis {axis_name!r}"
        )
    run = _compiled(env, policy, num_steps, mesh, axis_name, bool(has_aux), bool(keep_info), unroll)
    return run(key, state)
