"""`LimitOrderBookReplay-v0` and `LimitOrderBookReplayExecution-v0`: a LOBSTER day replayed.

The contract an outsider can check: with `noop_action` at every step, the replayed book's
best bid and ask (`info`) and its depth equal the orderbook file after each message
(`info["message_index"]`), from any window start, in float32 and x64. Files come from
`tests/lobster_files.py` (a stream drawn against sekai's `OrderBook`, with more levels in the
file than the book ever holds, so the snapshot a window opens on is complete). Then the
agent's orders against the replay (the module rules of `_replay.py`, on hand-built books),
the execution task with its TWAP and immediate baselines, constructor errors, the battery.
"""

from __future__ import annotations

import dataclasses
import pathlib

import _lob_cases as cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax.finance import (
    LimitOrderBookReplayEnv,
    LimitOrderBookReplayExecutionEnv,
    SequentialStart,
    immediate_policy,
    twap_policy,
)
from parallax.finance._lob import _replay
from parallax.finance._lob._book import ASK, BID, add_limit, empty_book
from parallax.finance._lob._book_queries import depth_levels
from parallax.finance._lob._decision import AGENT
from parallax.finance._lob._lobster import LOBSTER_ASK_DUMMY, LOBSTER_BID_DUMMY
from parallax.finance.lob import CANCEL, DELETE, EXECUTE, SUBMIT, load_lobster
from parallax.testing import run_battery

LEVELS = 12  # the generator's prices span fewer levels a side: every snapshot is complete
STEPS = 50
STARTS = (1, 37, 101, 149)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("sekai.finance.lob")
    from lobster_files import write_lobster_files

    w = write_lobster_files(tmp_path_factory.mktemp("replay"), seed=11, n=200, levels=LEVELS)
    return load_lobster(w.message_file, w.orderbook_file, levels=LEVELS)


def _lobster(prices, sizes, dummy):
    prices, sizes = np.asarray(prices, np.int64), np.asarray(sizes, np.int64)
    return np.where(sizes > 0, prices * 100, dummy), sizes


def _noop_replay(env, starts):
    """Each window's `(info, depth)` after every step of `noop_action`, in one program."""

    def episode(key, start):
        state = env.reset(key=key, start=start)

        def step(state, _):
            state = env.step(state, env.noop_action)
            return state, (state.info, depth_levels(state.env_state.book, LEVELS))

        return jax.lax.scan(step, state, None, length=STEPS)[1]

    keys = jax.random.split(jax.random.key(0), len(starts))
    return jax.jit(jax.vmap(episode))(keys, jnp.asarray(starts, jnp.int32))


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "x64"])
def test_noop_replay_is_the_orderbook_file_after_every_message(data, x64):
    with jax.enable_x64(x64):
        env = LimitOrderBookReplayEnv(data=data, n_steps=STEPS, messages_per_step=1, levels=4)
        info, (bp, bs, ap, asz) = _noop_replay(env, STARTS)
        wide = np.int64 if x64 else np.int32
        assert info["best_bid"].dtype == wide and info["best_ask"].dtype == wide
        assert env.empty_ask == (LOBSTER_ASK_DUMMY if x64 else np.iinfo(np.int32).max)
    index = np.asarray(info["message_index"])
    np.testing.assert_array_equal(index, np.asarray(STARTS)[:, None] + np.arange(STEPS))
    assert not np.any(info["rejected"]) and not np.any(info["overflow"])
    bid_p, bid_s = _lobster(bp, bs, LOBSTER_BID_DUMMY)
    ask_p, ask_s = _lobster(ap, asz, LOBSTER_ASK_DUMMY)
    np.testing.assert_array_equal(bid_p, data.bid_price[index])
    np.testing.assert_array_equal(bid_s, data.bid_size[index])
    np.testing.assert_array_equal(ask_p, data.ask_price[index])
    np.testing.assert_array_equal(ask_s, data.ask_size[index])
    if x64:  # LOBSTER's own values, empty sides included
        np.testing.assert_array_equal(info["best_bid"], data.bid_price[index, 0])
        np.testing.assert_array_equal(info["best_ask"], data.ask_price[index, 0])
    else:  # int32: an empty side reads int32's limits
        present = data.bid_size[index, 0] > 0
        np.testing.assert_array_equal(
            info["best_bid"], np.where(present, data.bid_price[index, 0], np.iinfo(np.int32).min)
        )
    np.testing.assert_allclose(info["timestamp"], data.times[index], rtol=1e-6)
    # the windows did exercise rule 2: messages on orders placed before their window
    day = env.day
    kinds = day.messages[:, 0]
    refers = (kinds == CANCEL) | (kinds == DELETE) | (kinds == EXECUTE)
    for start in STARTS[1:]:
        window = np.arange(start, start + STEPS)
        before = refers[window] & (day.origin[window] < start)
        assert before.sum() >= 3, start


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "x64"])
def test_an_empty_side_reads_lobsters_value(tmp_path: pathlib.Path, x64):
    (tmp_path / "m.csv").write_text(
        "34200.0,1,1,100,1000100,-1\n34200.1,1,2,50,999900,1\n34200.2,3,1,100,1000100,-1\n"
    )
    (tmp_path / "b.csv").write_text(
        "1000100,100,-9999999999,0\n1000100,100,999900,50\n9999999999,0,999900,50\n"
    )
    day = load_lobster(tmp_path / "m.csv", tmp_path / "b.csv", levels=1)
    with jax.enable_x64(x64):
        env = LimitOrderBookReplayEnv(data=day, n_steps=2, messages_per_step=1, sampler=0)
        state = env.reset(key=jax.random.key(0))
        bids, asks = [int(state.info["best_bid"])], [int(state.info["best_ask"])]
        step = jax.jit(env.step)
        for _ in range(2):
            state = step(state, env.noop_action)
            bids.append(int(state.info["best_bid"]))
            asks.append(int(state.info["best_ask"]))
    empty_bid, empty_ask = (LOBSTER_BID_DUMMY, LOBSTER_ASK_DUMMY) if x64 else (-(2**31), 2**31 - 1)
    assert bids == [empty_bid, 999900, 999900] and asks == [1000100, 1000100, empty_ask]
    if x64:
        assert bids == day.bid_price[:, 0].tolist() and asks == day.ask_price[:, 0].tolist()


