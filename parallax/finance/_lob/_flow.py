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
import itertools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import rng
from ._book import ASK, BACKGROUND, BID, Book, _row, _sums, empty_book

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
        iterations: int32 `()`, loop iterations used: one per event and per refill, one
            more per execution of an order after its first (an iteration executes against
            one resting order), and one for the final waiting time that crossed `until`.
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
    """`1 + Poisson(mean_size - 1)` by inversion of `u` (sekai: `1 + rng.poisson(...)`).

    Elementwise over `u` and `mean_size` (broadcast): `_size_from_table` with each mean's
    `_size_table`. The flow's loop builds the table once an interval instead.
    """

    def one(u: jax.Array, mean_size: jax.Array) -> jax.Array:
        return _size_from_table(u, _size_table(mean_size, u.dtype))

    return jnp.vectorize(one)(u, jnp.asarray(mean_size, u.dtype))


# Terms in a size table: at the default `mean_size` (3) a count reaches them with
# probability about 1e-10; a count that does finishes by the sequential search.
_SIZE_TERMS = 16


class _SizeTable(NamedTuple):
    """The first CDF terms of `1 + Poisson(mean_size - 1)` (see `_size_table`)."""

    cdf: jax.Array  # (_SIZE_TERMS + 1,): cdf_0 .. cdf_K, K = _SIZE_TERMS
    p: jax.Array  # p_K, the last term
    mean: jax.Array  # mean_size - 1


def _size_table(mean_size: jax.Array, dtype: Any) -> _SizeTable:
    """The CDF terms `_size_from_table` inverts, for one `mean_size`.

    With `m = mean_size - 1` (0 above 30, where the normal approximation takes over):
    `p_0 = exp(-m)`, `p_j = p_{j-1} m / j`, `cdf_j = cdf_{j-1} + p_j`. They are built by a
    loop whose trip count XLA cannot see, so every `/ j` stays a division, as in the
    search that goes on from the table: a constant `j` would let XLA multiply by `1 / j`
    or, for `j = 1`, fuse the term into a multiply-add, either of which can move a term
    by one unit in the last place.
    """
    mean = jnp.asarray(mean_size, dtype) - 1.0
    m = jnp.where(mean <= 30.0, mean, 0.0)
    p0 = jnp.exp(-m)
    cdf0 = jnp.full(_SIZE_TERMS + 1, jnp.nan, dtype).at[0].set(p0)

    def more(carry: Any) -> jax.Array:
        j, p, _, _ = carry
        return (j < _SIZE_TERMS) & (p >= 0)  # (a NaN mean stops at once: no count)

    def term(carry: Any) -> Any:
        j, p, cdf, table = carry
        j1 = j + 1
        p = p * m / j1.astype(dtype)
        cdf = cdf + p
        return j1, p, cdf, table.at[j1].set(cdf)

    _, p, _, cdf = lax.while_loop(more, term, (jnp.int32(0), p0, p0, cdf0))
    return _SizeTable(cdf=cdf, p=p, mean=mean)


