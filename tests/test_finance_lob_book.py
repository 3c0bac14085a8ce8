"""The array order book (`parallax.finance._lob`) against sekai 0.2.0's `OrderBook`.

Random streams of limit orders, market orders and cancellations (seeded NumPy) drive
sekai's book and ours; after every event the resting orders (id, side, price, size, owner,
so time order too), the fills, the depth, the best quotes, the last price and the queue
position of every resting order must be equal. Then: jit against eager, vmap against one
book at a time, overflow, rejection of invalid orders, float32 and x64.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax.finance._lob import (
    ASK,
    BACKGROUND,
    BID,
    Book,
    Fills,
    add_limit,
    best_ask,
    best_bid,
    cancel,
    cancel_slot,
    depth_levels,
    empty_book,
    market_order,
    queue_position,
    submit_order,
)

lob = pytest.importorskip("sekai.finance.lob")

LIMIT, MARKET, CANCEL = 0, 1, 2
CAPACITY = 96
N_EVENTS = 300
N_LEVELS = 5
REFERENCE = 100


@dataclasses.dataclass(frozen=True)
class Regime:
    """Event probabilities and order shapes of one random stream."""

    p_limit: float
    p_market: float
    owners: tuple[int, ...] = (BACKGROUND, 0, 1)
    crossing: bool = False  # limit prices anywhere near the reference, so many cross
    max_offset: int = 5
    mean_size: float = 3.0
    p_stp: float = 0.0  # chance an agent's order asks for self-trade prevention


REGIMES = {
    "thin": Regime(p_limit=0.4, p_market=0.25, max_offset=3),
    "deep": Regime(p_limit=0.6, p_market=0.1, max_offset=10),
    "crossing": Regime(p_limit=0.7, p_market=0.1, crossing=True, mean_size=5.0),
    "self_trades": Regime(p_limit=0.6, p_market=0.2, owners=(0, 1), crossing=True, p_stp=0.5),
    "self_trades_allowed": Regime(p_limit=0.6, p_market=0.2, owners=(0, 1), crossing=True),
}


# -- the reference: sekai's book, driven and read through its public API ------------------


def _resting(book: Any, owners: tuple[int, ...]) -> list[tuple[int, int, int, int, int]]:
    """Every resting order as (id, side, price, size, owner), by id (= time order)."""
    rows = [
        (o.order_id, int(o.side), o.price, o.quantity, o.owner)
        for owner in owners
        for o in book.orders_of(owner)
    ]
    return sorted(rows)


def _fill_rows(fills: list[Any]) -> list[tuple[int, ...]]:
    return [
        (f.price, f.quantity, f.maker_order_id, f.taker_order_id, f.maker_owner, f.taker_owner)
        for f in fills
    ]


def _generate(regime: Regime, seed: int, n_events: int) -> tuple[dict[str, np.ndarray], list]:
    """A random event stream and, after each event, what sekai's book shows."""
    rng = np.random.default_rng(seed)
    book = lob.OrderBook()
    events: dict[str, list[int]] = {k: [] for k in ("kind", "side", "price", "size", "owner")}
    events |= {"target": [], "stp": []}
    expected = []
    for _ in range(n_events):
        u = rng.random()
        kind = (
            LIMIT
            if u < regime.p_limit
            else MARKET
            if u < regime.p_limit + regime.p_market
            else CANCEL
        )
        side = BID if rng.random() < 0.5 else ASK
        owner = int(rng.choice(regime.owners))
        size = 1 + int(rng.poisson(regime.mean_size - 1))
        stp = owner != BACKGROUND and rng.random() < regime.p_stp
        price, target = 0, 0
        if kind == LIMIT:
            offset = int(rng.integers(1, regime.max_offset + 1))
            if regime.crossing:
                price = REFERENCE + int(rng.integers(-regime.max_offset, regime.max_offset + 1))
            elif side == BID:
                price = (book.best_ask() or REFERENCE) - offset
            else:
                price = (book.best_bid() or REFERENCE) + offset
            price = max(price, 1)
        if kind == CANCEL:
            resting = _resting(book, regime.owners)
            if resting and rng.random() < 0.9:
                target = resting[int(rng.integers(len(resting)))][0]
            else:  # mostly an id that does not rest: filled, cancelled or never issued
                target = int(rng.integers(0, n_events + 2))
        events["kind"].append(kind)
        events["side"].append(side)
        events["price"].append(price)
        events["size"].append(size)
        events["owner"].append(owner)
        events["target"].append(target)
        events["stp"].append(int(stp))

        found, fills, taker, prevented = None, [], None, 0
        if kind in (LIMIT, MARKET) and stp:  # sekai's rule: cancel own opposite quotes first
            for order in book.orders_of(owner):
                if int(order.side) == -side:
                    prevented += book.cancel(order.order_id)
        if kind == LIMIT:
            taker, fills = book.limit(side, price, size, owner)
        elif kind == MARKET:
            taker, fills = book.market(side, size, owner)
        else:
            found = book.cancel(target)
        resting = _resting(book, regime.owners)
        expected.append(
            {
                "resting": resting,
                "fills": _fill_rows(fills),
                "taker": taker,
                "found": found,
                "prevented": prevented,
                "depth": [d.tolist() for d in book.depth(N_LEVELS)],
                "best": (book.best_bid() or 0, book.best_ask() or 0),
                "last_price": book.last_price or 0,
                "queue": {row[0]: book.queue_ahead(row[0]) for row in resting},
            }
        )
    return {k: np.asarray(v, np.int32) for k, v in events.items()}, expected


