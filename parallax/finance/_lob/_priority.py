"""How matching ranks the opposite side's orders, without sorting (used by `_book.py`).

- `_sums`: int32 sums of several arrays over one axis in one reduction (one CPU loop).
- `_priority_ahead`: each eligible order's rank and the quantity ahead of it, from one
  pairwise `capacity x capacity` comparison (loop-free; the envs' decisions).
- `_walk`: what each eligible order trades against a quantity, taking the best one at a
  time in a `lax.while_loop` (one reduction per execution; the order-entry functions).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

INT32_MAX = int(np.iinfo(np.int32).max)
"""The largest int32: the key of no order, and a market buy's limit."""


def _sums(operands: tuple[jax.Array, ...], axis: int) -> tuple[jax.Array, ...]:
    """The int32 sums of `operands` (arrays of one shape) over `axis`, in one reduction.

    XLA's CPU compiler splits a one-output reduction over 32 or more elements into a
    partial and a final reduction, two kernels with the reduced operand written out between
    them; a reduction with two or more outputs stays one loop fused with what feeds it. So
    sums needed together are taken together (on the CPU, about the cost of one sum).
    """
    zeros = tuple(jnp.int32(0) for _ in operands)
    return tuple(
        lax.reduce(
            tuple(x.astype(jnp.int32) for x in operands),
            zeros,
            lambda x, y: tuple(a + b for a, b in zip(x, y, strict=True)),
            (axis,),
        )
    )


def _priority_ahead(
    key: jax.Array, seq: jax.Array, size: jax.Array, eligible: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Each eligible order's place in (key, seq) order among the eligible, without sorting.

    Args:
        key: int32 `(C,)`, the primary key (smaller first): the price, negated for bids.
        seq: int32 `(C,)`, the tie-break (smaller first); unique among eligible slots.
        size: int32 `(C,)`, the orders' sizes.
        eligible: bool `(C,)`, which slots take part.

    Returns:
        `(rank, ahead)`, int32 `(C,)` each: for slot `s`, the number of eligible orders
        before it and the sum of their sizes (what a sort by `(key, seq)` followed by an
        exclusive cumulative sum of the sizes gives). Meaningful for eligible slots only.
    """
    k_s, k_t = key[:, None], key[None, :]
    before = eligible[None, :] & ((k_t < k_s) | ((k_t == k_s) & (seq[None, :] < seq[:, None])))
    ones = before.astype(jnp.int32)
    # One two-output reduction: a quarter of two separate sums (or of the sort it replaces).
    rank, ahead = _sums((ones, ones * size[None, :].astype(jnp.int32)), 1)
    return rank, ahead


def _walk(
    key: jax.Array, seq: jax.Array, size: jax.Array, eligible: jax.Array, quantity: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """What each eligible order trades against `quantity`, by taking the best one at a time.

    The same `(traded, rank)` as `clip(quantity - ahead, 0, size)` from `_priority_ahead`
    (rank meaningful where `traded > 0`), in a `lax.while_loop` with one reduction per
    execution instead of one `C x C` comparison: the best untraded eligible order in
    `(key, seq)` order takes what is left, until nothing is left or none crosses.
    """
    capacity = key.shape[-1]
    slots = jnp.arange(capacity, dtype=jnp.int32)
    big = jnp.int32(INT32_MAX)

    def first(a: tuple[jax.Array, ...], b: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        # lexicographic (closed, key, seq); seq is unique among open orders
        a_first = (a[0] < b[0]) | (
            (a[0] == b[0]) & ((a[1] < b[1]) | ((a[1] == b[1]) & (a[2] < b[2])))
        )
        return tuple(jnp.where(a_first, x, y) for x, y in zip(a, b, strict=True))

    def best(traded: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        closed = (~(eligible & (traded == 0))).astype(jnp.int32)
        init = (jnp.int32(1), big, big, jnp.int32(0), jnp.int32(capacity))
        top = lax.reduce((closed, key, seq, size, slots), init, first, (0,))
        return top[0] == 0, top[3], top[4]

    def body(c: Any) -> Any:
        traded, rank, left, i, _, top_size, top_slot = c
        take = jnp.minimum(left, top_size)
        hit = slots == top_slot
        traded = jnp.where(hit, take, traded)
        rank = jnp.where(hit, i, rank)
        left = left - take
        found, top_size, top_slot = best(traded)
        return traded, rank, left, i + 1, found & (left > 0), top_size, top_slot

    # the carry: traded, rank, quantity left, turn, whether to go on, the next best's size
    # and slot
    zeros = jnp.zeros((capacity,), jnp.int32)
    found, top_size, top_slot = best(zeros)
    start = (zeros, zeros, quantity, jnp.int32(0), found & (quantity > 0), top_size, top_slot)
    traded, rank, *_ = lax.while_loop(lambda c: c[4], body, start)
    return traded, rank
