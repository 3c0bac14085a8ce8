"""The training wrappers: episode statistics, normalisation and transforms.

Each wrapper is checked on a single env and under `VmapWrapper`, composed with `TimeLimit`
and `AutoResetWrapper`, keeping the state type (`MaskedState`), with float32 and x64, and
the statistics wrappers are compared number for number with sekai's vector wrappers on
identical observation and reward streams.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai

import parallax
from parallax import (
    AutoResetWrapper,
    ClipAction,
    FlattenObservation,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    State,
    TimeLimit,
    TransformAction,
    TransformObservation,
    TransformReward,
    VmapAutoResetWrapper,
    VmapWrapper,
    rollout,
    spaces,
)
from parallax.envs import GridWorld, MaskedState

T, N, D = 40, 6, 3


def _float() -> jnp.dtype:
    return jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64))


# -- reference streams -------------------------------------------------------------------------
def _stream_tables(seed: int = 0) -> dict[str, np.ndarray]:
    """Random observation / reward / flag streams, cast to the current float dtype."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(_float())

    def obs(*shape):
        return (5.0 + 3.0 * rng.normal(size=shape) * np.arange(1, D + 1)).astype(dt)

    term = rng.random((T, N)) < 0.08
    trunc = (rng.random((T, N)) < 0.05) & ~term
    return {
        "obs0": obs(N, D),
        "step_obs": obs(T, N, D),
        "reset_obs": obs(T, N, D),
        "rewards": (2.0 + rng.normal(size=(T, N))).astype(dt),
        "term": term,
        "trunc": trunc,
    }


class StreamVecEnv:
    """A native, same-step auto-resetting vector env replaying fixed streams."""

    autoreset_mode = "same-step"
    action_space = spaces.Discrete(2)

    def __init__(self, tables: dict[str, np.ndarray]) -> None:
        self.num_envs = N
        self.observation_space = spaces.Box(-np.inf, np.inf, (D,), _float())
        self.t = {k: jnp.asarray(v) for k, v in tables.items()}

    def reset(self, *, key, state=None, done=None) -> State:
        obs = self.t["obs0"]
        return State(
            env_state=jnp.zeros(N, jnp.int32),
            observation=obs,
            reward=jnp.zeros(N, _float()),
            termination=jnp.zeros(N, bool),
            truncation=jnp.zeros(N, bool),
            info={"final_observation": obs, "final_info": {}},
            step_count=jnp.zeros(N, jnp.int32),
            key=jax.random.split(key, N),
        )

    def step(self, state: State, action) -> State:
        t = state.env_state
        i = jnp.arange(N)
        terminal = self.t["step_obs"][t, i]
        term, trunc = self.t["term"][t, i], self.t["trunc"][t, i]
        done = term | trunc
        return State(
            env_state=t + 1,
            observation=jnp.where(done[:, None], self.t["reset_obs"][t, i], terminal),
            reward=self.t["rewards"][t, i],
            termination=term,
            truncation=trunc,
            info={"final_observation": terminal, "final_info": {}},
            step_count=jnp.where(done, 0, state.step_count + 1),
            key=state.key,
        )


class SekaiStream(sekai.NativeVecEnv):
    """The same streams as a sekai native vector env (float64, same-step autoreset)."""

    def __init__(self, tables: dict[str, np.ndarray]) -> None:
        super().__init__(
            N, sekai.Box(-np.inf, np.inf, shape=(D,), dtype=np.float64), sekai.Discrete(2)
        )
        self.tables = {
            k: np.asarray(v, np.float64 if v.dtype.kind == "f" else bool) for k, v in tables.items()
        }
        self.t = 0
        self.cur = np.zeros((N, D))

    def _reset_envs(self, indices, options):
        if self.t == 0:
            self.cur = self.tables["obs0"].copy()
        else:
            self.cur[indices] = self.tables["reset_obs"][self.t - 1][indices]

    def _observe(self):
        return self.cur.copy()

    def _step(self, actions):
        tb, t = self.tables, self.t
        self.cur = tb["step_obs"][t].copy()
        self.t += 1
        return tb["rewards"][t], tb["term"][t], tb["trunc"][t], {}