# -- ours: one event as a pure function, a stream as a scan -------------------------------


def _apply(book: Book, event: dict[str, jax.Array]) -> tuple[Book, dict[str, Any]]:
    """Apply one event (every kind computed, the right one selected: jit/vmap-friendly)."""
    side, size, owner, stp = event["side"], event["size"], event["owner"], event["stp"] > 0
    limit_book, limit_fills = add_limit(
        book, side, event["price"], size, owner, prevent_self_trade=stp
    )
    market_book, market_fills = market_order(book, side, size, owner, prevent_self_trade=stp)
    cancel_book, found = cancel(book, event["target"])
    kind = event["kind"]

    def pick(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
        return jnp.where(kind == LIMIT, a, jnp.where(kind == MARKET, b, c))

    new_book = jax.tree.map(pick, limit_book, market_book, cancel_book)
    no_fills = jax.tree.map(jnp.zeros_like, limit_fills)
    fills = jax.tree.map(pick, limit_fills, market_fills, no_fills)
    return new_book, _observe(new_book, fills, found)


def _observe(book: Book, fills: Fills, found: jax.Array) -> dict[str, Any]:
    queue, queued = jax.vmap(jax.vmap(lambda i: queue_position(book, i)))(book.seq)
    return {
        "book": book,
        "fills": fills,
        "found": found,
        "depth": depth_levels(book, N_LEVELS),
        "best": (best_bid(book), best_ask(book)),
        "queue": queue,
        "queued": queued,
    }


def _run(book: Book, events: dict[str, jax.Array]) -> dict[str, Any]:
    return jax.lax.scan(_apply, book, events)[1]


_run_jit = jax.jit(_run)


def _at(tree: Any, t: int) -> Any:
    return jax.tree.map(lambda x: np.asarray(x[t]), tree)


def _our_resting(book: Any) -> list[tuple[int, int, int, int, int]]:
    rows = []
    for row, side in ((0, BID), (1, ASK)):
        for slot in np.flatnonzero(book.valid[row]):
            rows.append(
                (
                    int(book.seq[row, slot]),
                    side,
                    int(book.price[row, slot]),
                    int(book.size[row, slot]),
                    int(book.owner[row, slot]),
                )
            )
    return sorted(rows)


def _assert_equal_to_sekai(
    events: dict[str, np.ndarray], expected: list, ours: dict[str, Any]
) -> None:
    assert not bool(np.asarray(ours["book"].overflow).any())
    for t, want in enumerate(expected):
        got = _at(ours, t)
        book, fills = got["book"], got["fills"]
        where = f"event {t} ({events['kind'][t]})"
        assert _our_resting(book) == want["resting"], where
        assert bool(np.all(book.size[book.valid] >= 1)), where
        count = int(fills.count)
        our_fills = [
            (
                int(fills.price[i]),
                int(fills.size[i]),
                int(fills.maker_id[i]),
                int(fills.taker_id),
                int(fills.maker_owner[i]),
                int(fills.taker_owner),
            )
            for i in range(count)
        ]
        assert our_fills == want["fills"], where
        assert not np.any(fills.size[count:]), where
        if events["kind"][t] == CANCEL:
            assert bool(got["found"]) == want["found"], where
        else:
            assert bool(fills.accepted), where
            rested_id = int(fills.taker_id) if bool(fills.rested) else None
            if events["kind"][t] == LIMIT:
                assert rested_id == want["taker"], where
            else:
                assert int(fills.taker_id) == want["taker"] and rested_id is None, where
        assert [d.tolist() for d in got["depth"]] == want["depth"], where
        assert tuple(int(b) for b in got["best"]) == want["best"], where
        assert int(book.last_price) == want["last_price"], where
        queue = {
            int(book.seq[r, s]): int(got["queue"][r, s]) for r, s in zip(*np.nonzero(book.valid))
        }
        assert queue == want["queue"], where
        assert bool(np.all(got["queued"] == book.valid)), where


@pytest.mark.parametrize("name", list(REGIMES))
def test_book_equals_sekai_event_by_event(name: str) -> None:
    regime = REGIMES[name]
    events, expected = _generate(regime, seed=sorted(REGIMES).index(name), n_events=N_EVENTS)
    peak = max(
        max(sum(1 for r in e["resting"] if r[1] == side) for e in expected) for side in (BID, ASK)
    )
    assert peak <= CAPACITY  # sekai's book fits, so ours must match it exactly
    ours = _run_jit(empty_book(CAPACITY), jax.tree.map(jnp.asarray, events))
    _assert_equal_to_sekai(events, expected, ours)
    n_fills = sum(len(e["fills"]) for e in expected)
    assert n_fills > 20  # the regime really trades
    if name == "deep":
        assert peak > 30
    if regime.p_stp:  # prevention was exercised, and an order that asked for it never met its owner
        assert sum(e["prevented"] for e in expected) > 10
        for stp, e in zip(events["stp"], expected):
            assert not (stp and any(f[4] == f[5] for f in e["fills"]))
    if name == "thin":
        assert max(len(e["resting"]) for e in expected) < 40


# -- transforms, dtypes, overflow, rejection ----------------------------------------------


def _eager(book: Book, events: dict[str, np.ndarray]) -> list[tuple[Book, Any]]:
    """The same stream, one plain (un-jitted) call per event, chosen in Python."""
    out = []
    result: Any
    for t in range(len(events["kind"])):
        e = {k: int(v[t]) for k, v in events.items()}
        if e["kind"] == LIMIT:
            book, result = add_limit(
                book, e["side"], e["price"], e["size"], e["owner"], prevent_self_trade=e["stp"] > 0
            )
        elif e["kind"] == MARKET:
            book, result = market_order(
                book, e["side"], e["size"], e["owner"], prevent_self_trade=e["stp"] > 0
            )
        else:
            book, result = cancel(book, e["target"])
        out.append((book, result))
    return out


def test_jit_equals_eager(x64: bool) -> None:
    events, expected = _generate(REGIMES["self_trades"], seed=7, n_events=40)
    eager = _eager(empty_book(CAPACITY), events)
    jitted = _run_jit(empty_book(CAPACITY), jax.tree.map(jnp.asarray, events))
    for leaf in jax.tree.leaves(jitted):
        assert leaf.dtype in (jnp.int32, jnp.bool_)  # no int64 under x64
    _assert_equal_to_sekai(events, expected, jitted)
    for t, (book, result) in enumerate(eager):
        got = _at(jitted, t)
        jax.tree.map(np.testing.assert_array_equal, book, got["book"])
        if events["kind"][t] == CANCEL:
            assert bool(result) == bool(got["found"])
        else:
            jax.tree.map(np.testing.assert_array_equal, result, got["fills"])


def test_vmap_over_books_equals_each_book_alone() -> None:
    streams = [_generate(REGIMES["crossing"], seed=s, n_events=N_EVENTS)[0] for s in (11, 12, 13)]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *streams)
    books = jax.tree.map(lambda x: jnp.stack([x] * 3), empty_book(CAPACITY))
    batched = jax.jit(jax.vmap(_run))(books, batch)
    for i, events in enumerate(streams):
        alone = _run_jit(empty_book(CAPACITY), jax.tree.map(jnp.asarray, events))
        jax.tree.map(lambda a, b, i=i: np.testing.assert_array_equal(a[i], b), batched, alone)
    assert not np.array_equal(batched["book"].price[0], batched["book"].price[1])