def test_steps_of_many_messages_end_on_the_file(data):
    env = LimitOrderBookReplayEnv(data=data, n_steps=6, messages_per_step=25, sampler=20)
    state = env.reset(key=jax.random.key(1))
    assert int(state.info["message_index"]) == 20 and int(state.env_state.start) == 21
    step = jax.jit(env.step)
    for k in range(6):
        state = step(state, env.noop_action)
        i = 20 + 25 * (k + 1)
        assert int(state.info["message_index"]) == i
        bp, bs, ap, asz = depth_levels(state.env_state.book, LEVELS)
        np.testing.assert_array_equal(_lobster(bp, bs, LOBSTER_BID_DUMMY)[0], data.bid_price[i])
        np.testing.assert_array_equal(_lobster(ap, asz, LOBSTER_ASK_DUMMY)[1], data.ask_size[i])
    assert bool(state.termination) and float(state.info["wealth"]) == 0.0


def test_window_samplers(data):
    env = LimitOrderBookReplayEnv(data=data, n_steps=10, messages_per_step=5)
    starts = jax.jit(jax.vmap(lambda k: env.reset(key=k).env_state.start))(
        jax.random.split(jax.random.key(2), 64)
    )
    assert int(starts.min()) >= 1 and int(starts.max()) <= env.n_valid == len(data) - 50
    assert len(np.unique(np.asarray(starts))) > 20
    walk = LimitOrderBookReplayEnv(
        data=data, n_steps=10, messages_per_step=5, sampler=SequentialStart(start=3, stride=7)
    )
    assert walk.reset_uses_previous
    reset = jax.jit(lambda key, previous=None: walk.reset(key=key, previous=previous))
    first = reset(jax.random.key(0))
    second = reset(jax.random.key(0), first)
    assert (int(first.env_state.start), int(second.env_state.start)) == (4, 11)
    with pytest.raises(ValueError, match=r"start must be a message in 1\.\.150"):
        env.reset(key=jax.random.key(0), start=0)


# -- the agent's orders in the replay (the rules of _replay.py) -----------------------------
def _book_with(*orders, capacity=8):
    """A book of `(side, price, size, owner)` orders in arrival order."""
    book = empty_book(capacity)
    for side, price, size, owner in orders:
        book, _ = add_limit(book, side, price, size, owner)
    return book


