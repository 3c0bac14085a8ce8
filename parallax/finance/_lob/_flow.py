"""Zero-intelligence background order flow between decisions, as a bounded `lax.while_loop`.

- `initialise`: the symmetric seed book (sekai's `ZeroIntelligenceFlow.initialise`).
- `run_flow`: the Poisson events of one interval `(start, until]`, as sekai's `advance`: the
  loop of one book, and of a batch in stages under `vmap` (`_run_flow_batched`).
- `warm_up`: `initialise`, then the flow over `(0, warmup]` (decision index 0).

The rest of the flow: `FlowParams` and `FlowStats` (`_flow_params`), `FLOW_SLOTS` and the
draws' transforms (`_flow_draws`), `default_max_events` and `default_capacity`
(`_flow_bounds`), the loop's state (`_flow_state`) and one iteration (`_flow_iterate`).

Randomness: every draw is `parallax.rng` at `(episode_key, decision_index, slot, n)`, where
`n` counts the draws of that slot within the interval (the `n`-th waiting time, the `n`-th
size, ...). Draws are never shared between intervals or episodes, so a batch of books is
independent, and a reference that is handed the `n`-th draw of each slot in call order
(the shim generator of the tests) reproduces the run exactly.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._book import BACKGROUND, Book, empty_book, stacked_sides
from ._flow_bounds import _SEED_LEVELS, _SEED_ORDERS_PER_LEVEL
from ._flow_draws import FLOW_SLOTS, _flow_draw, _size_from_uniform
from ._flow_iterate import _iterate
from ._flow_params import FlowParams, FlowStats
from ._flow_state import _Consts, _finish, _running, _setup

__all__ = ["initialise", "run_flow", "warm_up"]


def initialise(
    capacity: int,
    params: FlowParams,
    episode_key: Any,
    *,
    mid: Any,
    levels: int = _SEED_LEVELS,
    orders_per_level: int = _SEED_ORDERS_PER_LEVEL,
) -> Book:
    """The seed book of sekai's `initialise`: `orders_per_level` background orders per level.

    Bids rest at `mid - 1, ..., mid - levels` (clipped to >= 1 tick), asks at
    `mid + 1, ..., mid + levels`, in sekai's order (for each distance, for each order: a
    bid then an ask), so ids run 1, 2, ... in that order. Sizes are `1 + Poisson(mean_size
    - 1)` from slot `INIT_SIZE` at decision index 0, order `j` taking index `j`.
    `last_price` is set to `mid` (sekai's reference price).

    Args:
        capacity: Slots per side (static).
        params: The flow's parameters.
        episode_key: uint32 `(2,)`, from `parallax.rng.episode_key`.
        mid: The initial mid price in ticks, int32 `()` >= 1.
        levels: Price levels per side, a positive int (static).
        orders_per_level: Orders per level, a positive int (static).

    Returns:
        The book. If `levels * orders_per_level > capacity`, the orders that do not fit
        are dropped and `book.overflow` is set.

    Raises:
        ValueError: If `levels`, `orders_per_level` or a Python-int `mid` is out of range.
    """
    for name, value in (("levels", levels), ("orders_per_level", orders_per_level)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    if isinstance(mid, bool) or (isinstance(mid, int | np.integer) and mid < 1):
        raise ValueError(f"mid must be an integer >= 1, got {mid!r}.")
    book = empty_book(capacity)
    n = int(levels) * int(orders_per_level)
    j = jnp.arange(n, dtype=jnp.int32)  # order j at distance j // orders_per_level + 1
    distance = j // int(orders_per_level) + 1
    mid = jnp.asarray(mid, jnp.int32)
    u = _flow_draw(episode_key, 0, FLOW_SLOTS.INIT_SIZE, jnp.arange(2 * n, dtype=jnp.uint32))
    sizes = _size_from_uniform(u, jnp.asarray(params.mean_size, u.dtype)).reshape(n, 2)
    fit = min(n, capacity)
    pad = capacity - fit

    def side(prices: jax.Array, size: jax.Array, ids: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(
            jnp.concatenate([x[:fit], jnp.zeros(pad, x.dtype)])
            for x in (prices, size, jnp.full(n, BACKGROUND, jnp.int32), ids, jnp.ones(n, bool))
        )

    bid = side(jnp.maximum(mid - distance, 1), sizes[:, 0], 2 * j + 1)
    ask = side(mid + distance, sizes[:, 1], 2 * j + 2)
    return dataclasses.replace(
        book,
        **stacked_sides(bid, ask),
        next_id=jnp.asarray(2 * n + 1, jnp.int32),
        last_price=mid,
        overflow=jnp.asarray(n > capacity),
    )


def run_flow(
    book: Book,
    params: FlowParams,
    episode_key: Any,
    decision_index: Any,
    start: Any,
    until: Any,
    *,
    max_events: int,
    max_trades: int = 64,
    num_agents: int = 1,
) -> tuple[Book, FlowStats]:
    """Run the background events of the interval `(start, until]` (sekai's `advance`).

    Events arrive as competing Poisson clocks of total rate `2 limit_rate + 2 market_rate +
    cancel_rate * n` (`n` resting background orders, recomputed after each event): a
    waiting time `-log1p(-u) / rate` is drawn, and while the clock stays <= `until` one
    event happens, chosen by `u' * rate` against the cumulative rates (limit bid, limit
    ask, market buy, market sell, cancellation). A limit buy goes `k` ticks below the best
    ask (a sell `k` above the best bid; one tick beyond the own side's best, or
    `last_price`, when the opposite side is empty), clipped at 1 tick; a market order
    finding the opposite side empty is skipped; a cancellation removes the `i`-th resting
    background order in arrival order, `i` uniform. After each event, an emptied side is
    refilled by limit orders (bid side first) at the event's time. Every order is
    `BACKGROUND`'s; agents' resting orders can be filled, never cancelled.

    The loop is a `lax.while_loop` of at most `max_events` iterations (see
    `FlowStats.iterations`: one per event, per refill, per execution after an order's first
    and for the final waiting time). Inside it each order carries its place in priority on
    its side, so an iteration reads the best quotes from place 0, executes at most one
    resting order and updates the places in place; orders never change slots (a `Book`'s
    slots are unordered by contract). Reaching the bound stops the run early with
    `stats.truncated` set; it is never silent. Under `vmap`, a batch of 128 books or more
    runs the loop in two stages, the second on the books still running
    (`_run_flow_batched`), with the same results, bit for bit, as each book alone.

    Args:
        book: The book (with both sides non-empty, or a `last_price`, as after
            `initialise`). Its owners are `BACKGROUND` or ids >= 0, as `add_limit` and
            `market_order` require (the loop encodes an owner and an arrival rank in one
            field).
        params: The flow's parameters.
        episode_key: uint32 `(2,)`, from `parallax.rng.episode_key`.
        decision_index: int `()`, the draws' step: 0 is the warm-up, the interval after
            decision `k` (0-based) should use `k + 1`.
        start: float `()`, the book's time (the previous interval's `until`).
        until: float `()` >= `start`, the end of the interval.
        max_events: Bound on the loop's iterations, a positive int (static); see
            `default_max_events`.
        max_trades: Size of the trade ring buffer, a positive int (static).
        num_agents: Owners `0..num_agents-1` whose fills are accounted (static, >= 0).

    Returns:
        `(book, stats)`.

    Raises:
        ValueError: If a static argument is out of range.

    Example:
        >>> import jax
        >>> from parallax import rng
        >>> from parallax.finance._lob import FlowParams, initialise, run_flow
        >>> ek = rng.episode_key(jax.random.key(0))
        >>> book = initialise(64, FlowParams(), ek, mid=100)
        >>> book, stats = run_flow(book, FlowParams(), ek, 1, 0.0, 1.0, max_events=256)
        >>> bool(stats.truncated), bool(book.valid[0].any() & book.valid[1].any())
        (False, True)
    """
    for name, value, minimum in (
        ("max_events", max_events, 1),
        ("max_trades", max_trades, 1),
        ("num_agents", num_agents, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return _run_flow(
        book,
        params,
        episode_key,
        decision_index,
        start,
        until,
        max_events=int(max_events),
        max_trades=int(max_trades),
        num_agents=int(num_agents),
    )


# One jitted function at module level, so that the loop's program is traced and compiled
# once per shape and static arguments. Called outside `jit` (an eager `env.step`), a
# `lax.while_loop` whose body is a fresh closure compiles anew on every call (2-3 s a step
# for the LOB env); inside an outer `jit` this is inlined and changes nothing.
@functools.partial(jax.jit, static_argnames=("max_events", "max_trades", "num_agents"))
def _run_flow(
    book: Book,
    params: FlowParams,
    episode_key: Any,
    decision_index: Any,
    start: Any,
    until: Any,
    *,
    max_events: int,
    max_trades: int,
    num_agents: int,
) -> tuple[Book, FlowStats]:
    # (the arguments go in as leaves: `custom_vmap` rebuilds their pytrees with flags,
    # and `FlowParams` refuses flags)
    leaves, treedef = jax.tree.flatten((book, params, episode_key, decision_index, start, until))
    return _flow_program(treedef, max_events, max_trades, num_agents)(*leaves)


@functools.cache
def _flow_program(treedef: Any, max_events: int, max_trades: int, num_agents: int) -> Any:
    """The flow of one book as a `custom_vmap` function of the arguments' leaves: batched,
    it is `_run_flow_batched`."""
    setup = functools.partial(_setup, max_trades=max_trades, num_agents=num_agents)
    iterate = functools.partial(
        _iterate, max_events=max_events, max_trades=max_trades, num_agents=num_agents
    )

    @jax.custom_batching.custom_vmap
    def one(*leaves: Any) -> tuple[Book, FlowStats]:
        consts, carry = setup(*jax.tree.unflatten(treedef, leaves))
        carry = lax.while_loop(
            lambda c: _running(c, max_events), functools.partial(iterate, consts), carry
        )
        return _finish(consts, carry)

    @one.def_vmap
    def batched(axis_size: int, in_batched: Any, *leaves: Any) -> tuple[Any, Any]:
        leaves = tuple(
            x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))
            for x, b in zip(leaves, in_batched, strict=True)
        )
        args = jax.tree.unflatten(treedef, leaves)
        out = _run_flow_batched(axis_size, args, setup, iterate, max_events)
        return out, jax.tree.map(lambda _: True, out)

    return one


def _stage_sizes(n: int) -> tuple[int, ...]:
    """The batch sizes of `_run_flow_batched`'s stages: `n`, then `n // 4` from 128 books.

    Each stage compiles its own copy of the loop's body, so there are two: at N = 1024 a
    third stage (64 books) or halving down to 32 books (five more) gained nothing more.
    """
    return (n, n // 4) if n >= 128 else (n,)


def _run_flow_batched(
    n: int, args: Any, setup: Any, iterate: Any, max_events: int
) -> tuple[Book, FlowStats]:
    """The flow of `n` books (every argument batched), each as `_run_flow` runs it alone.

    A batched `while_loop` turns until its busiest book is done: at the LOB env's defaults
    a book needs 44 iterations on average and the busiest of 1024 about 70, so a third of
    the work would go to books that have finished. Here the loop runs in stages
    (`_stage_sizes`): all `n` books until at most `n / 4` are still running, then those,
    gathered, to the end. Each book goes through the same iterations as alone (a finished
    book's iteration changes nothing), so the results are the same, bit for bit. At
    N = 1024 the flow takes about 0.8 of the time of one batched loop.
    """
    consts, carry = jax.vmap(setup)(*args)
    iterate = jax.vmap(iterate)
    running = jax.vmap(functools.partial(_running, max_events=max_events))
    sizes = (*_stage_sizes(n), 0)

    def stage(consts: _Consts, carry: Any, keep: int) -> Any:
        # run until at most `keep` books are still running
        return lax.while_loop(
            lambda c: jnp.sum(running(c), dtype=jnp.int32) > keep,
            functools.partial(iterate, consts),
            carry,
        )

    carry = stage(consts, carry, sizes[1])
    for size, keep in itertools.pairwise(sizes[1:]):
        # the books still running (all of them: at most `size`), gathered
        index = _running_first(running(carry))[:size]
        part_consts, part = jax.tree.map(lambda x, i=index: x[i], (consts, carry))
        part = stage(part_consts, part, keep)
        carry = jax.tree.map(lambda x, y, i=index: x.at[i].set(y), carry, part)
    return jax.vmap(_finish)(consts, carry)


def _running_first(running: jax.Array) -> jax.Array:
    """The indices of a batch, those where `running` holds first (a stable partition)."""
    flag = running.astype(jnp.int32)
    ahead = jnp.cumsum(flag) - flag  # running books before each one
    behind = jnp.arange(flag.shape[0], dtype=jnp.int32) - ahead  # finished ones before it
    place = jnp.where(running, ahead, jnp.sum(flag) + behind)
    index = jnp.arange(flag.shape[0], dtype=jnp.int32)
    return jnp.zeros_like(index).at[place].set(index, unique_indices=True)


def warm_up(
    capacity: int,
    params: FlowParams,
    episode_key: Any,
    *,
    mid: Any,
    warmup: Any,
    max_events: int,
    levels: int = _SEED_LEVELS,
    orders_per_level: int = _SEED_ORDERS_PER_LEVEL,
) -> tuple[Book, FlowStats]:
    """`initialise`, then the flow over `(0, warmup]` at decision index 0 (sekai's `start`).

    Args:
        capacity, params, episode_key, mid, levels, orders_per_level: As in `initialise`.
        warmup: float `()` >= 0, the warm-up's length (0: no events).
        max_events: Bound on the warm-up's loop iterations (static).

    Returns:
        `(book, stats)` of the warm-up; the session starts at time `warmup`.
    """
    book = initialise(
        capacity, params, episode_key, mid=mid, levels=levels, orders_per_level=orders_per_level
    )
    return run_flow(book, params, episode_key, 0, 0.0, warmup, max_events=max_events)
