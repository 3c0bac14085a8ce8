"""`parallax.finance.lob.process_messages` against JAX-LOB's book (Frey et al., ICAIF 2023).

JAX-LOB 0.19's `JaxOrderBookArrays` is loaded by `benchmarks/_jaxlob.py` (with the fix for
`jnp.where`'s removed keywords), which also converts our message rows into JAX-LOB's.
Random streams in five regimes (thin, deep, cancel-heavy, market-heavy, crossing; 256
messages, capacity 100 = JAX-LOB's rows per side, never exceeded) drive both books; after
every message the resting orders (price, size, order id, in priority order per side) and
the message's trades must agree. The streams use only the mappings that hold (see
`_jaxlob`'s table): a market order never larger than the opposite side's depth, an
execution always of the side's best order and never larger than it, and no order that
would trade with more than one resting order (JAX-LOB stops after the first).

Then each case where JAX-LOB does something else, pinned: what JAX-LOB does, what we do,
and our behaviour checked against sekai 0.2.0's `OrderBook`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax.finance import lob

pytest.importorskip("jaxlob.gymnax_exchange.jaxob.JaxOrderBookArrays")
sekai_lob = pytest.importorskip("sekai.finance.lob")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _jaxlob as jl  # noqa: E402

pytestmark = pytest.mark.xdist_group("lob_jaxlob")

TICK = 100
CAPACITY = jl.ROWS  # 100 orders per side, as JAX-LOB
M = 256  # every stream is padded to this length: one compiled program per book
REFERENCE = 1000  # ticks
Side = sekai_lob.Side


# -- running both books -------------------------------------------------------------------
@jax.jit
def _ours(messages):
    def body(book, message):
        book, result = lob.process_message(book, message, tick=TICK)
        return book, (book, result)

    return jax.lax.scan(body, lob.empty_book(CAPACITY), messages)[1]


def _pad(messages, rows=None):
    """Pad to `M`: ours with HIDDEN rows, JAX-LOB's with zero-size cancels (no-ops)."""
    messages = np.asarray(messages, np.int32).reshape(-1, 5)
    n = len(messages)
    assert n <= M
    padded = np.concatenate([messages, np.tile([[lob.HIDDEN, 0, 0, 0, 1]], (M - n, 1))])
    padded = padded.astype(np.int32)
    theirs = jl.to_jaxlob(padded, TICK)
    if rows is not None:  # JAX-LOB rows given as they are (for the cases of no mapping)
        theirs[:n] = np.asarray(rows, np.int32)
    return padded, theirs


class Both:
    """Both books run on one stream; `.ours(t)`, `.theirs(t)` after message `t`."""

    def __init__(self, messages, rows=None):
        padded, self.rows = _pad(messages, rows)
        books, results = _ours(jnp.asarray(padded))
        self.books = jax.tree.map(np.asarray, books)
        self.fills = jax.tree.map(np.asarray, results.fills)
        self.status = np.asarray(results.status)
        asks, bids = jl.empty_sides()
        self.asks, self.bids, self.trade_rows = map(np.asarray, jl.steps(asks, bids, self.rows))

    def ours(self, t):
        book = jax.tree.map(lambda x: x[t], self.books)
        out = {}
        for row, side, sign in ((0, 1, -1), (1, -1, 1)):
            slots = np.flatnonzero(book.valid[row])
            slots = sorted(slots, key=lambda s: (sign * book.price[row, s], book.seq[row, s]))
            out[side] = [
                (int(book.price[row, s]) * TICK, int(book.size[row, s]), int(book.owner[row, s]))
                for s in slots
            ]
        f = jax.tree.map(lambda x: x[t], self.fills)
        trades = [
            (int(f.price[i]) * TICK, int(f.size[i]), int(f.maker_owner[i]))
            for i in range(int(f.count))
        ]
        return out, trades

    def theirs(self, t):
        trades = [(p, q, maker) for p, q, maker, _ in jl.trades(self.trade_rows[t])]
        return jl.resting(self.asks[t], self.bids[t]), trades


def _sekai_resting(book, back):
    """sekai's resting orders in the same form, its ids mapped back to ours by `back`."""
    out = {1: [], -1: []}
    rows = sorted(book.orders_of(-1), key=lambda o: (-int(o.side) * o.price, o.order_id))
    for o in rows:
        out[int(o.side)].append((o.price * TICK, o.quantity, back[o.order_id]))
    return out