def test_overflow_is_flagged_and_drops_only_the_remainder() -> None:
    book = empty_book(3)
    for price in (97, 98, 99):
        book, fills = add_limit(book, BID, price, 2)
        assert bool(fills.rested) and not bool(fills.overflow)
    book, _ = add_limit(book, ASK, 105, 1)
    before = book
    book, fills = add_limit(book, BID, 96, 4)  # the bid side is full
    assert bool(fills.overflow) and not bool(fills.rested) and bool(book.overflow)
    assert int(fills.taker_id) == 5  # the order was accepted (it took an id) ...
    for name in ("price", "size", "owner", "seq", "valid"):  # ... but nothing was overwritten
        np.testing.assert_array_equal(getattr(book, name), getattr(before, name))
    # A crossing order on a full side still trades; only its remainder is dropped.
    book, fills = add_limit(book, BID, 105, 3)
    assert int(fills.count) == 1 and int(fills.size[0]) == 1 and bool(fills.overflow)
    # The flag is sticky, while a side with room keeps working normally.
    book, fills = add_limit(book, ASK, 110, 1)
    assert bool(fills.rested) and not bool(fills.overflow) and bool(book.overflow)
    assert not bool(empty_book(3).overflow)


def test_invalid_orders_are_refused() -> None:
    book, _ = add_limit(empty_book(4), ASK, 101, 5)
    with pytest.raises(ValueError, match="size must be an integer >= 1, got 0"):
        add_limit(book, BID, 101, 0)
    with pytest.raises(ValueError, match="price must be an integer >= 1, got 0"):
        add_limit(book, BID, 0, 1)
    with pytest.raises(ValueError, match=r"side must be BID \(1\) or ASK \(-1\), got 2"):
        market_order(book, 2, 1)
    # the flow's loop keeps owners >= 0 and background orders' ranks in one field
    with pytest.raises(ValueError, match=r"owner must be BACKGROUND \(-1\) or an id >= 0, got -2"):
        add_limit(book, BID, 100, 1, owner=-2)
    with pytest.raises(ValueError, match=r"owner must be BACKGROUND \(-1\) or an id >= 0, got -3"):
        market_order(book, BID, 1, owner=-3)
    with pytest.raises(ValueError, match="capacity must be a positive int, got 0"):
        empty_book(0)
    with pytest.raises(ValueError, match="n_levels must be a non-negative int, got -1"):
        depth_levels(book, -1)
    # Traced values cannot raise: an invalid order is rejected and changes nothing.
    for side, price, size in ((BID, 101, 0), (BID, 0, 1), (0, 101, 1)):
        new, fills = jax.jit(add_limit)(book, jnp.int32(side), jnp.int32(price), jnp.int32(size))
        assert not bool(fills.accepted) and int(fills.count) == 0 and not bool(fills.rested)
        jax.tree.map(np.testing.assert_array_equal, new, book)


