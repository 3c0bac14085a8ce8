"""JAX-LOB's book (Frey et al., ICAIF 2023; `jaxlob` 0.19) driven by our message streams.

Used by `tests/test_finance_lob_jaxlob.py` (which puts this folder on `sys.path`) and by
`benchmarks/lob_messages_speed.py`. Nothing of JAX-LOB is copied: its module is imported
and called.

- `load()`: JAX-LOB's `JaxOrderBookArrays` module, made to run on JAX >= 0.8: it calls
  `jnp.where(c, x=..., y=...)`, keywords that JAX removed, so its module-global `jnp` is
  replaced by `_WhereKeywords`, which forwards everything to `jax.numpy` and accepts them.
  Its functions are `jax.jit`-wrapped at import but look `jnp` up when they are traced, so
  the patch holds as long as nothing traced them before (`load` checks that it took). It
  also needs JAX's standard dtype promotion: the calls here run JAX-LOB under it.
- `to_jaxlob(messages, tick)`: our `(type, order_id, size, price, direction)` rows as
  JAX-LOB's `[type, side, quantity, price, traderid, orderid, time, time_ns]` rows, under
  the mappings below; `time` is the message's index + 1 (so JAX-LOB's time priority is
  arrival order), `time_ns` 0, the trader id `TRADER` for all.
- `empty_sides()`, `steps()`: JAX-LOB's two `(ROWS, 6)` sides and a jitted scan of its
  `cond_type_side` that returns both sides after every message and each message's own
  trades (a fresh `(trade_rows, 6)` trade array per message, so a message's trades are
  its rows that are not -1).
- `resting(asks, bids)`, `trades(array)`: read them back as Python lists.
- `generate(seed, n, regime)`, `REGIMES`: random streams of ours that both books read alike.

The mappings (`to_jaxlob`; `tests/test_finance_lob_jaxlob.py` checks where they hold):

| ours | JAX-LOB |
|---|---|
| `SUBMIT` | type 1, side = direction |
| `CANCEL` | type 2 (partial cancel by order id) |
| `DELETE` | type 3 with the order's full size (our `DELETE` does not read `size`: give it) |
| `MARKET` | type 4 on the opposite side at a price beyond the book (`BUY_BEYOND`, `SELL_BEYOND`) |
| `EXECUTE` | type 4 with side = direction (the resting side) at the order's price |
| `HIDDEN`, `CROSS`, `HALT` | type 2 of size 0 (JAX-LOB has no no-op type; that cancel changes nothing) |
"""

from __future__ import annotations

import importlib
import types
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

MODULE = "jaxlob.gymnax_exchange.jaxob.JaxOrderBookArrays"
ROWS = 100  # JAX-LOB's orders per side (its `init_orderside` default, jorderbook's nOrders)
TRADER = 7  # any id but -1: JAX-LOB takes a row holding a -1 anywhere for an empty one
BUY_BEYOND = 999_999_900  # a buy "market" order's price: above any ask (below its 999999999)
SELL_BEYOND = 0  # a sell "market" order's price: below any bid
SUBMIT, CANCEL, DELETE, EXECUTE, HIDDEN, CROSS, HALT, MARKET = 1, 2, 3, 4, 5, 6, 7, 8


class _WhereKeywords(types.SimpleNamespace):
    """`jax.numpy`, but `where` also takes the `x=`/`y=` keywords that JAX removed."""

    def __getattr__(self, name: str) -> Any:
        return getattr(jnp, name)

    @staticmethod
    def where(condition: Any, *args: Any, x: Any = None, y: Any = None, **kwargs: Any) -> Any:
        if x is not None or y is not None:
            if args:
                raise TypeError("where: x and y given both by position and keyword")
            return jnp.where(condition, x, y, **kwargs)
        return jnp.where(condition, *args, **kwargs)


def _standard() -> Any:
    """JAX-LOB relies on JAX's standard dtype promotion (`bool * int`); a caller may run
    under `jax_numpy_dtype_promotion="strict"` (our test suite does), so its calls and
    traces run inside this context (part of the jit cache key, so it must wrap every call)."""
    return jax.numpy_dtype_promotion("standard")


