"""One agent's decision in the book, its account, and the recent-trades log (pure functions).

- `AGENT`: the agent's owner id (0, as sekai's `LimitOrderBookEnv.AGENT`).
- `TradeLog`: the last `T` trades (price, size, aggressor side) as a ring buffer.
- `empty_log`, `log_trades`, `log_flow_trades`, `ordered_trades`: fill, extend and read it.
- `Account`, `new_account`, `credit`, `book_flow_fills`: the agent's inventory, cash (int32
  ticks), quote ids and fill totals; a trade booked to it; the fills of its resting quotes
  during a flow run.
- `book_mid2`: twice the mid (an int: `best_bid + best_ask`, or twice the reference price).
- `wealth_change`: the change in `cash + inventory * mid`, the envs' reward before penalties.
- `quote_plan`: sekai's `_quote` decision for one side (keep, move, place or cancel);
  `decision_order`, `allowed_levels`: one order of a decision as data, and the quote levels
  the inventory limit allows (shared with the market's traders).
- `decision_masks`, `account_info`: the decision's action masks and the account's `info`
  keys (shared by LimitOrderBook-v0 and the replay envs).
- `apply_decision`: sekai's `_LOBCore.apply`: the market order (after cancelling the
  opposite quote), then the bid and the ask kept, moved, placed or cancelled; the three
  orders are one `lax.scan` body, so the matching compiles once per decision.

Everything is int32 and exact; the env turns it into float observations and rewards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ._book import ASK, BID, Book, _match, cancel
from ._book_queries import best_quotes
from ._flow_params import FlowStats
from ._priority import INT32_MAX as _INT32_MAX
from ._priority import _sums

__all__ = [
    "AGENT",
    "Account",
    "Executions",
    "TradeLog",
    "account_info",
    "allowed_levels",
    "apply_decision",
    "book_flow_fills",
    "book_mid2",
    "credit",
    "decision_masks",
    "decision_order",
    "empty_log",
    "log_flow_trades",
    "log_trades",
    "market_intent",
    "new_account",
    "ordered_trades",
    "quote_plan",
    "wealth_change",
]

AGENT: int = 0
"""The agent's owner id in the book."""

SELL, HOLD, BUY = 0, 1, 2


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TradeLog:
    """The last `T` trades of the session (sekai's `deque(maxlen=max_trades)`).

    Attributes:
        price, size, side: int32 `(T,)`, a ring buffer: the next trade goes to `head`.
        head: int32 `()`, the slot of the next trade.
        count: int32 `()`, how many slots hold a trade (at most `T`).
    """

    price: jax.Array
    size: jax.Array
    side: jax.Array
    head: jax.Array
    count: jax.Array


def empty_log(max_trades: int) -> TradeLog:
    """A log with room for `max_trades` trades and none in it."""
    zeros = jnp.zeros(max_trades, jnp.int32)
    zero = jnp.asarray(0, jnp.int32)
    return TradeLog(price=zeros, size=zeros, side=zeros, head=zero, count=zero)


def _append(log: TradeLog, price: Any, size: Any, side: Any, count: Any) -> TradeLog:
    """Append entries `0..count-1` of the arrays (only the last `T` can remain)."""
    capacity = log.price.shape[0]
    n = jnp.shape(price)[0]
    j = jnp.arange(n, dtype=jnp.int32)
    keep = (j < count) & (j >= count - capacity)
    slot = jnp.where(keep, (log.head + j) % capacity, capacity)

    def put(buffer: jax.Array, value: Any) -> jax.Array:
        value = jnp.broadcast_to(jnp.asarray(value, jnp.int32), (n,))
        return buffer.at[slot].set(value, mode="drop")

    return TradeLog(
        price=put(log.price, price),
        size=put(log.size, size),
        side=put(log.side, side),
        head=(log.head + count) % capacity,
        count=jnp.minimum(log.count + count, capacity),
    )


