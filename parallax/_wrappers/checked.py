"""`CheckedWrapper`: an opt-in runtime check that stops a jitted program on bad values.

Before any of that, at trace time, `step` refuses an action of the wrong shape or kind
(a float or a batch of actions given to a `Discrete` env, say) with the `TypeError` /
`ValueError` of `parallax.check_action`, which names the space and the expected shape
(`num_envs` actions over a vector env), before the wrapped env is traced. That check is on
by default in every env `make` builds; `CheckedWrapper` adds the value checks below.

Inside `jit` nothing can raise a Python exception, so the checks use `equinox`'s runtime
errors: the program stops with a message that names the check, the env index (for vector
envs) and the offending field. Checked on every `reset` and `step`:

- the action lies in `action_space` (step only);
- the observation holds no NaN or inf in its floating leaves;
- the reward is finite.

The checks cost a few reductions per step; leave the wrapper out of production runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._action_check import check_action
from .._core import Env, KeyArray, MARLState, StateT
from .base import Wrapper, batch_depth, is_vector_env, step_env

_CHECKS = ("action outside action_space", "NaN or inf in observation", "NaN or inf in reward")


def _nonfinite(tree: PyTree, batch_dims: int) -> Array:
    """Per-env (or scalar) flag: any floating leaf holds NaN or inf."""
    flags = [
        jnp.any(~jnp.isfinite(leaf), axis=tuple(range(batch_dims, jnp.ndim(leaf))))
        for leaf in jax.tree.leaves(tree)
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
    ]
    if not flags:
        leaves = jax.tree.leaves(tree)
        return jnp.zeros(jnp.shape(leaves[0])[:batch_dims] if leaves else (), bool)
    out = flags[0]
    for f in flags[1:]:
        out = out | f
    return out


class CheckedWrapper(Wrapper[StateT]):
    """Stop the program with a clear message on NaN/inf or out-of-space values.

    Put it outermost, over `VmapWrapper`, to get env indices in the messages.

    Args:
        env: any environment or vector environment.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import CheckedWrapper, VmapWrapper
        >>> from parallax.envs import GridWorld
        >>> env = CheckedWrapper(VmapWrapper(GridWorld(), num_envs=4))
        >>> state = env.reset(key=jax.random.key(0))
        >>> try:
        ...     jax.jit(env.step)(state, jnp.array([0, 1, 9, 0]))
        ... except Exception as error:
        ...     print("env 2" in str(error))
        True
    """

    def __init__(self, env: Env[StateT]) -> None:
        super().__init__(env)
        self._vector = is_vector_env(env)
        self._num_envs = int(getattr(env, "num_envs", 1)) if self._vector else 1
        n = self._num_envs
        self._messages = tuple(
            f"CheckedWrapper: {check}" + (f" in env {i} of {n}" if self._vector else "")
            for i in range(n)
            for check in _CHECKS
        )

    def _rewards(self, state: Any) -> Any:
        return state.agents.reward if isinstance(state, MARLState) else state.reward

    def _observations(self, state: Any) -> Any:
        return state.agents.observation if isinstance(state, MARLState) else state.observation

    def _check(self, state: StateT, bad_action: Array) -> StateT:
        batch = 1 if self._vector else 0
        codes = jnp.stack(
            [
                bad_action,
                _nonfinite(self._observations(state), batch),
                _nonfinite(self._rewards(state), batch),
            ],
            axis=-1,
        )  # (N, 3) or (3,)
        flat = codes.reshape(-1)
        index = jnp.argmax(flat)
        # Tie the check to a numeric leaf (equinox cannot carry typed keys through its check).
        if isinstance(state, MARLState):
            reward = eqx.branched_error_if(state.agents.reward, flat[index], index, self._messages)
            return replace(state, agents=replace(state.agents, reward=reward))
        reward = eqx.branched_error_if(state.reward, flat[index], index, self._messages)
        return replace(state, reward=reward)

    def reset(self, *, key: KeyArray, **kwargs: Any) -> StateT:
        """Reset, then check the observation."""
        state = self.env.reset(key=key, **kwargs)
        no = jnp.zeros((self._num_envs,) if self._vector else (), bool)
        return self._check(state, no)

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Check the action, step (`params=` passed on when given), then check observation
        and reward.

        The action's shape and kind are checked at trace time (`TypeError` for the kind,
        `ValueError` for the shape), its values inside `jit`. For multi-agent states the
        value check is skipped: inactive slots may hold any value.
        """
        space = self.env.action_space
        batch = (self._num_envs,) if self._vector else ()
        nested = batch_depth(self.env) > 1
        check_action(space, action, "CheckedWrapper.step", None if nested else batch)
        if isinstance(state, MARLState):
            bad_action = jnp.zeros((self._num_envs,) if self._vector else (), bool)
        elif self._vector:
            bad_action = ~jax.vmap(space.contains)(action)
        else:
            bad_action = ~jnp.asarray(space.contains(action))
        stepped = step_env(self.env, state, action, params)
        return self._check(stepped, bad_action)