def load() -> types.ModuleType:
    """JAX-LOB's book module with the `jnp.where` keyword fix (idempotent)."""
    module = importlib.import_module(MODULE)
    if not isinstance(module.jnp, _WhereKeywords):
        module.jnp = _WhereKeywords()
    # the check that the patch took: `add_order` calls `where(..., x=, y=)` when traced; a
    # function traced before the patch would keep failing (or stay cached) here
    side = -jnp.ones((4, 6), jnp.int32)
    msg = {k: jnp.int32(v) for k, v in zip(_FIELDS, (1, 1, 5, 100, TRADER, 1, 1, 0), strict=True)}
    with _standard():
        added = np.asarray(module.add_order(side, msg))
    assert added[0].tolist() == [100, 5, 1, TRADER, 1, 0], added
    return module


_FIELDS = ("type", "side", "quantity", "price", "traderid", "orderid", "time", "time_ns")


def to_jaxlob(messages: Any, tick: int = 1) -> np.ndarray:
    """Our message rows `(M, 5)` as JAX-LOB's `(M, 8)` rows (see the module's table).

    `tick` is not applied: both books get the same integer prices (ours keeps
    `price // tick`, JAX-LOB the price itself); it is only checked.
    """
    m = np.asarray(messages, np.int64)
    kind, order_id, size, price, side = (m[:, i] for i in range(5))
    n = len(m)
    rows = np.zeros((n, 8), np.int64)
    rows[:, 4] = TRADER
    rows[:, 5] = order_id
    rows[:, 6] = np.arange(1, n + 1)
    rows[:, 2] = size
    rows[:, 3] = price
    rows[:, 1] = side
    rows[:, 0] = kind
    market = kind == MARKET
    rows[market, 0] = 4
    rows[market, 1] = -side[market]
    rows[market, 3] = np.where(side[market] > 0, BUY_BEYOND, SELL_BEYOND)
    rows[kind == EXECUTE, 0] = 4  # side = direction: the resting side; price: the order's
    noop = (kind == HIDDEN) | (kind == CROSS) | (kind == HALT)
    rows[noop, 0] = 2
    rows[noop, 2] = 0
    submitted = kind == SUBMIT
    assert np.all(price[submitted] % tick == 0), "off-grid prices"
    return rows.astype(np.int32)


def empty_sides(rows: int = ROWS) -> tuple[jax.Array, jax.Array]:
    """JAX-LOB's empty `(asks, bids)`: `(rows, 6)` int32 arrays of -1."""
    side = -jnp.ones((rows, 6), jnp.int32)
    return side, side


