"""One trader's decision in a book shared by several traders (pure functions).

- `new_accounts`: `A` traders' accounts, an `Account` whose leaves lead with `A`.
- `book_fills`: book one incoming order's executions to every trader that took part (the
  taker, and each trader whose resting order was hit), and count them as sekai does.
- `apply_trader_decision`: sekai's `_LOBCore.apply` for trader `owner`: the market order
  (after cancelling the trader's opposite quote), then its bid and its ask kept, moved,
  placed or cancelled.

`_decision.apply_decision` is the single-agent case (owner 0, no other trader); these
functions take the owner as an argument and book the other traders' side of each fill.
Everything is int32 and exact.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ._book import ASK, BID, Book
from ._decision import (
    Account,
    Executions,
    TradeLog,
    allowed_levels,
    credit,
    decision_order,
    log_trades,
    market_intent,
)
from ._priority import _sums

__all__ = ["apply_trader_decision", "book_fills", "new_accounts"]


def new_accounts(num_agents: int) -> Account:
    """`num_agents` accounts with no position, no cash and no quotes (leaves `(A,)`)."""
    zeros = jnp.zeros(num_agents, jnp.int32)
    return Account(
        inventory=zeros, cash=zeros, bid_id=zeros, ask_id=zeros, bought=zeros, sold=zeros
    )


def book_fills(
    accounts: Account, executions: Executions, counts: jax.Array
) -> tuple[Account, jax.Array]:
    """Book one incoming order's executions to the traders `0..A-1` that took part.

    The taker buys (sells) the whole executed quantity, each maker sells (buys) its part,
    at the makers' prices. As in sekai, the taker counts every execution of its order and
    each other trader one per execution against its resting order.

    Args:
        accounts: the traders' accounts, leaves `(A,)`.
        executions: the executions of one incoming order.
        counts: int32 `(A,)`, fills counted so far.

    Returns:
        `(accounts, counts)`.
    """
    num_agents = counts.shape[0]
    traders = jnp.arange(num_agents, dtype=jnp.int32)
    ex = executions
    size = ex.size
    value = size * ex.price
    taker = ex.taker_owner == traders  # (A,)
    maker = (size > 0)[None, :] & (ex.maker_owner[None, :] == traders[:, None])  # (A, C)
    total_qty, total_value = _sums((size, value), 0)
    taker_qty = jnp.where(taker, total_qty, 0)
    taker_value = jnp.where(taker, total_value, 0)
    maker_qty, maker_value, as_maker = _sums(
        (
            jnp.where(maker, size[None, :], 0),
            jnp.where(maker, value[None, :], 0),
            maker & ~taker[:, None],
        ),
        1,
    )
    is_buy = ex.taker_side == BID
    bought = jnp.where(is_buy, taker_qty, maker_qty)
    sold = jnp.where(is_buy, maker_qty, taker_qty)
    cash = jnp.where(is_buy, maker_value - taker_value, taker_value - maker_value)
    accounts = credit(accounts, bought, sold, cash)
    counts = counts + jnp.where(taker, ex.n_fills, 0) + as_maker
    return accounts, counts


def apply_trader_decision(
    book: Book,
    accounts: Account,
    log: TradeLog,
    counts: jax.Array,
    owner: jax.Array,
    action: jax.Array,
    *,
    order_size: int,
    max_inventory: int,
    mid_price: int,
) -> tuple[Book, Account, TradeLog, jax.Array]:
    """Carry out trader `owner`'s decision `(bid level, ask level, market)`.

    1. A market buy (sell) allowed by the inventory limit cancels the trader's resting ask
       (bid) first, then executes `order_size` lots; every trader hit is booked.
    2. The bid, then the ask, is kept, moved, placed or cancelled (a side the inventory
       limit forbids after the market order gets level 0).

    Args:
        book, accounts, log: the book, every trader's account (leaves `(A,)`), the trades.
        counts: int32 `(A,)`, fills counted so far this step.
        owner: int32 `()`, the deciding trader (its slot in `accounts` and owner id).
        action: int32 `(3,)`, inside the action space.
        order_size, max_inventory, mid_price: the env's static configuration.

    Returns:
        `(book, accounts, log, counts)`.
    """
    bid_level, ask_level, market = action[0], action[1], action[2]
    q = order_size

    def mine(accounts: Account) -> Account:
        return jax.tree.map(lambda x: x[owner], accounts)

    own = mine(accounts)
    book, do_buy, do_sell = market_intent(book, own, market, q, max_inventory)
    accounts = dataclasses.replace(
        accounts,
        ask_id=accounts.ask_id.at[owner].set(jnp.where(do_buy, 0, own.ask_id)),
        bid_id=accounts.bid_id.at[owner].set(jnp.where(do_sell, 0, own.bid_id)),
    )
    market_side = jnp.where(do_buy, BID, ASK)
    market_size = jnp.where(do_buy | do_sell, q, 0)

    # The market order, the bid, the ask: one loop body (one compiled copy of the matching),
    # as in the single-agent `apply_decision`.
    def order(carry: Any, i: jax.Array) -> tuple[Any, None]:
        book, accounts, log, counts, levels = carry
        own = mine(accounts)
        book, executions, bid_id, ask_id = decision_order(
            book, i, owner, own.bid_id, own.ask_id, levels,
            market_side, market_size, q, mid_price,
        )  # fmt: skip
        accounts = dataclasses.replace(
            accounts,
            bid_id=accounts.bid_id.at[owner].set(bid_id),
            ask_id=accounts.ask_id.at[owner].set(ask_id),
        )
        accounts, counts = book_fills(accounts, executions, counts)
        log = log_trades(log, executions)
        levels = allowed_levels(
            i, levels, accounts.inventory[owner], bid_level, ask_level, q, max_inventory
        )
        return (book, accounts, log, counts, levels), None

    levels0 = jnp.zeros(2, jnp.asarray(bid_level).dtype)
    carry = (book, accounts, log, counts, levels0)
    book, accounts, log, counts, _ = lax.scan(order, carry, jnp.arange(3, dtype=jnp.int32))[0]
    return book, accounts, log, counts
