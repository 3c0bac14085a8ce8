"""`to_jaxmarl`: a multi-agent Parallax environment as a JaxMARL (0.2.0) environment.

- `to_jaxmarl(env)`: the export, a `JaxMARLEnv`.
- `JaxMARLEnv`: a subclass of JaxMARL's `MultiAgentEnv` that runs a Parallax env whose
  states are `MARLState`s (`Race-v0`, `LimitOrderBookMarket-v0`, a `parallax new
  --multi-agent` env).
- `JaxMARLExportState`: its state, the Parallax `MARLState` (with JaxMARL's `done` and
  `step`).
- `to_jaxmarl_space`: a per-agent Parallax space as a JaxMARL space.

JaxMARL's interface, as the export provides it:

- `agents` are the slots `0 .. num_agents - 1`, named `"agent_0"`, `"agent_1"`, ...;
  every dict below has one entry per agent, every step, whatever the agent is doing
  (JaxMARL's arrays have fixed sizes; agents that left are marked, not removed);
- `reset(key) -> (obs, state)`;
- `step(key, state, actions, reset_state=None) -> (obs, state, rewards, dones, infos)`,
  with JaxMARL's auto-reset: on the step `dones["__all__"]` is set, `obs` and `state` are
  the next episode's first (or `reset_state` and its observations, when given), `rewards`
  and `dones` the finished step's;
- `step_env` (one transition, no auto-reset), `get_obs`, `get_avail_actions`,
  `observation_space(agent)`, `action_space(agent)`, `observation_spaces`,
  `action_spaces`, `num_agents`, `agent_classes`, `name`, `max_steps`.

How `MARLState` maps to it (`docs/exports.md`, "JaxMARL"):

- `obs[agent]` is the agent's slice of `agents.observation` (zeros in a slot that is not
  active, Parallax's rule 2), `rewards[agent]` its `agents.reward`;
- `dones[agent]` is `episode over | not agents.active[agent]`: an agent that left (or has
  not joined yet) is done, as JaxMARL marks a dead unit in SMAX; its action is still
  passed (JaxMARL passes one for every agent) and ignored by the env (rule 1). A slot that
  becomes active again gets `dones[agent] = False` again: JaxMARL has no rule against it.
  `dones["__all__"]` is `termination | truncation`;
- `get_avail_actions(state)[agent]` is the env's `action_mask` for that agent when it has
  one, otherwise all actions of a `Discrete` action space (JaxMARL's boolean masks);
- `infos` holds one value per agent for each entry (JaxMARL's baselines reshape every
  info leaf to one value per actor): the env's own `info` entries (a scalar entry repeated
  for every agent, an entry that already leads with `num_agents` as it is, any other
  repeated along a new leading axis), then `terminated` and `truncated` (Parallax's
  episode flags, so a learner can bootstrap at a time limit), and `active`;
- `state.parallax_state` is the `MARLState`; its `global_observation` (when the env has
  one) is what a centralised critic reads.

Keys. As in `to_gymnax`, a Parallax env keeps its own key in its state, so `step` and
`step_env` ignore JaxMARL's step key: the env's draws are the same whatever key is passed,
and the auto-reset starts the next episode from `next_episode_key` of the finished one,
the rule of Parallax's `AutoResetWrapper`, so a JaxMARL rollout of the export runs exactly
the episodes of the Parallax env under `AutoResetWrapper` (tested bit for bit). The state's
key is stored raw (uint32), JaxMARL's convention.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._core import MARLState
from .._spaces import Discrete, MultiBinary, MultiDiscrete, PyTreeSpace, Space
from .._wrappers.autoreset import AutoResetWrapper, next_episode_key, reset_uses_previous
from .._wrappers.base import episode_length, is_vector_env, unwrap_layers
from ._agents import agent_names, agent_space
from ._common import gymnax_style_space, lazy_module_getattr, module_class, raw_key, select_tree
from ._imports import require

__all__ = ["JaxMARLEnv", "JaxMARLExportState", "to_jaxmarl", "to_jaxmarl_space"]

_EXPORT_INFO = ("terminated", "truncated", "active")


def jaxmarl_module(needed_by: str) -> Any:
    """`import jaxmarl`, or the "install the extra" `ImportError`. JaxMARL 0.2.0 prints two
    lines about its optional submodule envs when first imported; they are swallowed."""
    with contextlib.redirect_stdout(io.StringIO()):
        return require("jaxmarl", extra="jaxmarl", needed_by=needed_by)


@jax.tree_util.register_dataclass
@dataclass
class JaxMARLExportState:
    """The JaxMARL state of a `JaxMARLEnv`: the Parallax `MARLState` of the wrapped env."""

    parallax_state: MARLState
    """The wrapped env's `MARLState` (its `key` raw uint32)."""

    @property
    def done(self) -> Array:
        """JaxMARL's episode flag: the Parallax `termination | truncation`."""
        return self.parallax_state.termination | self.parallax_state.truncation

    @property
    def step(self) -> Array:
        """JaxMARL's step counter: the Parallax `step_count`."""
        return self.parallax_state.step_count


