"""A price-time priority limit order book as fixed-shape arrays, and its pure functions.

- `Book`: the resting orders of both sides (a capacity of slots per side) plus the order-id
  counter, the last trade price and a sticky overflow flag; a pytree.
- `Fills`: what one incoming order did: its executions in matching order (fixed-size arrays
  with a count), its id, and whether its remainder rested, was dropped or was rejected.
- `BID`, `ASK`, `BACKGROUND`: side codes (the sign of the owner's position change on a fill,
  as sekai's `Side`) and the owner id of background flow.
- `empty_book`, `add_limit`, `market_order`, `submit_order` (either kind, chosen as data),
  `cancel`, `cancel_slot`: order entry.
- the queries (`best_bid`, `best_ask`, `depth_levels`, `queue_position`) are in
  `_book_queries.py`.

Every function is pure and jit/vmap-able; none jits itself. Matching does not sort
(`_priority.py`). The order-entry functions walk the opposite side (`_walk`): a
`lax.while_loop` whose every turn takes the best untraded crossing order (one
lexicographic reduction over its slots), so an order costs one pass over the side per
execution (under `vmap`, per execution of the busiest book); the executions are then
written at their ranks. The envs' decisions (`_decision.py`) use the loop-free form
(`_priority_ahead`): one pairwise comparison of the side's slots by their (price, arrival)
keys gives each crossing order its rank and the quantity ahead of it, and each takes
`clip(quantity - ahead, 0, size)`, one `capacity x capacity` comparison whatever the
number of fills (in the envs' step, as fast as the loop). The two give the same
executions (tests compare both with NumPy on random books). The behaviour is that of sekai
0.2.0's `sekai.finance.lob.OrderBook` (tested against it event by event).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._priority import INT32_MAX as _INT32_MAX
from ._priority import _priority_ahead, _walk

__all__ = [
    "ASK",
    "BACKGROUND",
    "BID",
    "Book",
    "Fills",
    "add_limit",
    "cancel",
    "cancel_slot",
    "empty_book",
    "market_order",
    "submit_order",
]

BID: int = 1
"""Side code of a buy order (row 0 of the book's arrays)."""
ASK: int = -1
"""Side code of a sell order (row 1 of the book's arrays)."""
BACKGROUND: int = -1
"""Owner id of background flow, as sekai's `BACKGROUND`."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Book:
    """The resting orders of a limit order book, `C` slots per side.

    Row 0 of each `(2, C)` array is the bid side, row 1 the ask side. Slots are unordered:
    priority comes from the keys (price, then `seq`), never from the slot index, and an
    empty slot (`valid` False) holds zeros in every field.

    Attributes:
        price: int32 `(2, C)`, limit prices in ticks (>= 1 while valid).
        size: int32 `(2, C)`, remaining quantities (>= 1 while valid).
        owner: int32 `(2, C)`, owner ids (`BACKGROUND` = -1 for background flow).
        seq: int32 `(2, C)`, arrival sequence numbers: the order ids, unique and increasing
            in arrival order (time priority within a price level).
        valid: bool `(2, C)`, which slots hold a resting order.
        next_id: int32 `()`, the id the next accepted order gets (ids start at 1, and
            market orders take one too, as in sekai).
        last_price: int32 `()`, the price of the most recent fill, 0 before any.
        overflow: bool `()`, sticky: True once a limit remainder found no free slot on its
            side and was dropped. Results after that differ from an unbounded book.
    """

    price: jax.Array
    size: jax.Array
    owner: jax.Array
    seq: jax.Array
    valid: jax.Array
    next_id: jax.Array
    last_price: jax.Array
    overflow: jax.Array

    @property
    def capacity(self) -> int:
        """Slots per side (static: the arrays' last dimension)."""
        return int(self.price.shape[-1])


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Fills:
    """The result of one incoming order: its executions, in matching order.

    Entry `i < count` of the `(C,)` arrays is the `i`-th execution; later entries are 0.
    `C` (the book's capacity) bounds the number of executions of one order, since each
    but the last removes a resting order, so the arrays can never overflow.

    Attributes:
        price: int32 `(C,)`, execution prices: the resting (maker) order's price.
        size: int32 `(C,)`, executed quantities.
        maker_id: int32 `(C,)`, ids of the resting orders.
        maker_owner: int32 `(C,)`, owners of the resting orders.
        count: int32 `()`, the number of executions.
        taker_id: int32 `()`, the incoming order's id (0 if it was rejected).
        taker_owner: int32 `()`, the incoming order's owner.
        taker_side: int32 `()`, the incoming order's side (`BID` or `ASK`).
        accepted: bool `()`, False when the order was invalid (size < 1, limit price < 1
            or side not in {1, -1}) and changed nothing.
        rested: bool `()`, True when an unfilled limit remainder now rests under
            `taker_id`.
        overflow: bool `()`, True when an unfilled limit remainder was dropped because its
            side had no free slot (the book's sticky `overflow` is set too).
    """

    price: jax.Array
    size: jax.Array
    maker_id: jax.Array
    maker_owner: jax.Array
    count: jax.Array
    taker_id: jax.Array
    taker_owner: jax.Array
    taker_side: jax.Array
    accepted: jax.Array
    rested: jax.Array
    overflow: jax.Array


def _check_static_int(name: str, value: Any, minimum: int) -> None:
    """Validate `value` if it is a Python/NumPy integer; arrays are the caller's contract."""
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    if isinstance(value, int | np.integer) and int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")


def _check_owner(owner: Any) -> None:
    if isinstance(owner, bool | np.bool_) or (
        isinstance(owner, int | np.integer) and int(owner) < BACKGROUND
    ):
        raise ValueError(f"owner must be BACKGROUND (-1) or an id >= 0, got {owner!r}.")


def _check_side(side: Any) -> None:
    if isinstance(side, bool | np.bool_) or (
        isinstance(side, int | np.integer) and int(side) not in (BID, ASK)
    ):
        raise ValueError(f"side must be BID (1) or ASK (-1), got {side!r}.")


def empty_book(capacity: int) -> Book:
    """A book with no resting orders and `capacity` slots per side.

    Args:
        capacity: Slots per side, a positive int (static: it fixes the arrays' shapes).

    Returns:
        An empty `Book`; `next_id` is 1 and `last_price` 0.

    Raises:
        ValueError: If `capacity` is not a positive int.

    Example:
        >>> from parallax.finance._lob import empty_book
        >>> empty_book(4).price.shape
        (2, 4)
    """
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer) or capacity < 1:
        raise ValueError(f"capacity must be a positive int, got {capacity!r}.")
    shape = (2, int(capacity))
    zeros = jnp.zeros(shape, jnp.int32)
    return Book(
        price=zeros,
        size=zeros,
        owner=zeros,
        seq=zeros,
        valid=jnp.zeros(shape, bool),
        next_id=jnp.asarray(1, jnp.int32),
        last_price=jnp.asarray(0, jnp.int32),
        overflow=jnp.asarray(False),
    )


def stacked_sides(bid: Any, ask: Any) -> dict[str, jax.Array]:
    """A book's per-slot fields from its two sides' `(price, size, owner, seq, valid)` (one
    array each, `(capacity,)`): each field stacked bid first, `(2, capacity)`, by name."""
    names = ("price", "size", "owner", "seq", "valid")
    return {n: jnp.stack([b, a]) for n, b, a in zip(names, bid, ask, strict=True)}


def _row(side: jax.Array) -> jax.Array:
    """The array row of a side code: 0 for `BID`, 1 for `ASK`."""
    return (side < 0).astype(jnp.int32)


class _Match(NamedTuple):
    """What matching one incoming order did, per slot of the opposite side (unordered).

    The `n_fills` makers that traded (`traded > 0`) have the priority ranks `0..n_fills-1`, in
    matching order; `price`, `maker_id` and `maker_owner` are the opposite side's fields
    before the match. `Fills` is this with the executions written at their ranks.
    """

    traded: jax.Array
    rank: jax.Array
    price: jax.Array
    maker_id: jax.Array
    maker_owner: jax.Array
    n_fills: jax.Array
    taker_id: jax.Array
    accepted: jax.Array
    rested: jax.Array
    overflow: jax.Array


def _match(
    book: Book,
    side: Any,
    limit: Any,
    size: Any,
    owner: Any,
    *,
    is_market: Any,
    prevent_self_trade: Any,
    walk: bool = False,
) -> tuple[Book, _Match]:
    """Match an incoming order against the opposite side, then rest a limit remainder.

    `is_market` (a bool, or a traced bool `()`): no price limit, and no remainder rests.
    `walk` (static): match with `_walk`, else with `_priority_ahead`; the same result.
    The executions are left unordered (see `_Match`); `_submit` orders them."""
    side = jnp.asarray(side, jnp.int32)
    size = jnp.asarray(size, jnp.int32)
    owner = jnp.asarray(owner, jnp.int32)
    is_bid = side == BID
    is_market = jnp.asarray(is_market, bool)
    market_limit = jnp.where(is_bid, jnp.int32(_INT32_MAX), jnp.int32(0))
    limit = jnp.where(is_market, market_limit, jnp.asarray(limit, jnp.int32))
    accepted = (size >= 1) & (is_market | (limit >= 1)) & ((side == BID) | (side == ASK))
    capacity = book.capacity
    opp = 1 - _row(side)

    # Self-trade prevention, cancel-resting mode: the owner's orders on the opposite side
    # leave the book before matching, so the incoming order can never meet them.
    # The opposite row of all five fields in one read: under vmap, `field[opp]` is a gather,
    # and one gather of the stacked fields costs less than five (the flow, N = 1024: 10%).
    fields = jnp.stack([book.price, book.size, book.owner, book.seq, book.valid.astype(jnp.int32)])
    opp_price, opp_size, opp_owner, opp_seq, opp_valid_int = fields[:, opp]
    cancel_own = jnp.asarray(prevent_self_trade, bool) & accepted & (opp_owner == owner)
    opp_valid = (opp_valid_int > 0) & ~cancel_own

    # Price-time priority: best price first (lowest ask, highest bid), then earliest id.
    crosses = jnp.where(is_bid, opp_price <= limit, opp_price >= limit)
    eligible = opp_valid & crosses & accepted
    # What each eligible maker trades and its rank in that order, without a sort (ids are
    # unique, so the order is total): by the loop, or from the quantity resting ahead of it.
    key = jnp.where(is_bid, opp_price, -opp_price)
    quantity = jnp.where(accepted, size, 0)
    if walk:
        traded, rank = _walk(key, opp_seq, opp_size, eligible, quantity)
    else:
        rank, ahead = _priority_ahead(key, opp_seq, opp_size, eligible)
        traded = jnp.clip(quantity - ahead, 0, jnp.where(eligible, opp_size, 0))
    filled = jnp.sum(traded, dtype=jnp.int32)
    remaining = quantity - filled
    is_fill = traded > 0
    # The number of executions, and the worst price that traded (the highest ask a buy
    # reached, the lowest bid a sell did: the last execution's), in one reduction.
    count, worst = lax.reduce(
        (is_fill.astype(jnp.int32), jnp.where(is_fill, key, -_INT32_MAX)),
        (jnp.int32(0), jnp.int32(-_INT32_MAX)),
        lambda x, y: (x[0] + y[0], jnp.maximum(x[1], y[1])),
        (0,),
    )
    last_fill_price = jnp.where(is_bid, worst, -worst)

    new_opp_size = opp_size - traded
    new_opp_valid = opp_valid & (new_opp_size > 0)
    slots = jnp.arange(capacity, dtype=jnp.int32)

    # Rest a limit remainder in the first free slot of its side, or flag the overflow.
    # The first free slot of each side (capacity if none) and whether it has one, in one
    # two-output reduction over both rows (no gather of the own row, one loop on the CPU),
    # then the own side's.
    first_free, any_free = lax.reduce(
        (jnp.where(book.valid, capacity, slots), (~book.valid).astype(jnp.int32)),
        (jnp.int32(capacity), jnp.int32(0)),
        lambda x, y: (jnp.minimum(x[0], y[0]), jnp.maximum(x[1], y[1])),
        (1,),
    )
    slot = jnp.where(is_bid, first_free[0], first_free[1])
    has_free = jnp.where(is_bid, any_free[0], any_free[1]) > 0
    wants_rest = (remaining > 0) & ~is_market
    rested = wants_rest & has_free
    overflowed = wants_rest & ~has_free
    taker_id = jnp.where(accepted, book.next_id, 0)
    place = rested & (slots == slot)

    rows = jnp.arange(2, dtype=jnp.int32)[:, None]
    is_opp = rows == opp
    placed = ~is_opp & place[None, :]  # the new order's slot, in the own row

    def update(field: jax.Array, opp_row: jax.Array, own_value: jax.Array) -> jax.Array:
        # Both rows by selection, not `field.at[opp].set(...).at[own].set(...)`: under vmap
        # that scatter becomes an in-place dynamic-update-slice fusion, and when the order
        # comes from a policy's counter-based draws in the same program (e.g.
        # `parallax.rollout` with `parallax.random_actions`), XLA's CPU fusion emitter
        # (jaxlib 0.10) took minutes on that one kernel; the selects compile in seconds.
        # The own row is the field itself but for the placed slot, so it is never read out
        # (a gather under vmap).
        return jnp.where(is_opp, opp_row[None, :], jnp.where(placed, own_value, field))

    valid = update(book.valid, new_opp_valid, jnp.asarray(True))
    new_book = Book(
        price=jnp.where(valid, update(book.price, opp_price, limit), 0),
        size=jnp.where(valid, update(book.size, new_opp_size, remaining), 0),
        owner=jnp.where(valid, update(book.owner, opp_owner, owner), 0),
        seq=jnp.where(valid, update(book.seq, opp_seq, taker_id), 0),
        valid=valid,
        next_id=book.next_id + accepted.astype(jnp.int32),
        last_price=jnp.where(count > 0, last_fill_price, book.last_price),
        overflow=book.overflow | overflowed,
    )
    match = _Match(
        traded=traded,
        rank=rank,
        price=opp_price,
        maker_id=opp_seq,
        maker_owner=opp_owner,
        n_fills=count,
        taker_id=taker_id,
        accepted=accepted,
        rested=rested,
        overflow=overflowed,
    )
    return new_book, match


def _submit(
    book: Book,
    side: Any,
    limit: Any,
    size: Any,
    owner: Any,
    *,
    is_market: Any,
    prevent_self_trade: Any,
) -> tuple[Book, Fills]:
    """`_match`, with the executions written in matching order (`Fills`)."""
    book, m = _match(
        book,
        side,
        limit,
        size,
        owner,
        is_market=is_market,
        prevent_self_trade=prevent_self_trade,
        walk=True,
    )
    capacity = book.capacity
    # The filled makers are the first `count` in priority, so their ranks are 0..count-1
    # and each lands at its rank; the other entries stay 0.
    at = jnp.where(m.traded > 0, m.rank, capacity)
    executions = (
        jnp.zeros((4, capacity), jnp.int32)
        .at[:, at]
        .set(jnp.stack([m.price, m.traded, m.maker_id, m.maker_owner]), mode="drop")
    )
    fill_price, fill_size, fill_maker, fill_owner = executions
    fills = Fills(
        price=fill_price,
        size=fill_size,
        maker_id=fill_maker,
        maker_owner=fill_owner,
        count=m.n_fills,
        taker_id=m.taker_id,
        taker_owner=jnp.asarray(owner, jnp.int32),
        taker_side=jnp.asarray(side, jnp.int32),
        accepted=m.accepted,
        rested=m.rested,
        overflow=m.overflow,
    )
    return book, fills


def add_limit(
    book: Book,
    side: Any,
    price: Any,
    size: Any,
    owner: Any = BACKGROUND,
    *,
    prevent_self_trade: Any = False,
) -> tuple[Book, Fills]:
    """Submit a limit order: match while the prices cross, then rest the remainder.

    The order takes the opposite side's orders best price first and, within a price,
    earliest first, each at the resting order's price, until its quantity is used up or
    the next price no longer crosses `price`. An unfilled remainder rests under the new id
    `fills.taker_id`, behind every order already at its price.

    Args:
        book: The book.
        side: `BID` (1) or `ASK` (-1), int32 `()`.
        price: Limit price in ticks, int32 `()` >= 1.
        size: Quantity, int32 `()` >= 1.
        owner: Owner id, int32 `()`: `BACKGROUND` (-1, the default) or an id >= 0.
        prevent_self_trade: bool `()`. If True, the owner's resting orders on the opposite
            side are cancelled before matching (sekai's cancel-resting rule: a trader never
            trades with itself). Do not set it for `BACKGROUND`, whose orders are all one
            owner's.

    Returns:
        `(book, fills)`. An invalid order (size < 1, price < 1, unknown side) is rejected:
        `fills.accepted` is False and the book is unchanged. A remainder that finds no free
        slot is dropped and flagged (`fills.overflow`, and `book.overflow` from then on).

    Raises:
        ValueError: If `side`, `price` or `size` is a Python int out of range (traced
            values cannot be checked; they are rejected as above).

    Example:
        >>> from parallax.finance._lob import ASK, BID, add_limit, best_ask, empty_book
        >>> book, _ = add_limit(empty_book(8), ASK, 101, 5)
        >>> book, fills = add_limit(book, BID, 102, 3, owner=0)
        >>> int(fills.count), int(fills.price[0]), int(fills.size[0]), int(best_ask(book))
        (1, 101, 3, 101)
    """
    _check_side(side)
    _check_static_int("price", price, 1)
    _check_static_int("size", size, 1)
    _check_owner(owner)
    return _submit(
        book,
        side,
        price,
        size,
        owner,
        is_market=False,
        prevent_self_trade=prevent_self_trade,
    )


def market_order(
    book: Book,
    side: Any,
    size: Any,
    owner: Any = BACKGROUND,
    *,
    prevent_self_trade: Any = False,
) -> tuple[Book, Fills]:
    """Submit a market order: walk the opposite side and drop any unfilled remainder.

    Matching is `add_limit`'s with no price limit. The order takes an id even when the
    opposite side is empty (as in sekai).

    Args:
        book: The book.
        side: `BID` (1) to buy or `ASK` (-1) to sell, int32 `()`.
        size: Quantity, int32 `()` >= 1.
        owner: Owner id, int32 `()`: `BACKGROUND` (-1, the default) or an id >= 0.
        prevent_self_trade: bool `()`, as in `add_limit`.

    Returns:
        `(book, fills)`; `fills.rested` and `fills.overflow` are always False.

    Raises:
        ValueError: If `side` or `size` is a Python int out of range.
    """
    _check_side(side)
    _check_static_int("size", size, 1)
    _check_owner(owner)
    return _submit(
        book,
        side,
        0,
        size,
        owner,
        is_market=True,
        prevent_self_trade=prevent_self_trade,
    )


def submit_order(
    book: Book, side: Any, price: Any, size: Any, owner: Any, *, is_market: Any
) -> tuple[Book, Fills]:
    """A limit order at `price`, or, where `is_market` (a bool `()`, may be traced), a market
    order (`price` ignored): `add_limit` or `market_order` chosen as data, so a loop body
    that submits both kinds compiles the matching once. No argument checks, no self-trade
    prevention."""
    return _submit(book, side, price, size, owner, is_market=is_market, prevent_self_trade=False)


def _clear(book: Book, remove: jax.Array) -> Book:
    valid = book.valid & ~remove
    return dataclasses.replace(
        book,
        price=jnp.where(valid, book.price, 0),
        size=jnp.where(valid, book.size, 0),
        owner=jnp.where(valid, book.owner, 0),
        seq=jnp.where(valid, book.seq, 0),
        valid=valid,
    )


def cancel(book: Book, order_id: Any) -> tuple[Book, jax.Array]:
    """Cancel a resting order by its id.

    Args:
        book: The book.
        order_id: int32 `()`, an id from `Fills.taker_id`.

    Returns:
        `(book, found)`: `found` (bool `()`) is False, and the book unchanged, when no
        resting order has this id (unknown, filled or already cancelled).
    """
    match = book.valid & (book.seq == jnp.asarray(order_id, jnp.int32))
    return _clear(book, match), jnp.any(match)


def cancel_slot(book: Book, side: Any, slot: Any) -> tuple[Book, jax.Array]:
    """Cancel whatever order rests in slot `slot` of side `side`.

    Args:
        book: The book.
        side: `BID` (1) or `ASK` (-1), int32 `()`.
        slot: int32 `()` in `[0, capacity)`.

    Returns:
        `(book, found)`: `found` is False when the slot was empty or out of range.
    """
    _check_side(side)
    side = jnp.asarray(side, jnp.int32)
    slots = jnp.arange(book.capacity, dtype=jnp.int32)
    rows = jnp.arange(2, dtype=jnp.int32)
    target = (rows[:, None] == _row(side)) & (slots[None, :] == jnp.asarray(slot, jnp.int32))
    match = book.valid & target
    return _clear(book, match), jnp.any(match)