class Executions(NamedTuple):
    """What one incoming order executed, per slot of the opposite side (unordered).

    The `n_fills` slots with `size > 0` traded, the `rank`-th in matching order (the
    others' ranks mean nothing). Kept unordered: the log and the accounts need no sort or
    scatter into matching order (`Fills` is this written in order).

    Attributes:
        price: int32 `(C,)`, the resting orders' prices (the execution prices).
        size: int32 `(C,)`, the quantity each executed, 0 for those that did not trade.
        maker_owner: int32 `(C,)`, the resting orders' owners.
        rank: int32 `(C,)`, the execution's place in matching order.
        n_fills: int32 `()`, the number of executions.
        taker_owner, taker_side: int32 `()`, the incoming order's owner and side.
    """

    price: jax.Array
    size: jax.Array
    maker_owner: jax.Array
    rank: jax.Array
    n_fills: jax.Array
    taker_owner: jax.Array
    taker_side: jax.Array


def log_trades(log: TradeLog, executions: Executions) -> TradeLog:
    """Append the executions of one incoming order (aggressor side: the order's side), in
    matching order: execution `j` goes to slot `head + j`, the last `T` of them remain."""
    ex = executions
    capacity = log.price.shape[0]
    ring = jnp.arange(capacity, dtype=jnp.int32)
    keep = (ex.size > 0) & (ex.rank >= ex.n_fills - capacity)
    slot = jnp.where(keep, (log.head + ex.rank) % capacity, capacity)
    # Each written entry has exactly one execution: one (T, C) match, summed in one
    # two-output reduction.
    hit = slot[None, :] == ring[:, None]
    price, size = _sums(
        (jnp.where(hit, ex.price[None, :], 0), jnp.where(hit, ex.size[None, :], 0)), 1
    )
    written = (ring - log.head) % capacity < jnp.minimum(ex.n_fills, capacity)
    return TradeLog(
        price=jnp.where(written, price, log.price),
        size=jnp.where(written, size, log.size),
        side=jnp.where(written, jnp.asarray(ex.taker_side, jnp.int32), log.side),
        head=(log.head + ex.n_fills) % capacity,
        count=jnp.minimum(log.count + ex.n_fills, capacity),
    )


def log_flow_trades(log: TradeLog, stats: FlowStats) -> TradeLog:
    """Append the trades of a flow run (its ring holds the last `T` of them, in order)."""
    ring = stats.trade_price.shape[0]
    n = stats.n_trades
    k = jnp.minimum(n, ring)
    i = jnp.arange(ring, dtype=jnp.int32)
    source = (n - k + i) % ring  # trade n - k + i of the run sits at that index mod ring
    return _append(
        log,
        stats.trade_price[source],
        stats.trade_size[source],
        stats.trade_taker_side[source],
        k,
    )


def ordered_trades(log: TradeLog) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """`(price, size, side, mask)`, `(T,)` each, oldest trade first, zeros past `count`."""
    capacity = log.price.shape[0]
    i = jnp.arange(capacity, dtype=jnp.int32)
    source = (log.head - log.count + i) % capacity
    present = i < log.count
    price, size, side = (jnp.where(present, x[source], 0) for x in (log.price, log.size, log.side))
    return price, size, side, present


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Account:
    """The agent's side of the book.

    Attributes:
        inventory: int32 `()`, signed position in lots.
        cash: int32 `()`, cash in ticks (sold value - bought value).
        bid_id, ask_id: int32 `()`, the ids of its last bid and ask quotes (0: none). An id
            may name an order that has since filled: the book says whether it rests.
        bought, sold: int32 `()`, total quantity bought and sold in the session.
    """

    inventory: jax.Array
    cash: jax.Array
    bid_id: jax.Array
    ask_id: jax.Array
    bought: jax.Array
    sold: jax.Array


def new_account() -> Account:
    """No position, no cash, no quotes."""
    zero = jnp.asarray(0, jnp.int32)
    return Account(inventory=zero, cash=zero, bid_id=zero, ask_id=zero, bought=zero, sold=zero)


