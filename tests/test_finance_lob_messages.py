"""`parallax.finance.lob.process_messages`: the book driven by LOBSTER-style messages.

Random message streams (submissions, partial cancels, deletions, executions of resting
orders, market orders, hidden executions, and bad messages) drive sekai 0.2.0's
`OrderBook` and ours; after every message the resting orders (order id, side, price, size,
in time order), the trades and the best quotes must agree. Then the rule for bad messages,
the checked mode, overflow, jit against eager and vmap over books.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax.finance import lob

sekai_lob = pytest.importorskip("sekai.finance.lob")

TICK = 100
CAPACITY = 64
REFERENCE = 1000  # ticks


def _generate(seed: int, n: int, p: dict[str, float]):
    """Messages, and after each what sekai's book shows (order ids mapped to ours)."""
    rng = np.random.default_rng(seed)
    book = sekai_lob.OrderBook()
    to_sekai: dict[int, int] = {}
    messages, expected = [], []
    kinds = list(p)
    for t in range(n):
        kind = kinds[int(rng.choice(len(kinds), p=list(p.values())))]
        side = 1 if rng.random() < 0.5 else -1
        size = 1 + int(rng.poisson(3))
        resting = [(ours, book.get(s)) for ours, s in to_sekai.items() if book.get(s) is not None]
        order_id, price, trades = 10_000 + t, 0, []
        if kind == "submit":
            if rng.random() < 0.3:  # anywhere near the reference: these often cross
                ticks = REFERENCE + int(rng.integers(-4, 5))
            else:  # a passive order, below the reference for a buy, above it for a sell
                ticks = REFERENCE - side * int(rng.integers(1, 6))
            price = ticks * TICK
            taker, fills = book.limit(sekai_lob.Side(side), ticks, size)
            if taker is not None:
                to_sekai[order_id] = taker
            trades = [(f.price, f.quantity, f.maker_order_id) for f in fills]
        elif kind == "market":
            _, fills = book.market(sekai_lob.Side(side), size)
            trades = [(f.price, f.quantity, f.maker_order_id) for f in fills]
        elif kind in ("cancel", "delete", "execute") and resting:
            order_id, order = resting[int(rng.integers(len(resting)))]
            side, price = int(order.side), order.price * TICK
            size = min(size, order.quantity) if kind != "delete" else size
            left = 0 if kind == "delete" else order.quantity - size
            book.reduce(to_sekai[order_id], left)
            if kind == "execute":
                trades = [(order.price, size, to_sekai[order_id])]
        else:  # a hidden execution, or a cancel with nothing resting: the book is unchanged
            kind = "hidden"
        code = {"submit": lob.SUBMIT, "market": lob.MARKET, "cancel": lob.CANCEL}
        code |= {"delete": lob.DELETE, "execute": lob.EXECUTE, "hidden": lob.HIDDEN}
        messages.append((code[kind], order_id, size, price, side))
        back = {s: ours for ours, s in to_sekai.items()}
        rows = sorted(
            (o.order_id, int(o.side), o.price, o.quantity) for o in book.orders_of(-1)
        )  # by sekai id: time order
        expected.append(
            {
                "resting": [(back[i], side, price, q) for i, side, price, q in rows],
                "trades": [(price, q, back.get(m, m)) for price, q, m in trades],
                "best": (book.best_bid() or 0, book.best_ask() or 0),
            }
        )
    return np.asarray(messages, np.int32), expected


def _resting(book) -> list[tuple[int, int, int, int]]:
    rows = []
    for row, side in ((0, 1), (1, -1)):
        for slot in np.flatnonzero(book.valid[row]):
            seq = int(book.seq[row, slot])
            rows.append(
                (
                    seq,
                    int(book.owner[row, slot]),
                    side,
                    int(book.price[row, slot]),
                    int(book.size[row, slot]),
                )
            )
    return [r[1:] for r in sorted(rows)]


REGIMES = {
    "balanced": {"submit": 0.45, "market": 0.1, "cancel": 0.15, "delete": 0.15, "execute": 0.15},
    "cancel_heavy": {"submit": 0.4, "cancel": 0.3, "delete": 0.25, "execute": 0.05},
    "market_heavy": {"submit": 0.5, "market": 0.35, "execute": 0.1, "hidden": 0.05},
}


