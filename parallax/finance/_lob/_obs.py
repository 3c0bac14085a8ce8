"""The observation of the limit order book envs (sekai's `_LOBCore.observe`).

- `observation_space`: one trader's `{"book", "trades", "agent"}` space.
- `shared_rows`: the book levels and the recent trades, relative to the mid, which every
  trader of a book sees alike.
- `agent_row`: a trader's own block (inventory ratio, time left, its quotes' queue places).
- `observe`: the whole observation of the single agent of `LimitOrderBookEnv`.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ... import _spaces as spaces
from ._book import Book
from ._book_queries import depth_levels, queue_position
from ._decision import Account, TradeLog, book_mid2, ordered_trades

__all__ = ["agent_row", "observation_space", "observe", "shared_rows"]


def observation_space(levels: int, max_trades: int, agent: int = 6) -> spaces.PyTreeSpace:
    """One trader's observation space: `levels` book rows, `max_trades` recent trades and
    `agent` features of its own."""
    return spaces.PyTreeSpace(
        {
            "book": spaces.Box(-np.inf, np.inf, (levels, 4), jnp.float32),
            "trades": {
                "values": spaces.Box(-np.inf, np.inf, (max_trades, 3), jnp.float32),
                "mask": spaces.MultiBinary(max_trades),
            },
            "agent": spaces.Box(-np.inf, np.inf, (agent,), jnp.float32),
        }
    )


def shared_rows(
    book: Book, trades: TradeLog, *, mid_price: int | Array, levels: int, fdt: Any
) -> tuple[Array, Array, Array]:
    """The book's `levels` rows and the recent trades, prices relative to the mid.

    Computed in `fdt` and stored as float32. Returns `(book rows (levels, 4): bid price,
    bid size, ask price, ask size; trade rows (T, 3): price, size, side; which trade rows
    hold a trade (bool (T,)))`.
    """
    mid = book_mid2(book, mid_price).astype(fdt) * 0.5
    bp, bs, ap, asz = depth_levels(book, levels)
    rows = jnp.stack(
        [
            jnp.where(bs > 0, bp.astype(fdt) - mid, 0.0),
            bs.astype(fdt),
            jnp.where(asz > 0, ap.astype(fdt) - mid, 0.0),
            asz.astype(fdt),
        ],
        axis=1,
    ).astype(jnp.float32)
    price, size, side, present = ordered_trades(trades)
    values = jnp.stack(
        [
            jnp.where(present, price.astype(fdt) - mid, 0.0),
            size.astype(fdt),
            side.astype(fdt),
        ],
        axis=1,
    ).astype(jnp.float32)
    return rows, values, present


def agent_row(
    book: Book, account: Account, inventory_ratio: Array, time_left: Array, fdt: Any
) -> Array:
    """A trader's own block, float32 `(6,)`: inventory ratio, time left, whether its bid and
    its ask rest, and the volume ahead of each in its queue (0 when not resting)."""
    bid_ahead, bid_found = queue_position(book, account.bid_id)
    ask_ahead, ask_found = queue_position(book, account.ask_id)
    bid_found = bid_found & (account.bid_id > 0)
    ask_found = ask_found & (account.ask_id > 0)
    return jnp.stack(
        [
            inventory_ratio.astype(fdt),
            time_left,
            bid_found.astype(fdt),
            ask_found.astype(fdt),
            jnp.where(bid_found, bid_ahead, 0).astype(fdt),
            jnp.where(ask_found, ask_ahead, 0).astype(fdt),
        ]
    ).astype(jnp.float32)


def observe(
    book: Book,
    account: Account,
    trades: TradeLog,
    time_left: Array,
    inventory_ratio: np.ndarray,
    *,
    mid_price: int | Array,
    levels: int,
) -> dict[str, Any]:
    """One agent's observation, computed in the default float dtype and stored as float32.

    Args:
        book, account, trades: the state.
        time_left: the fraction of the session left (default float dtype, scalar).
        inventory_ratio: float32 `(2 M + 1,)`, `i / M` for inventories `i` in `[-M, M]`
            (`M = max_inventory`), computed as sekai does; a table keeps it exact in a batch.
        mid_price: the initial mid (the reference price before any trade).
        levels: book levels observed.

    Returns:
        `{"book": float32 (levels, 4), "trades": {"values": float32 (T, 3), "mask": int8
        (T,)}, "agent": float32 (6,)}`.
    """
    fdt = time_left.dtype
    rows, values, present = shared_rows(book, trades, mid_price=mid_price, levels=levels, fdt=fdt)
    limit = (inventory_ratio.shape[0] - 1) // 2
    ratio = jnp.asarray(inventory_ratio)[jnp.clip(account.inventory, -limit, limit) + limit]
    return {
        "book": rows,
        "trades": {"values": values, "mask": present.astype(jnp.int8)},
        "agent": agent_row(book, account, ratio, time_left, fdt),
    }