def _book_fills(account: Account, executions: Executions) -> Account:
    """Book the agent's side of one incoming order's fills (it was the taker, maybe a maker)."""
    ex = executions
    size = ex.size
    value = size * ex.price
    taker = ex.taker_owner == AGENT
    maker = (size > 0) & (ex.maker_owner == AGENT)
    total_qty, total_value, maker_qty, maker_value = _sums(
        (size, value, jnp.where(maker, size, 0), jnp.where(maker, value, 0)), 0
    )
    taker_qty = jnp.where(taker, total_qty, 0)
    taker_value = jnp.where(taker, total_value, 0)
    is_buy = ex.taker_side == BID
    # the taker buys on a bid; a maker sells to a bid (a self-trade nets to zero)
    bought = jnp.where(is_buy, taker_qty, maker_qty)
    sold = jnp.where(is_buy, maker_qty, taker_qty)
    cash = jnp.where(is_buy, maker_value - taker_value, taker_value - maker_value)
    return credit(account, bought, sold, cash)


def credit(account: Account, bought: Any, sold: Any, cash: Any) -> Account:
    """`account` (or a stack of accounts) after buying `bought` and selling `sold` lots for
    a net `cash` (ticks: received minus paid)."""
    return dataclasses.replace(
        account,
        inventory=account.inventory + bought - sold,
        cash=account.cash + cash,
        bought=account.bought + bought,
        sold=account.sold + sold,
    )


def book_flow_fills(account: Account, stats: FlowStats) -> Account:
    """Book the fills of the agent's resting quotes during a flow run."""
    bought, sold = stats.agent_bought[AGENT], stats.agent_sold[AGENT]
    return credit(account, bought, sold, stats.agent_cash[AGENT])


def book_mid2(book: Book, mid_price: int | jax.Array) -> jax.Array:
    """Twice the mid, int32: `best_bid + best_ask`, or twice the reference price when a side is
    empty (sekai: `last_price`, or the initial `mid_price` before any)."""
    has_bid, has_ask, bid, ask = best_quotes(book)
    reference = jnp.where(book.last_price != 0, book.last_price, mid_price)
    return jnp.where(has_bid & has_ask, bid + ask, 2 * reference)


def wealth_change(
    before: Account, after: Account, mid_before: jax.Array, mid_after: jax.Array, fdt: Any
) -> jax.Array:
    """The change in `cash + inventory * mid` (ticks, float `fdt`) from `before` at
    `mid_before` to `after` at `mid_after` (leaves `()` or `(A,)`), exact where the
    cash and the mids are ints and half-ints."""
    inventory = after.inventory.astype(fdt)
    return (after.cash - before.cash).astype(fdt) + (
        inventory * mid_after - before.inventory.astype(fdt) * mid_before
    )