def _message(kind, order_id, size, price_ticks, side):
    return jnp.array([kind, order_id, size, price_ticks * 100, side], jnp.int32)


def _apply(book, message, origin=0, start=0):
    return jax.jit(_replay.replay_message, static_argnames="tick")(
        book, message, jnp.int32(origin), jnp.int32(start), tick=100
    )


def test_an_agent_order_ahead_takes_the_execution_first():
    # the historical order 7 rests at 101; the agent's ask at 100 has a better price
    book = _book_with((ASK, 101, 50, 7), (ASK, 100, 20, AGENT))
    new, r = _apply(book, _message(EXECUTE, 7, 30, 101, ASK))
    assert (int(r.agent_size), int(r.agent_price)) == (20, 100)
    bought, sold, cash, fills = (int(x) for x in _replay.agent_trades(r))
    assert (bought, sold, cash, fills) == (0, 20, 2000, 1)
    # the rest of the execution (10) hit order 7, which keeps 40
    _, _, ap, asz = depth_levels(new, 2)
    assert ap.tolist() == [101, 0] and asz.tolist() == [40, 0]


def test_an_agent_order_behind_the_executed_one_is_not_filled():
    # same price, later arrival: the historical order keeps its priority
    book = _book_with((BID, 99, 50, 7), (BID, 99, 20, AGENT))
    new, r = _apply(book, _message(EXECUTE, 7, 30, 99, BID))
    assert int(r.agent_size) == 0 and int(r.status) == 0
    assert sorted(np.asarray(new.size[0][new.valid[0]]).tolist()) == [20, 20]
    # same price, earlier arrival: the agent's bid is bought into first
    book = _book_with((BID, 99, 20, AGENT), (BID, 99, 50, 7))
    new, r = _apply(book, _message(EXECUTE, 7, 30, 99, BID))
    assert int(r.agent_size) == 20
    assert tuple(int(x) for x in _replay.agent_trades(r)) == (20, 0, -1980, 1)
    assert np.asarray(new.size[0][new.valid[0]]).tolist() == [40]


def test_a_historical_submission_can_cross_the_agent():
    book = _book_with((ASK, 100, 20, AGENT))
    new, r = _apply(book, _message(SUBMIT, 9, 30, 100, BID))  # a buy at the agent's price
    assert tuple(int(x) for x in _replay.agent_trades(r)) == (0, 20, 2000, 1)
    bp, bs, _, asz = depth_levels(new, 1)
    assert (int(bp[0]), int(bs[0]), int(asz[0])) == (100, 10, 0)


def test_orders_from_before_the_window_are_the_snapshot_levels():
    rows = jnp.array([[99, 98], [70, 30], [101, 0], [40, 0]], jnp.int32)  # two bids, one ask
    book = _replay.snapshot_book(rows, 6)
    assert int(book.next_id) == 5 and book.owner[0, :2].tolist() == [-2, -3]
    # a deletion of order 5 (placed before the window, origin -1) of 25 at 99: a cancel of
    # 25 on the snapshot level; an execution at 98 takes the second level
    new, r = _apply(book, _message(DELETE, 5, 25, 99, BID), origin=-1, start=10)
    assert int(r.status) == 0 and depth_levels(new, 2)[1].tolist() == [45, 30]
    new, r = _apply(new, _message(EXECUTE, 6, 30, 98, BID), origin=3, start=10)
    assert int(r.status) == 0 and depth_levels(new, 2)[1].tolist() == [45, 0]
    # an order placed in the window (origin >= start) is found by its id only: unknown here
    same, r = _apply(new, _message(CANCEL, 5, 5, 99, BID), origin=12, start=10)
    assert int(r.status) == parallax.finance.lob.UNKNOWN_ID
    assert depth_levels(same, 1)[1].tolist() == [45]
    # no snapshot order at that price: changes nothing
    same, r = _apply(new, _message(CANCEL, 5, 5, 97, BID), origin=-1, start=10)
    assert int(r.status) == parallax.finance.lob.UNKNOWN_ID