# -- spaces -----------------------------------------------------------------------------------
def to_jaxmarl_space(space: Space) -> Any:
    """The JaxMARL space equivalent to one agent's Parallax space.

    Args:
        space: a scalar `Discrete`, a `Box`, a `MultiDiscrete` or `Discrete` with one axis,
            a one-axis `MultiBinary` (a `MultiDiscrete` of 2s), or a `PyTreeSpace` of them
            in dicts (JaxMARL `Dict`) and tuples (JaxMARL `Tuple`).

    Returns:
        A `jaxmarl.environments.spaces` `Discrete`, `MultiDiscrete`, `Box`, `Dict` or
        `Tuple`.

    Raises:
        TypeError: a space JaxMARL has no equivalent for (the message names it).

    Example:
        >>> from parallax import spaces
        >>> from parallax.adapters import to_jaxmarl_space
        >>> space = to_jaxmarl_space(spaces.Discrete(4))
        >>> type(space).__name__, space.n
        ('Discrete', 4)
    """
    jaxmarl_spaces = jaxmarl_module("to_jaxmarl_space").environments.spaces
    tree = space.spaces if isinstance(space, PyTreeSpace) else space
    return _convert(tree, jaxmarl_spaces, "space")


def _convert(space: Any, jaxmarl_spaces: Any, where: str) -> Any:
    if isinstance(space, Discrete) and space.shape == ():
        dtype = jax.dtypes.canonicalize_dtype(np.dtype(space.dtype))
        return jaxmarl_spaces.Discrete(int(space.n), dtype=dtype)
    if isinstance(space, Discrete) and len(space.shape) == 1:
        return jaxmarl_spaces.MultiDiscrete([int(space.n)] * space.shape[0])
    if isinstance(space, MultiDiscrete) and np.ndim(space.nvec) == 1:
        return jaxmarl_spaces.MultiDiscrete([int(n) for n in np.asarray(space.nvec)])
    if isinstance(space, MultiBinary) and len(space.shape) == 1:
        return jaxmarl_spaces.MultiDiscrete([2] * space.shape[0])
    converted = gymnax_style_space(
        space, jaxmarl_spaces, where, lambda s, w: _convert(s, jaxmarl_spaces, w)
    )
    if converted is not None:
        return converted
    raise TypeError(
        f"to_jaxmarl: {where} is {space!r}, which has no JaxMARL equivalent (JaxMARL has "
        "Discrete, MultiDiscrete, Box, and Dict / Tuple of them; a multi-axis discrete "
        "space has none)"
    )


# -- the environment --------------------------------------------------------------------------
def _per_agent(value: Array, num_agents: int) -> Array:
    """An info entry as one value per agent (see the module docstring)."""
    value = jnp.asarray(value)
    if value.ndim >= 1 and value.shape[0] == num_agents:
        return value
    return jnp.broadcast_to(value, (num_agents, *value.shape))


