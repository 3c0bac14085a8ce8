"""`Race`: the documentation's multi-agent example."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from .. import _spaces as spaces
from .._action_check import check_action
from .._core import Agents, MARLState
from .._validate import check_key
from . import _render

FINISH = 10.0


class Race:
    """Three agents race to position 10; finishers become inactive.

    - Per-agent action `Discrete(2)` (stay, advance by 1); stacked `action_space.shape == (3,)`.
      Out-of-range actions are clipped into the space (`5` acts as `1`, `-1` as `0`).
    - Per-agent observation: its position (0 once inactive).
    - Reward 1 on the step an agent finishes, else 0; terminates when all have finished.

    `render(state)` draws the three lanes as an RGB image (`uint8`), pure `jnp`.

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
    check_actions: bool = True
    """Whether `step` checks the action's shape and dtype kind at trace time
    (`parallax.check_action`; one action per agent, `(3,)`)."""

    def reset(self, *, key: PRNGKeyArray) -> MARLState:
        check_key(key, f"{type(self).__name__}.reset")
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
        if self.check_actions:
            check_action(self.action_space, action, f"{type(self).__name__}.step")
        action = jnp.clip(action, 0, 1)  # out-of-range actions clip into the space
        advance = jnp.where(state.agents.active, jnp.asarray(action).astype(jnp.float32), 0.0)
        return self._moved(state, state.env_state + advance)  # inactive actions are ignored

    def _moved(self, state: MARLState, positions: Array) -> MARLState:
        """The state after a step that took the agents to `positions`: agents at the
        finish drop out, and those that reached it on this step get a reward of 1."""
        active = positions < FINISH
        finished_now = state.agents.active & ~active
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

    def render(self, state: MARLState, *, cell_pixels: int = 16) -> Array:
        """The race as an RGB image, `uint8 (3 * cell_pixels, 11 * cell_pixels, 3)`.

        One lane (row) per agent, one cell per position `0 .. 10`; the finish column is
        shaded. Each agent is a square in its own colour (blue, orange, red) at its
        position; a finished agent stands in the finish column. Pure `jnp`: jit-able, and
        vmappable over states.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> from parallax.envs import Race
            >>> env = Race()
            >>> state = env.step(env.reset(key=jax.random.key(0)), jnp.array([1, 0, 0]))
            >>> image = env.render(state)
            >>> image.shape, image[8, 16 + 8].tolist()  # agent 0 moved to position 1
            ((48, 176, 3), [31, 119, 180])
        """
        cell_pixels = _render.check_cell_pixels(cell_pixels)
        lanes, columns = self.num_agents, int(FINISH) + 1
        lane, lane_inside = _render.cells(lanes, cell_pixels)
        col, col_inside = _render.cells(columns, cell_pixels)
        inside = lane_inside[:, None] & col_inside[None, :]
        image = _render.canvas(lanes * cell_pixels, columns * cell_pixels)
        image = _render.paint(
            image, jnp.broadcast_to(col[None, :] == columns - 1, inside.shape), _render.FINISH
        )
        image = _render.paint(image, _render.grid_lines(lanes, columns, cell_pixels), _render.GRID)
        where = jnp.clip(jnp.round(state.env_state), 0, columns - 1).astype(jnp.int32)
        for agent in range(lanes):
            here = inside & (lane[:, None] == agent) & (col[None, :] == where[agent])
            image = _render.paint(image, here, _render.AGENTS[agent % len(_render.AGENTS)])
        return image

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
