"""The background flow's loop state: a book's inputs, the carry, its start and its end.

- `_Consts`: a book's inputs to the loop; `_Scalars`: its per-book scalars (the draw
  counters, the incoming order still matching, ...); `_Draws`: the draws an iteration may
  use, made by `_draws` (the draw schedule) and carried.
- `_pack`: the book's fields with each order's place in priority and its tag; `_owner`: an
  order's owner from its tag; `_place_dtype`: the places' int type.
- `_setup`: a book's inputs and the first carry; `_running`: whether its loop goes on;
  `_finish`: the book and the stats from the last carry.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ... import rng
from ._book import BACKGROUND, Book
from ._flow_draws import (
    FLOW_SLOTS,
    _exponential_from_uniform,
    _float,
    _offset_from_uniform,
    _size_from_table,
    _size_table,
    _SizeTable,
)
from ._flow_params import FlowParams, FlowStats
from ._priority import _sums


class _Consts(NamedTuple):
    """A book's inputs to the flow's loop (see `_setup`)."""

    episode_key: jax.Array
    step: jax.Array
    until: jax.Array
    limit_rate: jax.Array
    market_rate: jax.Array
    cancel_rate: jax.Array
    max_offset: jax.Array
    offset_decay: jax.Array
    sizes: _SizeTable


def _draw(consts: _Consts, slot: int, n: jax.Array) -> jax.Array:
    return rng.uniform(consts.episode_key, consts.step, slot, n.astype(jnp.uint32), dtype=_float())


def _draws(consts: _Consts, sc: _Scalars) -> _Draws:
    """The draws the next iteration may use.

    They are made at the end of an iteration and carried: as loop state they are computed
    once a book, where XLA would otherwise fuse the hashes into the slot-wide updates and
    compute them once a slot.
    """
    return _Draws(
        wait=_exponential_from_uniform(_draw(consts, FLOW_SLOTS.WAIT, sc.n_wait)),
        event=_draw(consts, FLOW_SLOTS.EVENT, sc.n_wait),
        offset=_offset_from_uniform(
            _draw(consts, FLOW_SLOTS.OFFSET, sc.n_offset), consts.max_offset, consts.offset_decay
        ),
        size=_size_from_table(_draw(consts, FLOW_SLOTS.SIZE, sc.n_size), consts.sizes),
        cancel=rng.randint(
            consts.episode_key,
            consts.step,
            FLOW_SLOTS.CANCEL,
            sc.n_cancel.astype(jnp.uint32),
            jnp.maximum(sc.n_background, 1),
        ),
    )


def _setup(
    book: Book,
    params: FlowParams,
    episode_key: Any,
    decision_index: Any,
    start: Any,
    until: Any,
    *,
    max_trades: int,
    num_agents: int,
) -> tuple[_Consts, Any]:
    """A book's loop inputs and the loop's first carry."""
    dtype = _float()
    consts = _Consts(
        episode_key=jnp.asarray(episode_key),
        step=jnp.asarray(decision_index, jnp.uint32),
        until=jnp.asarray(until, dtype),
        limit_rate=jnp.asarray(params.limit_rate, dtype),
        market_rate=jnp.asarray(params.market_rate, dtype),
        cancel_rate=jnp.asarray(params.cancel_rate, dtype),
        max_offset=jnp.asarray(params.max_offset, jnp.int32),
        offset_decay=jnp.asarray(params.offset_decay, dtype),
        sizes=_size_table(jnp.asarray(params.mean_size, dtype), dtype),
    )
    # In the loop each order carries its place in priority on its side (0: the best, the
    # highest bid or lowest ask, the earliest at a price first; `C`: an empty slot) and its
    # tag (see `_pack`). The best orders are those at place 0, an incoming order meets the
    # opposite side's orders one per iteration in place order, and every change to a side
    # is a per-slot update of the places and tags; orders never move between slots.
    fields0, length = _pack(book)
    zero = jnp.asarray(0, jnp.int32)
    stats0 = FlowStats(
        events=zero,
        limit_orders=zero,
        market_orders=zero,
        cancels=zero,
        refills=zero,
        iterations=zero,
        truncated=jnp.asarray(False),
        n_trades=zero,
        volume=zero,
        trade_time=jnp.zeros(max_trades, dtype),
        trade_price=jnp.zeros(max_trades, jnp.int32),
        trade_size=jnp.zeros(max_trades, jnp.int32),
        trade_maker_owner=jnp.zeros(max_trades, jnp.int32),
        trade_taker_side=jnp.zeros(max_trades, jnp.int32),
        agent_bought=jnp.zeros(num_agents, jnp.int32),
        agent_sold=jnp.zeros(num_agents, jnp.int32),
        agent_cash=jnp.zeros(num_agents, jnp.int32),
        agent_fills=jnp.zeros(num_agents, jnp.int32),
        end_time=jnp.asarray(start, dtype),
    )
    n_background0 = jnp.sum(book.valid & (book.owner == BACKGROUND), dtype=jnp.int32)
    # Scalars: n-th draw of WAIT (= EVENT), OFFSET, SIZE, CANCEL within the interval; the
    # next id; the background count; the last price; overflow; and the incoming order
    # still matching (its quantity left, side, limit, id and whether it is a market order).
    scalars0 = _Scalars(
        n_wait=zero,
        n_offset=zero,
        n_size=zero,
        n_cancel=zero,
        next_id=book.next_id,
        n_background=n_background0,
        last_price=book.last_price,
        overflow=book.overflow,
        qty=zero,
        side=zero,
        limit=zero,
        taker_id=zero,
        market=jnp.asarray(False),
        done=jnp.asarray(False),
    )
    return consts, (*fields0, length, stats0, scalars0, _draws(consts, scalars0))


def _running(carry: Any, max_events: int) -> jax.Array:
    """Whether a book's loop goes on: not past `until`, and under the bound."""
    stats, sc = carry[6], carry[7]
    return ~sc.done & (stats.iterations < max_events)