def _make_environment_class() -> type:
    """Build `JaxMARLEnv` on JaxMARL's `MultiAgentEnv` (imported only when first needed)."""
    jaxmarl = jaxmarl_module("to_jaxmarl")
    base = jaxmarl.environments.multi_agent_env.MultiAgentEnv

    class JaxMARLEnv(base):  # type: ignore[misc, valid-type]
        """A multi-agent Parallax environment as a JaxMARL `MultiAgentEnv` (see
        `to_jaxmarl`).

        Attributes:
            env: the wrapped Parallax environment.
            agents: the agent names, `"agent_0"`, `"agent_1"`, ...
            observation_spaces, action_spaces: each agent's JaxMARL space.
            max_steps: the episode length the wrapped stack declares (a `TimeLimit`'s
                `max_steps`, ...), or `None`.
        """

        def __init__(self, env: Any) -> None:
            for attribute in ("reset", "step", "observation_space", "action_space"):
                if not hasattr(env, attribute):
                    raise TypeError(
                        f"to_jaxmarl: env must be a Parallax environment (reset, step and "
                        f"spaces), got {type(env).__name__} without {attribute!r}"
                    )
            if is_vector_env(env):
                raise TypeError(
                    "to_jaxmarl: env must be a single env (JaxMARL code vmaps the env "
                    f"itself), got the vector env {env!r}"
                )
            if any(isinstance(layer, AutoResetWrapper) for layer in unwrap_layers(env)):
                raise TypeError(
                    "to_jaxmarl: do not wrap the env in AutoResetWrapper: JaxMARL's step "
                    "auto-resets"
                )
            shapes = jax.eval_shape(lambda k: env.reset(key=k), jax.random.key(0))
            if not isinstance(shapes, MARLState):
                raise TypeError(
                    f"to_jaxmarl: env must return multi-agent `MARLState`s, got "
                    f"{type(shapes).__name__}; export a single-agent env with to_gymnax"
                )
            num_agents = int(shapes.agents.active.shape[0])
            super().__init__(num_agents=num_agents)
            self.env = env
            self.agents = agent_names(num_agents)
            self._slot = {name: i for i, name in enumerate(self.agents)}
            self._observation_specs = [
                agent_space(env.observation_space, i, num_agents, owner="to_jaxmarl")
                for i in range(num_agents)
            ]
            self._action_specs = [
                agent_space(env.action_space, i, num_agents, owner="to_jaxmarl")
                for i in range(num_agents)
            ]
            self.observation_spaces = {
                a: _convert(_tree(s), jaxmarl.environments.spaces, f"{a}'s observation space")
                for a, s in zip(self.agents, self._observation_specs)
            }
            self.action_spaces = {
                a: _convert(_tree(s), jaxmarl.environments.spaces, f"{a}'s action space")
                for a, s in zip(self.agents, self._action_specs)
            }
            clash = sorted(set(shapes.info) & set(_EXPORT_INFO))
            if clash:
                raise ValueError(
                    f"to_jaxmarl: the env's info already has {clash}, which the export sets"
                )
            self._reads_previous = reset_uses_previous(env)
            self.max_steps = episode_length(env)

        # -- JaxMARL's interface -------------------------------------------------------------
        @property
        def name(self) -> str:
            """The wrapped env's class name (the innermost layer's)."""
            return type(unwrap_layers(self.env)[-1]).__name__

        @property
        def agent_classes(self) -> dict[str, list[str]]:
            """One class holding every agent (a Parallax env's slots share their spaces)."""
            return {"agent": list(self.agents)}

        @partial(jax.jit, static_argnums=(0,))
        def reset(self, key: Any) -> tuple[dict[str, Any], JaxMARLExportState]:
            """The env's `reset(key=key)`: `(obs, state)`."""
            state = JaxMARLExportState(parallax_state=self._reset(key, previous=None))
            return self.get_obs(state), state

        def step_env(
            self, key: Any, state: JaxMARLExportState, actions: dict[str, Any]
        ) -> tuple[dict[str, Any], JaxMARLExportState, dict[str, Array], dict[str, Array], Any]:
            """One transition of the env (no auto-reset); `key` is unused (see the module)."""
            del key  # the env draws from the key in its own state
            stepped = self.env.step(state.parallax_state, self._stack(actions))
            next_state = JaxMARLExportState(parallax_state=self._raw(stepped))
            agents = stepped.agents
            over = stepped.termination | stepped.truncation
            rewards = {a: agents.reward[i] for a, i in self._slot.items()}
            dones = {a: over | ~agents.active[i] for a, i in self._slot.items()}
            dones["__all__"] = over
            return self.get_obs(next_state), next_state, rewards, dones, self._infos(stepped)

        @partial(jax.jit, static_argnums=(0,))
        def step(
            self,
            key: Any,
            state: JaxMARLExportState,
            actions: dict[str, Any],
            reset_state: JaxMARLExportState | None = None,
        ) -> tuple[Any, ...]:
            """JaxMARL's `step`: one transition, then JaxMARL's auto-reset when it ended.

            `key` is unused: the next episode starts from `next_episode_key` of the finished
            one, or from `reset_state` when given (see the module).
            """
            obs_step, stepped, rewards, dones, infos = self.step_env(key, state, actions)
            if reset_state is None:
                finished = stepped.parallax_state
                fresh = self._reset(next_episode_key(finished.key), previous=finished)
                reset_state = JaxMARLExportState(parallax_state=fresh)
            next_state = select_tree(dones["__all__"], reset_state, stepped)
            obs = select_tree(dones["__all__"], self.get_obs(reset_state), obs_step)
            return obs, next_state, rewards, dones, infos

        def get_obs(self, state: JaxMARLExportState) -> dict[str, Any]:
            """Each agent's slice of the state's `agents.observation`."""
            observation = state.parallax_state.agents.observation
            return {
                a: jax.tree.map(lambda x, i=i: x[i], observation) for a, i in self._slot.items()
            }

        def get_avail_actions(self, state: JaxMARLExportState) -> dict[str, Any]:
            """Each agent's legal actions: the env's `action_mask`, or every action of a
            `Discrete` action space (booleans)."""
            mask = state.parallax_state.agents.action_mask
            if mask is not None:
                return {a: jax.tree.map(lambda m, i=i: m[i], mask) for a, i in self._slot.items()}
            space = self._action_specs[0]
            if isinstance(space, Discrete) and space.shape == ():
                every = jnp.ones((space.n,), dtype=bool)
                return {a: every for a in self.agents}
            raise NotImplementedError(
                f"to_jaxmarl: {self.name} has no action_mask and a {space!r} action space; "
                "available actions are defined for masked envs and Discrete action spaces"
            )

        # -- helpers -------------------------------------------------------------------------
        @staticmethod
        def _raw(state: MARLState) -> MARLState:
            return replace(state, key=raw_key(state.key))

        def _reset(self, key: Any, previous: MARLState | None) -> MARLState:
            kwargs: dict[str, Any] = {}
            if previous is not None and self._reads_previous:
                kwargs["previous"] = previous
            return self._raw(self.env.reset(key=key, **kwargs))

        def _stack(self, actions: Any) -> Any:
            if not isinstance(actions, dict):
                raise TypeError(
                    f"to_jaxmarl: step takes actions as a dict {{agent: action}}, got "
                    f"{type(actions).__name__}"
                )
            missing = [a for a in self.agents if a not in actions]
            extra = [a for a in actions if a not in self._slot]
            if missing or extra:
                raise ValueError(
                    f"to_jaxmarl: step needs one action for every agent {self.agents} "
                    f"(inactive agents' are ignored); missing {missing}, unknown {extra}"
                )
            per_agent = [actions[a] for a in self.agents]
            return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *per_agent)

        def _infos(self, state: MARLState) -> dict[str, Any]:
            n = self.num_agents
            infos = jax.tree.map(lambda x: _per_agent(x, n), dict(state.info))
            infos["terminated"] = jnp.broadcast_to(state.termination, (n,))
            infos["truncated"] = jnp.broadcast_to(state.truncation, (n,))
            infos["active"] = state.agents.active
            return infos

        def __repr__(self) -> str:
            return f"to_jaxmarl({self.env!r})"

    return module_class(JaxMARLEnv, __name__)


