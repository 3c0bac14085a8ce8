"""One iteration of the background flow's loop, for one book.

- `_iterate`: at most one event (or refill) and one execution against the opposite side's
  best order, then every field updated per slot, in place (see `run_flow`).
- `_materialize`: values computed once a book, not once a slot (XLA's CPU fusion).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ._book import ASK, BID, _row
from ._flow_draws import _float
from ._flow_params import FlowStats
from ._flow_state import _Consts, _draws, _owner, _running, _Scalars
from ._priority import INT32_MAX as _INT32_MAX
from ._priority import _sums


def _iterate(
    consts: _Consts, carry: Any, *, max_events: int, max_trades: int, num_agents: int
) -> Any:
    """One iteration of a book's loop (see `run_flow`)."""
    dtype = _float()
    lr, mr, cr = consts.limit_rate, consts.market_rate, consts.cancel_rate
    until = consts.until
    limit_total = 2.0 * lr
    market_bid = limit_total + mr
    base = limit_total + 2.0 * mr
    capacity = carry[0].shape[-1]
    agents = jnp.arange(num_agents, dtype=jnp.int32)
    ring = jnp.arange(max_trades, dtype=jnp.int32)
    slots = jnp.arange(capacity, dtype=jnp.int32)
    rows = jnp.arange(2, dtype=jnp.int32)[:, None]
    zero = jnp.asarray(0, jnp.int32)
    price, size, seq, tag, pos, length, stats, sc, dr = carry
    # A book that has finished (or reached the bound) goes through unchanged: no event,
    # no order, no iteration counted (see `_run_flow_batched`).
    live = _running(carry, max_events)
    # Each side's best order (place 0: price, size, tag), the next one's price and the
    # first free slot, in one reduction.
    best, second = pos == 0, pos == 1
    best_price, best_size, best_tag, best_slot, second_price, free = lax.reduce(
        (
            jnp.where(best, price, 0),
            jnp.where(best, size, 0),
            jnp.where(best, tag, 0),
            jnp.where(best, slots[None, :], 0),
            jnp.where(second, price, 0),
            jnp.where(pos >= capacity, slots[None, :], capacity),
        ),
        (zero, zero, zero, zero, zero, jnp.int32(capacity)),
        lambda x, y: (
            *(a + b for a, b in zip(x[:5], y[:5], strict=True)),
            jnp.minimum(x[5], y[5]),
        ),
        (1,),
    )
    has = length > 0
    has_bid, has_ask = has[0], has[1]
    bid = jnp.where(has_bid, best_price[0], 0)
    ask = jnp.where(has_ask, best_price[1], _INT32_MAX)
    pending = live & (sc.qty > 0)
    fresh = live & (sc.qty <= 0)
    refill = fresh & (stats.events > 0) & ~(has_bid & has_ask)
    drawn = fresh & ~refill

    # A Poisson event (when no order is still matching and no refill is pending).
    rate = base + cr * sc.n_background.astype(dtype)
    t = stats.end_time + dr.wait / rate
    finished = drawn & (t > until)
    happens = drawn & ~finished
    u = dr.event * rate
    is_limit = happens & (u < limit_total)
    is_market_kind = happens & (u >= limit_total) & (u < base)
    is_cancel = happens & (u >= base) & (sc.n_background > 0)
    limit_side = jnp.where(u < lr, BID, ASK)
    market_side = jnp.where(u < market_bid, BID, ASK)
    opposite_present = jnp.where(market_side == BID, has_ask, has_bid)
    is_market = is_market_kind & opposite_present

    # A new order: the event's limit or market order, or a refill of an emptied side
    # (bids first).
    place = is_limit | refill
    new_side = jnp.where(refill, jnp.where(has_bid, ASK, BID), limit_side)
    new_side = jnp.where(is_market, market_side, new_side)
    reference_bid = jnp.where(has_ask, ask, jnp.where(has_bid, bid + 1, sc.last_price))
    reference_ask = jnp.where(has_bid, bid, jnp.where(has_ask, ask - 1, sc.last_price))
    offset = dr.offset
    limit_price = jnp.where(new_side == BID, reference_bid - offset, reference_ask + offset).clip(1)
    # A market order is a limit order at the far end of the book whose remainder is
    # dropped rather than rested.
    new_limit = jnp.where(is_market, jnp.where(new_side == BID, _INT32_MAX, 1), limit_price)
    submits = place | is_market
    new_size = dr.size

    # The order that matches this iteration: the one still matching, or the new one.
    side = jnp.where(pending, sc.side, new_side)
    limit = jnp.where(pending, sc.limit, new_limit)
    qty = jnp.where(pending, sc.qty, jnp.where(submits, new_size, 0))
    taker_id = jnp.where(pending, sc.taker_id, sc.next_id)
    market = jnp.where(pending, sc.market, is_market)
    active = qty > 0
    is_bid = side == BID
    own = _row(side)
    opp = 1 - own

    # It meets the opposite side's best order: one execution an iteration.
    def opposite(per_side: jax.Array) -> jax.Array:
        return jnp.where(opp == 0, per_side[0], per_side[1])

    def crosses(p: jax.Array) -> jax.Array:
        return jnp.where(is_bid, p <= limit, p >= limit)

    front_price = opposite(best_price)
    front_size = opposite(best_size)
    front_tag = opposite(best_tag)
    front_owner = _owner(front_tag)
    opp_length = jnp.where(opp == 0, length[0], length[1])
    hit = active & (opp_length > 0) & crosses(front_price)
    traded = jnp.where(hit, jnp.minimum(qty, front_size), 0)
    consumed = hit & (traded == front_size)
    left = qty - traded
    # Whether it goes on matching next iteration (the next order crosses too).
    next_crosses = jnp.where(consumed, (opp_length > 1) & crosses(opposite(second_price)), hit)
    goes_on = (left > 0) & next_crosses
    wants_rest = active & (left > 0) & ~goes_on & ~market
    own_length = jnp.where(own == 0, length[0], length[1])
    rests = wants_rest & (own_length < capacity)
    overflowed = wants_rest & (own_length >= capacity)

    # A background order that leaves (the best opposite one consumed, or the cancelled
    # one: the `index`-th in arrival order, tag `index + 1`) takes its tag out: the
    # later orders' tags move down one. A resting remainder is the newest.
    gone = jnp.where(
        is_cancel,
        dr.cancel + 1,
        jnp.where(consumed & (front_tag > 0), front_tag, _INT32_MAX),
    )
    n_background = sc.n_background - (gone < _INT32_MAX).astype(jnp.int32)
    new_tag = n_background + 1

    # What the slot-wide updates below read, computed once (see `_materialize`).
    side, limit, is_cancel, hit, consumed, traded, left, rests, gone, new_tag = _materialize(
        side, limit, is_cancel, hit, consumed, traded, left, rests, gone, new_tag
    )
    is_bid = side == BID
    own = _row(side)
    opp = 1 - own
    valid = pos < capacity

    # Per side: the cancelled order's place and whether it is there, and the place a
    # resting remainder takes (behind every order at its price or better), in one
    # reduction.
    removed = is_cancel & valid & (tag == gone)
    sign = jnp.where(rows == 0, -1, 1)
    ahead = valid & (rows == own) & (sign * price <= jnp.where(is_bid, -limit, limit))
    cancel_at, cancelled, rest_at = _sums((jnp.where(removed, pos, 0), removed, ahead), 1)
    small = pos.dtype
    rest_at = rest_at[0] + rest_at[1]

    # Each side changes by at most one order: one leaves (the opposite best consumed, or
    # the cancelled one) and those behind it move up a place, or the remainder enters at
    # place `rest_at` in the side's first free slot and those from there move down one.
    # Every update is per slot, in place.
    leaves = ((cancelled > 0) | ((rows[:, 0] == opp) & consumed))[:, None]
    leave_at = jnp.where(cancelled > 0, cancel_at, 0)[:, None]
    # (`rest_at >= 0` always holds: it makes every field's update wait for the reduction
    # above, which reads the old fields, so XLA can update them in place; otherwise
    # it copied the price, tag and place fields every iteration)
    enters = ((rows[:, 0] == own) & rests & (rest_at >= 0))[:, None]
    is_new = enters & (slots[None, :] == free[:, None])
    moved = (
        pos
        - (leaves & valid & (pos > leave_at.astype(small))).astype(small)
        + (enters & valid & (pos >= rest_at.astype(small))).astype(small)
    )
    left_book = leaves & valid & (pos == leave_at.astype(small))
    new_pos = jnp.where(
        is_new, rest_at.astype(small), jnp.where(left_book, jnp.asarray(capacity, small), moved)
    )
    partial = (rows == opp) & (slots[None, :] == best_slot[:, None]) & hit & ~consumed
    new_size_field = jnp.where(is_new, left, jnp.where(partial, size - traded, size))
    new_price = jnp.where(is_new, limit, price)
    new_seq = jnp.where(is_new, taker_id, seq)
    new_tag_field = jnp.where(is_new, new_tag, jnp.where(tag > gone, tag - 1, tag))
    new_length = length + enters[:, 0].astype(jnp.int32) - leaves[:, 0].astype(jnp.int32)

    # The execution: logged at `n_trades % T` (the ring keeps the last T).
    fill = traded > 0
    time = jnp.where(happens, t, stats.end_time)
    written = fill & (ring == stats.n_trades % max_trades)

    def log_each(buffer: jax.Array, value: jax.Array) -> jax.Array:
        return jnp.where(written, value.astype(buffer.dtype), buffer)

    mine = fill & (front_owner == agents)
    quantity = jnp.where(mine, traded, 0)
    new_stats = FlowStats(
        events=stats.events + happens.astype(jnp.int32),
        limit_orders=stats.limit_orders + is_limit.astype(jnp.int32),
        market_orders=stats.market_orders + is_market.astype(jnp.int32),
        cancels=stats.cancels + is_cancel.astype(jnp.int32),
        refills=stats.refills + refill.astype(jnp.int32),
        iterations=stats.iterations + live.astype(jnp.int32),
        truncated=stats.truncated,
        n_trades=stats.n_trades + fill.astype(jnp.int32),
        volume=stats.volume + traded,
        trade_time=log_each(stats.trade_time, time),
        trade_price=log_each(stats.trade_price, front_price),
        trade_size=log_each(stats.trade_size, traded),
        trade_maker_owner=log_each(stats.trade_maker_owner, front_owner),
        trade_taker_side=log_each(stats.trade_taker_side, side),
        agent_bought=stats.agent_bought + jnp.where(is_bid, 0, quantity),
        agent_sold=stats.agent_sold + jnp.where(is_bid, quantity, 0),
        agent_cash=stats.agent_cash + jnp.where(is_bid, quantity, -quantity) * front_price,
        agent_fills=stats.agent_fills + mine.astype(jnp.int32),
        end_time=time,
    )
    new_sc = _Scalars(
        n_wait=sc.n_wait + drawn.astype(jnp.int32),
        n_offset=sc.n_offset + place.astype(jnp.int32),
        n_size=sc.n_size + submits.astype(jnp.int32),
        n_cancel=sc.n_cancel + is_cancel.astype(jnp.int32),
        next_id=sc.next_id + submits.astype(jnp.int32),
        n_background=n_background + rests.astype(jnp.int32),
        last_price=jnp.where(fill, front_price, sc.last_price),
        overflow=sc.overflow | overflowed,
        qty=jnp.where(goes_on, left, 0),
        side=side,
        limit=limit,
        taker_id=taker_id,
        market=market,
        done=sc.done | finished,
    )
    return (
        new_price,
        new_size_field,
        new_seq,
        new_tag_field,
        new_pos,
        new_length,
        new_stats,
        new_sc,
        _draws(consts, new_sc),
    )


def _materialize(*values: jax.Array) -> tuple[jax.Array, ...]:
    """`values` (arrays of one shape, int or bool), computed once and stored.

    XLA's CPU compiler fuses cheap computations into every kernel that reads them. So a
    chain of a few hundred per-book operations (the event, its order, the match with the
    best opposite order) ran once per slot of every field update (the LOB env, N = 1024:
    48.5k steps/s instead of 75k). A reduction is never fused into what reads it (an
    optimisation barrier did not help), so the values go through one: each is paired with
    a zero and the pair summed.
    """
    ops = tuple(jnp.stack([v, jnp.zeros_like(v)], -1) for v in values)
    inits = tuple(jnp.zeros((), v.dtype) for v in values)

    def combine(a: tuple[jax.Array, ...], b: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        return tuple((x | y) if x.dtype == jnp.bool_ else x + y for x, y in zip(a, b, strict=True))

    return tuple(lax.reduce(ops, inits, combine, (values[0].ndim,)))