def _sekai_run(vec, steps: int = T):
    first = vec.reset(seed=0)
    results = [vec.step(np.zeros(N, int)) for _ in range(steps)]
    return first, results


def _zeros_policy(key, state):
    return jnp.zeros(N, jnp.int32)


def _tol(x64: bool) -> dict[str, float]:
    return {"rtol": 1e-9, "atol": 1e-9} if x64 else {"rtol": 2e-4, "atol": 2e-4}


# -- NormalizeObservation ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "sekai_kwargs"),
    [
        ({}, {}),
        ({"halflife": 7.0}, {"stats": "ewm", "halflife": 7.0}),
        ({"clip": 1.5, "epsilon": 1e-6}, {"clip": 1.5, "epsilon": 1e-6}),
    ],
    ids=["running", "ewm", "clip"],
)
def test_normalize_observation_matches_sekai(x64, kwargs, sekai_kwargs):
    tables = _stream_tables(1)
    env = NormalizeObservation(StreamVecEnv(tables), **kwargs)
    state0 = env.reset(key=jax.random.key(0))
    _, traj = jax.jit(rollout, static_argnums=(0, 1, 3))(
        env, _zeros_policy, jax.random.key(0), T, state=state0
    )
    assert traj.observation.dtype == _float()
    first, results = _sekai_run(sekai.VecNormalizeObservation(SekaiStream(tables), **sekai_kwargs))
    np.testing.assert_allclose(np.asarray(state0.observation), first.observations, **_tol(x64))
    expected_obs = np.stack([r.observations for r in results])
    np.testing.assert_allclose(np.asarray(traj.observation[1:]), expected_obs[:-1], **_tol(x64))
    done = np.asarray(traj.done)
    assert done.sum() > 5
    for t, i in zip(*np.nonzero(done)):
        np.testing.assert_allclose(
            np.asarray(traj.next_observation[t, i]),
            results[t].infos[i]["final_observation"],
            **_tol(x64),
        )
    if "clip" in kwargs:
        assert float(jnp.max(jnp.abs(traj.observation))) <= kwargs["clip"]
        assert float(jnp.max(jnp.abs(traj.observation))) == pytest.approx(kwargs["clip"])


def test_normalize_reward_matches_sekai(x64):
    tables = _stream_tables(2)
    env = NormalizeReward(StreamVecEnv(tables), gamma=0.9)
    _, traj = jax.jit(rollout, static_argnums=(0, 1, 3))(env, _zeros_policy, jax.random.key(0), T)
    assert traj.reward.dtype == _float()
    _, results = _sekai_run(sekai.VecNormalizeReward(SekaiStream(tables), gamma=0.9))
    expected = np.stack([r.rewards for r in results])
    np.testing.assert_allclose(np.asarray(traj.reward), expected, **_tol(x64))
    # the scale is not trivial: rewards around 2 are divided by a return std well above 1
    assert 0.05 < float(jnp.mean(traj.reward[-10:])) < 1.0


def test_record_episode_statistics_matches_sekai(x64):
    tables = _stream_tables(3)
    env = RecordEpisodeStatistics(StreamVecEnv(tables))
    state, traj = jax.jit(rollout, static_argnums=(0, 1, 3))(
        env, _zeros_policy, jax.random.key(0), T
    )
    stats = traj.info["episode_statistics"]
    _, results = _sekai_run(sekai.VecRecordEpisodeStatistics(SekaiStream(tables)))
    ended = np.asarray(stats.ended)
    expected_ended = np.array([[("episode" in info) for info in r.infos] for r in results])
    np.testing.assert_array_equal(ended, expected_ended)
    returns, lengths = [], []
    for t, i in zip(*np.nonzero(ended)):
        episode = results[t].infos[i]["episode"]
        np.testing.assert_allclose(
            float(stats.episode_return[t, i]), episode.episode_return, **_tol(x64)
        )
        assert int(stats.episode_length[t, i]) == episode.episode_length
        returns.append(episode.episode_return)
        lengths.append(episode.episode_length)
    summary = RecordEpisodeStatistics.summary(state)
    assert int(summary["num_episodes"]) == len(returns) > 5
    np.testing.assert_allclose(float(summary["mean_return"]), np.mean(returns), rtol=1e-5)
    np.testing.assert_allclose(float(summary["mean_length"]), np.mean(lengths), rtol=1e-6)


