"""The book driven by a stream of LOBSTER-style messages (issue 39).

- `SUBMIT`, `CANCEL`, `DELETE`, `EXECUTE`, `HIDDEN`, `CROSS`, `HALT`: LOBSTER's event
  types 1-7; `MARKET` (8, not a LOBSTER type): a market order that walks the book.
- `OK`, `UNKNOWN_TYPE`, `BAD_SIDE`, `BAD_SIZE`, `OFF_GRID`, `DUPLICATE_ID`, `UNKNOWN_ID`,
  `CLIPPED`, `OVERFLOW`, and `STATUS_NAMES`: what happened to each message.
- `MessageResult`: one message's outcome, its `Fills` and its status.
- `process_message`, `process_messages`: one message, or a stream of them under `lax.scan`.

A message is one int32 row `(type, order_id, size, price, direction)`: LOBSTER's message
columns without the time, with LOBSTER's meaning (`direction` 1 for a buy order, -1 for a
sell order; for an execution, the side of the resting order executed). `price` is in
LOBSTER's integer units and must be a multiple of `tick`; the book keeps `price // tick`.

In a book driven by messages, `Book.owner` holds each resting order's message `order_id`,
so the `Fills` of a message name the makers by their order ids (`maker_owner`), and
cancels, deletions and executions find their order by it. Order ids must be unique among
resting orders; `Book.seq` still gives time priority (arrival order).

The one rule for bad messages: a message that cannot apply changes nothing and gets a
status other than `OK` (`UNKNOWN_TYPE`, `BAD_SIDE`, `BAD_SIZE`: size < 1, `OFF_GRID`: a
limit price that is not a positive multiple of `tick`, `DUPLICATE_ID`: a submission whose
id is resting already, `UNKNOWN_ID`: a cancel, deletion or execution of no resting order
of that side). Two statuses report a message that did apply: `CLIPPED`, a cancel or
execution larger than the order (the whole order goes, and only its size executes), and
`OVERFLOW`, a limit remainder dropped for want of a free slot (the book's sticky
`overflow` is set too). `process_messages(..., checked=True)` stops the program on the
first message whose status is not `OK`, naming the rule.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from ._book import BACKGROUND, Book, Fills, _clear, submit_order

__all__ = [
    "BAD_SIDE",
    "BAD_SIZE",
    "CANCEL",
    "CLIPPED",
    "CROSS",
    "DELETE",
    "DUPLICATE_ID",
    "EXECUTE",
    "HALT",
    "HIDDEN",
    "MARKET",
    "OFF_GRID",
    "OK",
    "OVERFLOW",
    "STATUS_NAMES",
    "SUBMIT",
    "UNKNOWN_ID",
    "UNKNOWN_TYPE",
    "MessageResult",
    "process_message",
    "process_messages",
]

SUBMIT, CANCEL, DELETE, EXECUTE, HIDDEN, CROSS, HALT, MARKET = 1, 2, 3, 4, 5, 6, 7, 8
"""Message types: LOBSTER's 1-7, and 8 for a market order."""

OK, UNKNOWN_TYPE, BAD_SIDE, BAD_SIZE, OFF_GRID, DUPLICATE_ID, UNKNOWN_ID, CLIPPED, OVERFLOW = range(
    9
)
"""Message statuses (`MessageResult.status`)."""

STATUS_NAMES: tuple[str, ...] = (
    "ok",
    "unknown message type (not 1-8)",
    "direction not 1 (buy) or -1 (sell)",
    "size < 1",
    "limit price not a positive multiple of tick",
    "submission of an order id that is resting already",
    "cancel, deletion or execution of an order id that is not resting on that side",
    "cancel or execution larger than the resting order (clipped to it)",
    "limit remainder dropped: no free slot on its side (capacity overflow)",
)
"""What each status means, indexed by status."""

_COLUMNS = 5


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class MessageResult:
    """What one message did (stacked along a leading axis by `process_messages`).

    Attributes:
        fills: the executions (`Fills`): a submission's or market order's matches, one
            entry for an `EXECUTE`, none otherwise. `maker_owner` and `taker_owner` are
            order ids (see the module); an execution's taker is unknown (`BACKGROUND`).
        status: int32 `()`, one of `OK`, ... (`STATUS_NAMES[status]` says what).
    """

    fills: Fills
    status: jax.Array