def test_submit_order_is_add_limit_or_market_order_chosen_as_data() -> None:
    """One jitted `submit_order` with a traced `is_market` does what `add_limit` (False) and
    `market_order` (True) do: the same book and fills, for both sides, a crossing limit, a
    resting limit and a market order larger than the opposite side."""
    book = empty_book(6)
    for side, price, size, owner in ((BID, 99, 2, 0), (BID, 98, 3, 1), (ASK, 101, 2, 1)):
        book, _ = add_limit(book, side, price, size, owner)
    submit = jax.jit(submit_order)
    cases = [(BID, 101, 1), (BID, 100, 4), (ASK, 99, 1), (ASK, 102, 2), (BID, 1, 5), (ASK, 1, 9)]
    for side, price, size in cases:
        want_limit = add_limit(book, side, price, size, 0)
        want_market = market_order(book, side, size, 0)
        for is_market, want in ((False, want_limit), (True, want_market)):
            got = submit(book, side, price, size, 0, is_market=jnp.asarray(is_market))
            jax.tree.map(np.testing.assert_array_equal, got, want)
    # the market order walks the whole opposite side and rests nothing
    new, fills = submit(book, ASK, 1, 9, 0, is_market=jnp.asarray(True))
    assert int(fills.count) == 2 and not bool(fills.rested) and not bool(jnp.any(new.valid[0]))


