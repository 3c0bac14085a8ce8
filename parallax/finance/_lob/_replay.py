"""Replaying a LOBSTER day in the array book, with an agent's orders in it (issue 39).

- `ReplayDay`, `prepare_day`: a loaded day (`LobsterData`) checked and laid out for replay:
  the messages, the index of the submission each message refers to, and the book after every
  message as a snapshot in ticks.
- `snapshot_book`: the book of one orderbook row (one order per level, placed before the
  window).
- `ReplayResult`, `replay_message`: one historical message applied to a book that also holds
  the agent's orders; `agent_trades`: what the agent bought and sold in it.

The rules, chosen so that a replay with no agent orders reproduces the orderbook file:

1. A window starting at message `s` opens on the book of orderbook row `s - 1`: each level
   becomes one order (owner `SNAPSHOT_OWNER - level`), ahead in time of every later order.
2. A cancel, deletion or execution of an order submitted before the window (the submission is
   not in the file, or is before `s`) applies to the snapshot order at its price on its side
   (a deletion becomes a cancel of its size there); with no snapshot order at that price it
   changes nothing (status `UNKNOWN_ID`). Orders submitted in the window are found by id.
3. An execution (type 4) is the trace of an incoming order of the other side, limited to the
   execution price. A resting agent order that would have had priority over the executed
   order (a better price, or the same price and an earlier arrival) fills first, at its own
   price; what remains executes the historical order.
4. Submissions match as any limit order does, so one can cross the agent's order.

The agent (owner `AGENT`) has at most one resting order per side in both replay envs; rule 3
relies on it. Depth below the orderbook file's levels is unknown at the window's start, so the
replayed book equals the file only while the levels it shows come from known orders.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ._book import ASK, BID, Book, Fills, stacked_sides
from ._decision import AGENT
from ._lobster import LobsterData
from ._messages import CANCEL, DELETE, EXECUTE, HIDDEN, SUBMIT, _reduce, process_message

__all__ = [
    "SNAPSHOT_OWNER",
    "ReplayDay",
    "ReplayResult",
    "agent_trades",
    "prepare_day",
    "replay_message",
    "snapshot_book",
]

SNAPSHOT_OWNER = -2
"""Owner id of the snapshot order of level 0; level `j` is `SNAPSHOT_OWNER - j`."""

_INT32 = np.iinfo(np.int32)
_NO_ORDER = int(_INT32.min)  # an order id nothing in a book has


@dataclasses.dataclass(frozen=True, eq=False)
class ReplayDay:
    """A LOBSTER day laid out for replay (read-only NumPy arrays; `M` messages, `L` levels).

    Attributes:
        messages: int32 `(M, 5)`, `(type, order_id, size, price, direction)`; a type 1-4
            message with an order id < 1 (LOBSTER never writes one) gets type 0 and is
            ignored.
        origin: int32 `(M,)`, for a cancel, deletion or execution the row of the latest
            earlier submission of its order id, -1 when there is none; -1 for other types.
        times: float64 `(M,)`, LOBSTER's seconds after midnight.
        rows: int32 `(M, 4, L)`, the book after each message in ticks: bid prices, bid
            sizes, ask prices, ask sizes (price and size 0 for an empty level).
        reference: int32 `(M,)`, the mid in ticks after each message (rounded down), the
            one side's best price when the other is empty, the next message's price when
            both are (at least 1).
        tick: LOBSTER price units per tick.
        levels: the orderbook file's levels per side.
        max_resting: the most orders of the file resting on one side at once (with no agent).
    """

    messages: np.ndarray
    origin: np.ndarray
    times: np.ndarray
    rows: np.ndarray
    reference: np.ndarray
    tick: int
    levels: int
    max_resting: int

    def __len__(self) -> int:
        return int(self.messages.shape[0])


def _origins(messages: np.ndarray) -> np.ndarray:
    """The row of the latest earlier submission of each reference's order id (-1: none)."""
    n = messages.shape[0]
    kind, ids = messages[:, 0], messages[:, 1].astype(np.int64)
    rows = np.arange(n, dtype=np.int64)
    submitted = np.flatnonzero(kind == SUBMIT)
    keys = (ids[submitted] << 32) | submitted  # ids are >= 1 here: keys sort by (id, row)
    order = np.argsort(keys, kind="stable")
    keys, submitted = keys[order], submitted[order]
    origin = np.full(n, -1, np.int32)
    refers = np.flatnonzero((kind == CANCEL) | (kind == DELETE) | (kind == EXECUTE))
    if refers.size and keys.size:
        at = np.searchsorted(keys, (ids[refers] << 32) | rows[refers]) - 1
        found = at >= 0
        same = np.zeros_like(found)
        same[found] = (keys[at[found]] >> 32) == ids[refers[found]]
        origin[refers[same]] = submitted[at[same]]
    return origin