def _no_fills(book: Book, taker_side: jax.Array) -> Fills:
    zeros = jnp.zeros((book.capacity,), jnp.int32)
    zero = jnp.int32(0)
    return Fills(
        price=zeros,
        size=zeros,
        maker_id=zeros,
        maker_owner=zeros,
        count=zero,
        taker_id=zero,
        taker_owner=jnp.int32(BACKGROUND),
        taker_side=taker_side,
        accepted=jnp.asarray(False),
        rested=jnp.asarray(False),
        overflow=jnp.asarray(False),
    )


def _reduce(book: Book, target: jax.Array, amount: jax.Array) -> Book:
    """Take `amount` off the one order where `target`; remove it when nothing is left."""
    size = jnp.where(target, book.size - amount, book.size)
    return _clear(dataclasses.replace(book, size=size), target & (size <= 0))


def process_message(book: Book, message: Any, *, tick: int = 1) -> tuple[Book, MessageResult]:
    """Apply one message `(type, order_id, size, price, direction)` to the book.

    Args:
        book: the book (`empty_book(capacity)` to start).
        message: int32 `(5,)`, see the module.
        tick: the price units per tick, a positive int (static).

    Returns:
        `(book, result)`; a message that cannot apply leaves the book unchanged.

    Example:
        >>> import jax.numpy as jnp
        >>> from parallax.finance.lob import SUBMIT, EXECUTE, empty_book, process_message
        >>> book, r = process_message(empty_book(8), jnp.array([SUBMIT, 7, 100, 10100, -1]), tick=100)
        >>> book, r = process_message(book, jnp.array([EXECUTE, 7, 40, 10100, -1]), tick=100)
        >>> int(r.status), int(r.fills.size[0]), int(r.fills.maker_owner[0]), int(book.size.max())
        (0, 40, 7, 60)
    """
    message = jnp.asarray(message, jnp.int32)
    kind, order_id, size, price, side = (message[..., i] for i in range(_COLUMNS))
    rows = jnp.arange(2, dtype=jnp.int32)[:, None]
    on_side = rows == (side < 0).astype(jnp.int32)
    is_order = (kind == SUBMIT) | (kind == MARKET)
    is_reduction = (kind == CANCEL) | (kind == DELETE) | (kind == EXECUTE)
    mine = book.valid & (book.owner == order_id)
    target = mine & on_side
    resting = jnp.sum(jnp.where(target, book.size, 0), dtype=jnp.int32)

    checks = (
        (~((kind >= SUBMIT) & (kind <= MARKET)), UNKNOWN_TYPE),
        ((is_order | is_reduction) & (side != 1) & (side != -1), BAD_SIDE),
        ((is_order | (kind == CANCEL) | (kind == EXECUTE)) & (size < 1), BAD_SIZE),
        ((kind == SUBMIT) & ((price < 1) | (price % tick != 0)), OFF_GRID),
        ((kind == SUBMIT) & jnp.any(mine), DUPLICATE_ID),
        (is_reduction & ~jnp.any(target), UNKNOWN_ID),
    )
    status = jnp.int32(OK)
    for failed, code in reversed(checks):  # the first failed check wins
        status = jnp.where(failed, jnp.int32(code), status)
    applies = status == OK

    def order(book: Book) -> tuple[Book, Fills, jax.Array]:
        new, fills = submit_order(
            book, side, price // tick, size, order_id, is_market=kind == MARKET
        )
        return new, fills, jnp.where(fills.overflow, jnp.int32(OVERFLOW), jnp.int32(OK))

    def reduction(book: Book) -> tuple[Book, Fills, jax.Array]:
        amount = jnp.where(kind == DELETE, resting, jnp.minimum(size, resting))
        new = _reduce(book, target, amount)
        executed = kind == EXECUTE
        maker_price = jnp.sum(jnp.where(target, book.price, 0), dtype=jnp.int32)
        maker_seq = jnp.sum(jnp.where(target, book.seq, 0), dtype=jnp.int32)
        first = jnp.arange(book.capacity) == 0
        fills = dataclasses.replace(
            _no_fills(book, -side),
            price=jnp.where(first & executed, maker_price, 0),
            size=jnp.where(first & executed, amount, 0),
            maker_id=jnp.where(first & executed, maker_seq, 0),
            maker_owner=jnp.where(first & executed, order_id, 0),
            count=executed.astype(jnp.int32),
            accepted=jnp.asarray(True),
        )
        new = dataclasses.replace(new, last_price=jnp.where(executed, maker_price, book.last_price))
        clipped = (kind != DELETE) & (size > resting)
        return new, fills, jnp.where(clipped, jnp.int32(CLIPPED), jnp.int32(OK))

    def nothing(book: Book) -> tuple[Book, Fills, jax.Array]:
        return book, _no_fills(book, jnp.asarray(side, jnp.int32)), jnp.int32(OK)

    branch = jnp.where(applies & is_order, 0, jnp.where(applies & is_reduction, 1, 2))
    new, fills, applied = lax.switch(branch, (order, reduction, nothing), book)
    return new, MessageResult(fills=fills, status=jnp.where(applies, applied, status))