REGIMES = jl.REGIMES


def _generate(seed, n, regime):
    return jl.generate(seed, n, regime, tick=TICK, capacity=CAPACITY)


@pytest.mark.parametrize("name", list(REGIMES))
def test_jaxlob_equals_ours_message_by_message(name):
    messages = _generate(list(REGIMES).index(name), M, REGIMES[name])
    both = Both(messages)
    assert np.all(both.status == lob.OK)
    traded, deepest = 0, 0
    for t in range(M):
        (ours, our_trades), (theirs, their_trades) = both.ours(t), both.theirs(t)
        where = f"{name}, message {t}: {messages[t].tolist()}"
        assert ours == theirs, where
        assert our_trades == their_trades, where
        # JAX-LOB names the aggressor by the message's order id (an execution: the maker's)
        assert {a for *_, a in jl.trades(both.trade_rows[t])} <= {int(messages[t, 1])}, where
        traded += len(our_trades)
        deepest = max(deepest, len(ours[1]), len(ours[-1]))
    codes = dict(zip(jl.KINDS, (lob.SUBMIT, lob.MARKET, lob.EXECUTE, lob.DELETE, lob.CANCEL)))
    assert {codes[k] for k in jl.KINDS if k in REGIMES[name]} <= set(messages[:, 0].tolist())
    assert traded > 20, traded
    if name == "deep":
        assert deepest >= 60, deepest  # the deep regime really fills most of the 100 rows


# -- where JAX-LOB differs ---------------------------------------------------------------
def _submit(order_id, ticks, size, side):
    return (lob.SUBMIT, order_id, size, ticks * TICK, side)


def _row(kind, side, size, price, order_id, time, trader=jl.TRADER):
    return (kind, side, size, price, trader, order_id, time, 0)


SEED = [_submit(1, 99, 5, 1), _submit(2, 99, 4, 1), _submit(3, 101, 5, -1), _submit(4, 102, 3, -1)]