def _size_from_table(u: jax.Array, table: _SizeTable) -> jax.Array:
    """`1 + Poisson(mean_size - 1)` for a uniform `u` `()` by inversion: the smallest `k`
    with `u < cdf_k`, exactly, for `mean_size <= 31`; above, the rounded normal
    approximation `m + sqrt(m) Phi^-1(u)` (sekai's sizes are `1 + rng.poisson(...)`).

    The count is the number of the table's first `_SIZE_TERMS` terms that `u` reaches
    (they rise with `k`); only a `u` that reaches the last one goes on to a sequential
    search. So the flow's loop, which draws a size in most iterations, no longer turns a
    search loop of its own each time (at N = 1024 about six turns of some eight small
    kernels an iteration, a tenth of a step).
    """
    mean = table.mean
    small = mean <= 30.0
    m = jnp.where(small, mean, 0.0)
    cap = m + 12.0 * jnp.sqrt(m) + 20.0  # a guard: no count goes beyond
    j = jnp.arange(_SIZE_TERMS, dtype=u.dtype)
    k = jnp.sum((u >= table.cdf[:_SIZE_TERMS]) & (j < cap), dtype=jnp.int32)

    def go_on(carry: Any) -> jax.Array:
        k, _, cdf = carry
        return (u >= cdf) & (k.astype(u.dtype) < cap)

    def search(carry: Any) -> Any:
        k, p, cdf = carry
        k1 = k + 1
        p = p * m / k1.astype(u.dtype)
        return k1, p, cdf + p

    k, _, _ = lax.while_loop(go_on, search, (k, table.p, table.cdf[_SIZE_TERMS]))

    def normal_approximation() -> jax.Array:
        z = jnp.sqrt(2.0) * lax.erf_inv(2.0 * u - 1.0)
        return jnp.maximum(jnp.floor(mean + jnp.sqrt(mean) * z + 0.5), 0.0).astype(u.dtype)

    big = lax.cond(~small, normal_approximation, lambda: jnp.zeros((), u.dtype))
    return 1 + jnp.where(small, k.astype(u.dtype), big).astype(jnp.int32)


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

    Limit orders and cancellations take one iteration each, at a rate of at most
    `2 limit_rate + cancel_rate * 2 capacity` (every slot a background order); a market
    order takes one per resting order it executes against, at most its size, so market
    orders add `2 market_rate * s` iterations per unit time for sizes `s` (mean
    `mean_size`). The bound is twice (each event may be followed by a refill) the mean of
    that compound Poisson count plus `sigmas` of its standard deviations plus 16.

    Args:
        params: Python-number parameters.
        duration: The interval's length, > 0.
        capacity: The book's slots per side.
        sigmas: Standard deviations of margin.

    Returns:
        The bound, a Python int.
    """
    single = 2 * float(params.limit_rate) + float(params.cancel_rate) * 2 * int(capacity)
    market = 2 * float(params.market_rate)
    size = float(params.mean_size)
    mean = (single + market * size) * float(duration)
    # a compound Poisson count's variance: rate * E[s^2], with Var(s) = mean_size - 1
    variance = (single + market * (size * size + size - 1)) * float(duration)
    return int(2 * math.ceil(mean + sigmas * math.sqrt(variance) + 16))


# The seed book of `initialise` (and `warm_up`) at its defaults: 10 levels of 3 orders a side.
_SEED_LEVELS = 10
_SEED_ORDERS_PER_LEVEL = 3
_SEED_ORDERS = _SEED_LEVELS * _SEED_ORDERS_PER_LEVEL
# A side's derived capacity is a multiple of this (16 int32 lanes of an AVX-512 register).
_CAPACITY_STEP = 16
# Above this a derived capacity is refused: the caller chooses one (see `default_capacity`).
_CAPACITY_LIMIT = 1 << 16


def default_capacity(
    params: FlowParams,
    horizon: float,
    *,
    reserved: int = 1,
    seed_orders: int = _SEED_ORDERS,
    tail: float = 1e-9,
) -> int:
    """Slots per side that the flow fills with probability at most `tail` at any time.

    The count of background orders resting on a side is bounded from the rates. Limit
    orders of a side arrive at `limit_rate` and rest on that side (they are priced off the
    opposite best, so they never cross). Each resting background order is cancelled at
    `cancel_rate` (a cancellation picks one of `n` orders at total rate `cancel_rate * n`).
    Market orders and the agents' orders only take background orders away. So at time `t`
    the count is at most `S_t + A_t`: the seed orders still resting, `S_t ~ Binomial(seed,
    exp(-c t))`, and the arrivals still resting, `A_t ~ Poisson(limit_rate (1 - exp(-c t))
    / c)` (`limit_rate t` without cancellations). The capacity is `reserved` (the agents'
    orders) plus the least `k` whose Chernoff bound `P(S_t + A_t >= k) <= tail` holds at
    every `t` of `[0, horizon]` (513 times, spread evenly and geometrically from
    `1e-6 horizon`), rounded up to a multiple of 16.

    sekai's default flow gets 64 (its fullest side in 12 x 400 time units of sekai's own
    runs: 35 orders); `cancel_rate=1.0` 48; `cancel_rate=0.1` 176 (115 seen).

    Args:
        params: Python-number parameters.
        horizon: The time the book lives, finite and > 0 (warm-up plus session).
        reserved: Slots kept for the agents' resting orders, an int >= 0.
        seed_orders: Orders per side of the seed book, an int >= 0.
        tail: The bound's probability, in (0, 1).

    Returns:
        The capacity, a Python int.

    Raises:
        ValueError: If an argument is out of range, or if the capacity would exceed 65,536
            slots (as without cancellations over a long session): pass the env a
            `capacity` of your own then (overflow is flagged in `info`).

    Example:
        >>> from parallax.finance._lob import FlowParams, default_capacity
        >>> default_capacity(FlowParams(), 320.0), default_capacity(FlowParams(cancel_rate=0.1), 320.0)
        (64, 176)
    """
    for name, value, minimum in (("reserved", reserved, 0), ("seed_orders", seed_orders, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    if not (isinstance(horizon, int | float | np.number) and 0 < float(horizon) < math.inf):
        raise ValueError(f"horizon must be finite and > 0, got {horizon!r}.")
    if not (isinstance(tail, int | float | np.number) and 0 < float(tail) < 1):
        raise ValueError(f"tail must be in (0, 1), got {tail!r}.")
    lam, c = float(params.limit_rate), float(params.cancel_rate)
    # times spread evenly and, for the seed book's quick changes at the start, geometrically
    t = np.unique(
        np.concatenate([np.linspace(0.0, h := float(horizon), 257), np.geomspace(h * 1e-6, h, 257)])
    )
    survive = np.exp(-c * t)
    # the arrivals' mean, lam (1 - exp(-c t)) / c, continuous at c = 0 (lam t)
    arrivals = lam * t if c == 0 else lam * -np.expm1(-c * t) / c
    seed = float(seed_orders)

    def log_tail(k: float) -> float:
        # max over t of min over theta > 0 of log E[exp(theta N_t)] - theta k: the
        # log-MGF's derivative in theta rises, so its root (the best theta) is bisected
        def slope(theta: np.ndarray) -> np.ndarray:
            e = np.exp(theta)
            return seed * survive * e / (1.0 + survive * np.expm1(theta)) + arrivals * e - k

        lo, hi = np.zeros_like(t), np.full_like(t, 50.0)
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            up = slope(mid) > 0
            hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
        theta = 0.5 * (lo + hi)
        log_mgf = seed * np.log1p(survive * np.expm1(theta)) + arrivals * np.expm1(theta)
        return float(np.max(np.minimum(log_mgf - theta * k, 0.0)))

    # the least k with log_tail(k) <= log(tail), by bisection (log_tail falls as k rises)
    target = math.log(float(tail))
    lo_k, hi_k = 0, max(1, int(seed + arrivals.max()))
    while log_tail(hi_k) > target:
        lo_k, hi_k = hi_k, 2 * hi_k
        if hi_k > 4 * _CAPACITY_LIMIT:
            break
    while hi_k - lo_k > 1:
        mid_k = (lo_k + hi_k) // 2
        lo_k, hi_k = (lo_k, mid_k) if log_tail(mid_k) <= target else (mid_k, hi_k)
    step = _CAPACITY_STEP
    capacity = -(-(hi_k + int(reserved)) // step) * step
    if capacity > _CAPACITY_LIMIT:
        raise ValueError(
            f"the flow (limit_rate={params.limit_rate!r}, cancel_rate={params.cancel_rate!r})"
            f" may rest more than {_CAPACITY_LIMIT} orders on a side within {horizon!r} time"
            " units: pass capacity explicitly (a full side then sets info['overflow'])."
        )
    return int(capacity)


def initialise(
    capacity: int,
    params: FlowParams,
    episode_key: Any,
    *,
    mid: Any,
    levels: int = _SEED_LEVELS,
    orders_per_level: int = _SEED_ORDERS_PER_LEVEL,
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

    The loop is a `lax.while_loop` of at most `max_events` iterations (see
    `FlowStats.iterations`: one per event, per refill, per execution after an order's first
    and for the final waiting time). Inside it each order carries its place in priority on
    its side, so an iteration reads the best quotes from place 0, executes at most one
    resting order and updates the places in place; orders never change slots (a `Book`'s
    slots are unordered by contract). Reaching the bound stops the run early with
    `stats.truncated` set; it is never silent. Under `vmap`, a batch of 128 books or more
    runs the loop in two stages, the second on the books still running
    (`_run_flow_batched`), with the same results, bit for bit, as each book alone.

    Args:
        book: The book (with both sides non-empty, or a `last_price`, as after
            `initialise`). Its owners are `BACKGROUND` or ids >= 0, as `add_limit` and
            `market_order` require (the loop encodes an owner and an arrival rank in one
            field).
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
    # (the arguments go in as leaves: `custom_vmap` rebuilds their pytrees with flags,
    # and `FlowParams` refuses flags)
    leaves, treedef = jax.tree.flatten((book, params, episode_key, decision_index, start, until))
    return _flow_program(treedef, max_events, max_trades, num_agents)(*leaves)


@functools.cache
def _flow_program(treedef: Any, max_events: int, max_trades: int, num_agents: int) -> Any:
    """The flow of one book as a `custom_vmap` function of the arguments' leaves: batched,
    it is `_run_flow_batched`."""
    setup = functools.partial(_setup, max_trades=max_trades, num_agents=num_agents)
    iterate = functools.partial(
        _iterate, max_events=max_events, max_trades=max_trades, num_agents=num_agents
    )

    @jax.custom_batching.custom_vmap
    def one(*leaves: Any) -> tuple[Book, FlowStats]:
        consts, carry = setup(*jax.tree.unflatten(treedef, leaves))
        carry = lax.while_loop(
            lambda c: _running(c, max_events), functools.partial(iterate, consts), carry
        )
        return _finish(consts, carry)

    @one.def_vmap
    def batched(axis_size: int, in_batched: Any, *leaves: Any) -> tuple[Any, Any]:
        leaves = tuple(
            x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))
            for x, b in zip(leaves, in_batched, strict=True)
        )
        args = jax.tree.unflatten(treedef, leaves)
        out = _run_flow_batched(axis_size, args, setup, iterate, max_events)
        return out, jax.tree.map(lambda _: True, out)

    return one


def _stage_sizes(n: int) -> tuple[int, ...]:
    """The batch sizes of `_run_flow_batched`'s stages: `n`, then `n // 4` from 128 books.

    Each stage compiles its own copy of the loop's body, so there are two: at N = 1024 a
    third stage (64 books) or halving down to 32 books (five more) gained nothing more.
    """
    return (n, n // 4) if n >= 128 else (n,)


def _run_flow_batched(
    n: int, args: Any, setup: Any, iterate: Any, max_events: int
) -> tuple[Book, FlowStats]:
    """The flow of `n` books (every argument batched), each as `_run_flow` runs it alone.

    A batched `while_loop` turns until its busiest book is done: at the LOB env's defaults
    a book needs 44 iterations on average and the busiest of 1024 about 70, so a third of
    the work would go to books that have finished. Here the loop runs in stages
    (`_stage_sizes`): all `n` books until at most `n / 4` are still running, then those,
    gathered, to the end. Each book goes through the same iterations as alone (a finished
    book's iteration changes nothing), so the results are the same, bit for bit. At
    N = 1024 the flow takes about 0.8 of the time of one batched loop.
    """
    consts, carry = jax.vmap(setup)(*args)
    iterate = jax.vmap(iterate)
    running = jax.vmap(functools.partial(_running, max_events=max_events))
    sizes = (*_stage_sizes(n), 0)

    def stage(consts: _Consts, carry: Any, keep: int) -> Any:
        # run until at most `keep` books are still running
        return lax.while_loop(
            lambda c: jnp.sum(running(c), dtype=jnp.int32) > keep,
            functools.partial(iterate, consts),
            carry,
        )

    carry = stage(consts, carry, sizes[1])
    for size, keep in itertools.pairwise(sizes[1:]):
        # the books still running (all of them: at most `size`), gathered
        index = _running_first(running(carry))[:size]
        part_consts, part = jax.tree.map(lambda x, i=index: x[i], (consts, carry))
        part = stage(part_consts, part, keep)
        carry = jax.tree.map(lambda x, y, i=index: x.at[i].set(y), carry, part)
    return jax.vmap(_finish)(consts, carry)


def _running_first(running: jax.Array) -> jax.Array:
    """The indices of a batch, those where `running` holds first (a stable partition)."""
    flag = running.astype(jnp.int32)
    ahead = jnp.cumsum(flag) - flag  # running books before each one
    behind = jnp.arange(flag.shape[0], dtype=jnp.int32) - ahead  # finished ones before it
    place = jnp.where(running, ahead, jnp.sum(flag) + behind)
    index = jnp.arange(flag.shape[0], dtype=jnp.int32)
    return jnp.zeros_like(index).at[place].set(index, unique_indices=True)


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


def warm_up(
    capacity: int,
    params: FlowParams,
    episode_key: Any,
    *,
    mid: Any,
    warmup: Any,
    max_events: int,
    levels: int = _SEED_LEVELS,
    orders_per_level: int = _SEED_ORDERS_PER_LEVEL,
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
