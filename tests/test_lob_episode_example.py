"""`examples/lob_episode.py` (the picture on the limit-order-book page): one short episode
under its quoting rule, the arrays the figure is drawn from, and the figure itself."""

from __future__ import annotations

import pathlib
import runpy

import numpy as np
import pytest

# one worker runs this file, so its module fixtures are built once per `make test`
pytestmark = pytest.mark.xdist_group("lob_episode_example")

PATH = pathlib.Path(__file__).resolve().parents[1] / "examples" / "lob_episode.py"
SESSION, LIMIT = 12.0, 2


@pytest.fixture(scope="module")
def example():
    return runpy.run_path(str(PATH), run_name="lob_episode")


@pytest.fixture(scope="module")
def path(example):
    return example["run_episode"](seed=3, session_length=SESSION, inventory_limit=LIMIT)


def test_the_episode_follows_the_quoting_rule(example, path):
    steps = int(SESSION) + 1  # the state after reset, then one per decision
    assert path["time"].tolist() == list(range(steps))
    assert path["price"].shape[:2] == (steps, 2) and path["inventory"].shape == (steps,)
    assert not path["overflow"].any()
    # at most one lot fills on the quoted side between decisions, and the rule stops quoting
    # that side at the limit, so the inventory never passes it
    assert np.abs(path["inventory"]).max() <= LIMIT
    assert path["inventory"][0] == 0 and path["wealth"][0] == 0.0
    # the agent (owner 0) rests at most one order per side, and only where the rule quotes
    mine = (path["owner"] == example["AGENT"]) & (path["size"] > 0)
    assert mine.sum(axis=2).max() <= 1
    assert not mine[1:, 0][path["inventory"][:-1] >= LIMIT].any()  # no bid at the long limit
    assert not mine[1:, 1][path["inventory"][:-1] <= -LIMIT].any()  # no ask at the short one
    assert mine[1:].any(), "the agent quoted during the episode"
    bid, ask = path["best_bid"], path["best_ask"]
    assert np.all((bid > 0) & (ask > bid))  # never crossed, both sides present
    np.testing.assert_allclose(path["mid"], (bid + ask) / 2)


def test_depth_grid_holds_every_lot_in_its_window(example, path):
    low = int(path["price"][path["size"] > 0].min())
    high = int(path["price"][path["size"] > 0].max())
    grid = example["depth_grid"](path, low, high)
    assert grid.shape == (2, path["price"].shape[0], high - low + 1)
    np.testing.assert_array_equal(grid.sum(axis=2), path["size"].sum(axis=2).T)
    # bids rest below the best ask, asks above the best bid
    t, tick = np.nonzero(grid[0])
    assert np.all(low + tick < path["best_ask"][t])
    t, tick = np.nonzero(grid[1])
    assert np.all(low + tick > path["best_bid"][t])


def test_trades_are_read_once_each_from_the_ring(example, path):
    step, price, size, side = example["new_trades"](path)
    assert len(step) > 0 and np.all(np.diff(step) >= 0) and step.min() >= 1
    assert np.all(size >= 1) and set(np.unique(side)) <= {-1, 1}
    # each step's newest trade is the log's last entry
    ring = path["trade_price"].shape[1]
    for t in np.unique(step):
        last = (int(path["trade_head"][t]) - 1) % ring
        assert price[step == t][-1] == path["trade_price"][t, last]


def test_the_figure_and_the_command_line(example, path, tmp_path):
    fig = example["figure"](path)
    top, bottom = fig.axes[:2]
    assert len(top.get_images()) == 2  # bid depth, ask depth
    labels = [h.get_label() for h in top.get_legend().legend_handles]
    assert "mid price" in labels and "agent's resting bid" in labels
    np.testing.assert_array_equal(bottom.get_lines()[0].get_ydata(), path["inventory"])
    np.testing.assert_array_equal(fig.axes[2].get_lines()[0].get_ydata(), path["wealth"])
    out = tmp_path / "lob.png"
    argv = ["--out", str(out), "--seed", "3", "--session-length", str(SESSION)]
    example["main"]([*argv, "--inventory-limit", str(LIMIT)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