def test_the_replay_env_books_the_agents_fills(data):
    # join the best bid and ask every step: the flow's executions and crossing submissions
    # fill the agent; the account and the wealth identity stay exact
    env = LimitOrderBookReplayEnv(
        data=data, n_steps=20, messages_per_step=5, order_size=10, max_inventory=100, sampler=30
    )
    state = env.reset(key=jax.random.key(0))
    step = jax.jit(env.step)
    total = 0.0
    for _ in range(20):
        state = step(state, jnp.array([1, 1, 1]))
        total += float(state.reward)
        for name, fn in env.invariants.items():
            assert bool(fn(state)), name
    account = state.env_state.account
    assert int(account.bought) + int(account.sold) > 0
    assert np.isclose(total, float(state.info["wealth"]), atol=1e-3)


# -- the execution task --------------------------------------------------------------------
@pytest.fixture(scope="module")
def execution(data):
    return LimitOrderBookReplayExecutionEnv(
        data=data, quantity=200, n_steps=8, messages_per_step=10, sampler=60
    )


def _rollout(env, policy):
    def body(state, _):
        state = env.step(state, policy(state))
        return state, (state.reward, state.info)

    state = env.reset(key=jax.random.key(0))
    return jax.jit(lambda s: jax.lax.scan(body, s, None, length=env.n_steps))(state)


def test_twap_and_immediate_baselines(execution):
    env = execution
    _, (r_twap, twap) = _rollout(env, twap_policy(env))
    _, (r_now, now) = _rollout(env, immediate_policy(env))
    # TWAP sells remaining / steps left: 25 a step while the bids take it
    sold = np.asarray(twap["sold"])
    assert sold[0] == 25 and sold[-1] == 200 and np.all(np.diff(sold) >= 0)
    assert np.asarray(now["sold"])[0] == 200  # the opening bids take it all
    for rewards, info in ((r_twap, twap), (r_now, now)):
        assert int(info["remaining"][-1]) == 0
        # the return is the episode's shortfall in bps of the arrival value
        np.testing.assert_allclose(np.cumsum(rewards), info["shortfall_bps"], atol=1e-3)
        expected = (float(info["proceeds"][-1]) / 200 / float(info["arrival_mid"][-1]) - 1) * 1e4
        np.testing.assert_allclose(float(info["shortfall_bps"][-1]), expected, atol=1e-2)
        assert float(info["vwap"][-1]) < float(info["arrival_mid"][-1])  # sellers pay spread
    # selling at once walks the book deeper: a worse price than spreading it out
    assert float(now["shortfall_bps"][-1]) < float(twap["shortfall_bps"][-1])


def test_the_last_step_sells_what_is_left(execution):
    env = execution
    _, (_, info) = _rollout(env, lambda s: jnp.asarray(env.noop_action))
    sold = np.asarray(info["sold"])
    assert np.all(sold[:-1] == 0) and sold[-1] == 200


def test_a_resting_sell_rests_at_the_best_ask(execution):
    env = execution
    state = env.reset(key=jax.random.key(0))
    best_ask = int(state.info["best_ask"]) // 100
    state = jax.jit(env.step)(state, jnp.array([0.0, 0.5], jnp.float32))
    book = state.env_state.book
    mine = np.asarray(book.valid[1] & (book.owner[1] == AGENT))
    assert mine.sum() == 1 and not np.any(book.valid[0] & (book.owner[0] == AGENT))
    size = int(np.asarray(book.size[1])[mine][0])
    assert int(np.asarray(book.price[1])[mine][0]) == best_ask
    assert size + int(state.info["sold"]) == 100  # half of the 200, resting or sold
    assert float(state.observation["agent"][2]) == size / 200
    # the next step cancels it and rests the new fraction: still one order
    state = jax.jit(env.step)(state, jnp.array([0.0, 0.1], jnp.float32))
    book = state.env_state.book
    assert int(np.sum(book.valid[1] & (book.owner[1] == AGENT))) == 1


