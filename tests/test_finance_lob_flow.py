"""The background flow (`parallax.finance._lob.run_flow`) against sekai 0.2.0's `ZeroIntelligenceFlow`.

sekai's flow is driven by a shim generator that serves it our `parallax.rng` draws (the
`n`-th call of each kind gets the `n`-th draw of its slot), so its books must equal ours
after every interval: every resting order (id, side, price, size, owner), the next id, the
last price, and every trade of the interval (time, price, size, maker owner, taker side),
including fills of an agent's resting orders. Then: the capacity is never reached by
sekai's default flow in long runs, jit against eager, vmap independence, validation.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax import rng
from parallax.finance._lob import (
    ASK,
    BID,
    FLOW_SLOTS,
    Book,
    FlowParams,
    add_limit,
    best_ask,
    best_bid,
    default_max_events,
    initialise,
    run_flow,
    warm_up,
)
from parallax.finance._lob._flow_draws import (
    _exponential_from_uniform,
    _size_from_table,
    _size_from_uniform,
    _size_table,
)
from parallax.rng import reference

lob = pytest.importorskip("sekai.finance.lob")

MID = 10_000
CAPACITY = 64  # sekai's default flow: at most 35 orders per side seen in 3,200 time units
DEEP_CAPACITY = 192  # cancel_rate=0.1: at most 115 per side seen in 3,200 time units
MAX_EVENTS = 256  # per unit interval: about 40 events at the default rates
WARMUP_EVENTS = 4096
MAX_TRADES = 128
N_INTERVALS = 300  # sekai's default session: 300 unit intervals
WARMUP = 20.0

# setting -> (flow keywords, capacity, sessions compared): two whole sessions for the
# default flow, one for each of the others
SETTINGS = {
    "default": ({}, CAPACITY, 2),
    "thin": ({"cancel_rate": 1.0}, CAPACITY, 1),
    "deep": ({"cancel_rate": 0.1}, DEEP_CAPACITY, 1),
}


@jax.jit
def _shim_draws(key: Any, step: Any, mean_size: Any) -> tuple[jax.Array, ...]:
    """The waiting times and sizes of one step, by the flow's own transforms (x64)."""
    n = jnp.arange(WARMUP_EVENTS, dtype=jnp.uint32)
    mean = jnp.asarray(mean_size, jnp.float64)

    def uniform(slot: int) -> jax.Array:
        return rng.uniform(key, step, slot, n, dtype=jnp.float64)

    return (
        _exponential_from_uniform(uniform(FLOW_SLOTS.WAIT)),
        _size_from_uniform(uniform(FLOW_SLOTS.SIZE), mean),
        _size_from_uniform(uniform(FLOW_SLOTS.INIT_SIZE), mean),
    )


class FlowShim:
    """A `numpy.random.Generator` stand-in serving sekai's flow our draws, in call order.

    sekai calls `standard_exponential` (a waiting time, slot WAIT) then `random` (the event
    type, slot EVENT, same index), then per order `random` (offset, slot OFFSET) and
    `poisson` (size, slot SIZE), and `integers(n)` for a cancellation (slot CANCEL). A
    `random` call right after a waiting time is the event type; any other is an offset.
    """

    def __init__(self, episode_key: jax.Array, mean_size: float) -> None:
        self.key = np.asarray(episode_key)
        self.mean_size = mean_size
        self.set_step(0, init=True)

    def set_step(self, step: int, *, init: bool = False) -> None:
        self.step = step
        self.init = init
        self.counts = {"wait": 0, "offset": 0, "size": 0, "cancel": 0, "init": 0}
        self.after_wait: int | None = None
        with jax.enable_x64(True):
            waits, sizes, init_sizes = _shim_draws(self.key, step, self.mean_size)
        self.waits, self.sizes, self.init_sizes = (
            np.asarray(x) for x in (waits, sizes, init_sizes)
        )

    def _take(self, name: str) -> int:
        n = self.counts[name]
        self.counts[name] += 1
        return n

    def standard_exponential(self) -> float:
        n = self._take("wait")
        self.after_wait = n
        return float(self.waits[n])

    def random(self) -> float:
        if self.after_wait is not None:
            n, self.after_wait = self.after_wait, None
            return float(
                reference.uniform(self.key, self.step, FLOW_SLOTS.EVENT, n, dtype=np.float64)
            )
        n = self._take("offset")
        return float(reference.uniform(self.key, self.step, FLOW_SLOTS.OFFSET, n, dtype=np.float64))

    def poisson(self, lam: float) -> int:
        assert lam == self.mean_size - 1.0
        if self.init:
            return int(self.init_sizes[self._take("init")]) - 1
        return int(self.sizes[self._take("size")]) - 1

    def integers(self, n: int) -> int:
        m = self._take("cancel")
        return int(reference.randint(self.key, self.step, FLOW_SLOTS.CANCEL, m, n))