def steps(
    asks: jax.Array, bids: jax.Array, rows: Any, trade_rows: int = ROWS
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """JAX-LOB's scan over `rows` `(M, 8)`: asks and bids after each message `(M, R, 6)`
    and each message's trades `(M, trade_rows, 6)` (`[price, quantity, maker orderid,
    aggressor orderid, time, time_ns]`, -1 rows unused). Compiled once per shape."""
    load()
    with _standard():
        return _steps(asks, bids, jnp.asarray(rows, jnp.int32), trade_rows)


@partial(jax.jit, static_argnames="trade_rows")
def _steps(asks: jax.Array, bids: jax.Array, rows: jax.Array, trade_rows: int) -> Any:
    job = importlib.import_module(MODULE)
    fresh = -jnp.ones((trade_rows, 6), jnp.int32)

    def body(
        sides: tuple[jax.Array, jax.Array], row: jax.Array
    ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
        (ask, bid, trade), _ = job.cond_type_side((*sides, fresh), row)
        return (ask, bid), (ask, bid, trade)

    return jax.lax.scan(body, (asks, bids), rows)[1]


def scan(asks: jax.Array, bids: jax.Array, trades: jax.Array, rows: jax.Array) -> Any:
    """JAX-LOB's own whole-stream scan (`scan_through_entire_array`): the final
    `(asks, bids, trades)`, trades accumulating in one array (what the benchmark times)."""
    load()
    with _standard():
        return _scan(asks, bids, trades, rows)


@jax.jit
def _scan(asks: jax.Array, bids: jax.Array, trades: jax.Array, rows: jax.Array) -> Any:
    return importlib.import_module(MODULE).scan_through_entire_array(rows, (asks, bids, trades))


def resting(asks: Any, bids: Any) -> dict[int, list[tuple[int, int, int]]]:
    """The resting orders per side (1: bids, -1: asks) as `(price, quantity, orderid)` in
    JAX-LOB's priority order: best price first, then `(time, time_ns)`."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for side, array, sign in ((1, np.asarray(bids), -1), (-1, np.asarray(asks), 1)):
        live = array[array[:, 0] != -1]
        order = sorted(live.tolist(), key=lambda r: (sign * r[0], r[4], r[5]))
        out[side] = [(r[0], r[1], r[2]) for r in order]
    return out


def trades(array: Any) -> list[tuple[int, int, int, int]]:
    """A trade array's used rows as `(price, quantity, maker orderid, aggressor orderid)`,
    in the order JAX-LOB wrote them."""
    a = np.asarray(array)
    return [(r[0], r[1], r[2], r[3]) for r in a[a[:, 0] != -1].tolist()]


# -- random streams of the mappings that hold ----------------------------------------------
REGIMES: dict[str, dict[str, float]] = {
    # kind weights; "cross": chance that a submission is priced anywhere near the reference
    # (these often cross), else passive within `spread` ticks; `size`: mean extra size
    "thin": dict(submit=0.35, market=0.2, execute=0.2, delete=0.15, cancel=0.1, cross=0.4),
    "deep": dict(submit=0.8, market=0.05, execute=0.05, delete=0.03, cancel=0.07, spread=15),
    "cancel_heavy": dict(submit=0.4, cancel=0.3, delete=0.25, execute=0.05),
    "market_heavy": dict(submit=0.5, market=0.35, execute=0.15, size=5),
    "crossing": dict(submit=0.8, cancel=0.1, market=0.05, execute=0.05, cross=0.7, size=6),
}
KINDS = ("submit", "market", "execute", "delete", "cancel")
REFERENCE = 1000  # ticks


def generate(
    seed: int, n: int, regime: dict[str, float], *, tick: int = 100, capacity: int = ROWS
) -> np.ndarray:
    """`n` of our message rows `(n, 5)` that both books read alike, drawn against sekai's
    `OrderBook` (the state that tells which orders rest): only the mappings that hold
    (`to_jaxlob`), no side near `capacity` orders, no order that would trade with more than
    one resting order (JAX-LOB's matching stops after the first), no market order larger
    than its maker, executions only of the side's best order and never larger than it."""
    from sekai.finance import lob as sekai_lob

    side_of = sekai_lob.Side
    rng = np.random.default_rng(seed)
    weights = np.array([regime.get(k, 0.0) for k in KINDS])
    cross, spread, mean = regime.get("cross", 0.3), regime.get("spread", 5), regime.get("size", 3)
    book, to_sekai, messages = sekai_lob.OrderBook(), {}, []
    for t in range(n):
        kind = KINDS[int(rng.choice(len(KINDS), p=weights / weights.sum()))]
        side = 1 if rng.random() < 0.5 else -1
        size = 1 + int(rng.poisson(mean))
        live = {ours: book.get(s) for ours, s in to_sekai.items() if book.get(s) is not None}
        mine = [(i, o) for i, o in live.items() if int(o.side) == side]
        makers = sorted(  # the opposite side in priority order
            (o for o in live.values() if int(o.side) == -side),
            key=lambda o: (side * o.price, o.order_id),
        )
        if kind == "submit" and len(mine) >= capacity - 5:
            kind = "delete"
        if kind == "market" and not makers:
            kind = "submit"
        if kind in ("execute", "delete", "cancel") and not mine:
            kind = "submit"
        order_id = 10_000 + t
        if kind == "submit":
            if rng.random() < cross:
                ticks = REFERENCE + int(rng.integers(-4, 5))
            else:
                ticks = REFERENCE - side * int(rng.integers(1, spread + 1))
            crossing = [o for o in makers if side * (ticks - o.price) >= 0]
            if len(crossing) > 1:
                size = min(size, crossing[0].quantity)
            taker, _ = book.limit(side_of(side), ticks, size)
            if taker is not None:
                to_sekai[order_id] = taker
            messages.append((SUBMIT, order_id, size, ticks * tick, side))
        elif kind == "market":
            size = min(size, makers[0].quantity)
            book.market(side_of(side), size)
            messages.append((MARKET, order_id, size, 0, side))
        else:
            if kind == "execute":  # the side's best order: first by price, then by time
                order_id, order = min(mine, key=lambda r: (-side * r[1].price, r[1].order_id))
                size = min(size, order.quantity)
            else:
                order_id, order = mine[int(rng.integers(len(mine)))]
                size = order.quantity if kind == "delete" else min(size, order.quantity)
            book.reduce(to_sekai[order_id], order.quantity - size)
            code = {"execute": EXECUTE, "delete": DELETE, "cancel": CANCEL}[kind]
            messages.append((code, order_id, size, order.price * tick, side))
    return np.asarray(messages, np.int32)
