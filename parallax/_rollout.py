"""`rollout`: collect a trajectory with `jax.lax.scan`, inside or outside `jit`.

- `Trajectory`: the collected transitions, a registered dataclass pytree.
- `rollout`: run a policy for `num_steps` steps of a single or vector env.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from ._wrappers.autoreset import FINAL_OBSERVATION, final_observation
from ._wrappers.base import check_positive_int

__all__ = ["Trajectory", "rollout"]


# Fields are typed `Any`: JAX rebuilds pytrees with non-array leaves (`jax.eval_shape`,
# tree maps), which a run-time checked `__init__` would refuse; docstrings give the types.
@jax.tree_util.register_dataclass
@dataclass
class Trajectory:
    """Transitions collected by `rollout`; every leaf leads with `(num_steps, *batch)`.

    Transition `t` goes from `observation[t]` with `action[t]` to `next_observation[t]`.
    At an episode end `next_observation[t]` is the true terminal observation (from
    `info["final_observation"]` under auto-reset), while the next row's `observation`
    is the first observation of the new episode. Bootstrap value targets from
    `next_observation` where `truncation` is True, never where `termination` is.
    """

    observation: Any
    """Observation the action was chosen from."""

    action: Any
    """Action taken."""

    reward: Any
    """Reward of the transition."""

    termination: Any
    """The transition ended the episode in a terminal state (bool)."""

    truncation: Any
    """The transition ended the episode by truncation (bool)."""

    next_observation: Any
    """Observation after the transition; the true terminal observation at episode ends."""

    info: Any
    """`info` of the state after the transition, without `"final_observation"` (it is
    `next_observation`); `{}` with `keep_info=False`."""

    aux: Any = None
    """What the policy returned next to the action (`has_aux=True`), else None."""

    @property
    def done(self) -> Array:
        """`termination | truncation`."""
        return self.termination | self.truncation


Policy = Callable[[PRNGKeyArray, Any], Any]


def _check_action_batch(env: Any, action: Any) -> None:
    """Raise at trace time when a vector env's policy returns no batch of actions."""
    num_envs = getattr(env, "num_envs", None)
    if num_envs is None:
        return
    for leaf in jax.tree.leaves(action):
        if tuple(jnp.shape(leaf))[:1] != (num_envs,):
            space_shape = getattr(getattr(env, "action_space", None), "shape", None)
            if isinstance(space_shape, tuple):
                expected = f"shape {(num_envs, *space_shape)}"
            else:
                expected = f"leaves leading with {num_envs}"
            raise ValueError(
                f"rollout: the policy must return one action per env for a vector env of "
                f"num_envs={num_envs} ({expected}), got an action of shape {jnp.shape(leaf)}"
            )


def _rollout(
    env: Any,
    policy: Policy,
    key: PRNGKeyArray,
    num_steps: int,
    state: Any,
    has_aux: bool,
    keep_info: bool,
    unroll: int,
    constrain: Callable[[Any], Any],
) -> tuple[Any, Trajectory]:
    if state is None:
        key, reset_key = jax.random.split(key)
        state = env.reset(key=reset_key)
    state = constrain(state)

    def body(state: Any, step_key: PRNGKeyArray) -> tuple[Any, Trajectory]:
        out = policy(step_key, state)
        action, aux = out if has_aux else (out, None)
        _check_action_batch(env, action)
        next_state = constrain(env.step(state, action))
        info = next_state.info
        if keep_info and isinstance(info, dict):
            info = {k: v for k, v in info.items() if k != FINAL_OBSERVATION}
        else:
            info = {}
        transition = Trajectory(
            observation=state.observation,
            action=action,
            reward=next_state.reward,
            termination=next_state.termination,
            truncation=next_state.truncation,
            next_observation=final_observation(next_state),
            info=info,
            aux=aux,
        )
        return next_state, transition

    keys = jax.random.split(key, num_steps)
    return jax.lax.scan(body, state, keys, unroll=unroll)


def rollout(
    env: Any,
    policy: Policy,
    key: PRNGKeyArray,
    num_steps: int,
    *,
    state: Any = None,
    has_aux: bool = False,
    keep_info: bool = True,
    unroll: int = 1,
) -> tuple[Any, Trajectory]:
    """Run `policy` in `env` for `num_steps` steps with `jax.lax.scan`.

    Pure and traceable: call it inside a jitted training step, vmap it over seeds, or
    `jax.jit(rollout, static_argnums=(0, 1, 3))` it alone. Works for single envs and
    vector envs (`VmapWrapper`, `make_vec`), with or without auto-reset; without
    auto-reset an episode that ends simply keeps stepping (reset it yourself between calls,
    or use `AutoResetWrapper`).

    Args:
        env: a Parallax environment (single or vector).
        policy: `policy(key, state) -> action` (or `(action, aux)` with `has_aux`). It gets
            the whole state, so it can read `state.observation`, an action mask or wrapper
            statistics; over a vector env it gets the batched state and returns a batch of
            actions. `key` is a fresh key for each step.
        key: a PRNG key; split into the reset key (when `state` is None) and one key per
            step.
        num_steps: positive int, the number of steps (the trajectory's leading axis).
        state: the state to continue from; None resets the env first.
        has_aux: the policy returns `(action, aux)`; `aux` (e.g. log-probabilities and
            values) is stacked into `Trajectory.aux`.
        keep_info: keep each step's `info` in `Trajectory.info` (`{}` when False, which
            saves memory).
        unroll: passed to `lax.scan`.

    Returns:
        `(final_state, trajectory)`: the state after the last step (continue from it) and a
        `Trajectory` whose leaves have shape `(num_steps, *batch, ...)`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import parallax
        >>> env = parallax.make_vec("GridWorld-v0", num_envs=4, max_episode_steps=3)
        >>> policy = lambda key, state: jax.random.randint(key, (4,), 0, 4)
        >>> state, traj = jax.jit(parallax.rollout, static_argnums=(0, 1, 3))(
        ...     env, policy, jax.random.key(0), 6)
        >>> traj.observation.shape, traj.reward.shape, bool(traj.truncation[2].all())
        ((6, 4, 4), (6, 4), True)
    """
    if not callable(policy):
        raise TypeError(f"rollout: policy must be callable, got {type(policy).__name__}")
    num_steps = check_positive_int(num_steps, "num_steps", "rollout")
    unroll = check_positive_int(unroll, "unroll", "rollout")
    return _rollout(
        env, policy, key, num_steps, state, bool(has_aux), bool(keep_info), unroll, lambda s: s
    )