def resting(book: Book) -> dict[int, tuple[int, int, int, int]]:
    """Our resting orders as {id: (side, price, size, owner)}."""
    valid, seq, price, size, owner = (
        np.asarray(x) for x in (book.valid, book.seq, book.price, book.size, book.owner)
    )
    out = {}
    for row, side in ((0, BID), (1, ASK)):
        for slot in np.flatnonzero(valid[row]):
            out[int(seq[row, slot])] = (
                side,
                int(price[row, slot]),
                int(size[row, slot]),
                int(owner[row, slot]),
            )
    return out


def sekai_resting(book: Any) -> dict[int, tuple[int, int, int, int]]:
    return {
        oid: (int(o.side), o.price, o.quantity, o.owner)
        for oid, o in book._orders.items()
        if o.quantity > 0
    }


def assert_same_book(ours: Book, ref: Any, where: str) -> None:
    assert resting(ours) == sekai_resting(ref), where
    assert int(ours.next_id) == ref._next_id, where
    assert int(ours.last_price) == ref.last_price, where
    assert not bool(ours.overflow), where


def assert_same_trades(stats: Any, fills: list[Any], where: str) -> None:
    stats = jax.tree.map(np.asarray, stats)
    n = int(stats.n_trades)
    assert n == len(fills), where
    assert n <= MAX_TRADES, f"{where}: raise MAX_TRADES to compare every trade"
    assert np.asarray(stats.trade_price[:n]).tolist() == [f.price for f in fills], where
    assert np.asarray(stats.trade_size[:n]).tolist() == [f.quantity for f in fills], where
    owners = [f.maker_owner for f in fills]
    assert np.asarray(stats.trade_maker_owner[:n]).tolist() == owners, where
    sides = [int(f.taker_side) for f in fills]
    assert np.asarray(stats.trade_taker_side[:n]).tolist() == sides, where
    np.testing.assert_allclose(
        stats.trade_time[:n], [f.time for f in fills], rtol=1e-12, err_msg=where
    )
    mine = [f for f in fills if f.maker_owner == 0]
    bought = sum(f.quantity for f in mine if f.taker_side == lob.Side.ASK)
    sold = sum(f.quantity for f in mine if f.taker_side == lob.Side.BID)
    cash = sum((1 if f.taker_side == lob.Side.BID else -1) * f.quantity * f.price for f in mine)
    assert (int(stats.agent_bought[0]), int(stats.agent_sold[0])) == (bought, sold), where
    assert int(stats.agent_cash[0]) == cash, where