def _tree(space: Any) -> Any:
    return space.spaces if isinstance(space, PyTreeSpace) else space


JaxMARLEnv: type
"""The class of `to_jaxmarl`'s result, built on JaxMARL's `MultiAgentEnv` on first access."""

# built once, on first use: the class subclasses JaxMARL's, so it needs jaxmarl imported
_environment_class = cache(_make_environment_class)


__getattr__ = lazy_module_getattr(__name__, "JaxMARLEnv", _environment_class)


def to_jaxmarl(env: Any) -> Any:
    """Export a multi-agent Parallax environment as a JaxMARL `MultiAgentEnv` (see the
    module).

    Args:
        env: a single Parallax environment returning `MARLState`s, with stacked spaces
            (`stack_space(per_agent_space, num_agents)`), unwrapped or wrapped (`TimeLimit`,
            ...), but not in `AutoResetWrapper`: JaxMARL's `step` auto-resets.

    Returns:
        A `JaxMARLEnv`, a subclass of `jaxmarl.environments.multi_agent_env.MultiAgentEnv`.

    Raises:
        ImportError: jaxmarl is not installed (the message names the extra).
        TypeError: `env` is not a single multi-agent environment, is auto-reset, or has a
            space JaxMARL has no equivalent for (named).

    Example:
        >>> import jax
        >>> import parallax
        >>> from parallax.adapters import to_jaxmarl
        >>> env = to_jaxmarl(parallax.make("Race-v0"))
        >>> obs, state = env.reset(jax.random.PRNGKey(0))
        >>> actions = {"agent_0": 1, "agent_1": 0, "agent_2": 1}
        >>> obs, state, rewards, dones, infos = env.step(jax.random.PRNGKey(1), state, actions)
        >>> float(obs["agent_0"]), float(rewards["agent_0"]), bool(dones["__all__"])
        (1.0, 0.0, False)
        >>> env.agents, env.action_space("agent_0").n
        (['agent_0', 'agent_1', 'agent_2'], 2)
    """
    return _environment_class()(env)
