"""One episode of `LimitOrderBook-v0`, pictured: the book's depth, its quotes, the trades, and
the agent's inventory and wealth.

The episode runs as one jitted `jax.lax.scan` under a simple quoting rule: quote one lot on
both sides at the best prices (level 1), and stop quoting the side that would push the
inventory past `inventory_limit` lots; never send a market order. After every decision the
scan keeps the whole book (every slot's price, size, owner), the best quotes, the trade log
and the agent's account; the figure is drawn from those arrays with matplotlib. It is the
one on the documentation's limit-order-book page (`docs/assets/lob_episode.png`).

    python examples/lob_episode.py --out docs/assets/lob_episode.png
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from parallax.finance import LimitOrderBookEnv
from parallax.finance._lob import best_ask, best_bid

AGENT = 0
"""The agent's owner id in the book (background orders are -1)."""

DEFAULT_SESSION = 80.0
"""Decisions in the pictured episode (one per unit of time)."""


def quoting_rule(inventory: jax.Array, inventory_limit: int) -> jax.Array:
    """`(bid level, ask level, market)`: join both best quotes, no market order; drop the bid
    at `+inventory_limit` lots and the ask at `-inventory_limit`."""
    bid = jnp.where(inventory >= inventory_limit, 0, 1)
    ask = jnp.where(inventory <= -inventory_limit, 0, 1)
    return jnp.stack([bid, ask, jnp.ones_like(bid)]).astype(jnp.int32)


def make_env(session_length: float = DEFAULT_SESSION) -> LimitOrderBookEnv:
    """sekai's defaults but the session length, and a trade log long enough for one step."""
    return LimitOrderBookEnv(session_length=session_length, max_trades=64)


def _snapshot(state: Any) -> dict[str, jax.Array]:
    """What the picture needs of one state."""
    es = state.env_state
    book = es.book
    return {
        "price": book.price,
        "size": jnp.where(book.valid, book.size, 0),
        "owner": book.owner,
        "best_bid": best_bid(book),
        "best_ask": best_ask(book),
        "mid": state.info["mid_price"],
        "trade_price": es.trades.price,
        "trade_size": es.trades.size,
        "trade_side": es.trades.side,
        "trade_head": es.trades.head,
        "inventory": state.info["inventory"],
        "wealth": state.info["wealth"],
        "overflow": state.info["overflow"],
    }


@functools.cache
def episode_function(session_length: float, inventory_limit: int) -> Any:
    """The jitted `episode(key)`: reset, then `n_steps` decisions in one `lax.scan`; the
    snapshots of the first state and of each decision, stacked (cached per setting)."""
    env = make_env(session_length)

    @jax.jit
    def episode(key: jax.Array) -> dict[str, jax.Array]:
        state = env.reset(key=key)

        def decide(state: Any, _: None) -> tuple[Any, dict[str, jax.Array]]:
            action = quoting_rule(state.info["inventory"], inventory_limit)
            state = env.step(state, action)
            return state, _snapshot(state)

        _, path = jax.lax.scan(decide, state, None, length=env.n_steps)
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), _snapshot(state), path)

    return episode


def run_episode(
    seed: int = 0, session_length: float = DEFAULT_SESSION, inventory_limit: int = 5
) -> dict[str, np.ndarray]:
    """One episode under `quoting_rule`, as numpy arrays with a leading `(n_steps + 1,)` axis
    (the state after reset, then after each decision) and `time`, the decision times."""
    env = make_env(session_length)
    episode = episode_function(float(session_length), int(inventory_limit))
    out = {k: np.asarray(v) for k, v in episode(jax.random.key(seed)).items()}
    out["time"] = np.arange(env.n_steps + 1) * env.decision_interval
    return out


def depth_grid(path: dict[str, np.ndarray], low: int, high: int) -> np.ndarray:
    """`(2, steps, high - low + 1)` resting volume per price tick (row 0 bids, row 1 asks)."""
    steps = path["price"].shape[0]
    grid = np.zeros((2, steps, high - low + 1))
    for side in range(2):
        price, size = path["price"][:, side], path["size"][:, side]
        inside = (size > 0) & (price >= low) & (price <= high)
        t = np.broadcast_to(np.arange(steps)[:, None], price.shape)
        np.add.at(grid[side], (t[inside], price[inside] - low), size[inside])
    return grid


