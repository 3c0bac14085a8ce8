"""Zero-intelligence background order flow between decisions, as a bounded `lax.while_loop`.

- `FlowParams`: the flow's parameters (sekai's `ZeroIntelligenceFlow` keywords, defaults and
  validation), a frozen pytree of numbers, so a batch can vmap over them.
- `FlowStats`: what one run of the flow did (event counts, the truncation flag, the trades
  of the interval in a ring buffer, and the fills of agents' resting orders).
- `FLOW_SLOTS`: the `parallax.rng` slot table of every draw the flow makes.
- `initialise`: the symmetric seed book (sekai's `ZeroIntelligenceFlow.initialise`).
- `run_flow`: the Poisson events of one interval `(start, until]`, as sekai's `advance`.
- `warm_up`: `initialise`, then the flow over `(0, warmup]` (decision index 0).
- `default_max_events`: a bound on the loop's iterations for an interval, from the rates.

Randomness: every draw is `parallax.rng` at `(episode_key, decision_index, slot, n)`, where
`n` counts the draws of that slot within the interval (the `n`-th waiting time, the `n`-th
size, ...). Draws are never shared between intervals or episodes, so a batch of books is
independent, and a reference that is handed the `n`-th draw of each slot in call order
(the shim generator of the tests) reproduces the run exactly.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import rng
from .._models._base import _poisson
from ._book import ASK, BACKGROUND, BID, Book, _match, _nth_smallest, _sums, empty_book

__all__ = [
    "FLOW_SLOTS",
    "FlowParams",
    "FlowStats",
    "default_max_events",
    "initialise",
    "run_flow",
    "warm_up",
]

_INT32_MAX = int(np.iinfo(np.int32).max)
_CANCEL_STEP_BITS = 2  # bits per step of the cancellation's search (3: 5% slower, 4: 3%)

FLOW_SLOTS = rng.SlotTable(
    rng.Slot(0, "INIT_SIZE", "initialise (decision 0)", "order j of the seed book", "uniform"),
    rng.Slot(1, "WAIT", "every event", "n-th event of the interval", "uniform -> exponential"),
    rng.Slot(2, "EVENT", "every event", "n-th event of the interval", "uniform (event type)"),
    rng.Slot(3, "OFFSET", "every limit order", "n-th limit order", "uniform -> offset"),
    rng.Slot(4, "SIZE", "every order", "n-th order", "uniform -> 1 + Poisson(mean_size - 1)"),
    rng.Slot(5, "CANCEL", "every cancellation", "n-th cancellation", "randint(n_background)"),
)
"""The draws of the flow; the step of each draw is the decision index."""


def _check_rate(name: str, value: Any, *, strict: bool) -> None:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        return  # arrays (batched or traced parameters) are the caller's contract
    bound = "> 0" if strict else ">= 0"
    ok = math.isfinite(float(value)) and (float(value) > 0 if strict else float(value) >= 0)
    if not ok:
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}.")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class FlowParams:
    """The parameters of the background flow (sekai's `ZeroIntelligenceFlow`).

    Every field is a number (or an array, for a batch); Python numbers are validated with
    sekai's rules and messages naming the argument.

    Attributes:
        limit_rate: Limit orders per unit time, per side, finite and > 0 (default 10.0).
        market_rate: Market orders per unit time, per side, finite and > 0 (default 2.0).
        cancel_rate: Cancellations per resting background order per unit time, finite and
            >= 0 (default 0.5).
        max_offset: Largest limit-order distance from the opposite best quote, in ticks,
            an integer >= 1 (default 10).
        offset_decay: Decay of the offset distribution per tick, finite and >= 0 (0 is
            uniform; default 0.5).
        mean_size: Mean order size, finite and >= 1 (default 3.0). Sizes are
            `1 + Poisson(mean_size - 1)`, by exact inversion for `mean_size <= 31` and by
            the rounded normal approximation above.

    Example:
        >>> from parallax.finance._lob import FlowParams
        >>> FlowParams(cancel_rate=1.0).cancel_rate
        1.0
    """

    limit_rate: Any = 10.0
    market_rate: Any = 2.0
    cancel_rate: Any = 0.5
    max_offset: Any = 10
    offset_decay: Any = 0.5
    mean_size: Any = 3.0

    def __post_init__(self) -> None:
        _check_rate("limit_rate", self.limit_rate, strict=True)
        _check_rate("market_rate", self.market_rate, strict=True)
        _check_rate("cancel_rate", self.cancel_rate, strict=False)
        _check_rate("offset_decay", self.offset_decay, strict=False)
        size = self.mean_size
        is_number = isinstance(size, int | float | np.number)
        if (
            is_number
            and not isinstance(size, bool | np.bool_)
            and not (math.isfinite(float(size)) and float(size) >= 1)
        ):
            raise ValueError(f"mean_size must be finite and >= 1, got {size!r}.")
        offset = self.max_offset
        if isinstance(offset, bool | np.bool_ | float | np.floating):
            raise ValueError(f"max_offset must be an integer, got {offset!r}.")
        if isinstance(offset, int | np.integer) and int(offset) < 1:
            raise ValueError(f"max_offset must be >= 1, got {offset!r}.")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class FlowStats:
    """What one run of the flow did.

    The trade log is a ring buffer of the last `T` (`max_trades`) trades of the run: trade
    `j` (0-based, in execution order) sits at `j % T`, so with `n_trades <= T` entry `j`
    is trade `j`; later entries are 0.

    Attributes:
        events: int32 `()`, Poisson events that happened (a skipped market order counts).
        limit_orders, market_orders, cancels: int32 `()`, events of each kind carried out
            (market orders that found the opposite side empty are not counted).
        refills: int32 `()`, limit orders placed to refill an emptied side.
        iterations: int32 `()`, loop iterations used (events + refills + the final
            waiting time that crossed `until`).
        truncated: bool `()`, True when the loop stopped at `max_events` iterations before
            reaching `until`: the book is then that of an earlier time.
        n_trades: int32 `()`, executions in the run.
        volume: int32 `()`, quantity executed in the run.
        trade_time: float `(T,)`, the time of each logged trade.
        trade_price, trade_size: int32 `(T,)`, the execution price and quantity.
        trade_maker_owner, trade_taker_side: int32 `(T,)`, the resting order's owner and
            the side of the incoming (background) order.
        agent_bought, agent_sold: int32 `(A,)`, quantity bought and sold by owners
            `0..A-1` (`num_agents`) through their resting orders.
        agent_cash: int32 `(A,)`, their cash change in ticks (sold value - bought value).
        agent_fills: int32 `(A,)`, the number of executions against their resting orders.
        end_time: float `()`, the time reached: `until`, or the last event's time if
            truncated.
    """

    events: jax.Array
    limit_orders: jax.Array
    market_orders: jax.Array
    cancels: jax.Array
    refills: jax.Array
    iterations: jax.Array
    truncated: jax.Array
    n_trades: jax.Array
    volume: jax.Array
    trade_time: jax.Array
    trade_price: jax.Array
    trade_size: jax.Array
    trade_maker_owner: jax.Array
    trade_taker_side: jax.Array
    agent_bought: jax.Array
    agent_sold: jax.Array
    agent_cash: jax.Array
    agent_fills: jax.Array
    end_time: jax.Array


def _float() -> Any:
    return jnp.zeros(()).dtype  # float64 under jax_enable_x64, else float32


def _size_from_uniform(u: jax.Array, mean_size: jax.Array) -> jax.Array:
    """`1 + Poisson(mean_size - 1)` by inversion of `u` (sekai: `1 + rng.poisson(...)`)."""
    mean = jnp.broadcast_to(mean_size - 1.0, u.shape)
    return 1 + _poisson(u, mean).astype(jnp.int32)


def _exponential_from_uniform(u: jax.Array) -> jax.Array:
    """A standard exponential waiting time, `-log1p(-u)`."""
    return -jnp.log1p(-u)


def _offset_from_uniform(u: jax.Array, max_offset: jax.Array, decay: jax.Array) -> jax.Array:
    """sekai's truncated-geometric offset in `1..max_offset` from a uniform `u`."""
    n = max_offset.astype(u.dtype)
    safe = jnp.where(decay > 0, decay, 1.0)
    geometric = jnp.ceil(-jnp.log1p(u * jnp.expm1(-safe * n)) / safe)
    uniform = jnp.floor(u * n) + 1.0
    k = jnp.where(decay > 0, geometric, uniform)
    return jnp.clip(k, 1.0, n).astype(jnp.int32)


def _flow_draw(episode_key: Any, decision_index: Any, slot: int, index: Any) -> jax.Array:
    """The uniform the flow uses for draw `index` of `slot` (float64 under x64)."""
    return rng.uniform(episode_key, decision_index, slot, index, dtype=_float())


def default_max_events(
    params: FlowParams, duration: float, capacity: int, *, sigmas: float = 10.0
) -> int:
    """A bound on the loop iterations of one interval of length `duration`.

    The event rate is at most `2 limit_rate + 2 market_rate + cancel_rate * 2 capacity`
    (every slot a background order). The bound is twice (each event may be followed by a
    refill) the Poisson mean at that rate plus `sigmas` standard deviations plus 16.

    Args:
        params: Python-number parameters.
        duration: The interval's length, > 0.
        capacity: The book's slots per side.
        sigmas: Standard deviations of margin.

    Returns:
        The bound, a Python int.
    """
    rate = 2 * float(params.limit_rate) + 2 * float(params.market_rate)
    rate += float(params.cancel_rate) * 2 * int(capacity)
    mean = rate * float(duration)
    return int(2 * math.ceil(mean + sigmas * math.sqrt(mean) + 16))


def initialise(
    capacity: int,
    params: FlowParams,
    episode_key: Any,
    *,
    mid: Any,
    levels: int = 10,
    orders_per_level: int = 3,
) -> Book:
    """The seed book of sekai's `initialise`: `orders_per_level` background orders per level.

    Bids rest at `mid - 1, ..., mid - levels` (clipped to >= 1 tick), asks at
    `mid + 1, ..., mid + levels`, in sekai's order (for each distance, for each order: a
    bid then an ask), so ids run 1, 2, ... in that order. Sizes are `1 + Poisson(mean_size
    - 1)` from slot `INIT_SIZE` at decision index 0, order `j` taking index `j`.
    `last_price` is set to `mid` (sekai's reference price).

    Args:
        capacity: Slots per side (static).
        params: The flow's parameters.
        episode_key: uint32 `(2,)`, from `parallax.rng.episode_key`.
        mid: The initial mid price in ticks, int32 `()` >= 1.
        levels: Price levels per side, a positive int (static).
        orders_per_level: Orders per level, a positive int (static).

    Returns:
        The book. If `levels * orders_per_level > capacity`, the orders that do not fit
        are dropped and `book.overflow` is set.

    Raises:
        ValueError: If `levels`, `orders_per_level` or a Python-int `mid` is out of range.
    """
    for name, value in (("levels", levels), ("orders_per_level", orders_per_level)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    if isinstance(mid, bool) or (isinstance(mid, int | np.integer) and mid < 1):
        raise ValueError(f"mid must be an integer >= 1, got {mid!r}.")
    book = empty_book(capacity)
    n = int(levels) * int(orders_per_level)
    j = jnp.arange(n, dtype=jnp.int32)  # order j at distance j // orders_per_level + 1
    distance = j // int(orders_per_level) + 1
    mid = jnp.asarray(mid, jnp.int32)
    u = _flow_draw(episode_key, 0, FLOW_SLOTS.INIT_SIZE, jnp.arange(2 * n, dtype=jnp.uint32))
    sizes = _size_from_uniform(u, jnp.asarray(params.mean_size, u.dtype)).reshape(n, 2)
    fit = min(n, capacity)
    pad = capacity - fit

    def side(prices: jax.Array, size: jax.Array, ids: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(
            jnp.concatenate([x[:fit], jnp.zeros(pad, x.dtype)])
            for x in (prices, size, jnp.full(n, BACKGROUND, jnp.int32), ids, jnp.ones(n, bool))
        )

    bid = side(jnp.maximum(mid - distance, 1), sizes[:, 0], 2 * j + 1)
    ask = side(mid + distance, sizes[:, 1], 2 * j + 2)
    price, size, owner, seq, valid = (jnp.stack([b, a]) for b, a in zip(bid, ask, strict=True))
    return dataclasses.replace(
        book,
        price=price,
        size=size,
        owner=owner,
        seq=seq,
        valid=valid,
        next_id=jnp.asarray(2 * n + 1, jnp.int32),
        last_price=mid,
        overflow=jnp.asarray(n > capacity),
    )


def _background(book: Book) -> jax.Array:
    """Which slots hold a resting background order, bool `(2, C)`."""
    return book.valid & (book.owner == BACKGROUND)


def _best(
    book: Book, background: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Best bid (0 if none), best ask (int32 max if none), whether each side has an order,
    and the number of resting background orders (`background`: `_background(book)`), in
    one pass over the slots."""
    sign = jnp.asarray([[1], [-1]], jnp.int32)
    key = jnp.where(book.valid, sign * book.price, jnp.iinfo(jnp.int32).min)
    # One two-output reduction, one loop on the CPU (see `_sums`).
    best, count = lax.reduce(
        (key, background.astype(jnp.int32)),
        (jnp.int32(jnp.iinfo(jnp.int32).min), jnp.int32(0)),
        lambda x, y: (jnp.maximum(x[0], y[0]), x[1] + y[1]),
        (1,),
    )
    has = best > jnp.iinfo(jnp.int32).min
    bid = jnp.where(has[0], best[0], 0)
    ask = jnp.where(has[1], -best[1], _INT32_MAX)
    return bid, ask, has[0], has[1], count[0] + count[1]


def _arrival_ranks(book: Book) -> tuple[jax.Array, jax.Array]:
    """Each resting background order's rank in arrival (id) order, and their number.

    Returns `(rank, count)`: int32 `(2, C)` (meaningful where a background order rests)
    and int32 `()`. One pairwise count over the `2C` slots, once per run of the flow.
    """
    seq = book.seq.reshape(-1)
    background = _background(book).reshape(-1)
    # Background ids are distinct, so an order's rank is the number of background ids below
    # its own. The pairwise count is a two-output reduction (the second counts the
    # background orders), one fused loop on the CPU and several times cheaper than a sort.
    below = background[None, :] & (seq[None, :] < seq[:, None])
    rank, count = _sums((below, jnp.broadcast_to(background, below.shape)), 1)
    return rank.reshape(book.seq.shape), count[0]


def run_flow(
    book: Book,
    params: FlowParams,
    episode_key: Any,
    decision_index: Any,
    start: Any,
    until: Any,
    *,
    max_events: int,
    max_trades: int = 64,
    num_agents: int = 1,
) -> tuple[Book, FlowStats]:
    """Run the background events of the interval `(start, until]` (sekai's `advance`).

    Events arrive as competing Poisson clocks of total rate `2 limit_rate + 2 market_rate +
    cancel_rate * n` (`n` resting background orders, recomputed after each event): a
    waiting time `-log1p(-u) / rate` is drawn, and while the clock stays <= `until` one
    event happens, chosen by `u' * rate` against the cumulative rates (limit bid, limit
    ask, market buy, market sell, cancellation). A limit buy goes `k` ticks below the best
    ask (a sell `k` above the best bid; one tick beyond the own side's best, or
    `last_price`, when the opposite side is empty), clipped at 1 tick; a market order
    finding the opposite side empty is skipped; a cancellation removes the `i`-th resting
    background order in arrival order, `i` uniform. After each event, an emptied side is
    refilled by limit orders (bid side first) at the event's time. Every order is
    `BACKGROUND`'s; agents' resting orders can be filled, never cancelled.

    The loop is a `lax.while_loop` of at most `max_events` iterations (one per event, per
    refill and for the final waiting time). Reaching the bound stops the run early with
    `stats.truncated` set; it is never silent.

    Args:
        book: The book (with both sides non-empty, or a `last_price`, as after
            `initialise`).
        params: The flow's parameters.
        episode_key: uint32 `(2,)`, from `parallax.rng.episode_key`.
        decision_index: int `()`, the draws' step: 0 is the warm-up, the interval after
            decision `k` (0-based) should use `k + 1`.
        start: float `()`, the book's time (the previous interval's `until`).
        until: float `()` >= `start`, the end of the interval.
        max_events: Bound on the loop's iterations, a positive int (static); see
            `default_max_events`.
        max_trades: Size of the trade ring buffer, a positive int (static).
        num_agents: Owners `0..num_agents-1` whose fills are accounted (static, >= 0).

    Returns:
        `(book, stats)`.

    Raises:
        ValueError: If a static argument is out of range.

    Example:
        >>> import jax
        >>> from parallax import rng
        >>> from parallax.finance._lob import FlowParams, initialise, run_flow
        >>> ek = rng.episode_key(jax.random.key(0))
        >>> book = initialise(64, FlowParams(), ek, mid=100)
        >>> book, stats = run_flow(book, FlowParams(), ek, 1, 0.0, 1.0, max_events=256)
        >>> bool(stats.truncated), bool(book.valid[0].any() & book.valid[1].any())
        (False, True)
    """
    for name, value, minimum in (
        ("max_events", max_events, 1),
        ("max_trades", max_trades, 1),
        ("num_agents", num_agents, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return _run_flow(
        book,
        params,
        episode_key,
        decision_index,
        start,
        until,
        max_events=int(max_events),
        max_trades=int(max_trades),
        num_agents=int(num_agents),
    )


# One jitted function at module level, so that the loop's program is traced and compiled
# once per shape and static arguments. Called outside `jit` (an eager `env.step`), a
# `lax.while_loop` whose body is a fresh closure compiles anew on every call (2-3 s a step
# for the LOB env); inside an outer `jit` this is inlined and changes nothing.
@functools.partial(jax.jit, static_argnames=("max_events", "max_trades", "num_agents"))
def _run_flow(
    book: Book,
    params: FlowParams,
    episode_key: Any,
    decision_index: Any,
    start: Any,
    until: Any,
    *,
    max_events: int,
    max_trades: int,
    num_agents: int,
) -> tuple[Book, FlowStats]:
    dtype = _float()
    lr = jnp.asarray(params.limit_rate, dtype)
    mr = jnp.asarray(params.market_rate, dtype)
    cr = jnp.asarray(params.cancel_rate, dtype)
    max_offset = jnp.asarray(params.max_offset, jnp.int32)
    decay = jnp.asarray(params.offset_decay, dtype)
    mean_size = jnp.asarray(params.mean_size, dtype)
    step = jnp.asarray(decision_index, jnp.uint32)
    until = jnp.asarray(until, dtype)
    limit_total = 2.0 * lr
    market_bid = limit_total + mr
    base = limit_total + 2.0 * mr
    capacity = book.capacity
    agents = jnp.arange(num_agents, dtype=jnp.int32)
    ring = jnp.arange(max_trades, dtype=jnp.int32)

    def draw(slot: int, n: jax.Array) -> jax.Array:
        return rng.uniform(episode_key, step, slot, n.astype(jnp.uint32), dtype=dtype)

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
    # counters: n-th draw of WAIT (= EVENT), OFFSET, SIZE, CANCEL within this interval
    counters0 = jnp.zeros(4, jnp.int32)
    carry0 = (book, stats0, counters0, jnp.asarray(False))
    # A cancellation takes the i-th resting background order in id order. Ids are relabelled
    # into a small range that keeps their order: the orders resting at the start by their
    # rank (< 2C), the orders of this run by `count0 + id - first_id`, where `first_id` is
    # the id the run's first order takes (each iteration issues at most one id). So the
    # i-th smallest label is searched over `width` bits instead of the ids' 31.
    rank0, count0 = _arrival_ranks(book)
    first_id = book.next_id
    width = max(2 * capacity + max_events - 1, 1).bit_length()

    def cond(carry: tuple[Book, FlowStats, jax.Array, jax.Array]) -> jax.Array:
        _, stats, _, done = carry
        return ~done & (stats.iterations < max_events)

    def body(
        carry: tuple[Book, FlowStats, jax.Array, jax.Array],
    ) -> tuple[Book, FlowStats, jax.Array, jax.Array]:
        book, stats, counters, _ = carry
        n_wait, n_offset, n_size, n_cancel = counters[0], counters[1], counters[2], counters[3]
        is_background = _background(book)
        bid, ask, has_bid, has_ask, n_background = _best(book, is_background)
        refill = (stats.events > 0) & ~(has_bid & has_ask)

        # A Poisson event (when no refill is pending).
        rate = base + cr * n_background.astype(dtype)
        t = stats.end_time + _exponential_from_uniform(draw(FLOW_SLOTS.WAIT, n_wait)) / rate
        finished = ~refill & (t > until)
        happens = ~refill & ~finished
        u = draw(FLOW_SLOTS.EVENT, n_wait) * rate
        is_limit = happens & (u < limit_total)
        is_market_kind = happens & (u >= limit_total) & (u < base)
        is_cancel = happens & (u >= base) & (n_background > 0)
        limit_side = jnp.where(u < lr, BID, ASK)
        market_side = jnp.where(u < market_bid, BID, ASK)
        opposite_present = jnp.where(market_side == BID, has_ask, has_bid)
        is_market = is_market_kind & opposite_present

        # A limit order: the event's, or a refill of the emptied side (bids first).
        place = is_limit | refill
        side = jnp.where(refill, jnp.where(has_bid, ASK, BID), limit_side)
        side = jnp.where(is_market, market_side, side)
        reference_bid = jnp.where(has_ask, ask, jnp.where(has_bid, bid + 1, book.last_price))
        reference_ask = jnp.where(has_bid, bid, jnp.where(has_ask, ask - 1, book.last_price))
        offset = _offset_from_uniform(draw(FLOW_SLOTS.OFFSET, n_offset), max_offset, decay)
        limit_price = jnp.where(side == BID, reference_bid - offset, reference_ask + offset).clip(1)
        # A market order is a limit order at the far end of the book whose remainder is
        # then removed, so one matching pass serves both kinds.
        price = jnp.where(is_market, jnp.where(side == BID, _INT32_MAX, 1), limit_price)
        submits = place | is_market
        size = _size_from_uniform(draw(FLOW_SLOTS.SIZE, n_size), mean_size)
        size = jnp.where(submits, size, 0)  # size 0: rejected, the book is unchanged
        # (the executions unordered: the trade log below writes each at its rank)
        after, match = _match(
            book, side, price, size, BACKGROUND, is_market=False, prevent_self_trade=False
        )
        drop_rest = is_market & match.rested
        after = dataclasses.replace(
            after,
            valid=after.valid & ~(drop_rest & (after.seq == match.taker_id)),
            overflow=book.overflow | (match.overflow & ~is_market),
        )

        # A cancellation: the i-th resting background order in arrival (id) order.
        index = rng.randint(
            episode_key,
            step,
            FLOW_SLOTS.CANCEL,
            n_cancel.astype(jnp.uint32),
            jnp.maximum(n_background, 1),
        )
        # The index-th smallest background label (so id), found without sorting.
        label = jnp.where(book.seq >= first_id, count0 + (book.seq - first_id), rank0)
        target = _nth_smallest(
            label.reshape(-1),
            is_background.reshape(-1),
            index,
            width=width,
            step_bits=_CANCEL_STEP_BITS,
        )
        remove = is_cancel & is_background & (label == target)
        valid = jnp.where(is_cancel, book.valid & ~remove, after.valid)
        new_book = dataclasses.replace(
            after,
            price=jnp.where(valid, jnp.where(is_cancel, book.price, after.price), 0),
            size=jnp.where(valid, jnp.where(is_cancel, book.size, after.size), 0),
            owner=jnp.where(valid, jnp.where(is_cancel, book.owner, after.owner), 0),
            seq=jnp.where(valid, jnp.where(is_cancel, book.seq, after.seq), 0),
            valid=valid,
        )

        # Trades: the ring buffer keeps the last max_trades of the run.
        # The maker in slot s was execution j = match.rank[s] of the order (s traded).
        j = match.rank
        is_fill = submits & (match.traded > 0)
        count = jnp.where(submits, match.n_fills, 0)
        keep = is_fill & (j >= count - max_trades)
        slot = jnp.where(keep, (stats.n_trades + j) % max_trades, max_trades)
        time = jnp.where(happens, t, stats.end_time)
        traded = jnp.where(is_fill, match.traded, 0)

        # The entries this iteration writes: `min(count, T)` from position `n_trades % T`
        # on (the last T trades when more). The time and the taker's side, the same for all
        # of them, are selected there rather than scattered: as a scatter's broadcast
        # update, XLA fused the side's draw into it and hashed the draw once per slot.
        written = (ring - stats.n_trades) % max_trades < jnp.minimum(count, max_trades)

        def log_each(buffer: jax.Array, value: jax.Array) -> jax.Array:
            return jnp.where(written, value.astype(buffer.dtype), buffer)

        # The makers' fields at the entries they write: one (T, C) match of entries to
        # slots, summed in one three-output reduction (each written entry has exactly one
        # slot), instead of three scatters.
        hit = slot[None, :] == ring[:, None]
        logged_price, logged_size, logged_owner = _sums(
            (
                jnp.where(hit, match.price[None, :], 0),
                jnp.where(hit, traded[None, :], 0),
                jnp.where(hit, match.maker_owner[None, :], 0),
            ),
            1,
        )

        mine = (match.maker_owner[None, :] == agents[:, None]) & is_fill[None, :]
        mine_size = jnp.where(mine, traded[None, :], 0)
        # Each agent's quantity, value and number of fills in one three-output reduction.
        quantity, value, n_fills = _sums((mine_size, mine_size * match.price[None, :], mine), 1)
        bought = jnp.where(side == ASK, quantity, 0)
        sold = jnp.where(side == BID, quantity, 0)
        cash = jnp.where(side == BID, value, -value)
        new_stats = FlowStats(
            events=stats.events + happens.astype(jnp.int32),
            limit_orders=stats.limit_orders + is_limit.astype(jnp.int32),
            market_orders=stats.market_orders + is_market.astype(jnp.int32),
            cancels=stats.cancels + is_cancel.astype(jnp.int32),
            refills=stats.refills + refill.astype(jnp.int32),
            iterations=stats.iterations + 1,
            truncated=stats.truncated,
            n_trades=stats.n_trades + count,
            volume=stats.volume + jnp.sum(traded, dtype=jnp.int32),
            trade_time=log_each(stats.trade_time, time),
            trade_price=log_each(stats.trade_price, logged_price),
            trade_size=log_each(stats.trade_size, logged_size),
            trade_maker_owner=log_each(stats.trade_maker_owner, logged_owner),
            trade_taker_side=log_each(stats.trade_taker_side, side),
            agent_bought=stats.agent_bought + bought,
            agent_sold=stats.agent_sold + sold,
            agent_cash=stats.agent_cash + jnp.where(count > 0, cash, 0),
            agent_fills=stats.agent_fills + n_fills,
            end_time=time,
        )
        new_counters = jnp.stack(
            [
                n_wait + (~refill).astype(jnp.int32),
                n_offset + place.astype(jnp.int32),
                n_size + submits.astype(jnp.int32),
                n_cancel + is_cancel.astype(jnp.int32),
            ]
        )
        return new_book, new_stats, new_counters, finished

    book, stats, _, done = lax.while_loop(cond, body, carry0)
    stats = dataclasses.replace(
        stats,
        truncated=~done,
        end_time=jnp.where(done, until, stats.end_time),
    )
    return book, stats


def warm_up(
    capacity: int,
    params: FlowParams,
    episode_key: Any,
    *,
    mid: Any,
    warmup: Any,
    max_events: int,
    levels: int = 10,
    orders_per_level: int = 3,
) -> tuple[Book, FlowStats]:
    """`initialise`, then the flow over `(0, warmup]` at decision index 0 (sekai's `start`).

    Args:
        capacity, params, episode_key, mid, levels, orders_per_level: As in `initialise`.
        warmup: float `()` >= 0, the warm-up's length (0: no events).
        max_events: Bound on the warm-up's loop iterations (static).

    Returns:
        `(book, stats)` of the warm-up; the session starts at time `warmup`.
    """
    book = initialise(
        capacity, params, episode_key, mid=mid, levels=levels, orders_per_level=orders_per_level
    )
    return run_flow(book, params, episode_key, 0, 0.0, warmup, max_events=max_events)