# -- RecordEpisodeStatistics semantics -----------------------------------------------------------
def _episodes_from(traj_reward: np.ndarray, traj_done: np.ndarray) -> list[tuple[float, int]]:
    """(return, length) of every episode finished in a (T, N) same-step trajectory."""
    out = []
    for i in range(traj_reward.shape[1]):
        ret, length = 0.0, 0
        for t in range(traj_reward.shape[0]):
            ret += float(traj_reward[t, i])
            length += 1
            if traj_done[t, i]:
                out.append((ret, length))
                ret, length = 0.0, 0
    return out


@functools.cache  # one function per batch size, so jitted rollouts can be reused
def _random_policy(n: int):
    def policy(key, state):
        return jax.random.randint(key, (n,), 0, 4)

    return policy


def test_episode_statistics_same_step_vector(x64):
    env = RecordEpisodeStatistics(parallax.make_vec("MaskedGridWorld-v0", 8, max_episode_steps=6))
    state, traj = jax.jit(rollout, static_argnums=(0, 1, 3))(
        env, _random_policy(8), jax.random.key(1), 30
    )
    assert isinstance(state, MaskedState)
    episodes = _episodes_from(np.asarray(traj.reward), np.asarray(traj.done))
    summary = RecordEpisodeStatistics.summary(state)
    assert int(summary["num_episodes"]) == len(episodes) >= 8 * 4
    np.testing.assert_allclose(
        float(summary["mean_return"]), np.mean([r for r, _ in episodes]), rtol=1e-5
    )
    np.testing.assert_allclose(
        float(summary["mean_length"]), np.mean([n for _, n in episodes]), rtol=1e-6
    )
    stats = traj.info["episode_statistics"]
    np.testing.assert_array_equal(np.asarray(stats.ended), np.asarray(traj.done))
    assert stats.episode_return.dtype == traj.reward.dtype
    assert int(jnp.max(stats.episode_length)) <= 6
    cleared = RecordEpisodeStatistics.clear(state)
    assert int(RecordEpisodeStatistics.summary(cleared)["num_episodes"]) == 0
    assert bool(jnp.isnan(RecordEpisodeStatistics.summary(cleared)["mean_return"]))


def test_episode_statistics_single_env_with_autoreset():
    env = RecordEpisodeStatistics(AutoResetWrapper(TimeLimit(GridWorld(), 4)))
    state, traj = rollout(env, lambda k, s: jnp.int32(2), jax.random.key(0), 10)
    stats = traj.info["episode_statistics"]
    assert stats.ended.tolist() == [False, False, False, True] * 2 + [False, False]
    episodes = _episodes_from(np.asarray(traj.reward)[:, None], np.asarray(traj.done)[:, None])
    np.testing.assert_allclose(np.asarray(stats.episode_return[3]), episodes[0][0], rtol=1e-6)
    assert int(stats.episode_length[7]) == 4
    assert int(RecordEpisodeStatistics.summary(state)["num_episodes"]) == 2


def test_episode_statistics_next_step_mode_skips_the_reset_step():
    env = RecordEpisodeStatistics(
        VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), 2, mode="next-step")
    )
    state, traj = rollout(env, _random_policy(2), jax.random.key(0), 12)
    stats = traj.info["episode_statistics"]
    # episodes of 3 real steps, each followed by one reset step that is not counted
    assert stats.ended[:, 0].tolist() == [False, False, True, False] * 3
    assert np.asarray(stats.episode_length)[np.asarray(stats.ended)].tolist() == [3] * 6
    assert int(RecordEpisodeStatistics.summary(state)["num_episodes"]) == 6


def test_episode_statistics_off_mode_waits_for_a_reset():
    env = RecordEpisodeStatistics(VmapWrapper(TimeLimit(GridWorld(), 3), 2))
    state, traj = rollout(env, _random_policy(2), jax.random.key(0), 6)
    stats = traj.info["episode_statistics"]
    assert stats.ended[:, 0].tolist() == [False, False, True, False, False, False]
    assert bool(stats.awaiting_reset[-1].all())
    # a selective reset through the wrapper starts counting again and keeps the aggregates
    state = env.reset(key=jax.random.key(1), state=state, done=state.done)
    assert not bool(state.info["episode_statistics"].awaiting_reset.any())
    state, traj = rollout(env, _random_policy(2), jax.random.key(2), 3, state=state)
    assert int(RecordEpisodeStatistics.summary(state)["num_episodes"]) == 4