_run = jax.jit(run_flow, static_argnames=("max_events", "max_trades", "num_agents"))
_warm = jax.jit(warm_up, static_argnames=("capacity", "max_events"))
# seed books, agent quotes and the touch, jitted (the eager run: test_jit_matches_eager)
_init = jax.jit(initialise, static_argnums=0, static_argnames=("levels", "orders_per_level"))
_add_limit = jax.jit(add_limit)
_touch = jax.jit(lambda book: (best_bid(book), best_ask(book)))


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_flow_equals_sekai_interval_by_interval(setting: str) -> None:
    kwargs, capacity, sessions = SETTINGS[setting]
    params = FlowParams(**kwargs)
    flow = lob.ZeroIntelligenceFlow(**kwargs)
    total_trades = total_events = agent_fills = 0
    with jax.enable_x64(True):
        for seed in range(sessions):
            ek = rng.episode_key(jax.random.key(seed))
            shim = FlowShim(ek, flow.mean_size)
            ref = lob.OrderBook()
            flow.initialise(ref, shim, mid=MID)
            book = _init(capacity, params, ek, mid=MID)
            assert_same_book(book, ref, f"{setting} seed {seed} initialise")
            shim.init = False
            fills = flow.advance(ref, shim, WARMUP)
            book, stats = _run(
                book, params, ek, 0, 0.0, WARMUP, max_events=WARMUP_EVENTS, max_trades=1024
            )
            assert not bool(stats.truncated)
            assert int(stats.n_trades) == len(fills)
            assert_same_book(book, ref, f"{setting} seed {seed} warm-up")
            for k in range(1, N_INTERVALS + 1):
                where = f"{setting} seed {seed} interval {k}"
                if k % 7 == 0:  # an agent quotes at the touch, so the flow fills it
                    bid, ask = (int(p) for p in _touch(book))
                    for side, price in ((BID, bid), (ASK, ask)):
                        ref.limit(lob.Side(side), price, 2, 0)
                        book, _ = _add_limit(book, side, price, 2, 0)
                shim.set_step(k)
                start, until = WARMUP + k - 1.0, WARMUP + float(k)
                fills = flow.advance(ref, shim, until)
                book, stats = _run(
                    book, params, ek, k, start, until, max_events=MAX_EVENTS, max_trades=MAX_TRADES
                )
                assert not bool(stats.truncated), where
                assert float(stats.end_time) == until
                assert_same_book(book, ref, where)
                assert_same_trades(stats, fills, where)
                total_trades += len(fills)
                total_events += int(stats.events)
                agent_fills += int(stats.agent_bought[0] + stats.agent_sold[0])
    # the runs exercised what they claim to
    assert total_events > sessions * N_INTERVALS * 20
    assert total_trades > sessions * N_INTERVALS
    assert agent_fills > 0


def test_sekai_default_flow_stays_within_capacity() -> None:
    """Capacity 64: sekai's default flow, own generator, 12 x 400 time units, stays well below."""
    flow = lob.ZeroIntelligenceFlow()
    worst = 0
    for seed in range(12):
        gen = np.random.default_rng(seed)
        book = lob.OrderBook()
        flow.initialise(book, gen, mid=MID)
        for k in range(1, 401):
            flow.advance(book, gen, float(k))
            n_bid = sum(1 for o in book._orders.values() if o.side is lob.Side.BID and o.quantity)
            worst = max(worst, n_bid, len(sekai_resting(book)) - n_bid)
    assert worst < 0.75 * CAPACITY, worst


def _sekai_statistics(n_books: int, n_intervals: int) -> np.ndarray:
    """Per book: mean spread, mean resting volume and mean trades per unit interval (own rng)."""
    flow = lob.ZeroIntelligenceFlow()
    out = []
    for seed in range(n_books):
        gen = np.random.default_rng(100 + seed)
        book = lob.OrderBook()
        flow.initialise(book, gen, mid=MID)
        flow.advance(book, gen, WARMUP)
        rows = []
        for k in range(1, n_intervals + 1):
            trades = len(flow.advance(book, gen, WARMUP + k))
            volume = sum(o.quantity for o in book._orders.values())
            rows.append((book.spread(), volume, trades))
        out.append(np.mean(rows, axis=0))
    return np.asarray(out)