def _finish(consts: _Consts, carry: Any) -> tuple[Book, FlowStats]:
    """The book and the stats from the loop's last carry."""
    price, size, seq, tag, pos, _, stats, sc, _ = carry
    capacity = price.shape[-1]
    valid = pos < capacity
    book = Book(
        price=jnp.where(valid, price, 0),
        size=jnp.where(valid, size, 0),
        owner=jnp.where(valid, _owner(tag), 0),
        seq=jnp.where(valid, seq, 0),
        valid=valid,
        next_id=sc.next_id,
        last_price=sc.last_price,
        overflow=sc.overflow,
    )
    stats = dataclasses.replace(
        stats,
        truncated=~sc.done,
        end_time=jnp.where(sc.done, consts.until, stats.end_time),
    )
    return book, stats


class _Draws(NamedTuple):
    """The draws an iteration of the flow may use (see `_run_flow`)."""

    wait: jax.Array
    event: jax.Array
    offset: jax.Array
    size: jax.Array
    cancel: jax.Array


class _Scalars(NamedTuple):
    """The flow loop's per-book scalars (see `_run_flow`)."""

    n_wait: jax.Array
    n_offset: jax.Array
    n_size: jax.Array
    n_cancel: jax.Array
    next_id: jax.Array
    n_background: jax.Array
    last_price: jax.Array
    overflow: jax.Array
    qty: jax.Array
    side: jax.Array
    limit: jax.Array
    taker_id: jax.Array
    market: jax.Array
    done: jax.Array


def _owner(tag: jax.Array) -> jax.Array:
    """The owner of an order from its tag (see `_pack`): 0 for an empty slot."""
    return jnp.where(tag > 0, BACKGROUND, jnp.where(tag < 0, -1 - tag, 0))


def _place_dtype(capacity: int) -> Any:
    """The smallest int type that holds the places `0..capacity`: the loop reads and
    writes the places every iteration, and int8 places (capacity < 127) make the flow
    about 12% faster than int32 ones (N = 1024, capacity 64)."""
    for dtype in (jnp.int8, jnp.int16):
        if capacity <= int(jnp.iinfo(dtype).max):
            return dtype
    return jnp.int32


def _pack(book: Book) -> tuple[tuple[jax.Array, ...], jax.Array]:
    """The book's fields for the flow's loop: each order's place in priority, and tags.

    Returns `((price, size, seq, tag, place), length)`: the book's fields, the tags, each
    order's place on its side (0 for the best, then by price and id; `C` for an empty
    slot), all int32 `(2, C)`, and the orders per side, int32 `(2,)`. A tag is `1 + ` the
    order's rank in arrival (id) order among the resting background orders, `-1 - owner`
    for an agent's order and 0 for an empty slot: the owner and, for the flow's
    cancellations, the arrival order in one field. Pairwise counts, not sorts (on the CPU
    a sort of the book costs several times more).
    """
    capacity = book.capacity
    valid = book.valid
    sign = jnp.asarray([[-1], [1]], jnp.int32)
    key = sign * book.price
    # Each order's place on its side: the valid orders before it in (key, seq) order.
    k_s, k_t = key[:, :, None], key[:, None, :]
    seq_s, seq_t = book.seq[:, :, None], book.seq[:, None, :]
    before = valid[:, None, :] & ((k_t < k_s) | ((k_t == k_s) & (seq_t < seq_s)))
    # (two outputs used, so the reduction stays one loop; see `_sums`)
    place, side_count = _sums((before, jnp.broadcast_to(valid[:, None, :], before.shape)), 2)
    # The arrival rank among background orders: those of both sides with a smaller id.
    background = valid & (book.owner == BACKGROUND)
    flat_seq, flat_background = book.seq.reshape(-1), background.reshape(-1)
    older = flat_background[None, :] & (flat_seq[None, :] < flat_seq[:, None])
    older_bids, older_asks = _sums((older[:, :capacity], older[:, capacity:]), 1)
    rank = (older_bids + older_asks).reshape(valid.shape)
    tag = jnp.where(background, rank + 1, jnp.where(valid, -1 - book.owner, 0))
    place = jnp.where(valid, place, capacity).astype(_place_dtype(capacity))
    return (book.price, book.size, book.seq, tag, place), side_count[:, 0]