class EquityEnv:
    """One continuous action in [-1, 1]; the equity follows the actions; ends after 5 steps."""

    episode_equity_key = "equity"  # what RecordEpisodeStatistics records as final_equity
    action_space = spaces.Box(-1.0, 1.0, (1,))
    observation_space = spaces.Box(-np.inf, np.inf, (2,))

    def reset(self, *, key) -> State:
        equity = jnp.asarray(100.0, _float())
        return State(
            env_state=equity,
            observation=jnp.stack([equity, equity]).astype(jnp.float32),
            reward=jnp.zeros((), _float()),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={"equity": equity},
            step_count=jnp.int32(0),
            key=key,
        )

    def step(self, state: State, action) -> State:
        change = jnp.asarray(action[0]).astype(_float())
        equity = state.env_state + change
        return State(
            env_state=equity,
            observation=jnp.stack([equity, change]).astype(jnp.float32),
            reward=change,
            termination=state.step_count + 1 >= 5,
            truncation=jnp.bool_(False),
            info={"equity": equity},
            step_count=state.step_count + 1,
            key=state.key,
        )


def test_episode_statistics_final_equity(x64):
    env = RecordEpisodeStatistics(VmapAutoResetWrapper(ClipAction(EquityEnv()), 3))
    actions = jnp.array([[0.5], [-2.0], [1.0]], jnp.float32)  # -2 is clipped to -1
    state, traj = rollout(env, lambda k, s: actions, jax.random.key(0), 10)
    stats = traj.info["episode_statistics"]
    np.testing.assert_allclose(np.asarray(stats.final_equity[4]), [102.5, 95.0, 105.0])
    assert stats.final_equity.dtype == _float()
    summary = RecordEpisodeStatistics.summary(state)
    np.testing.assert_allclose(
        float(summary["mean_final_equity"]), (102.5 + 95 + 105) / 3, rtol=1e-6
    )
    np.testing.assert_allclose(float(summary["mean_return"]), (2.5 - 5 + 5) / 3, rtol=1e-6)
    # without equity in info the fields are None
    plain = RecordEpisodeStatistics(GridWorld()).reset(key=jax.random.key(0))
    assert plain.info["episode_statistics"].final_equity is None


# -- NormalizeObservation semantics ----------------------------------------------------------------
def _grid_stack(n: int = 16, **kwargs):
    return NormalizeObservation(
        parallax.make_vec("MaskedGridWorld-v0", n, max_episode_steps=5), **kwargs
    )


def test_normalize_observation_statistics_are_shared_and_state_type_kept(x64):
    env = _grid_stack()
    state, traj = jax.jit(rollout, static_argnums=(0, 1, 3))(
        env, _random_policy(16), jax.random.key(0), 12
    )
    assert isinstance(state, MaskedState)
    stats = state.info["observation_statistics"].statistics
    assert stats.mean.shape == (16, 4) and stats.count.shape == (16,)
    np.testing.assert_array_equal(np.asarray(stats.mean), np.broadcast_to(stats.mean[0], (16, 4)))
    assert float(stats.count[0]) == pytest.approx(16 * 13, rel=1e-6)  # reset + 12 steps
    assert stats.mean.dtype == _float()
    assert traj.observation.dtype == jnp.float32  # observations keep their dtype
    # next_observation at episode ends is the normalised terminal observation (raw one >= 0)
    done = np.asarray(traj.done)
    assert done.any()
    assert float(jnp.min(traj.next_observation)) < 0.0