def test_cancel_slot_and_queries() -> None:
    book = empty_book(4)
    for size, owner in ((2, 0), (3, 1), (4, 0)):
        book, _ = add_limit(book, BID, 99, size, owner)
    book, _ = add_limit(book, BID, 98, 7)
    assert [int(queue_position(book, i)[0]) for i in (1, 2, 3, 4)] == [0, 2, 5, 0]
    assert not bool(queue_position(book, 9)[1])
    book, found = cancel_slot(book, BID, 1)  # order 2 (size 3) sat in slot 1
    assert bool(found) and int(queue_position(book, 3)[0]) == 2
    assert not bool(cancel_slot(book, BID, 1)[1]) and not bool(cancel_slot(book, ASK, 0)[1])
    bid_prices, bid_sizes, ask_prices, ask_sizes = depth_levels(book, 3)
    assert bid_prices.tolist() == [99, 98, 0] and bid_sizes.tolist() == [6, 7, 0]
    assert ask_prices.tolist() == [0, 0, 0] and ask_sizes.tolist() == [0, 0, 0]
    assert int(best_bid(book)) == 99 and int(best_ask(book)) == 0
    book, _ = add_limit(book, BID, 100, 1)  # reuses the freed slot, with a new, later id
    assert int(book.seq[0, 1]) == 5 and int(queue_position(book, 5)[0]) == 0