def test_default_flow_in_float32_never_overflows_and_matches_sekai_in_distribution() -> None:
    """16 books x 200 unit intervals, float32 (x64 off; a different stream from x64's).

    No overflow and no truncation, the fullest side below 0.75 * capacity, and the spread,
    resting volume and trades per interval within z <= 4 of sekai's own generator (the
    standard errors from the per-book means, books being independent).
    """
    n_books, n_intervals = 16, 200
    params = FlowParams()
    eks = rng.episode_key(jax.random.split(jax.random.key(3), n_books))

    @jax.jit
    def episode(ek: jax.Array) -> tuple[jax.Array, ...]:
        book, stats = warm_up(
            CAPACITY, params, ek, mid=MID, warmup=WARMUP, max_events=WARMUP_EVENTS
        )

        def step(book: Book, k: jax.Array) -> tuple[Book, tuple[jax.Array, ...]]:
            start = WARMUP + k.astype(jnp.float32) - 1.0
            book, stats = run_flow(book, params, ek, k, start, start + 1.0, max_events=MAX_EVENTS)
            row = jnp.stack(
                [
                    best_ask(book) - best_bid(book),
                    jnp.sum(book.size),
                    stats.n_trades,
                ]
            ).astype(jnp.float32)
            return book, (stats.truncated, jnp.max(jnp.sum(book.valid, axis=1)), row)

        book, (truncated, fullest, rows) = jax.lax.scan(step, book, jnp.arange(1, n_intervals + 1))
        overflow = book.overflow | stats.truncated
        return overflow, jnp.any(truncated), jnp.max(fullest), jnp.mean(rows, axis=0)

    overflow, truncated, fullest, ours = jax.vmap(episode)(eks)
    assert not np.any(overflow) and not np.any(truncated)
    assert int(np.max(fullest)) < 0.75 * CAPACITY
    ours = np.asarray(ours, np.float64)
    theirs = _sekai_statistics(n_books, n_intervals)
    se = np.sqrt(ours.var(axis=0, ddof=1) / n_books + theirs.var(axis=0, ddof=1) / n_books)
    z = (ours.mean(axis=0) - theirs.mean(axis=0)) / se
    assert np.all(np.abs(z) <= 4), (z, ours.mean(axis=0), theirs.mean(axis=0))


def test_docstring_examples() -> None:
    import doctest

    from parallax.finance._lob import _flow, _flow_bounds, _flow_params

    attempted = 0
    for module in (_flow, _flow_bounds, _flow_params):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 11  # the examples of the flow before it was split


def test_truncation_is_flagged() -> None:
    params = FlowParams()
    ek = rng.episode_key(jax.random.key(0))
    book = _init(CAPACITY, params, ek, mid=MID)
    _, stats = _run(book, params, ek, 1, 0.0, 20.0, max_events=MAX_EVENTS)  # ~800 events
    assert bool(stats.truncated) and int(stats.iterations) == MAX_EVENTS
    assert float(stats.end_time) < 20.0


def test_jit_matches_eager(x64: bool) -> None:
    params = FlowParams(cancel_rate=1.0)
    ek = rng.episode_key(jax.random.key(5))
    book = initialise(16, params, ek, mid=MID, levels=4, orders_per_level=2)
    eager = run_flow(book, params, ek, 3, 0.0, 2.0, max_events=MAX_EVENTS)
    jitted = _run(book, params, ek, 3, 0.0, 2.0, max_events=MAX_EVENTS)
    for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(eager[1].events) > 0
    float_dtype = jnp.float64 if x64 else jnp.float32
    assert eager[1].trade_time.dtype == float_dtype


def test_vmap_books_are_independent() -> None:
    params = FlowParams()
    eks = rng.episode_key(jax.random.split(jax.random.key(9), 4))
    books = jax.jit(jax.vmap(lambda ek: initialise(CAPACITY, params, ek, mid=MID)))(eks)
    batched = jax.jit(
        jax.vmap(lambda b, ek: run_flow(b, params, ek, 1, 0.0, 1.0, max_events=MAX_EVENTS))
    )(books, eks)
    for i in range(4):
        book_i = jax.tree.map(lambda x, i=i: x[i], books)
        alone = _run(book_i, params, eks[i], 1, 0.0, 1.0, max_events=MAX_EVENTS)
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(batched), strict=True):
            np.testing.assert_array_equal(a, b[i])
    # different keys give different books
    assert not np.array_equal(batched[0].price[0], batched[0].price[1])