def test_normalize_observation_single_env_and_final_observation():
    env = NormalizeObservation(AutoResetWrapper(TimeLimit(GridWorld(), 3)))
    state = env.reset(key=jax.random.key(0))
    raw = GridWorld().reset(key=jax.random.key(0)).observation
    step = jax.jit(env.step)
    for _ in range(3):
        prev = NormalizeObservation.statistics(state).statistics
        state = step(state, 2)
    assert bool(state.truncation)
    stats = NormalizeObservation.statistics(state).statistics
    assert float(stats.count) == pytest.approx(4.0, abs=1e-3)
    # the terminal observation was normalised with the updated statistics, then the reset
    # observation (already in the statistics) too
    terminal_raw = jnp.concatenate([jnp.array([3.0, 0.0]), raw[2:]])
    expected = (terminal_raw - stats.mean) / jnp.sqrt(stats.var + env.epsilon)
    np.testing.assert_allclose(
        np.asarray(state.info["final_observation"]), np.asarray(expected), rtol=1e-5, atol=1e-5
    )
    assert not np.allclose(np.asarray(prev.mean), np.asarray(stats.mean))


def test_normalize_observation_freeze_and_load_statistics():
    env = _grid_stack(8)
    run = jax.jit(lambda k, s: rollout(env, _random_policy(8), k, 5, state=s)[0])
    state = run(jax.random.key(0), jax.jit(env.reset)(key=jax.random.key(0)))
    trained = NormalizeObservation.statistics(state)
    frozen = run(jax.random.key(1), NormalizeObservation.freeze(state))  # no recompilation
    after = NormalizeObservation.statistics(frozen)
    np.testing.assert_array_equal(
        np.asarray(after.statistics.mean), np.asarray(trained.statistics.mean)
    )
    # an evaluation env starts from the trained statistics and keeps them
    eval_env = _grid_stack(4, update=False)

    @jax.jit
    def evaluate(statistics):
        state = eval_env.reset(key=jax.random.key(2), statistics=statistics)
        return rollout(eval_env, _random_policy(4), jax.random.key(3), 5, state=state)[0]

    eval_state = evaluate(trained)
    got = NormalizeObservation.statistics(eval_state).statistics
    np.testing.assert_array_equal(np.asarray(got.var), np.asarray(trained.statistics.var))
    assert bool(eval_state.info["observation_statistics"].frozen.all())


def test_normalize_observation_selective_reset_updates_with_reset_rows_only():
    env = NormalizeObservation(VmapWrapper(TimeLimit(GridWorld(), 2), 4))
    state = jax.jit(lambda k: env.step(env.reset(key=k), jnp.array([2, 2, 2, 2], jnp.int32)))(
        jax.random.key(0)
    )
    before = NormalizeObservation.statistics(state).statistics
    done = jnp.array([True, False, True, False])
    new = jax.jit(env.reset)(key=jax.random.key(1), state=state, done=done)
    after = NormalizeObservation.statistics(new).statistics
    assert float(after.count - before.count) == pytest.approx(2.0)
    np.testing.assert_array_equal(np.asarray(new.observation[1]), np.asarray(state.observation[1]))
    assert int(new.step_count[0]) == 0 and int(new.step_count[1]) == 1


def test_normalize_observation_pytree_space_passes_discrete_through():
    space = spaces.PyTreeSpace({"grid": spaces.Box(0.0, 4.0, (4,)), "mode": spaces.Discrete(3)})
    inner = TransformObservation(
        GridWorld(), lambda o: {"grid": o, "mode": jnp.int32(1)}, observation_space=space
    )
    env = NormalizeObservation(VmapWrapper(inner, 4))
    state = env.step(env.reset(key=jax.random.key(0)), jnp.zeros(4, jnp.int32))
    assert state.observation["mode"].tolist() == [1, 1, 1, 1]
    assert state.observation["grid"].dtype == jnp.float32
    assert env.observation_space.spaces["mode"] == spaces.Discrete(3)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": "1"}, TypeError, "epsilon"),
        ({"halflife": -1.0}, ValueError, "halflife"),
        ({"clip": 0}, ValueError, "clip"),
        ({"update": 1}, TypeError, "update"),
    ],
)
def test_normalize_observation_validates_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        NormalizeObservation(GridWorld(), **kwargs)


def test_normalize_observation_needs_a_box():
    env = TransformObservation(GridWorld(), lambda o: jnp.int32(0), spaces.Discrete(2))
    with pytest.raises(TypeError, match="Box"):
        NormalizeObservation(env)