def new_trades(path: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """`(step, price, size, aggressor side)` of every trade, the step in which it happened.

    The trade log is a ring of `max_trades`: the trades of step `t` are the ones its head
    passed over since step `t - 1` (fewer than `max_trades` per step in this session).
    """
    ring = path["trade_price"].shape[1]
    rows: list[tuple[int, int, int, int]] = []
    for t in range(1, path["trade_head"].shape[0]):
        n = int((path["trade_head"][t] - path["trade_head"][t - 1]) % ring)
        for j in range(n):
            slot = (int(path["trade_head"][t - 1]) + j) % ring
            rows.append(
                (
                    t,
                    int(path["trade_price"][t, slot]),
                    int(path["trade_size"][t, slot]),
                    int(path["trade_side"][t, slot]),
                )
            )
    if not rows:
        return tuple(np.zeros(0, int) for _ in range(4))
    return tuple(np.array(column) for column in zip(*rows))


def figure(path: dict[str, np.ndarray], margin: int = 6) -> Any:
    """Depth heatmap with the quotes, mid and trades above; inventory and wealth below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.ticker import MaxNLocator

    bid, ask, time = path["best_bid"], path["best_ask"], path["time"]
    quoted = np.concatenate([bid[bid > 0], ask[ask > 0]])
    low, high = int(quoted.min()) - margin, int(quoted.max()) + margin
    grid = depth_grid(path, low, high)
    vmax = float(np.percentile(grid[grid > 0], 98)) if np.any(grid > 0) else 1.0
    dt = time[1] - time[0] if len(time) > 1 else 1.0
    extent = (time[0] - dt / 2, time[-1] + dt / 2, low - 0.5, high + 0.5)

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(12, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]}
    )
    for side, colour in ((0, "#1f5fbf"), (1, "#c0392b")):
        ramp = LinearSegmentedColormap.from_list(f"side{side}", ["#ffffff00", colour])
        cmap = ramp.with_extremes(bad=(0, 0, 0, 0))  # empty ticks stay transparent
        layer = np.ma.masked_equal(grid[side].T, 0)
        top.imshow(
            layer,
            origin="lower",
            aspect="auto",
            extent=extent,
            cmap=cmap,
            vmin=0,
            vmax=vmax,
            interpolation="nearest",
        )
    top.step(time, np.where(bid > 0, bid, np.nan), where="mid", color="#0b3d91", lw=1.2)
    top.step(time, np.where(ask > 0, ask, np.nan), where="mid", color="#8b1a10", lw=1.2)
    top.plot(time, path["mid"], color="black", lw=0.9, ls="--", label="mid price")
    mine = (path["owner"] == AGENT) & (path["size"] > 0)
    for side, marker, colour, name in ((0, "^", "#0b3d91", "bid"), (1, "v", "#8b1a10", "ask")):
        t, slot = np.nonzero(mine[:, side])
        top.scatter(
            time[t],
            path["price"][t, side, slot],
            marker=marker,
            s=22,
            color=colour,
            edgecolor="black",
            linewidth=0.4,
            zorder=4,
            label=f"agent's resting {name}",
        )
    # one circle per (step, price, aggressor side), its area growing with the summed size
    t_step, t_price, t_size, t_side = new_trades(path)
    keys, where = np.unique(np.stack([t_step, t_price, t_side], 1), axis=0, return_inverse=True)
    volume = np.bincount(where.reshape(-1), weights=t_size, minlength=len(keys))
    t_step, t_price, t_side = keys.T if len(keys) else (t_step, t_price, t_side)
    for sign, colour, name in (
        (1, "#2e8b57", "buyer-initiated"),
        (-1, "#e67e22", "seller-initiated"),
    ):
        chosen = t_side == sign
        top.scatter(
            time[t_step[chosen]] - dt / 2,
            t_price[chosen],
            s=8 + 4 * volume[chosen],
            marker="o",
            facecolor="none",
            edgecolor=colour,
            linewidth=0.8,
            zorder=3,
            label=f"{name} trades (area ~ lots)",
        )
    top.plot([], [], color="#0b3d91", lw=1.2, label="best bid (depth: blue)")
    top.plot([], [], color="#8b1a10", lw=1.2, label="best ask (depth: red)")
    top.set_ylim(low - 0.5, high + 0.5)
    top.yaxis.set_major_locator(MaxNLocator(integer=True))
    top.set_ylabel("price (ticks)")
    fig.suptitle(
        "LimitOrderBook-v0, one episode: resting volume per tick (darker: more lots), "
        "quotes, mid and trades"
    )
    top.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, ncol=4, frameon=False)

    bottom.step(time, path["inventory"], where="post", color="#6c3483", label="inventory (lots)")
    bottom.axhline(0, color="grey", lw=0.6)
    bottom.set_ylabel("inventory (lots)", color="#6c3483")
    bottom.set_xlabel("time (decisions, one per unit)")
    wealth_axis = bottom.twinx()
    wealth_axis.plot(
        time, path["wealth"], color="#117a65", label="wealth: cash + inventory x mid (ticks)"
    )
    wealth_axis.set_ylabel("wealth (ticks)", color="#117a65")
    lines = bottom.get_lines()[:1] + wealth_axis.get_lines()
    bottom.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="lob_episode.png")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--session-length", type=float, default=DEFAULT_SESSION)
    parser.add_argument("--inventory-limit", type=int, default=5)
    args = parser.parse_args(argv)
    path = run_episode(args.seed, args.session_length, args.inventory_limit)
    if bool(path["overflow"].any()):
        raise RuntimeError("the book overflowed: raise capacity or max_events")
    figure(path).savefig(args.out, dpi=90)
    print(
        f"wrote {args.out}: {len(path['time']) - 1} decisions, {len(new_trades(path)[0])} trades, "
        f"final inventory {int(path['inventory'][-1])}, wealth {float(path['wealth'][-1]):.1f}"
    )


if __name__ == "__main__":
    main()