@pytest.fixture(scope="module")
def run():
    def stream(book, messages):
        book, results = lob.process_messages(book, messages, tick=TICK)
        return results

    def steps(book, messages):
        def body(book, message):
            book, result = lob.process_message(book, message, tick=TICK)
            return book, (book, result)

        return jax.lax.scan(body, book, messages)[1]

    return jax.jit(stream), jax.jit(steps)


@pytest.mark.parametrize("name", list(REGIMES))
def test_messages_equal_sekai_message_by_message(run, name):
    messages, expected = _generate(sorted(REGIMES).index(name), 300, REGIMES[name])
    stream, steps = run
    books, results = steps(lob.empty_book(CAPACITY), jnp.asarray(messages))
    assert np.all(np.asarray(results.status) == lob.OK)
    np.testing.assert_array_equal(
        np.asarray(stream(lob.empty_book(CAPACITY), jnp.asarray(messages)).status),
        np.asarray(results.status),
    )
    traded = 0
    for t, want in enumerate(expected):
        book = jax.tree.map(lambda x, t=t: np.asarray(x[t]), books)
        fills = jax.tree.map(lambda x, t=t: np.asarray(x[t]), results.fills)
        where = f"message {t}: {messages[t].tolist()}"
        assert _resting(book) == [(i, s, p, q) for i, s, p, q in want["resting"]], where
        count = int(fills.count)
        got = [
            (int(fills.price[i]), int(fills.size[i]), int(fills.maker_owner[i]))
            for i in range(count)
        ]
        assert got == want["trades"], where
        best = (int(lob.best_bid(book)), int(lob.best_ask(book)))
        assert best == want["best"], where
        traded += count
    assert traded > 15  # the stream really trades


def _one(kind, order_id, size, price, side):
    return jnp.array([kind, order_id, size, price, side], jnp.int32)


@pytest.fixture(scope="module")
def seeded():
    """A book holding order 1 (buy 5 at 99 ticks) and order 2 (sell 5 at 101 ticks)."""
    stream = jnp.array([[lob.SUBMIT, 1, 5, 9900, 1], [lob.SUBMIT, 2, 5, 10100, -1]])
    return lob.process_messages(lob.empty_book(4), stream, tick=TICK)[0]


@pytest.mark.parametrize(
    ("message", "status"),
    [
        ((9, 3, 1, 10000, 1), lob.UNKNOWN_TYPE),
        ((lob.SUBMIT, 3, 1, 10000, 0), lob.BAD_SIDE),
        ((lob.SUBMIT, 3, 0, 10000, 1), lob.BAD_SIZE),
        ((lob.MARKET, 3, -2, 0, 1), lob.BAD_SIZE),
        ((lob.SUBMIT, 3, 1, 10050, 1), lob.OFF_GRID),
        ((lob.SUBMIT, 3, 1, 0, 1), lob.OFF_GRID),
        ((lob.SUBMIT, 1, 1, 9800, 1), lob.DUPLICATE_ID),
        ((lob.CANCEL, 7, 1, 0, 1), lob.UNKNOWN_ID),
        ((lob.DELETE, 2, 1, 0, 1), lob.UNKNOWN_ID),  # order 2 rests on the other side
        ((lob.EXECUTE, 7, 1, 0, -1), lob.UNKNOWN_ID),
    ],
)
def test_a_bad_message_changes_nothing_and_says_why(seeded, message, status):
    book, result = lob.process_message(seeded, _one(*message), tick=TICK)
    assert int(result.status) == status, lob.STATUS_NAMES[int(result.status)]
    jax.tree.map(np.testing.assert_array_equal, book, seeded)
    assert int(result.fills.count) == 0
    with pytest.raises(Exception, match=re.escape(lob.STATUS_NAMES[status])):
        jax.jit(lambda b: lob.process_messages(b, _one(*message)[None], tick=TICK, checked=True))(
            seeded
        )[0].size.block_until_ready()


def test_types_that_leave_the_visible_book_alone(seeded):
    for kind in (lob.HIDDEN, lob.CROSS, lob.HALT):
        book, result = lob.process_message(seeded, _one(kind, 5, 3, 10000, 1), tick=TICK)
        assert int(result.status) == lob.OK
        jax.tree.map(np.testing.assert_array_equal, book, seeded)


