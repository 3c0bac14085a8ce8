"""Queries of the array book: its best prices, its depth by level, an order's queue place.

- `best_bid`, `best_ask`: the best resting prices (0 for an empty side).
- `best_quotes`: both sides' presence and best prices at once, for the envs' `info`.
- `depth_levels`: sekai's `depth`, the best `n` levels of each side, without a sort.
- `queue_position`: the quantity resting ahead of an order at its price.
"""

from __future__ import annotations

import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._book import _INT32_MAX, Book

__all__ = ["best_ask", "best_bid", "best_quotes", "depth_levels", "queue_position"]


def best_bid(book: Book) -> jax.Array:
    """The highest resting bid price, int32 `()`; 0 when the bid side is empty."""
    return jnp.max(jnp.where(book.valid[0], book.price[0], 0))


def best_ask(book: Book) -> jax.Array:
    """The lowest resting ask price, int32 `()`; 0 when the ask side is empty."""
    lowest = jnp.min(jnp.where(book.valid[1], book.price[1], _INT32_MAX))
    return jnp.where(jnp.any(book.valid[1]), lowest, 0)


def best_quotes(book: Book) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """`(has_bid, has_ask, bid, ask)`: bool `()` whether each side has an order, and the best
    prices, int32 `()`: 0 for an empty bid side, int32's maximum for an empty ask side."""
    has_bid, has_ask = jnp.any(book.valid[0]), jnp.any(book.valid[1])
    bid = jnp.max(jnp.where(book.valid[0], book.price[0], 0))
    ask = jnp.min(jnp.where(book.valid[1], book.price[1], _INT32_MAX))
    return has_bid, has_ask, bid, ask


def depth_levels(book: Book, n_levels: int) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Aggregated depth of the best `n_levels` price levels per side (sekai's `depth`).

    Args:
        book: The book.
        n_levels: Levels per side, a non-negative int (static).

    Returns:
        `(bid_prices, bid_sizes, ask_prices, ask_sizes)`, int32 `(n_levels,)` each, best
        level first (highest bid, lowest ask); missing levels have price 0 and size 0.

    Raises:
        ValueError: If `n_levels` is not a non-negative int.
    """
    try:
        n = operator.index(n_levels)
    except TypeError:
        n = -1
    if isinstance(n_levels, bool) or n < 0:
        raise ValueError(f"n_levels must be a non-negative int, got {n_levels!r}.")
    if not n:
        none = jnp.zeros(0, jnp.int32)
        return none, none, none, none
    # Level by level, without sorting (a sort of the slots costs far more on the CPU): the
    # next level's key is the smallest above the previous level's, found in the same
    # two-output reduction as the size resting at the previous level. Keys: -price for
    # bids, price for asks (smaller is better); empty slots are above every level.
    sign = jnp.asarray([[-1], [1]], jnp.int32)
    key = jnp.where(book.valid, sign * book.price, _INT32_MAX)
    quantity = jnp.where(book.valid, book.size, 0)

    def next_level(previous: jax.Array, _: Any) -> tuple[jax.Array, tuple[jax.Array, ...]]:
        following, resting = lax.reduce(
            (
                jnp.where(key > previous[:, None], key, _INT32_MAX),
                jnp.where(key == previous[:, None], quantity, 0),
            ),
            (jnp.int32(_INT32_MAX), jnp.int32(0)),
            lambda x, y: (jnp.minimum(x[0], y[0]), x[1] + y[1]),
            (1,),
        )
        return following, (following, resting)

    # levels 0..n-1 and, one step on, the size at level n-1 (unrolled for a few levels, a
    # loop beyond, so the program's size stays bounded)
    below_all = jnp.full(2, np.iinfo(np.int32).min, jnp.int32)
    _, (keys, sizes) = lax.scan(next_level, below_all, None, length=n + 1, unroll=n <= 16)
    level_key = keys[:n].T
    prices = jnp.where(level_key == _INT32_MAX, 0, sign * level_key)
    level_size = sizes[1:].T
    return prices[0], level_size[0], prices[1], level_size[1]


def queue_position(book: Book, order_id: Any) -> tuple[jax.Array, jax.Array]:
    """The resting quantity ahead of an order in its price level's queue (sekai's `queue_ahead`).

    Args:
        book: The book.
        order_id: int32 `()`, the order's id.

    Returns:
        `(ahead, found)`: int32 `()`, the quantity that must trade at the order's price
        before it starts to fill, and bool `()`, whether the order rests (`ahead` is 0 if
        not).
    """
    order_id = jnp.asarray(order_id, jnp.int32)
    match = book.valid & (book.seq == order_id)
    found = jnp.any(match)
    row = jnp.argmax(jnp.any(match, axis=1))
    price = jnp.max(jnp.where(match, book.price, 0))
    same_level = book.valid[row] & (book.price[row] == price) & (book.seq[row] < order_id)
    ahead = jnp.sum(jnp.where(same_level, book.size[row], 0), dtype=jnp.int32)
    return jnp.where(found, ahead, 0), found