def _check_tick(tick: Any) -> int:
    if isinstance(tick, bool) or not isinstance(tick, int) or tick < 1:
        raise ValueError(f"process_messages: tick must be a positive int, got {tick!r}")
    return tick


def process_messages(
    book: Book, messages: Any, *, tick: int = 1, checked: bool = False
) -> tuple[Book, MessageResult]:
    """Apply a stream of messages in order (`lax.scan` of `process_message`).

    Pure: `jit` it, `vmap` it over books and streams, scan it in chunks.

    Args:
        book: the book.
        messages: int32 `(M, 5)`, one message per row (see the module).
        tick: the price units per tick, a positive int (static).
        checked: stop the program (an `equinox` runtime error) on the first message whose
            status is not `OK`, naming the rule it broke.

    Returns:
        `(book, results)`: the book after the last message and each message's
        `MessageResult` (leaves with a leading axis of `M`).

    Raises:
        ValueError: `messages` is not `(M, 5)`, or `tick` is not a positive int.

    Example:
        >>> import jax.numpy as jnp
        >>> from parallax.finance.lob import (
        ...     CANCEL, MARKET, SUBMIT, best_ask, empty_book, process_messages)
        >>> stream = jnp.array([
        ...     [SUBMIT, 1, 5, 101, -1],  # sell 5 at 101
        ...     [SUBMIT, 2, 3, 102, -1],  # sell 3 at 102
        ...     [MARKET, 3, 6, 0, 1],     # buy 6 at market: 5 at 101, 1 at 102
        ...     [CANCEL, 9, 1, 0, -1],    # no order 9: rejected, nothing changes
        ... ])
        >>> book, results = process_messages(empty_book(8), stream)
        >>> results.status.tolist(), results.fills.count.tolist(), int(best_ask(book))
        ([0, 0, 0, 6], [0, 0, 2, 0], 102)
    """
    tick = _check_tick(tick)
    if not isinstance(checked, bool):
        raise TypeError(f"process_messages: checked must be True or False, got {checked!r}")
    messages = jnp.asarray(messages)
    if messages.ndim != 2 or messages.shape[-1] != _COLUMNS:
        raise ValueError(
            "process_messages: messages must be int32 (M, 5) rows (type, order_id, size, "
            f"price, direction), got shape {messages.shape}"
        )

    def body(book: Book, message: jax.Array) -> tuple[Book, MessageResult]:
        return process_message(book, message, tick=tick)

    book, results = lax.scan(body, book, messages.astype(jnp.int32))
    if checked:
        bad = results.status != OK
        first = results.status[jnp.argmax(bad)]
        messages_by_status = [
            f"process_messages: a message was rejected: {n}" for n in STATUS_NAMES
        ]
        book = eqx.branched_error_if(book, jnp.any(bad), first, messages_by_status)
    return book, results
