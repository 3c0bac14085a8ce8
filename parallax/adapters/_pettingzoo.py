"""Parallax multi-agent environments for PettingZoo users (this module imports `pettingzoo`).

- `to_pettingzoo(env, seed=None)`: a multi-agent Parallax environment as a PettingZoo
  `ParallelEnv`.
- `PettingZooEnv`: the class it builds (a `pettingzoo.ParallelEnv`).

Like `GymnasiumEnv`, the export is host-side: `reset` and `step` are each compiled once
with `jax.jit` (the env's step plus every conversion), each call makes one device-to-host
transfer (one byte buffer), and the caller gets NumPy.

How `MARLState` maps to PettingZoo's conventions (docs/protocol.md, "Timing"):

- agents are the slots `0 .. num_agents - 1`, named `"agent_0"`, `"agent_1"`, ...
  (`possible_agents`); `agents` lists the slots whose `agents.active` is set, in slot order;
- `step` reports, for every agent in `agents` before the step (and any agent that became
  active during it), its observation, reward (`agents.reward`, which pairs with the
  previous `active` mask), `terminated` and `truncated`. An agent whose slot became
  inactive is `terminated` (its observation is zeros, rule 2) and leaves `agents`; on the
  step the episode ends every reported agent is terminated (`termination`) or truncated
  (`truncation`) and `agents` becomes empty;
- PettingZoo agents never come back: an env that re-activates a slot which left raises
  `RuntimeError` (spawning slots that were never active is fine);
- infos: each agent's dict holds the env's `info` (episode-level, the same for every
  agent) and, when the env has action masks, `"action_mask"` (`int8`, as Gymnasium's
  `Discrete.sample(mask=...)` takes it);
- `state()` is the env's `global_observation` (NumPy), when it has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
import jax
import numpy as np

from .._core import MARLState
from .._wrappers.base import is_vector_env
from ._agents import agent_names, agent_space
from ._gymnasium_host import (
    HostPacker,
    ObservationCodec,
    action_encoder,
    check_parallax_env,
    seed_to_int,
)
from ._gymnasium_spaces import to_gymnasium_space
from ._imports import require

_pettingzoo = require("pettingzoo", extra="pettingzoo", needed_by="PettingZooEnv")

__all__ = ["PettingZooEnv", "to_pettingzoo"]


class PettingZooEnv(_pettingzoo.ParallelEnv):  # type: ignore[misc, name-defined]
    """A multi-agent Parallax environment (`MARLState`s) as a PettingZoo `ParallelEnv`.

    Passes `pettingzoo.test.parallel_api_test` and `parallel_seed_test`. The mapping of
    `active`, rewards and the episode flags is in the module docstring. Build it with
    `to_pettingzoo`.

    Args:
        env: a single (not vectorised) Parallax environment whose states are `MARLState`s,
            with stacked spaces (`stack_space(per_agent_space, num_agents)`); wrap it in
            `TimeLimit` for a time limit.
        seed: optional non-negative int seeding the generator that draws the keys of
            unseeded resets.

    Attributes:
        env: the Parallax environment.
        possible_agents, agents: agent names (`agents`: those taking part now).
        observation_spaces, action_spaces: each agent's Gymnasium space (the same objects
            `observation_space(agent)` / `action_space(agent)` return).
        parallax_state: the current `MARLState` (`None` before the first `reset`).

    Example:
        >>> import parallax
        >>> from parallax.adapters import to_pettingzoo
        >>> env = to_pettingzoo(parallax.make("Race-v0"))
        >>> env.possible_agents, env.action_space("agent_0")
        (['agent_0', 'agent_1', 'agent_2'], Discrete(2))
        >>> obs, infos = env.reset(seed=0)
        >>> obs, rewards, terminations, truncations, infos = env.step(
        ...     {"agent_0": 1, "agent_1": 0, "agent_2": 1}
        ... )
        >>> float(obs["agent_0"]), rewards["agent_0"], terminations["agent_0"]
        (1.0, 0.0, False)
        >>> try:
        ...     env.step({"agent_0": 2, "agent_1": 0, "agent_2": 0})
        ... except ValueError as error:
        ...     print(error)
        PettingZooEnv.step: action 2 of 'agent_0' is not in the action space Discrete(2)
    """

    metadata = {"name": "parallax", "render_modes": [], "is_parallelizable": True}  # noqa: RUF012

    def __init__(self, env: Any, seed: int | None = None) -> None:
        check_parallax_env(env, "PettingZooEnv")
        if is_vector_env(env):
            raise TypeError("PettingZooEnv: env must be a single env, got a vector env")
        shapes = jax.eval_shape(lambda k: env.reset(key=k), jax.random.key(0))
        if not isinstance(shapes, MARLState):
            raise TypeError(
                "PettingZooEnv: env must return multi-agent `MARLState`s, got "
                f"{type(shapes).__name__}; use GymnasiumEnv for a single-agent env"
            )
        num_agents = int(shapes.agents.active.shape[0])
        self.env = env
        self.render_mode = None
        self.possible_agents = agent_names(num_agents)
        self.agents: list[str] = []
        self._slot = {name: i for i, name in enumerate(self.possible_agents)}
        obs_specs = [
            agent_space(env.observation_space, i, num_agents, owner="PettingZooEnv")
            for i in range(num_agents)
        ]
        act_specs = [
            agent_space(env.action_space, i, num_agents, owner="PettingZooEnv")
            for i in range(num_agents)
        ]
        self.observation_spaces = {
            a: to_gymnasium_space(s) for a, s in zip(self.possible_agents, obs_specs)
        }
        self.action_spaces = {
            a: to_gymnasium_space(s) for a, s in zip(self.possible_agents, act_specs)
        }
        self._encoders = {
            a: action_encoder(
                self.action_spaces[a], act_specs[i], "PettingZooEnv.step", of=f" of {a!r}"
            )
            for i, a in enumerate(self.possible_agents)
        }
        # inactive slots get zeros: the env ignores their actions (rule 1)
        zeros, self._action_treedef = jax.tree.flatten(
            jax.eval_shape(lambda: env.action_space.sample(key=jax.random.key(0)))
        )
        self._action_zeros = [np.zeros(z.shape, z.dtype) for z in zeros]
        codec = ObservationCodec(obs_specs[0])
        self._build_obs = codec.host
        reset_packer, step_packer = HostPacker("PettingZooEnv"), HostPacker("PettingZooEnv")
        self._reset_out, self._step_out = reset_packer.unpack, step_packer.unpack

        def reset(key: Any) -> Any:
            state = env.reset(key=key)
            agents = state.agents
            out = (codec.device(agents.observation), agents.active, agents.action_mask)
            return state, reset_packer.pack((*out, state.info))

        def step(state: Any, action: Any) -> Any:
            state = env.step(state, action)
            agents = state.agents
            out = (codec.device(agents.observation), agents.reward, agents.active)
            flags = (state.termination, state.truncation, agents.action_mask, state.info)
            return state, step_packer.pack((*out, *flags))

        self._reset_fn: Callable[..., Any] = jax.jit(reset)
        self._step_fn: Callable[..., Any] = jax.jit(step)
        self.parallax_state: MARLState | None = None
        self._left: set[str] = set()
        self._rng, _ = gymnasium.utils.seeding.np_random(
            None if seed is None else seed_to_int(seed)
        )

    # -- spaces -------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        """`agent`'s observation space (always the same object)."""
        return self.observation_spaces[self._check_agent(agent)]

    def action_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        """`agent`'s action space (always the same object)."""
        return self.action_spaces[self._check_agent(agent)]

    def _check_agent(self, agent: Any) -> str:
        if agent not in self._slot:
            raise ValueError(
                f"PettingZooEnv: unknown agent {agent!r}; possible_agents: {self.possible_agents}"
            )
        return str(agent)

    # -- episode ------------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start an episode from `jax.random.key(seed)` (or a key drawn from the generator).

        Args:
            seed: optional non-negative int; it also reseeds the generator of unseeded resets.
            options: `None` or a dict, accepted and ignored (Parallax resets take no options).

        Returns:
            `(observations, infos)`, keyed by the agents active after the reset.
        """
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"PettingZooEnv.reset: options must be a dict or None, got {options!r}")
        if seed is not None:
            self._rng, _ = gymnasium.utils.seeding.np_random(seed_to_int(seed))
            key_seed = seed_to_int(seed)
        else:
            key_seed = int(self._rng.integers(0, 2**32, dtype=np.uint64))
        self.parallax_state, out = self._reset_fn(jax.random.key(key_seed))
        leaves, active, mask, info = self._reset_out(out)
        self._left = set()
        self.agents = [a for a in self.possible_agents if active[self._slot[a]]]
        observations = {a: self._observation(leaves, a) for a in self.agents}
        return observations, {a: self._info(info, mask, a) for a in self.agents}

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, Any],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Step every agent in `agents` with its action.

        Args:
            actions: `{agent: action}` for exactly the agents in `agents`.

        Returns:
            `(observations, rewards, terminations, truncations, infos)`, keyed by the agents
            that took part in the step (and any that became active in it).

        Raises:
            ValueError: an action for an agent not in `agents`, a missing action, or an
                action outside the agent's action space (named, with the space).
            gymnasium.error.ResetNeeded: before `reset`, or after the episode ended.
        """
        if self.parallax_state is None or not self.agents:
            raise gymnasium.error.ResetNeeded(
                "PettingZooEnv: the episode is over (or never started); call reset()"
            )
        self.parallax_state, out = self._step_fn(self.parallax_state, self._stack(actions))
        leaves, reward, active, termination, truncation, mask, info = self._step_out(out)
        previous = self.agents
        joined = [a for a in self.possible_agents if active[self._slot[a]] and a not in previous]
        back = sorted(set(joined) & self._left)
        if back:
            raise RuntimeError(
                f"PettingZooEnv: {back} became active again after leaving; PettingZoo agents "
                "cannot return within an episode"
            )
        ended = bool(termination) or bool(truncation)
        reported = previous + joined
        terminations = {a: bool(termination) or not active[self._slot[a]] for a in reported}
        truncations = {a: bool(truncation) and not terminations[a] for a in reported}
        observations = {a: self._observation(leaves, a) for a in reported}
        rewards = {a: float(reward[self._slot[a]]) for a in reported}
        infos = {a: self._info(info, mask, a) for a in reported}
        self._left |= {a for a in reported if terminations[a] or truncations[a]}
        self.agents = [] if ended else [a for a in reported if not terminations[a]]
        self.agents.sort(key=self._slot.__getitem__)
        return observations, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        """The env's `global_observation` as NumPy (centralised critics)."""
        if self.parallax_state is None:
            raise gymnasium.error.ResetNeeded("PettingZooEnv: call reset() before state()")
        view = self.parallax_state.global_observation
        if view is None:
            raise NotImplementedError(
                f"PettingZooEnv.state: {self.env!r} has no global_observation"
            )
        return np.array(view)

    def render(self) -> None:
        """No rendering (`render_mode` is `None`)."""
        return None

    def __repr__(self) -> str:
        return f"PettingZooEnv({self.env!r})"

    # -- conversions --------------------------------------------------------------------------
    def _stack(self, actions: Any) -> Any:
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"PettingZooEnv.step: actions must be a dict {{agent: action}}, got {actions!r}"
            )
        extra = [a for a in actions if a not in self.agents]
        if extra:
            raise ValueError(
                f"PettingZooEnv.step: actions for agents not in agents: {extra} (agents: "
                f"{self.agents}; agents that left or never joined take no actions)"
            )
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"PettingZooEnv.step: no action for the live agents {missing}")
        stacked = [z.copy() for z in self._action_zeros]
        for agent, action in actions.items():
            i = self._slot[agent]
            for leaf, value in zip(stacked, jax.tree.leaves(self._encoders[agent](action))):
                leaf[i] = value
        return jax.tree.unflatten(self._action_treedef, stacked)

    def _observation(self, leaves: list[Any], agent: str) -> Any:
        i = self._slot[agent]
        return self._build_obs([leaf[i] for leaf in leaves])

    def _info(self, info: dict[str, Any], mask: Any, agent: str) -> dict[str, Any]:
        out = {k: np.array(v) for k, v in info.items()}
        if mask is not None:
            i = self._slot[agent]
            out["action_mask"] = jax.tree.map(lambda m: m[i].astype(np.int8), mask)
        return out


def to_pettingzoo(env: Any, seed: int | None = None) -> PettingZooEnv:
    """A multi-agent Parallax environment as a PettingZoo `ParallelEnv` (`PettingZooEnv`).

    Args:
        env: a single Parallax environment returning `MARLState`s (e.g. `make("Race-v0")`).
        seed: optional non-negative int for the keys of unseeded resets.

    Returns:
        The `PettingZooEnv`.

    Example:
        >>> import parallax
        >>> from parallax.adapters import to_pettingzoo
        >>> env = to_pettingzoo(parallax.make("Race-v0"), seed=0)
        >>> obs, infos = env.reset()
        >>> sorted(obs), env.observation_space("agent_1")
        (['agent_0', 'agent_1', 'agent_2'], Box(0.0, 10.0, (), float32))
    """
    return PettingZooEnv(env, seed=seed)