def quote_plan(
    book: Book,
    side: Any,
    level: jax.Array,
    current: jax.Array,
    order_size: int,
    mid_price: int | jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """sekai's `_quote` decision for one side, without touching the book: keep, move, place
    or cancel the quote `current` on `side` (`BID` or `ASK`, a Python int or traced).

    The level is measured from the best price of every other order on the side (other
    traders' included); with none, one tick inside the opposite best (unless the own quote
    sits at that price), else the last trade price (or the initial mid). Level 0 cancels.
    The side is data: a sign `s` (+1 bid, -1 ask) turns the bid side's maxima into the ask
    side's minima, so one compiled body serves both quotes.

    Returns:
        `(id to cancel (0: none), limit price, size (0: place nothing), keep)`.
    """
    is_bid = jnp.asarray(side) == BID
    s = jnp.where(is_bid, 1, -1).astype(jnp.int32)
    valid = jnp.where(is_bid, book.valid[0], book.valid[1])
    price = jnp.where(is_bid, book.price[0], book.price[1])
    seq = jnp.where(is_bid, book.seq[0], book.seq[1])
    opp_valid = jnp.where(is_bid, book.valid[1], book.valid[0])
    opp_price = jnp.where(is_bid, book.price[1], book.price[0])
    mine = valid & (seq == current) & (current > 0)
    resting = jnp.any(mine)
    resting_price = jnp.sum(jnp.where(mine, price, 0), dtype=jnp.int32)
    others = valid & ~mine
    # own side: the highest bid (0 if none) or the lowest ask (int32 max if none)
    empty = jnp.where(is_bid, 0, -_INT32_MAX).astype(jnp.int32)
    best_other = s * jnp.max(jnp.where(others, s * price, empty))
    best_all = s * jnp.max(jnp.where(valid, s * price, empty))
    # opposite side: the lowest ask (int32 max if none) or the highest bid (0 if none)
    empty_opp = jnp.where(is_bid, -_INT32_MAX, 0).astype(jnp.int32)
    opposite = -s * jnp.max(jnp.where(opp_valid, -s * opp_price, empty_opp))
    inside = opposite - s
    use_opposite = jnp.any(opp_valid) & (~resting | (resting_price != opposite))
    reference = jnp.where(book.last_price != 0, book.last_price, mid_price)
    best = jnp.where(jnp.any(others), best_other, jnp.where(use_opposite, inside, reference))
    target = best - s * (level - 1)
    keep = (
        resting
        & (level > 0)
        & ((resting_price == target) | ((level == 1) & (resting_price == best_all)))
    )
    cancel_id = jnp.where(resting & ~keep, current, 0)
    size = jnp.where((level > 0) & ~keep, order_size, 0)  # size 0: rejected, no change
    return cancel_id, jnp.maximum(target, 1), size, keep


def decision_order(
    book: Book,
    i: jax.Array,
    owner: Any,
    bid_id: jax.Array,
    ask_id: jax.Array,
    levels: jax.Array,
    market_side: jax.Array,
    market_size: jax.Array,
    order_size: int,
    mid_price: int | jax.Array,
) -> tuple[Book, Executions, jax.Array, jax.Array]:
    """Order `i` of trader `owner`'s decision, as data: 0 the market order (`market_side`,
    `market_size`, 0 for none), 1 the bid quote at `levels[0]`, 2 the ask quote at
    `levels[1]`. One body for the three, so a `lax.scan` over them compiles the matching
    once.

    Returns:
        `(book, executions, bid_id, ask_id)`: the trader's quote ids after the order.
    """
    is_market = i == 0
    quote_side = jnp.where(i == 1, BID, ASK)
    current = jnp.where(i == 1, bid_id, ask_id)
    level = jnp.where(i == 1, levels[0], levels[1])
    cancel_id, price, size, keep = quote_plan(
        book, quote_side, level, current, order_size, mid_price
    )
    book, _ = cancel(book, jnp.where(is_market, 0, cancel_id))
    side = jnp.where(is_market, market_side, quote_side)
    book, match = _match(
        book,
        side,
        price,
        jnp.where(is_market, market_size, size),
        owner,
        is_market=is_market,
        prevent_self_trade=False,
    )
    executions = Executions(
        price=match.price,
        size=match.traded,
        maker_owner=match.maker_owner,
        rank=match.rank,
        n_fills=match.n_fills,
        taker_owner=jnp.asarray(owner, jnp.int32),
        taker_side=side,
    )
    new_id = jnp.where(keep, current, jnp.where(match.rested, match.taker_id, 0))
    return book, executions, jnp.where(i == 1, new_id, bid_id), jnp.where(i == 2, new_id, ask_id)


def allowed_levels(
    i: jax.Array,
    levels: jax.Array,
    inventory: jax.Array,
    bid_level: jax.Array,
    ask_level: jax.Array,
    order_size: int,
    max_inventory: int,
) -> jax.Array:
    """After the market order (`i == 0`): the quote levels `(bid, ask)`, a side the
    inventory limit forbids at level 0; after a quote, `levels` unchanged."""
    can_buy = inventory + order_size <= max_inventory
    can_sell = inventory - order_size >= -max_inventory
    allowed = jnp.stack([jnp.where(can_buy, bid_level, 0), jnp.where(can_sell, ask_level, 0)])
    return jnp.where(i == 0, allowed.astype(levels.dtype), levels)


def market_intent(
    book: Book, own: Account, market: Any, q: Any, max_inventory: int
) -> tuple[Book, jax.Array, jax.Array]:
    """Whether a trader's market order (`market`, `own` its account) buys or sells `q` lots,
    as the inventory limit allows, and the book with its own resting ask cancelled before a
    buy, its bid before a sell (self-trade prevention)."""
    do_buy = (market == BUY) & (own.inventory + q <= max_inventory)
    do_sell = (market == SELL) & (own.inventory - q >= -max_inventory)
    book, _ = cancel(book, jnp.where(do_buy, own.ask_id, 0))
    book, _ = cancel(book, jnp.where(do_sell, own.bid_id, 0))
    return book, do_buy, do_sell


def apply_decision(
    book: Book,
    account: Account,
    log: TradeLog,
    action: jax.Array,
    *,
    order_size: int,
    max_inventory: int,
    mid_price: int | jax.Array,
) -> tuple[Book, Account, TradeLog, jax.Array]:
    """Carry out one decision `(bid level, ask level, market)` (sekai's `_LOBCore.apply`).

    1. A market buy (sell) allowed by the inventory limit cancels the agent's resting ask
       (bid) first, then executes `order_size` lots against the book.
    2. The bid, then the ask, is kept, moved, placed or cancelled (a side that the inventory
       limit forbids after the market order gets level 0).

    Returns:
        `(book, account, log, n_fills)`, `n_fills` the executions the decision caused.
    """
    bid_level, ask_level, market = action[0], action[1], action[2]
    q = order_size
    book, do_buy, do_sell = market_intent(book, account, market, q, max_inventory)
    account = dataclasses.replace(
        account,
        ask_id=jnp.where(do_buy, 0, account.ask_id),
        bid_id=jnp.where(do_sell, 0, account.bid_id),
    )
    market_side = jnp.where(do_buy, BID, ASK)
    market_size = jnp.where(do_buy | do_sell, q, 0)

    # The market order, the bid, the ask: one loop body (one compiled copy of the matching).
    def order(carry: Any, i: jax.Array) -> tuple[Any, None]:
        book, account, log, n_fills, levels = carry
        book, executions, bid_id, ask_id = decision_order(
            book, i, AGENT, account.bid_id, account.ask_id, levels,
            market_side, market_size, q, mid_price,
        )  # fmt: skip
        account = _book_fills(
            dataclasses.replace(account, bid_id=bid_id, ask_id=ask_id), executions
        )
        log = log_trades(log, executions)
        levels = allowed_levels(
            i, levels, account.inventory, bid_level, ask_level, q, max_inventory
        )
        return (book, account, log, n_fills + executions.n_fills, levels), None

    levels0 = jnp.zeros(2, jnp.asarray(bid_level).dtype)
    carry = (book, account, log, jnp.asarray(0, jnp.int32), levels0)
    book, account, log, n_fills, _ = lax.scan(order, carry, jnp.arange(3, dtype=jnp.int32))[0]
    return book, account, log, n_fills


def decision_masks(
    account: Account, order_size: int, max_inventory: int, max_quote_offset: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """sekai's per-dimension masks of a `(bid level, ask level, market)` decision (bool): no
    buying at the long limit, no selling at the short one (level 0 and holding always)."""
    can_buy = account.inventory + order_size <= max_inventory
    can_sell = account.inventory - order_size >= -max_inventory
    first = jnp.arange(max_quote_offset + 1) == 0
    return first | can_buy, first | can_sell, jnp.stack([can_sell, jnp.bool_(True), can_buy])


def account_info(book: Book, account: Account, reference: Any, fdt: Any) -> dict[str, jax.Array]:
    """`info`'s `mid_price`, `spread` (ticks, 0 when a side is empty), `inventory`, `cash` and
    `wealth` (`cash + inventory * mid`); `reference` is the mid's fallback (`book_mid2`)."""
    mid = book_mid2(book, reference).astype(fdt) * 0.5
    has_bid, has_ask, bid, ask = best_quotes(book)
    cash = account.cash.astype(fdt)
    return {
        "mid_price": mid,
        "spread": jnp.where(has_bid & has_ask, ask - bid, 0),
        "inventory": account.inventory,
        "cash": cash,
        "wealth": cash + account.inventory.astype(fdt) * mid,
    }