def _seeded():
    """sekai's book holding SEED (buys 1: 5 @ 99, 2: 4 @ 99; sells 3: 5 @ 101, 4: 3 @ 102)."""
    book = sekai_lob.OrderBook()
    back = {}
    for _, order_id, size, price, side in SEED:
        back[book.limit(Side(side), price // TICK, size)[0]] = order_id
    return book, back


def test_an_aggressive_order_trades_with_one_resting_order_only_in_jaxlob():
    # JAX-LOB's matching loop computes the next maker's row from the side as it was before
    # the trade, finds the maker it just used up, and stops: an order that should walk the
    # book takes one maker, and a limit order's remainder rests, crossing the book
    messages = [_submit(1, 101, 1, -1), _submit(2, 102, 1, -1), _submit(3, 102, 2, 1)]
    messages += [_submit(4, 98, 1, 1), _submit(5, 97, 1, 1), (lob.MARKET, 6, 2, 0, -1)]
    both = Both(messages)
    (theirs, their_trades), (ours, our_trades) = both.theirs(2), both.ours(2)
    assert their_trades == [(10100, 1, 1)] and our_trades == [(10100, 1, 1), (10200, 1, 2)]
    assert theirs == {1: [(10200, 1, 3)], -1: [(10200, 1, 2)]}  # bid 102 = ask 102: crossed
    assert ours == {1: [], -1: []}
    (theirs, their_trades), (ours, our_trades) = both.theirs(5), both.ours(5)
    assert their_trades == [(10200, 1, 3)] and our_trades == [(9800, 1, 4), (9700, 1, 5)]
    book = sekai_lob.OrderBook()
    back = {book.limit(Side(s), p // TICK, q)[0]: i for _, i, q, p, s in messages[:5]}
    assert [back[f.maker_order_id] for f in book.market(Side(-1), 2)[1]] == [4, 5]
    assert _sekai_resting(book, back) == ours == {1: [], -1: []}


def test_a_market_order_larger_than_its_maker_rests_its_remainder_in_jaxlob():
    # our MARKET maps to JAX-LOB's type 4 at a price beyond the book only while it fits
    seed = [_submit(3, 101, 5, -1), _submit(1, 99, 5, 1)]
    for side, beyond in ((1, jl.BUY_BEYOND), (-1, jl.SELL_BEYOND)):
        both = Both([*seed, (lob.MARKET, 9, 7, 0, side)])
        (theirs, their_trades), (ours, our_trades) = both.theirs(2), both.ours(2)
        assert their_trades == our_trades == [(10100, 5, 3) if side == 1 else (9900, 5, 1)]
        assert theirs[side][0] == (beyond, 2, 9)  # the rest waits at that price
        assert theirs[-side] == [] == ours[-side]
        assert ours[side] == both.ours(1)[0][side]  # ours drops it: a market order never rests
        book = sekai_lob.OrderBook()
        back = {book.limit(Side(s), p // TICK, q)[0]: i for _, i, q, p, s in seed}
        book.market(Side(side), 7)
        assert _sekai_resting(book, back) == ours


def test_an_execution_larger_than_its_order_rests_a_sell_in_jaxlob():
    both = Both([*SEED, (lob.EXECUTE, 1, 7, 9900, 1)])
    (ours, our_trades), (theirs, their_trades) = both.ours(4), both.theirs(4)
    assert int(both.status[4]) == lob.CLIPPED
    assert our_trades == their_trades == [(9900, 5, 1)]  # order 1, all of it
    assert theirs[1] == ours[1] == [(9900, 4, 2)]
    # JAX-LOB's type 4 is a sell limit of 7 at 99: its remainder of 2 rests as an ask
    assert theirs[-1] == [(9900, 2, 1), *ours[-1]]
    book, back = _seeded()
    book.reduce(next(s for s, o in back.items() if o == 1), 0)
    assert _sekai_resting(book, back) == ours


def test_an_execution_of_an_order_behind_the_best_hits_the_best_in_jaxlob():
    both = Both([*SEED, (lob.EXECUTE, 2, 3, 9900, 1), (lob.EXECUTE, 4, 2, 10200, -1)])
    assert both.theirs(4)[1] == [(9900, 3, 1)]  # order 1 is first in time at 99
    assert both.ours(4)[1] == [(9900, 3, 2)]  # ours: the order named
    assert both.theirs(5)[1] == [(10100, 2, 3)]  # a buy at 102 takes the best ask, 101
    assert both.ours(5)[1] == [(10200, 2, 4)]
    book, back = _seeded()
    ids = {o: s for s, o in back.items()}
    book.reduce(ids[2], 1)
    book.reduce(ids[4], 1)
    assert _sekai_resting(book, back) == both.ours(5)[0]


def _full_bids(extra):
    """100 buys (ids 1..100, prices 901..1000 ticks spread over levels) and `extra`."""
    return [_submit(i, 900 + (i % 50), 1 + i % 3, 1) for i in range(1, CAPACITY + 1)] + extra


def test_a_cancel_of_an_unknown_id_cuts_the_last_row_in_jaxlob():
    messages = _full_bids([(lob.CANCEL, 777, 1, 95000, 1), (lob.CANCEL, 3, 1, 90300, -1)])
    both = Both(messages)
    before = both.theirs(CAPACITY - 1)[0][1]
    last = np.asarray(both.bids[CAPACITY - 1])[-1]  # JAX-LOB's row 99: order 100
    assert last[2] == CAPACITY
    after = both.theirs(CAPACITY)[0][1]
    changed = [(b, a) for b, a in zip(before, after, strict=False) if b != a]
    assert changed == [((last[0], last[1], CAPACITY), (last[0], last[1] - 1, CAPACITY))]
    # an id resting only on the other side: also unknown on this one (the asks are empty)
    assert both.theirs(CAPACITY + 1)[0] == both.theirs(CAPACITY)[0]
    assert both.status[CAPACITY : CAPACITY + 2].tolist() == [lob.UNKNOWN_ID] * 2
    assert both.ours(CAPACITY + 1)[0] == both.ours(CAPACITY - 1)[0]  # ours: nothing changes
    book = sekai_lob.OrderBook()
    back = {book.limit(Side(s), p // TICK, q)[0]: i for _, i, q, p, s in messages[:CAPACITY]}
    assert not book.cancel(777) and not book.reduce(777, 0)
    assert _sekai_resting(book, back) == both.ours(CAPACITY + 1)[0]


def test_an_order_beyond_the_100_rows_overwrites_the_last_in_jaxlob():
    both = Both(_full_bids([_submit(101, 899, 2, 1)]))
    theirs, ours = both.theirs(CAPACITY)[0][1], both.ours(CAPACITY)[0][1]
    ids = sorted(i for *_, i in theirs)
    assert ids == [*range(1, CAPACITY), 101]  # order 100 (row 99) is gone, 101 took its row
    assert int(both.status[CAPACITY]) == lob.OVERFLOW
    assert sorted(i for *_, i in ours) == list(range(1, CAPACITY + 1))  # ours keeps 1..100
    book = sekai_lob.OrderBook()  # sekai has no capacity: it rests all 101
    back = {}
    for _, i, q, p, s in _full_bids([_submit(101, 899, 2, 1)]):
        back[book.limit(Side(s), p // TICK, q)[0]] = i
    sekai = _sekai_resting(book, back)
    assert [r for r in sekai[1] if r[2] != 101] == ours  # ours: sekai's book less the drop


def test_a_filled_order_on_a_full_side_deletes_the_last_row_in_jaxlob():
    # a buy that fills completely against an ask never rests, yet JAX-LOB's add_order still
    # writes its zero remainder into the "empty" row it finds: none, so row 99, then clears it
    messages = [_submit(500, 1001, 2, -1), *_full_bids([_submit(501, 1001, 2, 1)])]
    both = Both(messages)
    t = CAPACITY + 1
    (ours, our_trades), (theirs, their_trades) = both.ours(t), both.theirs(t)
    assert our_trades == their_trades == [(100100, 2, 500)]
    assert len(ours[1]) == CAPACITY and sorted(i for *_, i in ours[1]) == list(range(1, 101))
    assert len(theirs[1]) == CAPACITY - 1 and CAPACITY not in {i for *_, i in theirs[1]}
    book = sekai_lob.OrderBook()
    back = {book.limit(Side(s), p // TICK, q)[0]: i for _, i, q, p, s in messages[:-1]}
    book.limit(Side(1), 1001, 2)
    assert _sekai_resting(book, back) == ours


def test_types_without_a_jaxlob_meaning_are_sell_limit_orders_there():
    # JAX-LOB's switch sends every (type, side) other than types 1-4 with side +-1 to its
    # sell-limit branch: a hidden execution (5), a cross (6), a halt (7), a bad side
    rows = [jl.to_jaxlob(np.asarray(SEED))[i] for i in range(4)]
    extra = [(5, 1, 2, 9900, 77, 5), (6, -1, 1, 12000, 78, 6), (7, 1, 1, 13000, 79, 7)]
    extra += [(1, 0, 1, 14000, 80, 8)]  # a limit order with side 0
    rows += [_row(k, s, q, p, i, t) for k, s, q, p, i, t in extra]
    ours_messages = [*SEED, (lob.HIDDEN, 77, 2, 9900, 1), (lob.CROSS, 78, 1, 12000, -1)]
    ours_messages += [(lob.HALT, 79, 1, 13000, 1), (lob.SUBMIT, 80, 1, 14000, 0)]
    both = Both(ours_messages, rows)
    assert both.theirs(4)[1] == [(9900, 2, 1)]  # the "hidden execution" sold 2 to order 1
    asks = both.theirs(7)[0][-1]
    assert [i for *_, i in asks] == [3, 4, 78, 79, 80]  # and the rest rest as asks
    assert both.status[4:8].tolist() == [lob.OK] * 3 + [lob.BAD_SIDE]
    assert both.ours(7) == (both.ours(3)[0], [])  # ours: the visible book is unchanged
    book, back = _seeded()
    assert _sekai_resting(book, back) == both.ours(7)[0]


def test_duplicate_ids_rest_twice_and_a_cancel_takes_the_lower_row_in_jaxlob():
    messages = [_submit(1, 99, 5, 1), _submit(2, 98, 3, 1), (lob.DELETE, 1, 5, 9900, 1)]
    messages += [_submit(2, 97, 4, 1), (lob.CANCEL, 2, 1, 9800, 1)]
    both = Both(messages)
    # JAX-LOB: the second order 2 (at 97) took the first free row, 0 (order 1's); the cancel
    # finds the first row holding id 2, so it cuts the later order, whatever its price
    assert both.theirs(3)[0][1] == [(9800, 3, 2), (9700, 4, 2)]
    assert both.theirs(4)[0][1] == [(9800, 3, 2), (9700, 3, 2)]
    assert both.status[3:5].tolist() == [lob.DUPLICATE_ID, lob.OK]
    assert both.ours(4)[0][1] == [(9800, 2, 2)]  # ours: the duplicate refused; order 2 cut
    book = sekai_lob.OrderBook()
    book.cancel(book.limit(Side(1), 99, 5)[0])
    two = book.limit(Side(1), 98, 3)[0]
    book.reduce(two, 2)
    assert _sekai_resting(book, {two: 2}) == both.ours(4)[0]


def test_a_negative_cancel_grows_the_order_in_jaxlob():
    both = Both([*SEED, (lob.CANCEL, 3, -4, 10100, -1)])
    assert both.theirs(4)[0][-1][0] == (10100, 9, 3)  # 5 - (-4)
    assert int(both.status[4]) == lob.BAD_SIZE and both.ours(4)[0] == both.ours(3)[0]
    book, back = _seeded()
    with pytest.raises(ValueError):
        book.reduce(next(s for s, o in back.items() if o == 3), 9)  # sekai: no growing
    assert _sekai_resting(book, back) == both.ours(4)[0]


def test_an_oversized_cancel_removes_the_order_in_both():
    both = Both([*SEED, (lob.CANCEL, 3, 9, 10100, -1)])
    assert both.theirs(4)[0] == both.ours(4)[0] and int(both.status[4]) == lob.CLIPPED
    book, back = _seeded()
    book.reduce(next(s for s, o in back.items() if o == 3), 0)
    assert _sekai_resting(book, back) == both.ours(4)[0]


def test_equal_timestamps_break_ties_by_row_in_jaxlob_by_arrival_in_ours():
    # JAX-LOB's priority is (time, time_ns); equal times fall back to the lowest row, and a
    # later order lands in a lower row once an earlier one left
    seed = [_submit(1, 99, 1, 1), _submit(2, 99, 1, 1), (lob.DELETE, 1, 1, 9900, 1)]
    seed += [_submit(3, 99, 1, 1), (lob.MARKET, 9, 1, 0, -1)]
    rows = jl.to_jaxlob(np.asarray(seed))
    rows[:, 6] = 1  # one timestamp for the whole stream
    both = Both(seed, rows)
    assert both.theirs(4)[1] == [(9900, 1, 3)]  # JAX-LOB: order 3 (row 0) before order 2
    assert both.ours(4)[1] == [(9900, 1, 2)]  # ours: order 2, which came first
    book = sekai_lob.OrderBook()
    back = {book.limit(Side(1), 99, 1)[0]: i for i in (1, 2)}
    book.cancel(min(back))
    back[book.limit(Side(1), 99, 1)[0]] = 3
    assert [back[f.maker_order_id] for f in book.market(Side(-1), 1)[1]] == [2]
    assert _sekai_resting(book, back) == both.ours(4)[0]


def test_a_minus_one_in_any_field_makes_a_row_look_empty_in_jaxlob():
    # add_order takes the first row holding a -1 anywhere: a trader id of -1 (or an order id
    # of -1) marks a resting order's row as free, and the next order overwrites it
    rows = [_row(1, 1, 5, 9900, 1, 1, trader=-1), _row(1, 1, 3, 9800, 2, 2, trader=-1)]
    both = Both([_submit(1, 99, 5, 1), _submit(2, 98, 3, 1)], rows)
    assert both.theirs(1)[0][1] == [(9800, 3, 2)]  # order 1 was overwritten
    assert both.ours(1)[0][1] == [(9900, 5, 1), (9800, 3, 2)]


def test_trades_beyond_jaxlob_trade_rows_overwrite_its_last_row():
    # JAX-LOB records trades in a fixed array (its env's: 100 rows, filled across messages);
    # when it is full each further trade overwrites the last row. Ours: each message's
    # fills in its own `Fills` (up to the book's capacity; the book holds no more makers)
    sells = [_submit(i, 100 + i, 1, -1) for i in range(1, 7)]
    messages = [*sells, *[(lob.MARKET, 20 + i, 1, 0, 1) for i in range(1, 7)]]
    rows = jl.to_jaxlob(np.asarray(messages, np.int32))
    asks, bids = jl.empty_sides()
    *_, trades = jl.scan(asks, bids, -jnp.ones((4, 6), jnp.int32), jnp.asarray(rows))
    assert [t[:3] for t in jl.trades(trades)] == [(10000 + 100 * i, 1, i) for i in (1, 2, 3, 6)]
    both = Both(messages)
    assert [both.ours(5 + i)[1] for i in range(1, 7)] == [
        [(10000 + 100 * i, 1, i)] for i in range(1, 7)
    ]
