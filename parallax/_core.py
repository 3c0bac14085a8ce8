"""The Parallax protocol: state structs and structural environment protocols.

- `State`: single-agent state returned by `reset` and `step`.
- `Agents`: the per-agent view held by a `MARLState`.
- `MARLState`: multi-agent state, episode-level flags plus `Agents`.
- `StateT` / `MARLStateT`: type variables for state-generic code (`Env[MaskedState]`).
- `Env` / `VectorEnv`: single-agent protocols, plain and vectorised.
- `MARLEnv` / `MARLVectorEnv`: their multi-agent counterparts.

The protocols are structural and runtime-checkable: an environment satisfies them by having
the right attributes, without subclassing, and `isinstance(env, parallax.Env)` answers.

Dtype contract (checked by `parallax.testing.check_env`): `reward` is a floating array
(float32, or float64 for environments that choose it under `jax_enable_x64`), `termination`
and `truncation` are `bool`, `step_count` is `int32`. Every `reset` and `step` of one
environment returns the same tree structure, shapes and dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import jax
from jaxtyping import Array, Bool, Float, Int, Key, PRNGKeyArray, PyTree, UInt32
from typing_extensions import TypeVar

from ._spaces import Space

KeyArray = Key[Array, "..."] | UInt32[Array, "... 2"]
"""A typed PRNG key or a raw uint32 key, possibly batched."""

__all__ = [
    "Agents",
    "Env",
    "KeyArray",
    "MARLEnv",
    "MARLState",
    "MARLStateT",
    "MARLVectorEnv",
    "State",
    "StateT",
    "VectorEnv",
]


@jax.tree_util.register_dataclass
@dataclass
class State:
    """Single-agent environment state, returned by `reset` and `step`.

    Every field is a pytree leaf (or a pytree), so a `State` passes through `jit`, `vmap`,
    `lax.scan` and `lax.cond`. Subclass it (as a registered dataclass) to add fields; wrappers
    keep the subclass.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import State
        >>> s = State(env_state=jnp.zeros(2), observation=jnp.zeros(2),
        ...           reward=jnp.float32(0), termination=jnp.bool_(False),
        ...           truncation=jnp.bool_(True), info={}, step_count=jnp.int32(0),
        ...           key=jax.random.key(0))
        >>> bool(s.done)
        True
    """

    env_state: PyTree
    """Raw environment data, any pytree."""

    observation: PyTree
    """What the agent sees."""

    reward: Float[Array, "..."]
    """Scalar reward of the transition that produced this state (0 after reset)."""

    termination: Bool[Array, "..."]
    """The episode reached a terminal state of the MDP."""

    truncation: Bool[Array, "..."]
    """The episode was cut short (time limit); bootstrapping is still valid."""

    info: dict[str, Any]
    """Extra metadata; the same keys on every reset and step."""

    step_count: Int[Array, "..."]
    """Steps taken in this episode (0 after reset)."""

    key: KeyArray
    """The environment's RNG key (typed or raw; batched under `VmapWrapper`)."""

    @property
    def done(self) -> Bool[Array, "..."]:
        """`termination | truncation`: the episode ended, for either reason."""
        return self.termination | self.truncation


@jax.tree_util.register_dataclass
@dataclass
class Agents:
    """Per-agent view of a multi-agent state; every leaf leads with `num_agents`."""

    observation: PyTree
    """What each agent sees; zeros in inactive slots."""

    active: Bool[Array, "... A"]
    """Which agents' actions the next `step` uses."""

    reward: Float[Array, "... A"]
    """Reward of each agent for the transition into this state; zeros in inactive slots."""

    action_mask: PyTree | None = field(default=None, kw_only=True)
    """Optional legal-action mask per agent (at least one legal action per slot)."""


@jax.tree_util.register_dataclass
@dataclass
class MARLState:
    """Multi-agent environment state: episode-level flags plus the per-agent `Agents`."""

    env_state: PyTree
    """Raw environment data, any pytree."""

    agents: Agents
    """Per-agent observations, rewards, activity and masks."""

    termination: Bool[Array, "..."]
    """The MDP ended naturally (set by the environment itself)."""

    truncation: Bool[Array, "..."]
    """The MDP was cut short."""

    info: dict[str, Any]
    """Extra metadata; the same keys on every reset and step."""

    step_count: Int[Array, "..."]
    """Steps taken in this episode."""

    key: KeyArray
    """The environment's RNG key (typed or raw; batched under `VmapWrapper`)."""

    global_observation: PyTree | None = field(default=None, kw_only=True)
    """Optional full-state view for centralised critics."""

    @property
    def done(self) -> Bool[Array, "..."]:
        """`termination | truncation`."""
        return self.termination | self.truncation


StateT = TypeVar("StateT", bound=State | MARLState, default=State)
MARLStateT = TypeVar("MARLStateT", bound=MARLState, default=MARLState)


@runtime_checkable
class Env(Protocol[StateT]):
    """A Parallax environment: pure `reset` and `step`. Bare `Env` means `Env[State]`."""

    @property
    def action_space(self) -> Space: ...

    @property
    def observation_space(self) -> Space: ...

    def reset(self, *, key: PRNGKeyArray) -> StateT: ...

    def step(self, state: StateT, action: PyTree) -> StateT: ...


@runtime_checkable
class VectorEnv(Env[StateT], Protocol[StateT]):
    """A batch of `num_envs` environments with selective reset.

    `reset(key=k)` resets every env; `reset(key=k, state=s, done=d)` resets only where `d`.
    """

    num_envs: int

    def reset(
        self,
        *,
        key: PRNGKeyArray,
        state: StateT | None = None,
        done: Bool[Array, "..."] | None = None,
    ) -> StateT: ...


@runtime_checkable
class MARLEnv(Env[MARLStateT], Protocol[MARLStateT]):
    """A multi-agent environment with a static number of agent slots."""

    num_agents: int


@runtime_checkable
class MARLVectorEnv(MARLEnv[MARLStateT], VectorEnv[MARLStateT], Protocol[MARLStateT]):
    """A vectorised multi-agent environment with selective reset."""

    def reset(
        self,
        *,
        key: PRNGKeyArray,
        state: MARLStateT | None = None,
        done: Bool[Array, "..."] | None = None,
    ) -> MARLStateT: ...
