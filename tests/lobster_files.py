"""Write small LOBSTER-format message and orderbook files for tests.

A random stream of the message types our book and sekai 0.2.0's `OrderBook` agree on, from
an empty book: passive submissions (type 1, never crossing, as LOBSTER writes a marketable
order as executions followed by the submission of its remainder), partial cancels (2, via
`reduce`), deletions (3), visible executions of the front order of a best level (4, via
`reduce`) and hidden executions (5, no change). sekai's book is the reference for the
orderbook file: after each message its `depth(levels)`, in LOBSTER's units (dollars x
10,000, a $0.01 grid: tick 100) and with LOBSTER's dummy values for empty levels.
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

TICK = 100  # LOBSTER price units per cent
MID = 10_000  # ticks: $100.00
ASK_DUMMY, BID_DUMMY = 9_999_999_999, -9_999_999_999
START_NS = 34_200 * 10**9  # 9:30


@dataclasses.dataclass(frozen=True)
class Written:
    """The files written and what they hold."""

    message_file: pathlib.Path
    orderbook_file: pathlib.Path
    times_ns: np.ndarray  # int64 (M,), nanoseconds after midnight
    messages: np.ndarray  # int64 (M, 5), (type, order_id, size, price, direction)
    book: np.ndarray  # int64 (M, 4 * levels), the orderbook file's rows
    levels: int


def _time(ns: int) -> str:
    return f"{ns // 10**9}.{ns % 10**9:09d}"


def write_lobster_files(
    folder: pathlib.Path, *, seed: int = 0, n: int = 150, levels: int = 4, max_resting: int = 40
) -> Written:
    """Draw a stream against sekai's book and write `messages.csv` and `orderbook.csv`."""
    from sekai.finance.lob import OrderBook, Side

    rng = np.random.default_rng(seed)
    book = OrderBook()
    to_sekai: dict[int, int] = {}  # LOBSTER order id -> sekai's
    ns = START_NS
    times, messages, rows = [], [], []
    next_id = 1_000
    for _ in range(n):
        resting = [(o, book.get(s)) for o, s in to_sekai.items() if book.get(s) is not None]
        u = rng.random()
        if not resting or (u < 0.5 and len(resting) < max_resting):
            kind = 1
        elif u < 0.62:
            kind = 2
        elif u < 0.8:
            kind = 3
        elif u < 0.93:
            kind = 4
        else:
            kind = 5
        side = 1 if rng.random() < 0.5 else -1
        size = 1 + int(rng.poisson(60))
        if kind == 1:
            best_bid, best_ask = book.best_bid(), book.best_ask()
            if side == 1:
                top = (best_ask - 1) if best_ask is not None else MID + 2
                ticks = min(top, MID + 2) - int(rng.integers(0, 6))
            else:
                bottom = (best_bid + 1) if best_bid is not None else MID - 2
                ticks = max(bottom, MID - 2) + int(rng.integers(0, 6))
            next_id += int(rng.integers(1, 50))
            order_id = next_id
            taker, fills = book.limit(Side(side), ticks, size)
            assert not fills and taker is not None, "a submission crossed"
            to_sekai[order_id] = taker
            price = ticks * TICK
        elif kind == 5:  # a hidden execution: LOBSTER writes order id 0
            order_id, price = 0, (MID + int(rng.integers(-3, 4))) * TICK
        else:
            if kind == 4:  # the front order of the best level of one side
                sides = [s for s in (1, -1) if any(int(o.side) == s for _, o in resting)]
                side = sides[int(rng.integers(len(sides)))]
                mine = [(o, r) for o, r in resting if int(r.side) == side]
                order_id, order = min(mine, key=lambda x: (-side * x[1].price, to_sekai[x[0]]))
            else:
                order_id, order = resting[int(rng.integers(len(resting)))]
            side, price = int(order.side), order.price * TICK
            if kind == 2:
                if order.quantity < 2:
                    kind = 3
                else:
                    size = int(rng.integers(1, order.quantity))
            if kind == 3:
                size = order.quantity
            if kind == 4:
                size = int(rng.integers(1, order.quantity + 1))
            book.reduce(to_sekai[order_id], order.quantity - size)
        if rng.random() > 0.15:  # else the same time as the previous message
            ns += 1 + int(rng.exponential(2e8))
        times.append(ns)
        messages.append((kind, order_id, size, price, side))
        bid_p, bid_s, ask_p, ask_s = book.depth(levels)
        row = []
        for level in range(levels):
            row += [ask_p[level] * TICK if ask_s[level] else ASK_DUMMY, ask_s[level]]
            row += [bid_p[level] * TICK if bid_s[level] else BID_DUMMY, bid_s[level]]
        rows.append(row)
    folder.mkdir(parents=True, exist_ok=True)
    message_file, orderbook_file = folder / "messages.csv", folder / "orderbook.csv"
    message_file.write_text(
        "".join(f"{_time(t)},{k},{i},{s},{p},{d}\n" for t, (k, i, s, p, d) in zip(times, messages))
    )
    orderbook_file.write_text("".join(",".join(str(int(v)) for v in row) + "\n" for row in rows))
    return Written(
        message_file,
        orderbook_file,
        np.asarray(times, np.int64),
        np.asarray(messages, np.int64),
        np.asarray(rows, np.int64),
        levels,
    )
