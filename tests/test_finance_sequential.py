"""Sequential episode windows that survive resets, inside `jit`, against sekai 0.2.0.

sekai's `SequentialStart` keeps its position across resets, and its native vector env gives
each sub-env its own `sampler.spawn()` copy. Ours reads the finished episode's window from
`reset(key=..., previous=state)`, which `AutoResetWrapper` and `VmapWrapper` pass to envs
that declare `reset_uses_previous` (and only to them).
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
import sekai.finance as sf
from finance_support import assert_values_match
from test_finance_trading import _compare_vector_step

import parallax
from parallax import AutoResetWrapper, State, TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax import finance as pf
from parallax.envs import GridWorld

# 40 rows, window 3 + 5 + 1 = 9 rows: 32 windows, 7 episodes per epoch with the default stride.
ROWS, LOOKBACK, LENGTH = 40, 3, 5
SHORT = {"episode_length": LENGTH, "lookback": LOOKBACK}


def _history(rows=ROWS, assets=None, seed=0):
    shape = (rows,) if assets is None else (rows, assets)
    steps = np.random.default_rng(seed).normal(0.0, 0.01, shape)
    return 100 * np.exp(np.cumsum(steps, axis=0))


def _first_rows(env, count):
    """The first-decision rows of `count` episodes of sekai's sequential walk (host-side)."""
    return [int(r) for r in env.sequential_starts(count)]


def _scan(vec, key, actions):
    """Reset, then step through `actions` in one jitted `lax.scan`; per-step outputs."""

    @jax.jit
    def run(key, actions):
        def body(state, action):
            state = vec.step(state, action)
            out = (state.observation, state.reward, state.termination, state.truncation)
            return state, (*out, state.info)

        first = vec.reset(key=key)
        return first, jax.lax.scan(body, first, actions)[1]

    first, outs = run(key, actions)
    return jax.device_get((first.observation, first.info)), jax.device_get(outs)


def _against_sekai_native(env_id, kwargs, actions, *, limit=None, max_resets_per_step="auto"):
    """Run `make_vec` under jit + scan and sekai's native vector env; compare every step.

    Returns the `(steps, lanes)` done flags and the `(steps, lanes)` timestamps (the new
    episode's decision row where a sub-env just reset).
    """
    lanes = actions.shape[1]
    ref = sekai.make_vec(
        env_id, lanes, vectorization_mode="native", max_episode_steps=limit, **kwargs
    )
    with jax.enable_x64(True):
        vec = parallax.make_vec(
            env_id,
            lanes,
            max_episode_steps=limit,
            max_resets_per_step=max_resets_per_step,
            **kwargs,
        )
        (observation, info), (obs, reward, term, trunc, infos) = _scan(
            vec, jax.random.key(0), jnp.asarray(actions)
        )
    out = ref.reset(seed=0)
    assert_values_match(observation, out.observations, "reset")
    assert info["timestamp"].tolist() == [int(i["timestamp"]) for i in out.infos]
    done = np.zeros(actions.shape[:2], bool)
    for t in range(actions.shape[0]):
        out = ref.step(actions[t])
        state = types.SimpleNamespace(
            observation=jax.tree.map(lambda x, t=t: x[t], obs),
            reward=reward[t],
            termination=term[t],
            truncation=trunc[t],
            info=jax.tree.map(lambda x, t=t: x[t], infos),
        )
        _compare_vector_step(state, out, lanes, f"step {t + 1}")
        done[t] = out.dones
    ref.close()
    return done, infos["timestamp"]


def _episode_rows(done, stamps):
    """Per lane, the first-decision rows of the episodes started by auto-resets, in order."""
    return [stamps[done[:, i], i].tolist() for i in range(done.shape[1])]


# ------------------------------------------------------------- differential vs sekai
@pytest.mark.parametrize(
    ("sampler", "limit"),
    [("sequential", None), (sf.SequentialStart(start=2, stride=7), 4)],
    ids=["default", "stride-and-time-limit"],
)
def test_make_vec_sequential_matches_sekai_native_over_several_wraps(sampler, limit):
    kwargs = {"prices": _history(), "sampler": sampler, **SHORT}
    lanes, steps = 3, 120
    actions = np.random.default_rng(1).integers(0, 3, (steps, lanes)).astype(np.int32)
    done, stamps = _against_sekai_native("Trading-v0", kwargs, actions, limit=limit)
    env = pf.TradingEnv(**kwargs)
    per_episode = limit or LENGTH
    episodes = steps // per_episode
    want = _first_rows(env, episodes + 1)[1:]
    assert _episode_rows(done, stamps) == [want] * lanes
    per_epoch = pf.as_sampler(sampler).episodes_per_epoch(env.n_starts, LENGTH)
    assert episodes >= 3 * per_epoch  # the walk wrapped around at least three times


