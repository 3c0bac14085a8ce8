"""Episode figures of the finance envs: `plot_episode` (matplotlib Figure) and
`render_episode` (RGB array)."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

import parallax
from parallax.finance import almgren_chriss_trajectory, plot_episode, render_episode
from parallax.finance._plots import _SCHEDULE_PARAMETERS

pytest.importorskip("matplotlib")

STEPS = 8
CONFIG = {
    "Trading-v0": {"episode_length": STEPS, "lookback": 2},
    "Portfolio-v0": {"episode_length": STEPS, "lookback": 2, "n_assets": 2},
    "MarketMaking-v0": {"n_steps": STEPS},
    "OptimalExecution-v0": {"n_steps": STEPS},
}
PANELS = {
    "Trading-v0": ["price", "position", "equity", "drawdown"],
    "Portfolio-v0": ["price (start = 1)", "weights", "equity", "drawdown"],
    "MarketMaking-v0": ["price", "inventory", "wealth"],
    "OptimalExecution-v0": ["inventory", "price", "shortfall"],
}


def _episode(env, seed):
    def step(state, key):
        state = env.step(state, env.action_space.sample(key=key))
        return state, state

    keys = jax.random.split(jax.random.key(seed + 100), STEPS)
    return jax.lax.scan(step, env.reset(key=jax.random.key(seed)), keys)[1]


@pytest.fixture(scope="module", params=list(CONFIG))
def episodes(request):
    env = parallax.make(request.param, **CONFIG[request.param])
    return request.param, env, _episode(env, 0), _episode(env, 1)


def test_figure_has_the_expected_panels(episodes):
    env_id, env, states, _ = episodes
    fig = plot_episode(env, states)
    assert [ax.get_ylabel() for ax in fig.axes] == PANELS[env_id]
    assert fig.axes[-1].get_xlabel() == "step"
    assert all(ax.lines or ax.collections for ax in fig.axes)


def test_figure_draws_the_episode_data(episodes):
    env_id, env, states, _ = episodes
    fig = plot_episode(env, states)
    info = {k: np.asarray(v) for k, v in states.info.items()}
    first = fig.axes[0]
    if env_id == "Trading-v0":
        (price,) = [line for line in first.lines if line.get_label() == "price"]
        np.testing.assert_allclose(price.get_ydata(), info["price"])
        np.testing.assert_allclose(fig.axes[2].lines[0].get_ydata(), info["equity"])
    elif env_id == "Portfolio-v0":
        assert len(first.lines) == 2  # one price line per asset
        expected = np.cumprod(1 + info["asset_returns"], axis=0)[:, 1]
        np.testing.assert_allclose(first.lines[1].get_ydata(), expected, rtol=1e-6)
    elif env_id == "MarketMaking-v0":
        labels = {line.get_label(): line for line in first.lines}
        assert {"mid", "bid", "ask"} <= set(labels)
        np.testing.assert_allclose(labels["ask"].get_ydata(), info["ask"])
        np.testing.assert_allclose(fig.axes[2].lines[0].get_ydata(), info["wealth"])
    else:
        labels = {line.get_label(): line for line in first.lines}
        schedule = almgren_chriss_trajectory(n_steps=STEPS, **_params(env))
        np.testing.assert_allclose(labels["Almgren-Chriss"].get_ydata(), schedule, rtol=1e-5)
        np.testing.assert_allclose(labels["inventory"].get_ydata()[1:], info["inventory"])


def _params(env):
    return {name: getattr(env.params, name) for name in _SCHEDULE_PARAMETERS}


def test_render_returns_an_rgb_image_that_depends_on_the_episode(episodes):
    _, env, states, other = episodes
    image = render_episode(env, states, figsize=(4, 3), dpi=40)
    assert image.shape == (120, 160, 3) and image.dtype == np.uint8
    assert image.min() < 100 < image.max()  # something is drawn on the white background
    assert not np.array_equal(image, render_episode(env, other, figsize=(4, 3), dpi=40))
    assert np.array_equal(image, render_episode(env, states, figsize=(4, 3), dpi=40))
    # the env's own `render` is the same picture, also through a wrapper stack
    assert np.array_equal(image, env.render(states, figsize=(4, 3), dpi=40))
    wrapped = parallax.TimeLimit(env, max_steps=STEPS)
    assert np.array_equal(image, wrapped.render(states, figsize=(4, 3), dpi=40))


def test_episode_is_cut_after_it_ends_and_batches_need_an_index():
    env = parallax.TimeLimit(parallax.make("Trading-v0", **CONFIG["Trading-v0"]), 3)
    states = _episode(env, 0)
    fig = plot_episode(env, states)
    assert len(fig.axes[0].lines[0].get_ydata()) == 3
    vec = parallax.VmapWrapper(parallax.make("Trading-v0", **CONFIG["Trading-v0"]), 2)

    def step(state, _):
        state = vec.step(state, np.full((2,), 2, np.int32))
        return state, state

    _, batch = jax.lax.scan(step, vec.reset(key=jax.random.key(0)), length=4)
    with pytest.raises(ValueError, match="env_index"):
        plot_episode(vec, batch)
    one = plot_episode(vec, batch, env_index=1)
    np.testing.assert_allclose(
        one.axes[0].lines[0].get_ydata(), np.asarray(batch.info["price"])[:, 1]
    )


def test_trajectories_from_rollout_are_accepted():
    env = parallax.make("MarketMaking-v0", n_steps=STEPS)
    policy = lambda key, state: env.action_space.sample(key=key)  # noqa: E731
    _, traj = parallax.rollout(env, policy, jax.random.key(0), STEPS)
    fig = plot_episode(env, traj)
    assert [ax.get_ylabel() for ax in fig.axes] == PANELS["MarketMaking-v0"]


def test_other_envs_and_bad_arguments_are_refused():
    grid = parallax.make("GridWorld-v0")
    state = grid.reset(key=jax.random.key(0))
    stacked = jax.tree.map(lambda x: x[None], state)
    with pytest.raises(TypeError, match="finance envs"):
        plot_episode(grid, stacked)
    env = parallax.make("Trading-v0", **CONFIG["Trading-v0"])
    with pytest.raises(ValueError, match="stacked over time"):
        plot_episode(env, env.reset(key=jax.random.key(0)))
    with pytest.raises(ValueError, match="dpi"):
        render_episode(env, _episode(env, 0), dpi=0)


def test_missing_matplotlib_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    env = parallax.make("Trading-v0", **CONFIG["Trading-v0"])
    with pytest.raises(ImportError, match=r"parallax-rl\[docs\]"):
        plot_episode(env, _episode(env, 0))


def test_docstring_examples():
    import doctest
    import importlib

    module = importlib.import_module("parallax.finance._plots")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