def _max_resting(messages: np.ndarray) -> int:
    """Replay the file's own orders on the host: the most resting on one side at once."""
    sizes: dict[int, tuple[int, int]] = {}
    count = [0, 0]
    most = 0
    for kind, order_id, size, _, direction in messages.tolist():
        side = int(direction < 0)
        if kind == SUBMIT and size > 0 and order_id not in sizes:
            sizes[order_id] = (side, size)
            count[side] += 1
            most = max(most, count[side])
        elif kind in (CANCEL, DELETE, EXECUTE) and order_id in sizes:
            side, left = sizes[order_id]
            left = 0 if kind == DELETE else left - size
            if left > 0:
                sizes[order_id] = (side, left)
            else:
                del sizes[order_id]
                count[side] -= 1
    return most


def _ticks(name: str, prices: np.ndarray, sizes: np.ndarray, tick: int) -> np.ndarray:
    """Non-empty levels' prices in ticks (0 where empty); off-grid or too large: ValueError."""
    present = sizes > 0
    off = present & (prices % tick != 0)
    big = present & ((prices // tick > _INT32.max) | (prices < 1))
    for bad, why in ((off, f"not a multiple of tick={tick}"), (big, "outside 1..2**31 ticks")):
        if bad.any():
            row, level = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"LimitOrderBookReplay: orderbook row {row + 1}, {name} level {level + 1}: "
                f"price {prices[row, level]} is {why}"
            )
    return np.where(present, prices // tick, 0).astype(np.int32)


def prepare_day(data: LobsterData, tick: int) -> ReplayDay:
    """Check a loaded day and lay it out for replay.

    Raises:
        TypeError: `data` is not a `LobsterData`.
        ValueError: an empty day, a size that does not fit in int32, or an orderbook price off
            the `tick` grid (naming the row and level).
    """
    if not isinstance(data, LobsterData):
        raise TypeError(
            "LimitOrderBookReplay: data must be a LobsterData (parallax.finance.lob."
            f"load_lobster(...)), got {type(data).__name__}"
        )
    if len(data) < 2:
        raise ValueError(f"LimitOrderBookReplay: data must hold >= 2 messages, got {len(data)}")
    for name in ("bid_size", "ask_size"):
        if getattr(data, name).max() > _INT32.max:
            raise ValueError(f"LimitOrderBookReplay: a {name} in the orderbook exceeds int32")
    messages = np.array(data.messages, np.int32)
    refers = (messages[:, 0] >= SUBMIT) & (messages[:, 0] <= EXECUTE)
    messages[refers & (messages[:, 1] < 1), 0] = 0
    bid = _ticks("bid", data.bid_price, data.bid_size, tick)
    ask = _ticks("ask", data.ask_price, data.ask_size, tick)
    rows = np.stack([bid, data.bid_size, ask, data.ask_size], axis=1).astype(np.int32)
    has_bid, has_ask = data.bid_size[:, 0] > 0, data.ask_size[:, 0] > 0
    following = np.append(messages[1:, 3] // tick, messages[-1, 3] // tick)
    reference = np.where(
        has_bid & has_ask,
        (bid[:, 0].astype(np.int64) + ask[:, 0]) // 2,
        np.where(has_bid, bid[:, 0], np.where(has_ask, ask[:, 0], following)),
    )
    arrays = {
        "messages": messages,
        "origin": _origins(messages),
        "times": np.array(data.times, np.float64),
        "rows": rows,
        "reference": np.maximum(reference, 1).astype(np.int32),
    }
    for value in arrays.values():
        value.flags.writeable = False
    return ReplayDay(**arrays, tick=tick, levels=data.levels, max_resting=_max_resting(messages))


def snapshot_book(rows: jax.Array, capacity: int) -> Book:
    """The book of one orderbook row `(4, L)` (ticks): one order per non-empty level.

    Level `j` of either side is owned by `SNAPSHOT_OWNER - j`; its arrival number is `1 + j`
    (bids) or `1 + L + j` (asks), earlier than every order placed later (`next_id = 2 L + 1`).
    """
    levels = rows.shape[-1]
    pad = capacity - levels
    j = jnp.arange(levels, dtype=jnp.int32)

    def side(price: jax.Array, size: jax.Array, first_seq: int) -> tuple[jax.Array, ...]:
        valid = size > 0
        fields = (
            jnp.where(valid, price, 0),
            jnp.where(valid, size, 0),
            jnp.where(valid, SNAPSHOT_OWNER - j, 0),
            jnp.where(valid, first_seq + j, 0),
            valid,
        )
        return tuple(jnp.pad(f, (0, pad)) for f in fields)

    bids = side(rows[0], rows[1], 1)
    asks = side(rows[2], rows[3], 1 + levels)
    return Book(
        **stacked_sides(bids, asks),
        next_id=jnp.asarray(2 * levels + 1, jnp.int32),
        last_price=jnp.asarray(0, jnp.int32),
        overflow=jnp.asarray(False),
    )


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ReplayResult:
    """What one replayed message did.

    Attributes:
        status: int32 `()`, the `parallax.finance.lob` status of the historical message.
        fills: its `Fills` (a submission's matches, or the historical execution).
        agent_size: int32 `()`, what an execution filled of the agent's order ahead (rule 3).
        agent_price: int32 `()`, that order's price (0 when `agent_size` is 0).
        side: int32 `()`, the message's side (the resting side of an execution).
    """

    status: jax.Array
    fills: Fills
    agent_size: jax.Array
    agent_price: jax.Array
    side: jax.Array


def replay_message(
    book: Book, message: jax.Array, origin: jax.Array, start: jax.Array, *, tick: int
) -> tuple[Book, ReplayResult]:
    """Apply historical message `message` (a row of `ReplayDay.messages`) to `book`.

    `origin` is its row of `ReplayDay.origin` and `start` the window's first message (the
    module's rules 2 and 3 read them).
    """
    kind, order_id, size, price, side = (message[i] for i in range(5))
    rows = jnp.arange(2, dtype=jnp.int32)[:, None]
    on_side = rows == (side < 0).astype(jnp.int32)
    refers = (kind == CANCEL) | (kind == DELETE) | (kind == EXECUTE)
    # rule 2: an order from before the window is the snapshot order at its price
    before = refers & (origin < start)
    snap = book.valid & on_side & (book.owner <= SNAPSHOT_OWNER) & (book.price * tick == price)
    has_snap = jnp.any(snap)
    snap_owner = jnp.sum(jnp.where(snap, book.owner, 0), dtype=jnp.int32)
    order_id = jnp.where(before, jnp.where(has_snap, snap_owner, _NO_ORDER), order_id)
    kind = jnp.where(before & has_snap & (kind == DELETE), CANCEL, kind)
    # rule 3: the agent's order ahead of the executed one fills first
    target = book.valid & on_side & (book.owner == order_id)
    found = jnp.any(target)
    target_price = jnp.sum(jnp.where(target, book.price, 0), dtype=jnp.int32)
    target_seq = jnp.sum(jnp.where(target, book.seq, 0), dtype=jnp.int32)
    s = jnp.where(side > 0, 1, -1).astype(jnp.int32)  # on the bid side, higher is better
    crosses = s * book.price >= s * (price // tick)
    better = s * book.price > s * target_price
    earlier = (book.price == target_price) & (book.seq < target_seq)
    ahead = book.valid & on_side & (book.owner == AGENT) & crosses & (~found | better | earlier)
    executing = (kind == EXECUTE) & (size >= 1) & ((side == BID) | (side == ASK))
    ahead_size = jnp.sum(jnp.where(ahead, book.size, 0), dtype=jnp.int32)
    ahead_price = jnp.sum(jnp.where(ahead, book.price, 0), dtype=jnp.int32)
    agent_size = jnp.where(executing, jnp.minimum(size, ahead_size), 0)
    agent_price = jnp.where(agent_size > 0, ahead_price, 0)
    book = _reduce(book, ahead & (agent_size > 0), agent_size)
    rest = size - agent_size
    kind = jnp.where(executing & (rest == 0), HIDDEN, kind)  # all of it went to the agent
    book, result = process_message(
        book, jnp.stack([kind, order_id, rest, price, side]).astype(jnp.int32), tick=tick
    )
    return book, ReplayResult(
        status=result.status,
        fills=result.fills,
        agent_size=agent_size.astype(jnp.int32),
        agent_price=agent_price.astype(jnp.int32),
        side=jnp.asarray(side, jnp.int32),
    )


def agent_trades(result: ReplayResult) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """`(bought, sold, cash, fills)` of the agent in one replayed message, int32 (cash in
    ticks: sold value - bought value)."""
    f = result.fills
    mine = (f.size > 0) & (f.maker_owner == AGENT)
    qty = jnp.sum(jnp.where(mine, f.size, 0), dtype=jnp.int32)
    value = jnp.sum(jnp.where(mine, f.size * f.price, 0), dtype=jnp.int32)
    taker_buys = f.taker_side == BID  # the agent's resting ask sold to it
    # rule 3: the agent's resting order on the message's side traded with the incoming one
    agent_bid = result.side == BID
    priority_value = result.agent_size * result.agent_price
    bought = jnp.where(taker_buys, 0, qty) + jnp.where(agent_bid, result.agent_size, 0)
    sold = jnp.where(taker_buys, qty, 0) + jnp.where(agent_bid, 0, result.agent_size)
    cash = jnp.where(taker_buys, value, -value) + jnp.where(
        agent_bid, -priority_value, priority_value
    )
    fills = jnp.sum(mine, dtype=jnp.int32) + (result.agent_size > 0).astype(jnp.int32)
    return bought, sold, cash, fills
