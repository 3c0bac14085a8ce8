"""`Race`: the documentation's multi-agent example."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from .. import _spaces as spaces
from .._core import Agents, MARLState

FINISH = 10.0


class Race:
    """Three agents race to position 10; finishers become inactive.

    - Per-agent action `Discrete(2)` (stay, advance by 1); stacked `action_space.shape == (3,)`.
    - Per-agent observation: its position (0 once inactive).
    - Reward 1 on the step an agent finishes, else 0; terminates when all have finished.

    It follows the six multi-agent rules: inactive actions are ignored, inactive
    observations and rewards are zero, `active` marks whose actions the next step uses, and
    the env sets `termination` itself.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.envs import Race
        >>> env = Race()
        >>> s = env.step(env.reset(key=jax.random.key(0)), jnp.array([1, 0, 1]))
        >>> s.agents.observation.tolist()
        [1.0, 0.0, 1.0]
    """

    num_agents = 3
    action_space = spaces.stack_space(spaces.Discrete(2), num_agents)
    observation_space = spaces.stack_space(spaces.Box(0.0, FINISH, ()), num_agents)

    def reset(self, *, key: PRNGKeyArray) -> MARLState:
        positions = jnp.zeros(self.num_agents, dtype=jnp.float32)
        return MARLState(
            env_state=positions,
            agents=Agents(
                observation=positions,
                active=jnp.ones(self.num_agents, dtype=bool),
                reward=jnp.zeros(self.num_agents, dtype=jnp.float32),
            ),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={},
            step_count=jnp.int32(0),
            key=key,
        )

    def step(self, state: MARLState, action: Array) -> MARLState:
        acted = state.agents.active
        advance = jnp.where(acted, jnp.asarray(action).astype(jnp.float32), 0.0)
        positions = state.env_state + advance  # inactive actions are ignored
        active = positions < FINISH
        finished_now = acted & ~active
        return MARLState(
            env_state=positions,
            agents=Agents(
                observation=jnp.where(active, positions, 0.0),
                active=active,
                reward=jnp.where(finished_now, 1.0, 0.0).astype(jnp.float32),
            ),
            termination=~active.any(),
            truncation=jnp.bool_(False),
            info={},
            step_count=state.step_count + 1,
            key=state.key,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
