"""`render` of the example envs: RGB arrays that show the state, pure `jnp` (jit and vmap)."""

from __future__ import annotations

import doctest
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax.envs import GridWorld, MaskedGridWorld, Race, _render

CELL = 8


def _cell(image, row: int, col: int) -> np.ndarray:
    """The centre pixel of cell (row, col) of an image drawn with `CELL` pixels a cell."""
    return np.asarray(image[row * CELL + CELL // 2, col * CELL + CELL // 2])


def _stepped(env, actions):
    state = env.reset(key=jax.random.key(3))
    for action in actions:
        state = env.step(state, action)
    return state


def test_gridworld_draws_the_agent_and_the_goal_where_they_are():
    env = GridWorld()
    state = _stepped(env, [2, 2, 0])  # right, right, up: the agent at x=2, y=1
    image = env.render(state, cell_pixels=CELL)
    assert image.shape == (5 * CELL, 5 * CELL, 3) and image.dtype == jnp.uint8
    # +y is up: grid row y is image row 4 - y
    assert _cell(image, 4 - 1, 2).tolist() == list(_render.AGENT)
    gx, gy = (int(v) for v in state.env_state.goal)
    if (gx, gy) != (2, 1):
        assert _cell(image, 4 - gy, gx).tolist() == list(_render.GOAL)
    painted = (np.asarray(image) == np.asarray(_render.AGENT, np.uint8)).all(-1)
    assert painted.sum() == (CELL - 3) ** 2  # exactly one agent square


def test_masked_gridworld_renders_like_gridworld():
    state = MaskedGridWorld().reset(key=jax.random.key(0))
    assert np.array_equal(MaskedGridWorld().render(state), GridWorld().render(state))


def test_race_draws_each_agent_in_its_lane_and_finished_ones_at_the_finish():
    env = Race()
    state = _stepped(env, [jnp.array([1, 1, 0])] * 10 + [jnp.array([0, 1, 1])])
    image = env.render(state, cell_pixels=CELL)
    assert image.shape == (3 * CELL, 11 * CELL, 3)
    assert not bool(state.agents.active[0])  # agent 0 finished ...
    assert _cell(image, 0, 10).tolist() == list(_render.AGENTS[0])  # ... and stands there
    assert _cell(image, 1, 10).tolist() == list(_render.AGENTS[1])
    assert _cell(image, 2, 1).tolist() == list(_render.AGENTS[2])
    assert _cell(image, 2, 10).tolist() == list(_render.FINISH)  # the empty finish cell


@pytest.mark.parametrize("env", [GridWorld(), Race()], ids=repr)
def test_render_is_pure_jit_and_vmap_agree(env):
    action = env.action_space.sample(key=jax.random.key(1))
    states = jax.vmap(lambda k: env.step(env.reset(key=k), action))(
        jax.random.split(jax.random.key(2), 4)
    )
    frames = jax.jit(jax.vmap(env.render))(states)
    assert frames.shape[0] == 4
    one = jax.tree.map(lambda x: x[1], states)
    assert np.array_equal(frames[1], env.render(one))


@pytest.mark.parametrize("bad", [0, 3, 2.5, True, "8"])
def test_a_bad_cell_size_is_refused_with_its_name(bad):
    env = GridWorld()
    with pytest.raises(ValueError, match=r"cell_pixels must be an int >= 4"):
        env.render(env.reset(key=jax.random.key(0)), cell_pixels=bad)


@pytest.mark.parametrize(
    "name",
    ["parallax.envs._gridworld", "parallax.envs._race", "parallax._project", "parallax.train"],
)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
