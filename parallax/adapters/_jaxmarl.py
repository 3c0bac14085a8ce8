"""`JaxMARLAdapter`: a JaxMARL (0.2.0) multi-agent environment as a Parallax environment.

- `JaxMARLAdapter`: the adapter; its states are `MARLState`s.
- `from_jaxmarl_space`: a JaxMARL space (Discrete, MultiDiscrete, Box, Dict, Tuple) as a
  Parallax one.

The agents' spaces are stacked into one multi-agent space (leading axis: the agents, in
`env.agents` order), so the adapted env takes JaxMARL envs whose agents share observation
and action shapes: the MPE envs `MPE_simple_v3`, `MPE_simple_spread_v3`,
`MPE_simple_reference_v3`, `MPE_simple_facmac_*`, and others of that kind. Envs whose
agents differ (`MPE_simple_tag_v3`'s adversaries see more than the good agents) are refused
with both agents' spaces named.

How a step is computed. JaxMARL's public `env.step(k, state, actions)` splits `k` into a
step key and a reset key, calls `step_env` with the step key, and replaces the outcome by a
fresh reset when `dones["__all__"]`. The adapter makes the same `step_env` call without
the auto-reset, with `k = fold_in(state.key, t | 2**31)` as `GymnaxAdapter` does, so the
state after a step equals the one JaxMARL's `step(k, ...)` returns while the episode goes
on (tested step by step on MPE), and the last step's observation is the true terminal one.
`reset(key=key)` gives JaxMARL `jax.random.split(key)[1]` and keeps `split(key)[0]` as the
episode key. Restarting episodes is the job of `AutoResetWrapper`.

How JaxMARL's outcome maps to `MARLState`:

- `agents.observation`: the agents' observations, stacked; `agents.reward` their rewards;
- `agents.active`: an agent stays active until JaxMARL marks it done while the episode goes
  on (a dead SMAX unit); agents still in the game when the episode ends stay active in its
  last state. An inactive agent's observation and reward are zeros (Parallax's rule 2); its
  action is still passed to JaxMARL, which ignores a dead agent's;
- `termination` / `truncation`: `dones["__all__"]` is a truncation when the env has a
  `max_steps` (every MPE env) and the episode has reached it, a termination otherwise;
- `agents.action_mask`: `get_avail_actions`, for envs that implement it (stacked);
- `info`: JaxMARL's step info (zeros of the same shapes at reset);
- `env_state`: JaxMARL's own state.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from .._action_check import check_action
from .._core import Agents, KeyArray, MARLState
from .._spaces import Box, Discrete, MultiDiscrete, PyTreeSpace, Space
from .._validate import check_key
from ._agents import stack_agent_spaces
from ._common import cast_to_space, foreign_numerics, like, raw_key, strong
from ._gymnax import step_key_of
from ._to_jaxmarl import jaxmarl_module

__all__ = ["JaxMARLAdapter", "from_jaxmarl_space"]


def from_jaxmarl_space(space: Any) -> Space:
    """The Parallax space equivalent to a JaxMARL space.

    Args:
        space: a `jaxmarl.environments.spaces` `Discrete`, `MultiDiscrete`, `Box`, or a
            `Dict` / `Tuple` of them.

    Returns:
        A `Discrete`, `MultiDiscrete`, `Box`, or a `PyTreeSpace` of them.

    Raises:
        TypeError: a space of another type (named).

    Example:
        >>> from jaxmarl.environments import spaces
        >>> from parallax.adapters import from_jaxmarl_space
        >>> from_jaxmarl_space(spaces.Discrete(5))
        Discrete(5)
    """
    tree = _convert(space, jaxmarl_module("from_jaxmarl_space").environments.spaces)
    return tree if isinstance(tree, Space) else PyTreeSpace(tree)


def _convert(space: Any, spaces: Any) -> Any:
    if isinstance(space, spaces.Discrete):
        dtype = jax.dtypes.canonicalize_dtype(np.dtype(space.dtype))
        return Discrete(int(space.n), (), dtype)
    if isinstance(space, spaces.MultiDiscrete):
        return MultiDiscrete(np.asarray(space.num_categories), np.dtype(space.dtype))
    if isinstance(space, spaces.Box):
        dtype = jax.dtypes.canonicalize_dtype(np.dtype(space.dtype))
        shape = tuple(space.shape)
        low = np.broadcast_to(np.asarray(space.low, dtype=dtype), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype=dtype), shape)
        return Box(low, high, shape, dtype)
    if isinstance(space, spaces.Dict):
        return {k: _convert(v, spaces) for k, v in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_convert(v, spaces) for v in space.spaces)
    raise TypeError(
        f"from_jaxmarl_space: {type(space).__name__} has no Parallax equivalent (JaxMARL's "
        "Discrete, MultiDiscrete, Box, Dict and Tuple have)"
    )


def _stacked(values: dict[str, Any], names: list[str]) -> PyTree:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *[values[a] for a in names])


def _zero_where_inactive(tree: PyTree, active: Array) -> PyTree:
    def zero(x: Array) -> Array:
        keep = active.reshape(active.shape + (1,) * (x.ndim - 1))
        return jnp.where(keep, x, jnp.zeros_like(x))

    return jax.tree.map(zero, tree)


class JaxMARLAdapter:
    """A JaxMARL environment as a multi-agent Parallax environment (see the module).

    Args:
        env: a JaxMARL `MultiAgentEnv` whose agents share observation and action shapes,
            e.g. `jaxmarl.make("MPE_simple_spread_v3")`.

    Attributes:
        env: the wrapped JaxMARL environment.
        agent_names: JaxMARL's agent names, in slot order.
        num_agents: the number of slots.
        action_space, observation_space: the stacked Parallax spaces.
        check_actions: whether `step` refuses, at trace time, an action of the wrong shape
            or dtype kind (`parallax.check_action`); `True` unless set to `False`.

    Example:
        >>> import jax, jaxmarl
        >>> from parallax.adapters import JaxMARLAdapter
        >>> env = JaxMARLAdapter(jaxmarl.make("MPE_simple_spread_v3"))
        >>> env.num_agents, env.observation_space.shape, env.action_space
        (3, (3, 18), Discrete(5, shape=(3,)))
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, jax.numpy.array([1, 2, 0]))
        >>> state.agents.reward.shape, bool(state.done)
        ((3,), False)
    """

    check_actions: bool = True

    def __init__(self, env: Any) -> None:
        jaxmarl = jaxmarl_module("JaxMARLAdapter")
        if not isinstance(env, jaxmarl.environments.multi_agent_env.MultiAgentEnv):
            raise TypeError(
                "JaxMARLAdapter: env must be a JaxMARL MultiAgentEnv (e.g. "
                f"jaxmarl.make('MPE_simple_spread_v3')), got {type(env).__name__}"
            )
        self.env = env
        self.agent_names = list(env.agents)
        self.num_agents = len(self.agent_names)
        owner = f"JaxMARLAdapter({self.name})"
        self.observation_space = stack_agent_spaces(
            [from_jaxmarl_space(env.observation_space(a)) for a in self.agent_names],
            self.agent_names,
            owner=owner,
        )
        self.action_space = stack_agent_spaces(
            [from_jaxmarl_space(env.action_space(a)) for a in self.agent_names],
            self.agent_names,
            owner=owner,
        )
        limit = getattr(env, "max_steps", None)
        self.max_steps = int(limit) if isinstance(limit, int | np.integer) else None
        self._has_mask = self._implements_avail_actions()

    @property
    def name(self) -> str:
        """JaxMARL's name of the environment."""
        return str(self.env.name)

    @property
    def episode_length(self) -> int | None:
        """The env's `max_steps` (every MPE env has one), or None."""
        return self.max_steps

    def _implements_avail_actions(self) -> bool:
        def avail(key: Any) -> Any:
            with foreign_numerics():
                _, state = self.env.reset(key)
                return self.env.get_avail_actions(state)

        try:
            jax.eval_shape(avail, jax.random.PRNGKey(0))
        except NotImplementedError:
            return False
        return True

    def _avail(self, jaxmarl_state: Any) -> PyTree | None:
        if not self._has_mask:
            return None
        with foreign_numerics():
            avail = self.env.get_avail_actions(jaxmarl_state)
        return jax.tree.map(lambda m: m.astype(bool), _stacked(avail, self.agent_names))

    def _reset_info(self, jaxmarl_state: Any) -> dict[str, Any]:
        def step_env(k: Any, s: Any, a: Any) -> Any:
            with foreign_numerics():
                return self.env.step_env(k, s, a)

        actions = {
            a: jax.ShapeDtypeStruct(self.env.action_space(a).shape, self.env.action_space(a).dtype)
            for a in self.agent_names
        }
        abstract = jax.eval_shape(step_env, jax.random.PRNGKey(0), jaxmarl_state, actions)[4]
        return jax.tree.map(lambda v: jnp.zeros(v.shape, v.dtype), dict(abstract))

    def reset(self, *, key: KeyArray) -> MARLState:
        """Start an episode (JaxMARL's `reset` with `jax.random.split(key)[1]`).

        Returns:
            The first `MARLState`: every agent active, rewards 0, both flags False.
        """
        check_key(key, f"{self!r}.reset")
        key, reset_key = jax.random.split(key)
        with foreign_numerics():
            obs, jaxmarl_state = self.env.reset(raw_key(reset_key))
        jaxmarl_state = strong(jaxmarl_state)
        observation = cast_to_space(_stacked(obs, self.agent_names), self.observation_space)
        return MARLState(
            env_state=jaxmarl_state,
            agents=Agents(
                observation=observation,
                active=jnp.ones(self.num_agents, dtype=bool),
                reward=jnp.zeros(self.num_agents, dtype=jnp.float32),
                action_mask=self._avail(jaxmarl_state),
            ),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info=self._reset_info(jaxmarl_state),
            step_count=jnp.int32(0),
            key=key,
        )

    def step(self, state: MARLState, action: PyTree) -> MARLState:
        """One JaxMARL transition (`step_env`), without JaxMARL's auto-reset.

        Args:
            state: the current state.
            action: the stacked actions, one per agent (`action_space`); a `Discrete`
                action outside `[0, n)` is clipped into it. An inactive agent's action is
                passed on and ignored.

        Returns:
            The next `MARLState`; on the last step of an episode it holds the terminal
            observations and `termination` or `truncation` (never both).
        """
        if self.check_actions:
            check_action(self.action_space, action, f"{self!r}.step")
        if isinstance(self.action_space, Discrete):
            action = jnp.clip(action, 0, self.action_space.n - 1)
        actions = {
            a: jax.tree.map(lambda x, i=i: x[i], action) for i, a in enumerate(self.agent_names)
        }
        step_key, _ = jax.random.split(raw_key(step_key_of(state.key, state.step_count)))
        with foreign_numerics():
            obs, jaxmarl_state, rewards, dones, info = self.env.step_env(
                step_key, state.env_state, actions
            )
        jaxmarl_state = like(jaxmarl_state, state.env_state)
        over = jnp.asarray(dones["__all__"]).astype(bool)
        agent_done = jnp.stack([jnp.asarray(dones[a]).astype(bool) for a in self.agent_names])
        previous = state.agents.active
        active = previous & ~(agent_done & ~over)
        truncation = over & self._at_time_limit(jaxmarl_state)
        observation = cast_to_space(_stacked(obs, self.agent_names), self.observation_space)
        reward = jnp.stack([jnp.asarray(rewards[a]) for a in self.agent_names])
        return MARLState(
            env_state=jaxmarl_state,
            agents=Agents(
                observation=_zero_where_inactive(observation, active),
                active=active,
                reward=jnp.where(previous, reward.astype(jnp.float32), 0.0),
                action_mask=self._avail(jaxmarl_state),
            ),
            termination=over & ~truncation,
            truncation=truncation,
            info=like(dict(info), state.info),
            step_count=state.step_count + 1,
            key=state.key,
        )

    def _at_time_limit(self, jaxmarl_state: Any) -> Array:
        step = getattr(jaxmarl_state, "step", None)
        if self.max_steps is None or step is None:
            return jnp.bool_(False)
        return jnp.asarray(step) >= self.max_steps

    def __repr__(self) -> str:
        return f"JaxMARLAdapter({self.name})"