def test_docstring_examples_run() -> None:
    import doctest

    from parallax.finance._lob import _book

    result = doctest.testmod(_book, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def _random_sides(seed: int, n_books: int, capacity: int) -> tuple[np.ndarray, ...]:
    """`(key, seq, size, eligible)` of `n_books` sides: few distinct keys (many price ties),
    unique ids from the whole int32 range; book 0 has every key equal and the largest
    price, book 1 every slot eligible."""
    rng = np.random.default_rng(seed)
    key = rng.integers(-4, 4, (n_books, capacity)).astype(np.int32)
    key[0] = 2**31 - 1
    seq = np.stack([rng.choice(2**31 - 1, capacity, replace=False) for _ in range(n_books)])
    size = rng.integers(1, 10, (n_books, capacity)).astype(np.int32)
    eligible = rng.random((n_books, capacity)) < 0.7
    eligible[1] = True
    return key, seq.astype(np.int32), size, eligible


def _numpy_priority(key, seq, size, eligible) -> tuple[np.ndarray, np.ndarray]:
    """One side's eligible slots in (key, seq) order, and the size resting ahead of each."""
    slots = np.flatnonzero(eligible)
    order = slots[np.lexsort((seq[slots], key[slots]))]
    return order, np.cumsum(size[order]) - size[order]


def test_sort_free_priority_matches_numpy(x64: bool) -> None:
    from parallax.finance._lob._priority import _priority_ahead

    key, seq, size, eligible = _random_sides(19, 24, 16)
    rank, ahead = jax.jit(jax.vmap(_priority_ahead))(key, seq, size, eligible)
    assert rank.dtype == ahead.dtype == jnp.int32
    for b in range(len(key)):
        order, before = _numpy_priority(key[b], seq[b], size[b], eligible[b])
        np.testing.assert_array_equal(np.asarray(rank[b])[order], np.arange(len(order)))
        np.testing.assert_array_equal(np.asarray(ahead[b])[order], before)


def test_walking_match_matches_numpy(x64: bool) -> None:
    # the order-entry functions' matching loop: each eligible order trades what is left of
    # the quantity after the orders ahead of it in (key, seq) order, and its rank is its
    # place among the fills
    from parallax.finance._lob._priority import _walk

    n_books, capacity = 32, 16
    key, seq, size, eligible = _random_sides(23, n_books, capacity)
    eligible[2] = False  # nothing crosses
    rng = np.random.default_rng(29)
    # nothing asked, a partial first fill, sweeps of everything, and in between
    quantity = rng.integers(0, 60, n_books).astype(np.int32)
    quantity[:4] = [0, 1, 10**6, 10**6]
    traded, rank = jax.jit(jax.vmap(_walk))(key, seq, size, eligible, quantity)
    assert traded.dtype == rank.dtype == jnp.int32
    for b in range(n_books):
        order, before = _numpy_priority(key[b], seq[b], size[b], eligible[b])
        expected = np.zeros(capacity, np.int32)
        expected[order] = np.clip(quantity[b] - before, 0, size[b, order])
        np.testing.assert_array_equal(np.asarray(traded[b]), expected)
        fills = order[expected[order] > 0]
        np.testing.assert_array_equal(np.asarray(rank[b])[fills], np.arange(len(fills)))
    # one book, eager: the loop runs exactly the fills it needs, with the same result
    alone = _walk(*(jnp.asarray(x[3]) for x in (key, seq, size, eligible, quantity)))
    np.testing.assert_array_equal(np.asarray(alone[0]), np.asarray(traded[3]))
    np.testing.assert_array_equal(np.asarray(alone[1]), np.asarray(rank[3]))


def test_flow_pack_places_and_tags_match_numpy() -> None:
    # the flow's loop reads each order's place in priority (price, then id) from `_pack`,
    # and finds the cancelled background order by its arrival rank (tag = rank + 1;
    # an agent's order: -1 - owner; an empty slot: 0)
    from parallax.finance._lob._flow_state import _owner, _pack

    rng = np.random.default_rng(7)
    n_books, capacity = 12, 20
    price = rng.integers(1, 8, (n_books, 2, capacity)).astype(np.int32)  # many ties
    size = rng.integers(1, 9, (n_books, 2, capacity)).astype(np.int32)
    owner = rng.choice([BACKGROUND, BACKGROUND, BACKGROUND, 0, 3], (n_books, 2, capacity))
    seq = np.stack([rng.choice(10**6, 2 * capacity, replace=False) for _ in range(n_books)])
    seq = seq.reshape(n_books, 2, capacity).astype(np.int32)
    valid = rng.random((n_books, 2, capacity)) < 0.7
    valid[0] = False  # an empty book
    valid[1, 0] = False  # no bids
    price, size, owner, seq = (
        np.where(valid, x, 0).astype(np.int32) for x in (price, size, owner, seq)
    )
    books = jax.vmap(lambda p, z, o, q, v: dataclasses.replace(
        empty_book(capacity), price=p, size=z, owner=o, seq=q, valid=v
    ))(price, size, owner, seq, valid)  # fmt: skip
    (got_price, got_size, got_seq, tag, place), length = jax.jit(jax.vmap(_pack))(books)
    np.testing.assert_array_equal(got_price, price)
    np.testing.assert_array_equal(got_seq, seq)
    np.testing.assert_array_equal(got_size, size)
    np.testing.assert_array_equal(length, valid.sum(axis=2))
    np.testing.assert_array_equal(jax.vmap(_owner)(tag), owner)
    for b in range(n_books):
        for row, sign in ((0, -1), (1, 1)):
            slots = np.flatnonzero(valid[b, row])
            order = slots[np.lexsort((seq[b, row, slots], sign * price[b, row, slots]))]
            np.testing.assert_array_equal(np.asarray(place[b, row])[order], np.arange(len(order)))
            assert np.all(np.asarray(place[b, row])[~valid[b, row]] == capacity)
        background = valid[b] & (owner[b] == BACKGROUND)
        by_arrival = np.argsort(np.where(background, seq[b], np.iinfo(np.int32).max), axis=None)
        expected = np.zeros(2 * capacity, np.int64)
        expected[by_arrival[: background.sum()]] = np.arange(1, background.sum() + 1)
        expected = np.where(
            background.ravel(), expected, np.where(valid[b].ravel(), -1 - owner[b].ravel(), 0)
        )
        np.testing.assert_array_equal(np.asarray(tag[b]).ravel(), expected)


@pytest.mark.parametrize("n_levels", [1, 5, 17, 40])
def test_sort_free_depth_matches_numpy(n_levels: int) -> None:
    # depth_levels finds one level per step (unrolled up to 16 levels, a loop beyond): the
    # best distinct prices and the quantity at each, as aggregating the sorted slots does
    rng = np.random.default_rng(n_levels)
    n_books, capacity = 16, 24
    price = rng.integers(1, 30, (n_books, 2, capacity)).astype(np.int32)
    size = rng.integers(1, 9, (n_books, 2, capacity)).astype(np.int32)
    valid = rng.random((n_books, 2, capacity)) < 0.6
    valid[0] = False  # an empty book
    valid[1, 1] = False  # no asks
    valid[2] = True
    price[2] = 7  # one level per side
    price, size = np.where(valid, price, 0), np.where(valid, size, 0)
    zeros = np.zeros((n_books, 2, capacity), np.int32)
    book = Book(
        price=jnp.asarray(price),
        size=jnp.asarray(size),
        owner=jnp.asarray(zeros - 1),
        seq=jnp.asarray(zeros),
        valid=jnp.asarray(valid),
        next_id=jnp.ones(n_books, jnp.int32),
        last_price=jnp.zeros(n_books, jnp.int32),
        overflow=jnp.zeros(n_books, bool),
    )
    got = jax.jit(jax.vmap(lambda b: depth_levels(b, n_levels)))(book)
    for b in range(n_books):
        want = []
        for row, best_first in ((0, -1), (1, 1)):
            levels = np.unique(price[b, row][valid[b, row]])[::best_first][:n_levels]
            quantities = [
                int(size[b, row][valid[b, row] & (price[b, row] == p)].sum()) for p in levels
            ]
            pad = [0] * (n_levels - len(levels))
            want += [levels.tolist() + pad, quantities + pad]
        assert [np.asarray(g[b]).tolist() for g in got] == want, b
