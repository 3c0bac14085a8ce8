"""The observation of `LimitOrderBookEnv` (sekai's `_LOBCore.observe`).

- `observe`: the `{"book", "trades", "agent"}` dict of one agent, from the book, its account
  and the trade log.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._book import Book, depth_levels, queue_position
from ._decision import Account, TradeLog, book_mid2, ordered_trades

__all__ = ["observe"]


def observe(
    book: Book,
    account: Account,
    trades: TradeLog,
    time_left: Array,
    inventory_ratio: np.ndarray,
    *,
    mid_price: int,
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
    bid_ahead, bid_found = queue_position(book, account.bid_id)
    ask_ahead, ask_found = queue_position(book, account.ask_id)
    bid_found = bid_found & (account.bid_id > 0)
    ask_found = ask_found & (account.ask_id > 0)
    limit = (inventory_ratio.shape[0] - 1) // 2
    ratio = jnp.asarray(inventory_ratio)[jnp.clip(account.inventory, -limit, limit) + limit]
    agent = jnp.stack(
        [
            ratio.astype(fdt),
            time_left,
            bid_found.astype(fdt),
            ask_found.astype(fdt),
            jnp.where(bid_found, bid_ahead, 0).astype(fdt),
            jnp.where(ask_found, ask_ahead, 0).astype(fdt),
        ]
    ).astype(jnp.float32)
    return {
        "book": rows,
        "trades": {"values": values, "mask": present.astype(jnp.int8)},
        "agent": agent,
    }