# -- construction -------------------------------------------------------------------------
def test_constructor_errors(data, tmp_path: pathlib.Path):
    with pytest.raises(TypeError, match="needs data="):
        parallax.make("LimitOrderBookReplay-v0")
    with pytest.raises(TypeError, match="data must be a LobsterData"):
        LimitOrderBookReplayEnv(data=np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"n_steps \* messages_per_step = 200 must be < the"):
        LimitOrderBookReplayEnv(data=data, n_steps=20, messages_per_step=10)
    with pytest.raises(ValueError, match=r"capacity must be >= the file's levels \+ 2 = 14"):
        LimitOrderBookReplayEnv(data=data, n_steps=5, capacity=13)
    with pytest.raises(ValueError, match="messages_per_step must be an int >= 1, got 0"):
        LimitOrderBookReplayEnv(data=data, messages_per_step=0)
    with pytest.raises(TypeError, match=r"n_steps must be an int, got 2\.5"):
        LimitOrderBookReplayEnv(data=data, n_steps=2.5)
    with pytest.raises(ValueError, match="sampler start 500 is beyond the last window"):
        LimitOrderBookReplayEnv(data=data, n_steps=2, sampler=500)
    with pytest.raises(ValueError, match="quantity must be an int >= 1, got -3"):
        LimitOrderBookReplayExecutionEnv(data=data, n_steps=2, quantity=-3)
    (tmp_path / "m.csv").write_text("1.0,1,1,10,1000150,-1\n2.0,3,1,10,1000150,-1\n")
    (tmp_path / "b.csv").write_text("1000150,10,-9999999999,0\n9999999999,0,-9999999999,0\n")
    off_grid = load_lobster(tmp_path / "m.csv", tmp_path / "b.csv", levels=1)
    with pytest.raises(ValueError, match=r"orderbook row 1, ask level 1: price 1000150 is not"):
        LimitOrderBookReplayEnv(data=off_grid, n_steps=1, messages_per_step=1)
    env = LimitOrderBookReplayEnv(data=off_grid, tick=50, n_steps=1, messages_per_step=1)
    assert env.capacity >= 3 and env.tick == 50


def test_registered_and_exported():
    from parallax import _ids, _registry

    for env_id in ("LimitOrderBookReplay-v0", "LimitOrderBookReplayExecution-v0"):
        assert env_id in _registry._REGISTRY and env_id in _ids.BUILTIN_IDS
    assert parallax.finance.LimitOrderBookReplayEnv is LimitOrderBookReplayEnv


# -- the battery ----------------------------------------------------------------------------
# the execution task gets the whole single-agent list; the replay env, which shares its
# message loop, the checks of its own invariants and scripts (each check compiles anew)
CHECKS = {
    "replay": ["contract", "determinism", "invariant_sweep", "scripted_policies"],
    "execution": [*cases.F32_CHECKS, "scripted_policies"],
}


@pytest.mark.slow  # the whole validation battery on the book (`make test-slow`)
@pytest.mark.parametrize("kind", ["replay", "execution"])
def test_battery(data, kind):
    def make():
        if kind == "replay":
            return LimitOrderBookReplayEnv(data=data, n_steps=3, messages_per_step=4, levels=3)
        return LimitOrderBookReplayExecutionEnv(
            data=data, quantity=50, n_steps=3, messages_per_step=4, levels=3
        )

    outcomes = run_battery(
        make,
        num_steps=4,
        batch_size=2,
        checks=CHECKS[kind],
        options={
            "invariant_envs": 2,
            "invariant_steps": 4,
            "disable_jit": False,
            "scripted_keys": 2,
        },
    )
    cases.assert_battery_passed(outcomes, CHECKS[kind])


def test_each_invariant_catches_a_broken_state(execution):
    state = execution.reset(key=jax.random.key(0))
    state = jax.jit(execution.step)(state, jnp.array([0.2, 0.5]))
    checks = execution.invariants
    assert all(bool(fn(state)) for fn in checks.values())
    es = state.env_state
    broken = {
        "sold_within_quantity": dataclasses.replace(
            es, account=dataclasses.replace(es.account, bought=es.account.bought + 1)
        ),
        "one_resting_sell": dataclasses.replace(
            es, book=dataclasses.replace(es.book, owner=jnp.where(es.book.valid, AGENT, 0))
        ),
        "proceeds_identity": dataclasses.replace(
            es, account=dataclasses.replace(es.account, cash=-es.account.cash - 1)
        ),
        "message_clock": dataclasses.replace(es, start=es.start + 1),
    }
    for name, env_state in broken.items():
        assert not bool(checks[name](dataclasses.replace(state, env_state=env_state))), name
    wrong = dataclasses.replace(state, info={**state.info, "best_bid": state.info["best_bid"] + 1})
    assert not bool(checks["best_prices_of_the_book"](wrong))
