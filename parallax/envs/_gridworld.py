"""`GridWorld` and `MaskedGridWorld`: the documentation's example environments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, PRNGKeyArray

from .. import _spaces as spaces
from .._action_check import check_action
from .._core import State
from .._validate import check_key
from . import _render

SIZE = 4.0  # positions are in [0, SIZE] on both axes
_MOVES = ((0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (-1.0, 0.0))  # up, down, right, left


class GridState(NamedTuple):
    """Raw GridWorld data: the agent's position and the goal, both float32 `(2,)`."""

    pos: Array
    goal: Array


class GridWorld:
    """Walk on a 5x5 grid to a goal drawn at reset.

    - Observation: `float32 (4,)`, `[x, y, goal_x, goal_y]` in `[0, 4]`.
    - Action: `Discrete(4)` (up, down, right, left); moves into the wall are clipped. An
      out-of-range action is clipped into the space (`-1` acts as `0`, `7` as `3`), the
      rule of every bundled env (see "Out-of-range actions" in the protocol).
    - Reward: `exp(-|pos - goal|)`; terminates on reaching the goal. Never truncates (wrap it
      in `TimeLimit`).
    - `render(state)`: an RGB picture of the grid (`uint8 (80, 80, 3)`; the agent blue, the
      goal green, +y up), pure `jnp`, so `jax.vmap(env.render)` renders a trajectory.
    - `step` refuses, at trace time, an action of the wrong shape or kind (a float, a batch
      of actions, `None`) with an error naming the space (`check_actions = False` skips it;
      see `parallax.check_action`).

    Example:
        >>> import jax
        >>> from parallax.envs import GridWorld
        >>> env = GridWorld()
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, 2)
        >>> state.observation.shape, int(state.step_count)
        ((4,), 1)
    """

    action_space = spaces.Discrete(4)
    observation_space = spaces.Box(0.0, SIZE, (4,))
    check_actions: bool = True
    """Whether `step` checks the action's shape and dtype kind at trace time (free at run
    time: shapes and dtypes only)."""

    def reset(self, *, key: PRNGKeyArray) -> State:
        check_key(key, f"{type(self).__name__}.reset")
        key, goal_key = jax.random.split(key)
        pos = jnp.zeros(2, dtype=jnp.float32)
        goal = jax.random.randint(goal_key, (2,), minval=1, maxval=5).astype(jnp.float32)
        return State(
            env_state=GridState(pos=pos, goal=goal),
            observation=jnp.concatenate([pos, goal]),
            reward=jnp.float32(0.0),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={},
            step_count=jnp.int32(0),
            key=key,
        )

    def step(self, state: State, action: Array) -> State:
        if self.check_actions:
            check_action(self.action_space, action, f"{type(self).__name__}.step")
        moves = jnp.array(_MOVES, dtype=jnp.float32)
        action = jnp.clip(action, 0, len(_MOVES) - 1)  # out-of-range actions clip into the space
        pos = jnp.clip(state.env_state.pos + moves[action], 0.0, SIZE)
        goal = state.env_state.goal
        return State(
            env_state=GridState(pos=pos, goal=goal),
            observation=jnp.concatenate([pos, goal]),
            reward=jnp.exp(-jnp.linalg.norm(pos - goal)),
            termination=jnp.all(pos == goal),
            truncation=jnp.bool_(False),
            info={},
            step_count=state.step_count + 1,
            key=state.key,
        )

    def render(self, state: State, *, cell_pixels: int = 16) -> Array:
        """The grid as an RGB image, `uint8 (5 * cell_pixels, 5 * cell_pixels, 3)`.

        The agent is a blue square, the goal a green one (the agent hides the goal once it
        stands on it); `+y` points up. Pure `jnp`: jit-able, and vmappable over states.

        Example:
            >>> import jax
            >>> from parallax.envs import GridWorld
            >>> env = GridWorld()
            >>> image = env.render(env.reset(key=jax.random.key(0)))
            >>> image.shape, image.dtype.name, image[-8, 8].tolist()  # the agent at (0, 0)
            ((80, 80, 3), 'uint8', [31, 119, 180])
        """
        cell_pixels = _render.check_cell_pixels(cell_pixels)
        n = int(SIZE) + 1
        row, row_inside = _render.cells(n, cell_pixels)
        col, col_inside = _render.cells(n, cell_pixels)
        y = (n - 1) - row[:, None]  # image rows run downwards, +y upwards
        x = col[None, :]
        inside = row_inside[:, None] & col_inside[None, :]
        pos = jnp.round(state.env_state.pos).astype(jnp.int32)
        goal = jnp.round(state.env_state.goal).astype(jnp.int32)
        image = _render.canvas(n * cell_pixels, n * cell_pixels)
        image = _render.paint(image, _render.grid_lines(n, n, cell_pixels), _render.GRID)
        image = _render.paint(image, inside & (x == goal[0]) & (y == goal[1]), _render.GOAL)
        return _render.paint(image, inside & (x == pos[0]) & (y == pos[1]), _render.AGENT)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@jax.tree_util.register_dataclass
@dataclass
class MaskedState(State):
    """A `State` with a legal-action mask (`bool (4,)`)."""

    action_mask: Bool[Array, "4"]


def compute_mask(env_state: GridState) -> Bool[Array, "4"]:
    """Legal moves: those that change the position (not into the wall)."""
    moves = jnp.array(_MOVES, dtype=jnp.float32)
    target = env_state.pos[None, :] + moves
    return jnp.all((target >= 0.0) & (target <= SIZE), axis=-1)


class MaskedGridWorld(GridWorld):
    """`GridWorld` whose states carry `action_mask` (a `MaskedState`).

    Example:
        >>> import jax
        >>> from parallax.envs import MaskedGridWorld
        >>> state = MaskedGridWorld().reset(key=jax.random.key(0))
        >>> state.action_mask.tolist()  # at (0, 0): up and right are legal
        [True, False, True, False]
    """

    def reset(self, *, key: PRNGKeyArray) -> MaskedState:  # type: ignore[override]
        state = super().reset(key=key)
        return MaskedState(**vars(state), action_mask=compute_mask(state.env_state))

    def step(self, state: MaskedState, action: Array) -> MaskedState:  # type: ignore[override]
        state_ = super().step(state, action)
        return MaskedState(**vars(state_), action_mask=compute_mask(state_.env_state))