def _search_sizes(u: np.ndarray, p0: Any, mean: float, dtype: Any) -> np.ndarray:
    """`1 + Poisson(mean)` by the plain sequential search, in NumPy's `dtype` arithmetic
    (every operation rounded on its own), from `p0 = exp(-mean)`; counts stop at
    `mean + 12 sqrt(mean) + 20` (where the float sum of the terms may stay below `u`)."""
    one = dtype(1)
    cap = dtype(mean) + dtype(12) * np.sqrt(dtype(mean)) + dtype(20)
    k = np.zeros(u.shape, np.int64)
    p = np.full(u.shape, dtype(p0))
    cdf = p.copy()
    go = u >= cdf
    while go.any():
        k = k + go
        p = np.where(go, (p * dtype(mean)) / np.maximum(k, 1).astype(dtype), p).astype(dtype)
        cdf = np.where(go, cdf + p, cdf).astype(dtype)
        go = (u >= cdf) & (k < cap)
    return (k + one).astype(np.int64)


def test_sizes_are_the_sequential_search_bit_for_bit(x64: bool) -> None:
    # Order sizes `1 + Poisson(mean_size - 1)` come from a table of the first CDF terms
    # (built once an interval in the loop), then the sequential search past them: they
    # must be the plain search's, in the same float arithmetic, for every uniform (random
    # ones, each term of the CDF and its float neighbours), inside and past the table.
    dtype = np.float64 if x64 else np.float32
    means = [1.0, 1.5, 2.0, 3.0, 7.5, 18.0, 26.0, 31.0]
    tables = jax.jit(jax.vmap(lambda m: _size_table(m, dtype)))(jnp.asarray(means, dtype))
    terms = np.asarray(tables.cdf[:, :-1])
    below, above = np.nextafter(terms, dtype(0)), np.nextafter(terms, dtype(1))
    random = np.asarray(jax.random.uniform(jax.random.key(2), (len(means), 4000), dtype))
    u = np.clip(np.concatenate([random, terms, below, above], axis=1), 0, below.max())
    u = u.astype(dtype)
    ours = np.asarray(jax.jit(jax.vmap(jax.vmap(_size_from_table, (0, None))))(u, tables))
    for i, mean_size in enumerate(means):
        p0 = terms[i, 0]  # exp(-m): the one term not built by +, * and /
        expected = _search_sizes(u[i], p0, mean_size - 1.0, dtype)
        np.testing.assert_array_equal(ours[i], expected, err_msg=f"mean_size {mean_size}")
    assert ours[5].max() > 17  # mean_size 18: counts past the table's 16 terms
    # `_size_from_uniform` (the seed book, the shim generator) is the same function
    sizes = jax.jit(_size_from_uniform)(jnp.asarray(u), jnp.asarray(means, dtype)[:, None])
    np.testing.assert_array_equal(sizes, ours)
    # above 30 (mean_size > 31): the rounded normal approximation
    big = jax.jit(_size_from_uniform)(jnp.asarray(random[0]), jnp.asarray(101.0, dtype))
    assert abs(float(np.mean(big)) - 101.0) < 1.0 and abs(float(np.std(big)) - 10.0) < 1.0


def _staged_batch(n: int) -> tuple[Any, ...]:
    """`n` small books with their own keys, intervals and flow parameters."""
    eks = rng.episode_key(jax.random.split(jax.random.key(11), n))
    params = FlowParams(
        limit_rate=jnp.linspace(4.0, 12.0, n),
        market_rate=jnp.full(n, 2.0),
        cancel_rate=jnp.linspace(0.2, 1.0, n),
        max_offset=jnp.full(n, 6, jnp.int32),
        offset_decay=jnp.full(n, 0.5),
        mean_size=jnp.linspace(1.0, 4.0, n),
    )
    books = jax.jit(
        jax.vmap(lambda p, ek: initialise(16, p, ek, mid=MID, levels=4, orders_per_level=2))
    )(params, eks)
    start = jnp.linspace(0.0, 1.0, n)
    until = start + jnp.linspace(0.3, 2.5, n)  # some books reach `max_events`
    return books, params, eks, start, until


def _flow_alone(books: Any, params: Any, eks: Any, start: Any, until: Any, max_events: int):
    """Each book's flow on its own: `lax.map` runs the unbatched loop book after book."""
    return jax.jit(
        lambda *xs: jax.lax.map(
            lambda x: run_flow(x[0], x[1], x[2], 3, x[3], x[4], max_events=max_events), xs
        )
    )(books, params, eks, start, until)