def test_an_oversized_cancel_or_execution_takes_the_order_and_is_clipped(seeded):
    book, result = lob.process_message(seeded, _one(lob.EXECUTE, 2, 9, 10100, -1), tick=TICK)
    assert int(result.status) == lob.CLIPPED
    assert int(result.fills.size[0]) == 5 and int(result.fills.price[0]) == 101
    assert int(lob.best_ask(book)) == 0 and int(book.last_price) == 101
    book, result = lob.process_message(seeded, _one(lob.CANCEL, 1, 6, 9900, 1), tick=TICK)
    assert int(result.status) == lob.CLIPPED and int(lob.best_bid(book)) == 0


def test_overflow_is_flagged():
    stream = jnp.array([[lob.SUBMIT, i, 1, 9900 - 100 * i, 1] for i in range(1, 4)])
    book, results = lob.process_messages(lob.empty_book(2), stream, tick=TICK)
    assert results.status.tolist() == [lob.OK, lob.OK, lob.OVERFLOW]
    assert bool(book.overflow) and int(book.valid[0].sum()) == 2


def test_checked_mode_passes_a_clean_stream_through(seeded):
    stream = jnp.array([[lob.MARKET, 8, 2, 0, 1], [lob.DELETE, 1, 0, 0, 1]])
    book, results = jax.jit(lambda b: lob.process_messages(b, stream, tick=TICK, checked=True))(
        seeded
    )
    assert results.status.tolist() == [lob.OK, lob.OK]
    assert int(book.size.sum()) == 3


def test_jit_equals_eager_and_vmap_equals_each_book():
    messages, _ = _generate(5, 60, REGIMES["balanced"])
    eager_book = lob.empty_book(CAPACITY)
    statuses = []
    for m in messages:
        eager_book, r = lob.process_message(eager_book, jnp.asarray(m), tick=TICK)
        statuses.append(int(r.status))
    book, results = jax.jit(lambda b, m: lob.process_messages(b, m, tick=TICK))(
        lob.empty_book(CAPACITY), jnp.asarray(messages)
    )
    jax.tree.map(np.testing.assert_array_equal, book, eager_book)
    assert results.status.tolist() == statuses
    streams = jnp.stack([jnp.asarray(_generate(s, 60, REGIMES["balanced"])[0]) for s in range(3)])

    def one(m: Any) -> Any:
        return lob.process_messages(lob.empty_book(CAPACITY), m, tick=TICK)

    batched, _ = jax.jit(jax.vmap(one))(streams)
    one_alone = jax.jit(one)  # one program for the three books alone
    for i in range(3):
        alone, _ = one_alone(streams[i])
        jax.tree.map(lambda a, b, i=i: np.testing.assert_array_equal(a[i], b), batched, alone)


def test_x64_gives_the_same_int32_book():
    """Under x64 (strict promotion, as every test here) the book and results stay int32
    and equal float32's: a sum of an int32 column once widened to int64 and broke it."""
    messages, _ = _generate(6, 40, REGIMES["balanced"])
    run = jax.jit(lambda m: lob.process_messages(lob.empty_book(CAPACITY), m, tick=TICK))
    book, results = run(jnp.asarray(messages))
    with jax.enable_x64(True):
        book64, results64 = run(jnp.asarray(messages, jnp.int32))
    for leaf, leaf64 in zip(jax.tree.leaves((book, results)), jax.tree.leaves((book64, results64))):
        assert leaf64.dtype == leaf.dtype
        np.testing.assert_array_equal(leaf64, leaf)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match=r"\(M, 5\)"):
        lob.process_messages(lob.empty_book(4), jnp.zeros((3, 4), jnp.int32))
    with pytest.raises(ValueError, match="tick must be a positive int, got 0"):
        lob.process_messages(lob.empty_book(4), jnp.zeros((3, 5), jnp.int32), tick=0)
    with pytest.raises(TypeError, match="checked must be True or False"):
        lob.process_messages(lob.empty_book(4), jnp.zeros((3, 5), jnp.int32), checked=1)


def test_docstring_examples_run():
    import doctest

    from parallax.finance import lob as public
    from parallax.finance._lob import _messages

    for module in (public, _messages):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__