def test_portfolio_make_vec_sequential_matches_sekai_native():
    kwargs = {"prices": _history(assets=2, seed=3), "sampler": "sequential", **SHORT}
    lanes, steps = 2, 80
    actions = np.random.default_rng(2).uniform(0, 1, (steps, lanes, 3)).astype(np.float32)
    done, stamps = _against_sekai_native("Portfolio-v0", kwargs, actions, limit=3)
    want = _first_rows(pf.PortfolioEnv(**kwargs), steps // 3 + 1)[1:]
    assert _episode_rows(done, stamps) == [want] * lanes


def test_partial_reset_path_matches_sekai_native_when_lanes_end_apart():
    # A 100x position wipes an account out on a -1% day: lanes that lever up on different
    # days end on different steps, so many auto-resets take the K-slot path (K = 4 of 32).
    kwargs = {"prices": _history(seed=7), "sampler": "sequential", "positions": (0.0, 100.0)}
    kwargs.update(SHORT)
    lanes, steps, budget = 32, 60, 4
    actions = (np.random.default_rng(3).random((steps, lanes)) < 0.5).astype(np.int32)
    done, stamps = _against_sekai_native("Trading-v0", kwargs, actions, max_resets_per_step=budget)
    counts = done.sum(axis=1)
    assert np.any((counts >= 1) & (counts <= budget)), counts  # the K-slot path ran
    assert np.any(counts > budget), counts  # and the all-envs path
    assert len({tuple(rows) for rows in _episode_rows(done, stamps)}) > 1  # lanes diverged


# --------------------------------------------------------------- single env, wrappers
@pytest.mark.parametrize("mode", ["same-step", "next-step"])
def test_single_env_walks_the_history_across_auto_resets(x64, mode):
    env = pf.TradingEnv(_history(), sampler="sequential", **SHORT)
    stack = AutoResetWrapper(env, mode=mode)
    # next-step spends one extra step per episode on the reset
    per_episode = LENGTH + (mode == "next-step")
    episodes = 16

    @jax.jit
    def run(key):
        def body(state, _):
            state = stack.step(state, jnp.int32(2))
            return state, (state.step_count, state.info["timestamp"])

        first = stack.reset(key=key)
        return first.info["timestamp"], jax.lax.scan(body, first, None, episodes * per_episode)

    first, (_, (count, stamps)) = run(jax.random.key(0))
    count, stamps = np.asarray(count), np.asarray(stamps)
    starts = [int(first), *stamps[count == 0].tolist()]
    assert starts == _first_rows(env, len(starts))
    assert len(starts) == episodes + 1


def test_time_limit_passes_previous_on():
    env = pf.TradingEnv(_history(), sampler=pf.SequentialStart(start=1, stride=3), **SHORT)
    stack = AutoResetWrapper(TimeLimit(env, max_steps=2))
    state = stack.reset(key=jax.random.key(0))
    step = jax.jit(stack.step)
    starts = [int(state.info["timestamp"])]
    for _ in range(12):
        state = step(state, jnp.int32(0))
        if int(state.step_count) == 0:
            starts.append(int(state.info["timestamp"]))
    assert starts == _first_rows(env, 7)


def test_next_step_make_vec_walks_each_lane():
    kwargs = {"prices": _history(), "sampler": "sequential", **SHORT}
    vec = parallax.make_vec("Trading-v0", 2, autoreset="next-step", **kwargs)
    (_, info), (*_, infos) = _scan(vec, jax.random.key(0), jnp.zeros((30, 2), jnp.int32))
    stamps = np.asarray(infos["timestamp"])
    # every sixth step is the reset step: the next window's first decision
    want = _first_rows(pf.TradingEnv(**kwargs), 6)
    assert info["timestamp"].tolist() == [want[0]] * 2
    assert stamps[LENGTH::6].tolist() == [[row, row] for row in want[1:]]


@pytest.mark.parametrize("budget", [None, 4], ids=["all-envs", "k-slot"])
def test_selective_reset_moves_only_the_done_envs_to_their_next_window(budget):
    env = pf.TradingEnv(_history(), sampler="sequential", **SHORT)
    vec = VmapWrapper(env, 32, max_resets_per_step=budget)
    rows = _first_rows(env, 8)
    reset = jax.jit(lambda key, state, done: vec.reset(key=key, state=state, done=done))
    state = vec.reset(key=jax.random.key(0))
    walked = np.zeros(32, int)
    for k, lanes in enumerate([[3], [3, 17, 30], [0, 3], list(range(12)), [3, 30]]):
        done = np.zeros(32, bool)
        done[lanes] = True
        before = state
        state = reset(jax.random.key(k + 1), state, jnp.asarray(done))
        walked[done] += 1
        assert state.info["timestamp"].tolist() == [rows[w] for w in walked]
        kept = jax.tree.map(lambda x, d=done: x[~d], (before.observation, before.env_state))
        same = jax.tree.map(lambda x, d=done: x[~d], (state.observation, state.env_state))
        assert all(
            bool(jnp.array_equal(a, b))
            for a, b in zip(jax.tree.leaves(kept), jax.tree.leaves(same), strict=True)
        )
    assert walked.max() == 5 and walked[3] == 5


def test_plain_reset_starts_the_walk_again_and_start_overrides():
    env = pf.TradingEnv(_history(), sampler="sequential", **SHORT)
    rows = _first_rows(env, 3)
    first = env.reset(key=jax.random.key(0))
    second = env.reset(key=jax.random.key(1), previous=first)
    assert int(first.info["timestamp"]) == rows[0]
    assert int(second.info["timestamp"]) == rows[1]
    assert int(env.reset(key=jax.random.key(2)).info["timestamp"]) == rows[0]
    moved = env.reset(key=jax.random.key(3), previous=second, start=20)
    assert int(moved.info["timestamp"]) == 20
    # the walk goes on from the window that was given
    after = env.reset(key=jax.random.key(4), previous=moved)
    assert int(after.info["timestamp"]) == 20 + LENGTH
    assert env.reset_uses_previous


def test_reset_with_start_works_on_a_sequential_batch():
    vec = parallax.make_vec("Trading-v0", 3, prices=_history(), sampler="sequential", **SHORT)
    state = pf.reset_with_start(vec, key=jax.random.key(0), start=[5, 20, -LENGTH - 1])
    assert state.info["timestamp"].tolist() == [5, 20, ROWS - LENGTH - 1]
    step = jax.jit(vec.step)
    for _ in range(LENGTH):
        state = step(state, jnp.zeros(3, jnp.int32))
    assert state.info["timestamp"].tolist() == [5 + LENGTH, 20 + LENGTH, LOOKBACK]


# ------------------------------------------------------------ envs without the hook
class _StrictGridWorld(GridWorld):
    """GridWorld whose reset refuses any keyword but `key` (and counts its traces)."""

    traces = 0

    def reset(self, *, key):  # no **kwargs: a `previous=` would raise TypeError
        type(self).traces += 1
        return super().reset(key=key)


@pytest.mark.parametrize("mode", ["same-step", "next-step"])
def test_envs_without_the_hook_never_get_previous(mode):
    env = _StrictGridWorld()
    single = AutoResetWrapper(TimeLimit(env, 2), mode=mode)
    batch = VmapAutoResetWrapper(TimeLimit(env, 2), 32, mode, max_resets_per_step=4)
    plain = VmapWrapper(TimeLimit(env, 2), 32, max_resets_per_step=4)
    state = jax.jit(lambda k: single.step(single.reset(key=k), jnp.int32(0)))(jax.random.key(0))
    assert int(state.step_count) == 1
    state = batch.reset(key=jax.random.key(0))
    state = jax.jit(batch.step)(state, jnp.zeros(32, jnp.int32))
    state = plain.reset(key=jax.random.key(0))
    for done in (np.arange(32) < 3, np.arange(32) < 20):
        plain.reset(key=jax.random.key(1), state=state, done=jnp.asarray(done))
    assert _StrictGridWorld.traces > 0
    assert not hasattr(env, "reset_uses_previous")


def test_other_samplers_do_not_declare_the_hook_and_ignore_previous():
    for sampler in ("random", 4):
        env = pf.TradingEnv(_history(), sampler=sampler, **SHORT)
        assert not env.reset_uses_previous
        first = env.reset(key=jax.random.key(0))
        again = env.reset(key=jax.random.key(0), previous=first)
        assert int(again.info["timestamp"]) == int(first.info["timestamp"])
    assert not pf.TradingEnv(sampler="sequential", **SHORT).reset_uses_previous  # simulated


class _Forgetful(pf.TradingEnv):
    """A sequential env that does not declare the hook: proof that the checks can fail."""

    reset_uses_previous = False


def test_without_the_hook_every_episode_starts_at_the_first_window():
    env = _Forgetful(_history(), sampler="sequential", **SHORT)
    vec = VmapAutoResetWrapper(env, 2)
    _, (*_, truncated, infos) = _scan(vec, jax.random.key(0), jnp.zeros((15, 2), jnp.int32))
    restarts = np.asarray(infos["timestamp"])[np.asarray(truncated)]
    assert restarts.size == 3 * 2
    assert set(restarts.tolist()) == {_first_rows(env, 1)[0]}  # not the walk's next windows


def test_env_state_structure_is_unchanged_by_previous():
    env = pf.TradingEnv(_history(), sampler="sequential", **SHORT)
    first = env.reset(key=jax.random.key(0))
    second = jax.jit(lambda k, p: env.reset(key=k, previous=p))(jax.random.key(1), first)
    assert jax.tree.structure(first) == jax.tree.structure(second)
    assert isinstance(second, State)