# -- NormalizeReward semantics ----------------------------------------------------------------------
def test_normalize_reward_freeze_and_single_env(x64):
    env = NormalizeReward(AutoResetWrapper(TimeLimit(GridWorld(), 3)), gamma=0.5)
    state = env.reset(key=jax.random.key(0))
    raw = AutoResetWrapper(TimeLimit(GridWorld(), 3))
    raw_state = raw.reset(key=jax.random.key(0))
    g, rms = 0.0, sekai.utils.running_stats.RunningMeanStd(shape=())
    step, raw_step = jax.jit(env.step), jax.jit(raw.step)
    for _ in range(5):
        state = step(state, 2)
        raw_state = raw_step(raw_state, 2)
        g = 0.5 * g + float(raw_state.reward)
        rms.update(np.array([g]))
        if bool(raw_state.done):
            g = 0.0
        expected = float(raw_state.reward) / np.sqrt(rms.var + 1e-8)
        assert float(state.reward) == pytest.approx(expected, rel=1e-4)
    frozen = step(NormalizeReward.freeze(state), 2)
    np.testing.assert_array_equal(
        np.asarray(frozen.info["reward_statistics"].statistics.var),
        np.asarray(state.info["reward_statistics"].statistics.var),
    )


@pytest.mark.parametrize(
    ("gamma", "error"), [(1.5, ValueError), (-0.1, ValueError), ("x", TypeError)]
)
def test_normalize_reward_validates_gamma(gamma, error):
    with pytest.raises(error, match="gamma"):
        NormalizeReward(GridWorld(), gamma=gamma)


# -- transforms ---------------------------------------------------------------------------------------
def test_transform_observation_vector_final_observation_and_type():
    env = TransformObservation(
        parallax.make_vec("MaskedGridWorld-v0", 4, max_episode_steps=2), lambda o: o[:2] * 10.0
    )
    assert env.observation_space == spaces.Box(-np.inf, np.inf, (2,), np.float32)
    state = env.reset(key=jax.random.key(0))
    assert isinstance(state, MaskedState) and state.observation.shape == (4, 2)
    state = env.step(state, jnp.full(4, 2, jnp.int32))
    state = env.step(state, jnp.full(4, 2, jnp.int32))
    assert bool(state.truncation.all())
    np.testing.assert_array_equal(
        np.asarray(state.info["final_observation"]), np.full((4, 2), [20.0, 0.0])
    )
    np.testing.assert_array_equal(np.asarray(state.observation), np.zeros((4, 2)))


def test_transform_observation_selective_reset_keeps_other_rows():
    env = TransformObservation(VmapWrapper(GridWorld(), 3), lambda o: o.sum())
    state = jax.jit(lambda k: env.step(env.reset(key=k), jnp.full(3, 2, jnp.int32)))(
        jax.random.key(0)
    )
    new = jax.jit(env.reset)(
        key=jax.random.key(5), state=state, done=jnp.array([False, True, False])
    )
    assert new.observation.shape == (3,)
    np.testing.assert_array_equal(
        np.asarray(new.observation[::2]), np.asarray(state.observation[::2])
    )
    fresh_sum = float(jnp.sum(new.env_state.goal[1]))
    assert float(new.observation[1]) == pytest.approx(fresh_sum)


def test_transform_reward_keeps_dtype_and_reset_reward(x64):
    env = TransformReward(VmapWrapper(EquityEnv(), 2), lambda r: 2.0 * r + 1.0)
    state = env.reset(key=jax.random.key(0))
    assert state.reward.tolist() == [0.0, 0.0]
    state = env.step(state, jnp.array([[0.25], [-0.5]], jnp.float32))
    assert state.reward.tolist() == [1.5, 0.0]
    assert state.reward.dtype == _float()


def test_transform_action_and_clip_action():
    env = TransformAction(GridWorld(), lambda a: 3 - a, spaces.Discrete(4))
    state = env.step(env.reset(key=jax.random.key(0)), jnp.int32(1))
    assert state.observation[:2].tolist() == [1.0, 0.0]
    clipped = VmapWrapper(ClipAction(EquityEnv()), 2)
    assert clipped.action_space == spaces.Box(-np.inf, np.inf, (1,))
    state = clipped.step(
        clipped.reset(key=jax.random.key(0)), jnp.array([[5.0], [-0.5]], jnp.float32)
    )
    assert state.reward.tolist() == [1.0, -0.5]
    with pytest.raises(TypeError, match="Box"):
        ClipAction(GridWorld())