def test_a_large_batch_runs_in_stages_and_equals_each_book_alone() -> None:
    # A batch of 64 books or more runs its loop in stages on fewer and fewer books (the
    # ones still running, gathered); every book must still get exactly its own run:
    # batched parameters and intervals, truncated books included.
    from parallax.finance._lob._flow import _stage_sizes

    n, max_events = 160, 48
    assert _stage_sizes(n) == (160, 40)
    books, params, eks, start, until = _staged_batch(n)
    batched = jax.jit(
        jax.vmap(lambda b, p, ek, s, u: run_flow(b, p, ek, 3, s, u, max_events=max_events))
    )(books, params, eks, start, until)
    alone = _flow_alone(books, params, eks, start, until, max_events)
    for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(batched), strict=True):
        np.testing.assert_array_equal(a, b)
    stats = batched[1]
    truncated = np.asarray(stats.truncated)
    assert 0 < truncated.sum() < n  # both kinds of books are in the batch
    # the busiest book ran several times the iterations of the quietest
    assert int(stats.iterations.max()) >= 3 * int(stats.iterations.min())


def test_nested_vmap_runs_each_inner_batch_in_stages() -> None:
    # vmap of vmap: the inner batch (160 books: two stages) is staged, the outer vmaps that.
    n, max_events = 320, 48
    books, params, eks, start, until = _staged_batch(n)
    run = functools.partial(run_flow, decision_index=3, max_events=max_events)
    flow = jax.vmap(lambda b, p, ek, s, u: run(b, p, ek, start=s, until=u))
    split = jax.tree.map(lambda x: x.reshape(2, n // 2, *x.shape[1:]), (books, params, eks))
    nested = jax.jit(jax.vmap(flow, (0, 0, 0, None, None)))(
        *split, start[: n // 2], until[: n // 2]
    )
    # each half alone, in the program of the test above (the same shapes: compiled once)
    for half in range(2):
        rows = jax.tree.map(lambda x, h=half: x[h], split)
        alone = _flow_alone(*rows, start[: n // 2], until[: n // 2], max_events)
        inner = jax.tree.map(lambda x, h=half: x[h], nested)
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(inner), strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit_rate": 0.0}, "limit_rate must be finite and > 0, got 0.0"),
        ({"market_rate": float("inf")}, "market_rate must be finite and > 0"),
        ({"cancel_rate": -0.1}, "cancel_rate must be finite and >= 0, got -0.1"),
        ({"offset_decay": float("nan")}, "offset_decay must be finite and >= 0"),
        ({"mean_size": 0.5}, "mean_size must be finite and >= 1, got 0.5"),
        ({"max_offset": 0}, "max_offset must be >= 1, got 0"),
        ({"max_offset": 2.5}, "max_offset must be an integer, got 2.5"),
    ],
)
def test_params_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        FlowParams(**kwargs)
    with pytest.raises(ValueError):
        lob.ZeroIntelligenceFlow(**kwargs)  # sekai rejects the same values


def test_defaults_are_sekais() -> None:
    ours = dataclasses.asdict(FlowParams())
    theirs = {
        f.name: getattr(lob.ZeroIntelligenceFlow(), f.name)
        for f in dataclasses.fields(lob.ZeroIntelligenceFlow)
    }
    assert ours == theirs


def test_static_arguments_are_checked() -> None:
    params = FlowParams()
    ek = rng.episode_key(jax.random.key(0))
    book = _init(8, params, ek, mid=MID, levels=2, orders_per_level=2)
    with pytest.raises(ValueError, match="max_events must be an integer >= 1, got 0"):
        run_flow(book, params, ek, 1, 0.0, 1.0, max_events=0)
    with pytest.raises(ValueError, match="levels must be an integer >= 1, got 0"):
        initialise(8, params, ek, mid=MID, levels=0)
    assert bool(_init(4, params, ek, mid=MID, levels=5, orders_per_level=1).overflow)
    assert default_max_events(params, 1.0, CAPACITY) >= MAX_EVENTS // 2