def test_flatten_observation_pytree_with_discrete_and_final_observation():
    space = spaces.PyTreeSpace(
        {
            "grid": spaces.Box(0.0, 4.0, (2, 2)),
            "mode": spaces.Discrete(3),
            "bits": spaces.MultiBinary(2),
        }
    )

    def to_tree(o):
        return {"grid": o.reshape(2, 2), "mode": jnp.int32(2), "bits": jnp.array([1, 0], jnp.int8)}

    inner = AutoResetWrapper(TimeLimit(TransformObservation(GridWorld(), to_tree, space), 1))
    env = FlattenObservation(VmapWrapper(inner, 2))
    assert env.observation_space.shape == (2 + 4 + 3,)  # bits, grid, one-hot mode (sorted keys)
    assert env.observation_space.high.tolist() == [1, 1, 4, 4, 4, 4, 1, 1, 1]
    state = jax.jit(lambda k: env.step(env.reset(key=k), jnp.full(2, 2, jnp.int32)))(
        jax.random.key(0)
    )
    final = state.info["final_observation"]
    assert final.shape == (2, 9) and final.dtype == jnp.float32
    assert final[0, :2].tolist() == [1.0, 0.0] and final[0, 2:4].tolist() == [1.0, 0.0]
    assert final[0, 6:].tolist() == [0.0, 0.0, 1.0]
    assert bool(jax.vmap(env.observation_space.contains)(state.observation).all())


def test_transform_wrappers_validate_arguments():
    with pytest.raises(TypeError, match="fn"):
        TransformObservation(GridWorld(), 3)
    with pytest.raises(TypeError, match="observation_space"):
        TransformObservation(GridWorld(), lambda o: o, observation_space=(0, 1))
    with pytest.raises(TypeError, match="fn"):
        TransformReward(GridWorld(), None)
    with pytest.raises(TypeError, match="action_space"):
        TransformAction(GridWorld(), lambda a: a, action_space="Discrete(4)")
    with pytest.raises(TypeError, match="observation_space"):
        FlattenObservation(TransformObservation(GridWorld(), lambda o: o, _Weird()))


class _Weird:
    shape = ()
    dtype = np.dtype(np.float32)

    def sample(self, *, key):
        return jnp.zeros(())

    def contains(self, x):
        return jnp.bool_(True)


def test_full_training_stack_composes_and_jits(x64):
    base = parallax.make_vec("MaskedGridWorld-v0", 8, max_episode_steps=4)
    env = NormalizeReward(NormalizeObservation(RecordEpisodeStatistics(base), clip=5.0))
    state, _traj = jax.jit(rollout, static_argnums=(0, 1, 3))(
        env, _random_policy(8), jax.random.key(0), 9
    )
    assert isinstance(state, MaskedState)
    assert set(state.info) >= {"episode_statistics", "observation_statistics", "reward_statistics"}
    # episode statistics see the env's own rewards, not the normalised ones
    _raw_state, raw_traj = jax.jit(rollout, static_argnums=(0, 1, 3))(
        base, _random_policy(8), jax.random.key(0), 9
    )
    summary = RecordEpisodeStatistics.summary(state)
    episodes = _episodes_from(np.asarray(raw_traj.reward), np.asarray(raw_traj.done))
    np.testing.assert_allclose(
        float(summary["mean_return"]), np.mean([r for r, _ in episodes]), rtol=1e-5
    )
    reset = jax.jit(env.reset)(key=jax.random.key(1), state=state, done=state.done)
    assert jax.tree.structure(reset) == jax.tree.structure(state)
    assert dataclasses.fields(type(reset)) == dataclasses.fields(MaskedState)


def test_training_stack_passes_check_env():
    from parallax.envs import MaskedGridWorld
    from parallax.testing import check_env

    env = NormalizeReward(
        NormalizeObservation(
            RecordEpisodeStatistics(AutoResetWrapper(TimeLimit(MaskedGridWorld(), 5))), clip=5.0
        )
    )
    report = check_env(env, checks=("contract", "structure", "recompilation"))
    assert {"structure", "recompilation", "observation_in_space"} <= set(report.passed)
