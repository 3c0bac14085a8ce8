"""`to_gymnax`: any Parallax environment as a gymnax 1.0.1 environment.

The contract:

- the export is a gymnax `Environment` with gymnax's interface (`reset`, `step` returning
  `(obs, state, reward, terminated, truncated, info)`, `step_env`, `reset_env`, real gymnax
  spaces, `num_actions`, `name`, `default_params`), and spaces with no gymnax equivalent are
  refused when it is built;
- `step` auto-resets as gymnax's own `step` does, and `info` carries `discount`,
  `termination`, `truncation` and the terminal observation;
- the finance envs' params are gymnax's params (vmap over them works);
- gymnax's own wrappers work around it;
- the round trip `GymnaxAdapter(to_gymnax(env))` is an identity: `reset(key=k)` of the round
  trip is the env's `reset(key=jax.random.split(k)[1])` (the adapter's documented key), and
  every step after is the same (ints and bools exactly, floats within
  `TRANSFORM_TOLERANCE`);
- a PureJaxRL-style PPO (`purejaxrl_style.py`) learns OptimalExecution-v0 through the export
  to within 10% of the Almgren-Chriss baseline, and `jax.jit(jax.vmap(train))(seeds)` runs.
"""

from __future__ import annotations

import doctest
import importlib
import sys

import chex
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces as gspaces
from gymnax.wrappers import LegacyStepAPIWrapper
from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper
from purejaxrl_style import Config, make_train, policy_mean

import parallax
from parallax import AutoResetWrapper, State, TimeLimit, next_episode_key, spaces
from parallax.adapters import GymnaxAdapter, _to_gymnax, from_gymnax_space
from parallax.adapters._to_gymnax import (
    GymnaxEnv,
    GymnaxExportState,
    GymnaxParams,
    NoParams,
    to_gymnax,
    to_gymnax_space,
)
from parallax.finance import almgren_chriss_policy
from parallax.testing import TRANSFORM_TOLERANCE

# one worker runs this file, so its module fixtures are built once per `make test`
pytestmark = pytest.mark.xdist_group("export_gymnax")

SMALL = {
    "GridWorld-v0": {},
    "Trading-v0": {"episode_length": 4, "lookback": 2},
    "Portfolio-v0": {"n_assets": 2, "episode_length": 4, "lookback": 2},
    "MarketMaking-v0": {"n_steps": 4},
    "OptimalExecution-v0": {"n_steps": 4},
}
EXECUTION = {"n_steps": 5}  # the PPO env: OptimalExecution-v0 with 5 trading periods


def _execution(**kwargs):
    return parallax.make("OptimalExecution-v0", **{**SMALL["OptimalExecution-v0"], **kwargs})


# -- the interface ----------------------------------------------------------------------------
def test_export_is_a_gymnax_environment_with_gymnax_spaces():
    env = to_gymnax(parallax.make("GridWorld-v0"))
    assert isinstance(env, gymnax.environments.environment.Environment)
    assert isinstance(env, GymnaxEnv)
    assert env.name == "GridWorld" and env.num_actions == 4
    assert env.default_params == GymnaxParams(NoParams(), max_steps_in_episode=None)
    params = env.default_params
    action_space, observation_space = env.action_space(params), env.observation_space(params)
    assert isinstance(action_space, gspaces.Discrete) and action_space.n == 4
    assert isinstance(observation_space, gspaces.Box) and observation_space.shape == (4,)
    obs, state = env.reset(jax.random.PRNGKey(0), params)
    assert isinstance(state, GymnaxExportState) and int(state.time) == 0
    assert bool(observation_space.contains(obs))
    action = action_space.sample(jax.random.PRNGKey(1))
    assert bool(action_space.contains(action)) and action.dtype == jnp.int32
    assert not bool(action_space.contains(jnp.int32(4)))


def test_finance_spaces_and_params():
    portfolio = to_gymnax(parallax.make("Portfolio-v0", **SMALL["Portfolio-v0"]))
    observation_space = portfolio.observation_space(portfolio.default_params)
    assert isinstance(observation_space, gspaces.Dict)
    assert sorted(observation_space.spaces) == ["returns", "weights"]
    execution = to_gymnax(_execution())
    assert type(execution.default_params.env_params).__name__ == "OptimalExecutionParams"
    assert execution.num_actions == 1
    box = execution.action_space(execution.default_params)
    assert isinstance(box, gspaces.Box) and box.shape == (1,) and box.dtype == jnp.float32
    obs, _ = execution.reset(jax.random.PRNGKey(0))
    assert bool(execution.observation_space(None).contains(obs))


@pytest.mark.parametrize(
    "space",
    [
        spaces.Discrete(5),
        spaces.Box(-1.0, 2.0, (2, 3)),
        spaces.Box(0, 9, (4,), jnp.int32),
        spaces.PyTreeSpace({"a": spaces.Box(0.0, 1.0, (2,)), "b": spaces.Discrete(3)}),
        spaces.PyTreeSpace((spaces.Discrete(2), spaces.Box(0.0, 1.0, (1,)))),
    ],
    ids=["discrete", "box", "int-box", "dict", "tuple"],
)
def test_spaces_convert_both_ways(space):
    back = from_gymnax_space(to_gymnax_space(space))
    assert jax.tree.map(str, back.shape) == jax.tree.map(str, space.shape)
    assert jax.tree.map(str, back.dtype) == jax.tree.map(str, space.dtype)
    leaves = zip(
        jax.tree.leaves(back.spaces if hasattr(back, "spaces") else back),
        jax.tree.leaves(space.spaces if hasattr(space, "spaces") else space),
    )
    for got, want in leaves:
        if isinstance(want, spaces.Box):
            np.testing.assert_array_equal(got.low, want.low)
            np.testing.assert_array_equal(got.high, want.high)
        else:
            assert got.n == want.n


class _Spaces:
    """An env with the given spaces (never stepped: the export refuses it first)."""

    def __init__(self, action_space, observation_space=None):
        self.action_space = action_space
        self.observation_space = observation_space or spaces.Box(0.0, 1.0, (1,))

    def reset(self, *, key):
        raise AssertionError("not called")

    def step(self, state, action):
        raise AssertionError("not called")


@pytest.mark.parametrize(
    ("env", "error", "words"),
    [
        (_Spaces(spaces.MultiDiscrete([2, 3])), TypeError, ["action_space", "MultiDiscrete"]),
        (
            _Spaces(spaces.Discrete(2), spaces.MultiBinary(3)),
            TypeError,
            ["observation_space", "MultiBinary"],
        ),
        (_Spaces(spaces.Discrete(3, shape=(2,))), TypeError, ["action_space", "shape (2,)"]),
        (_Spaces(spaces.Discrete(3, dtype=jnp.int8)), ValueError, ["action_space", "int8"]),
        (
            _Spaces(spaces.Discrete(2), spaces.PyTreeSpace([spaces.Discrete(2)])),
            TypeError,
            ["observation_space", "list"],
        ),
        (object(), TypeError, ["Parallax environment", "object"]),
        (parallax.make("Race-v0"), TypeError, ["single-agent", "Race"]),
    ],
    ids=[
        "multi-discrete",
        "multi-binary",
        "shaped-discrete",
        "int8",
        "list-tree",
        "not-an-env",
        "multi-agent",
    ],
)
def test_spaces_without_a_gymnax_equivalent_are_refused(env, error, words):
    with pytest.raises(error) as caught:
        to_gymnax(env)
    message = str(caught.value)
    assert "to_gymnax" in message and all(w in message for w in words), message


def test_missing_gymnax_names_the_extra_only_when_called(monkeypatch):
    for name in list(sys.modules):
        if name.split(".")[0] == "gymnax":
            monkeypatch.setitem(sys.modules, name, None)  # `import gymnax` now fails
    monkeypatch.setattr(parallax.adapters, "_to_gymnax", _to_gymnax)  # restored afterwards
    monkeypatch.delitem(sys.modules, _to_gymnax.__name__)
    fresh = importlib.import_module(_to_gymnax.__name__)  # imports without gymnax
    assert fresh is not _to_gymnax
    with pytest.raises(ImportError, match=r"to_gymnax needs gymnax.*parallax-rl\[gymnax\]"):
        fresh.to_gymnax(parallax.make("GridWorld-v0"))


# -- stepping: gymnax's auto-reset and the info ---------------------------------------------
def _steps(env, key, actions, params=None):
    """Reset with `key`, then gymnax's `step` with `fold_in(key, t)` for each action."""

    @jax.jit
    def run(key, actions):
        obs, state = env.reset(key, params)

        def body(state, x):
            t, action = x
            out = env.step(jax.random.fold_in(key, t), state, action, params)
            return out[1], out

        return obs, state, jax.lax.scan(body, state, (jnp.arange(len(actions)), actions))[1]

    return run(key, actions)


def test_truncation_auto_resets_and_keeps_the_terminal_observation():
    env = to_gymnax(TimeLimit(parallax.make("GridWorld-v0"), max_steps=2))
    key = jax.random.PRNGKey(0)
    _, _, (obs, state, reward, terminated, truncated, info) = _steps(
        env, key, jnp.array([2, 2, 0], jnp.int32)
    )
    assert truncated.tolist() == [False, True, False]
    assert terminated.tolist() == [False, False, False]
    assert state.time.tolist() == [1, 0, 1]
    assert info["discount"].tolist() == [1.0, 1.0, 1.0]  # truncation: bootstrap
    assert info["truncation"].tolist() == [False, True, False]
    # step 1 ended the episode: its terminal observation is kept, obs is the next reset's
    np.testing.assert_array_equal(info["final_observation"][1][:2], [2.0, 0.0])
    # the next episode starts from `next_episode_key` of the finished one, as AutoResetWrapper
    finished = jax.jit(lambda k: env.env.step(env.env.step(env.env.reset(key=k), 2), 2))(key)
    fresh, _ = jax.jit(env.reset)(next_episode_key(finished.key))
    np.testing.assert_array_equal(obs[1], fresh)
    np.testing.assert_array_equal(info["final_observation"][0], obs[0])  # no reset: equal
    assert float(reward[1]) > 0.0


def test_termination_has_discount_zero_and_the_same_info_keys_on_every_step():
    env = to_gymnax(_execution(n_steps=2))
    _, first, (obs, state, _, terminated, truncated, info) = _steps(
        env, jax.random.PRNGKey(0), jnp.full((3, 1), 0.5, jnp.float32)
    )
    assert terminated.tolist() == [False, True, False]
    assert truncated.tolist() == [False, False, False]
    assert info["discount"].tolist() == [1.0, 0.0, 1.0]
    assert info["termination"].tolist() == [False, True, False]
    assert float(info["final_observation"][1][0]) == 0.0  # sold out
    assert float(obs[1][0]) == 1.0  # the next episode starts with the whole inventory
    assert state.time.tolist() == [1, 0, 1]
    assert {"shares_sold", "shortfall_bps", "terminated", "truncated"} <= set(info)
    assert first.parallax_state.key.dtype == jnp.uint32  # gymnax's raw key convention


def test_the_step_key_is_unused_across_episodes():
    """The env draws from its own key and the next episode's key follows from the finished
    one: any step keys give the same trajectory, resets included."""
    env = to_gymnax(_execution(n_steps=3))
    state = env.reset(jax.random.PRNGKey(0))[1]
    actions = jnp.full((8, 1), 0.3, jnp.float32)

    @jax.jit
    def run(keys):
        def one(state, xs):
            key, action = xs
            out = env.step(key, state, action)
            return out[1], out

        return jax.lax.scan(one, state, (keys, actions))[1]

    a = run(jax.random.split(jax.random.PRNGKey(1), 8))
    b = run(jax.random.split(jax.random.PRNGKey(2), 8))
    assert bool(a[3][2]) and bool(a[3][5])  # the episodes ended and restarted in the run
    chex.assert_trees_all_equal(a, b)


@pytest.mark.parametrize("env_id", sorted(SMALL))
def test_gymnax_auto_reset_runs_the_episodes_of_autoreset_wrapper(env_id):
    """`to_gymnax`'s auto-reset starts episodes as `AutoResetWrapper` does (bit for bit)."""
    env = parallax.make(env_id, **SMALL[env_id])
    exported = to_gymnax(env)
    wrapped = AutoResetWrapper(env)
    key = jax.random.PRNGKey(3)
    actions = jax.vmap(lambda k: env.action_space.sample(key=k))(
        jax.random.split(jax.random.PRNGKey(4), 12)
    )

    @jax.jit
    def both(actions):
        def via_gymnax(state, action):
            obs, state, reward, terminated, truncated, _ = exported.step(key, state, action)
            return state, (obs, reward, terminated, truncated)

        def via_wrapper(state, action):
            state = wrapped.step(state, action)
            return state, (state.observation, state.reward, state.termination, state.truncation)

        first = exported.reset(key)[1]
        return (
            jax.lax.scan(via_gymnax, first, actions)[1],
            jax.lax.scan(via_wrapper, wrapped.reset(key=key), actions)[1],
        )

    got, want = both(actions)
    assert bool(jnp.any(want[2] | want[3]))  # at least one episode ended
    chex.assert_trees_all_equal(got, want)


def test_vmap_over_params():
    env = to_gymnax(_execution())
    sigmas = jnp.array([0.0, 0.5, 1.0, 2.0], jnp.float32)
    batch = env.default_params.replace(sigma=sigmas)
    axes = jax.tree.map(lambda _: None, env.default_params).replace(sigma=0)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    action = jnp.full((4, 1), 0.25, jnp.float32)

    @jax.jit
    def two_steps(keys, params):
        _, state = jax.vmap(env.reset, in_axes=(0, axes))(keys, params)
        step = jax.vmap(env.step, in_axes=(0, 0, 0, axes))
        state = step(keys, state, action, params)[1]
        return step(keys, state, action, params)

    obs, _, reward, *_ = two_steps(keys, batch)
    for i, sigma in enumerate(sigmas.tolist()):
        one = env.default_params.replace(sigma=sigma)
        _, state = env.reset(keys[i], one)
        state = env.step(keys[i], state, action[i], one)[1]
        want_obs, _, want_reward, *_ = env.step(keys[i], state, action[i], one)
        assert TRANSFORM_TOLERANCE.close("observation", obs[i], want_obs).all()
        assert TRANSFORM_TOLERANCE.close("reward", reward[i], want_reward).all()
    assert float(obs[0, 2]) == 0.0 and len(set(np.asarray(reward).tolist())) == 4


def test_a_sequential_history_walk_continues_across_auto_resets():
    rows = 100 * np.exp(np.cumsum(np.random.default_rng(0).normal(0, 0.01, 30)))
    penv = parallax.make(
        "Trading-v0", prices=rows, sampler="sequential", episode_length=2, lookback=2
    )
    env = to_gymnax(penv)
    _, first, (_, state, *_) = _steps(env, jax.random.PRNGKey(0), jnp.zeros(8, jnp.int32))
    stamps = [int(first.parallax_state.info["timestamp"])]
    stamps += np.asarray(state.parallax_state.info["timestamp"])[1::2].tolist()
    assert stamps == [int(r) for r in penv.sequential_starts(5)]


# -- gymnax's conventions ---------------------------------------------------------------------
def test_params_have_max_steps_in_episode_like_gymnax_own_envs():
    own = gymnax.make("CartPole-v1")[1]
    limited = to_gymnax(parallax.TimeLimit(parallax.make("GridWorld-v0"), 30)).default_params
    for params in (own, limited):
        assert isinstance(params.max_steps_in_episode, int)
    assert limited.max_steps_in_episode == 30
    execution = to_gymnax(_execution()).default_params
    assert execution.max_steps_in_episode == 4  # its n_steps
    assert to_gymnax(parallax.make("Trading-v0")).default_params.max_steps_in_episode == 252
    # the round trip keeps gymnax's own limit
    cartpole = to_gymnax(parallax.make("gymnax/CartPole-v1")).default_params
    assert cartpole.max_steps_in_episode == own.max_steps_in_episode == 500
    # static: a params batch never batches it, and tree maps leave it alone
    assert jax.tree.leaves(limited) == []
    assert jax.tree.map(lambda x: x, execution).max_steps_in_episode == 4


def test_params_read_and_replace_the_env_params():
    params = to_gymnax(_execution()).default_params
    assert params.sigma == params.env_params.sigma
    changed = params.replace(sigma=0.5, max_steps_in_episode=3)
    assert float(changed.env_params.sigma) == 0.5 and changed.max_steps_in_episode == 3
    assert float(params.sigma) != 0.5  # a copy
    with pytest.raises(AttributeError, match=r"GymnaxParams has no attribute 'sgima'"):
        _ = params.sgima
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'level'"):
        to_gymnax(parallax.make("GridWorld-v0")).default_params.replace(level=3)
    env = to_gymnax(_execution())
    key = jax.random.PRNGKey(0)
    raw, wrapped = env.reset(key, params.env_params)[0], env.reset(key, params)[0]
    np.testing.assert_array_equal(raw, wrapped)  # the env's own params work as before


def test_params_reach_a_wrapped_finance_env():
    # wrappers forward `params=` (`reset(*, key, **kwargs)`), so the export keeps them
    wrapped = to_gymnax(parallax.TransformReward(_execution(), lambda r: 2.0 * r))
    plain = to_gymnax(_execution())
    assert wrapped.takes_params and wrapped.default_params == plain.default_params
    key = jax.random.PRNGKey(0)
    calm = plain.default_params.replace(sigma=0.0)
    action = jnp.array([0.3], jnp.float32)
    for env, scale in ((wrapped, 2.0), (plain, 1.0)):
        _, state = env.reset(key, calm)
        reward = env.step(key, state, action, calm)[2]
        assert float(reward) == pytest.approx(
            scale * float(plain.step(key, plain.reset(key, calm)[1], action, calm)[2])
        )
    default = plain.step(key, plain.reset(key)[1], action)[2]
    calm_reward = plain.step(key, plain.reset(key, calm)[1], action, calm)[2]
    assert float(default) != float(calm_reward)  # sigma matters, so the check above bites
    assert not to_gymnax(parallax.TimeLimit(parallax.make("GridWorld-v0"), 5)).takes_params


# -- gymnax's own wrappers --------------------------------------------------------------------
@pytest.mark.standard_promotion  # gymnax's wrappers compute `1 - done` with a bool `done`
def test_gymnax_wrappers_around_the_export():
    env = LogWrapper(FlattenObservationWrapper(to_gymnax(_execution())))
    params = env.default_params
    assert env.observation_space(params).shape == (3,)
    actions = jnp.full((9, 1), 0.4, jnp.float32)
    _, _, (obs, _, reward, terminated, _, info) = _steps(env, jax.random.PRNGKey(0), actions)
    assert terminated.tolist() == [False, False, False, True] * 2 + [False]
    ended = np.asarray(info["returned_episode"])
    returns = np.asarray(info["returned_episode_returns"])[ended]
    want = np.asarray(reward).reshape(-1)[:8].reshape(2, 4).sum(axis=1)
    np.testing.assert_allclose(returns, want, rtol=1e-6)
    assert info["final_observation"].shape == (9, 3) and obs.shape == (9, 3)


def test_legacy_five_value_step_for_purejaxrl_code_written_for_gymnax_0_0():
    env = LegacyStepAPIWrapper(to_gymnax(TimeLimit(parallax.make("GridWorld-v0"), max_steps=1)))
    _, state = env.reset(jax.random.PRNGKey(0))
    out = env.step(jax.random.PRNGKey(1), state, jnp.int32(0))
    assert len(out) == 5
    _, state, _, done, info = out
    assert bool(done) and bool(info["truncation"]) and float(info["discount"]) == 1.0
    assert int(state.time) == 0


def test_docstring_examples_run():
    result = doctest.testmod(_to_gymnax, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0 and result.failed == 0


# -- the round trip ---------------------------------------------------------------------------
def _make(id_, limit):
    env = parallax.make(id_, **SMALL[id_])
    return TimeLimit(env, max_steps=limit) if limit else env


def _trajectory(env, state, actions):
    def body(state, action):
        state = env.step(state, action)
        out = (state.observation, state.reward, state.termination, state.truncation)
        return state, (*out, state.step_count)

    return (state.observation, jax.lax.scan(body, state, actions)[1])


@pytest.mark.parametrize(
    ("id_", "limit"),
    [(i, None) for i in SMALL] + [("GridWorld-v0", 3)],
    ids=[*SMALL, "GridWorld-v0-TimeLimit"],
)
def test_round_trip_is_an_identity(id_, limit):
    env = _make(id_, limit)
    round_trip = GymnaxAdapter(to_gymnax(env))
    assert type(round_trip.action_space) is type(env.action_space)
    num_steps = 6
    actions = jax.vmap(lambda k: env.action_space.sample(key=k))(
        jax.random.split(jax.random.PRNGKey(1), num_steps)
    )
    key = jax.random.PRNGKey(7)

    @jax.jit
    def both(key, actions):
        direct = _trajectory(env, env.reset(key=jax.random.split(key)[1]), actions)
        return direct, _trajectory(round_trip, round_trip.reset(key=key), actions)

    direct, via = both(key, actions)
    names = ["first_observation", "observation", "reward", "termination", "truncation", "step"]
    flat_direct, flat_via = jax.tree.leaves(direct), jax.tree.leaves(via)
    assert len(flat_direct) == len(flat_via)
    for i, (want, got) in enumerate(zip(flat_direct, flat_via)):
        name = names[min(i, len(names) - 1)]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert TRANSFORM_TOLERANCE.close(name, got, want).all(), (name, got, want)


# -- PureJaxRL-style PPO ----------------------------------------------------------------------
def _episode_returns(env, policy, keys):
    """Mean episode return of `policy(state)` on the Parallax env, one episode per key
    (the same keys give the same price noise whatever the actions: a paired comparison)."""

    def one(key):
        def body(state, _):
            state = env.step(state, policy(state))
            return state, state.reward

        return jax.lax.scan(body, env.reset(key=key), None, env.n_steps)[1].sum()

    return jax.vmap(one)(keys).mean()


@pytest.fixture(scope="module")
def trained():
    """PPO trained through `to_gymnax` on four seeds at once: `jax.jit(jax.vmap(train))`."""
    env = to_gymnax(parallax.make("OptimalExecution-v0", **EXECUTION))
    train = make_train(Config(), env, env.default_params)
    seeds = jax.vmap(jax.random.PRNGKey)(jnp.arange(4))
    with jax.numpy_dtype_promotion("standard"):  # gymnax's LogWrapper mixes bools and floats
        return jax.block_until_ready(jax.jit(jax.vmap(train))(seeds))


def test_jit_vmap_train_over_four_seeds_runs_to_completion(trained):
    net, metrics = trained
    returns = np.asarray(metrics["episode_return"])
    assert returns.shape == (4, Config().num_updates) and np.isfinite(returns).all()
    assert jax.tree.leaves(net)[0].shape[0] == 4
    assert len(set(returns[:, 0].tolist())) == 4  # four different seeds


def test_purejaxrl_ppo_learns_within_10_percent_of_almgren_chriss(trained):
    net, metrics = trained
    penv = parallax.make("OptimalExecution-v0", **EXECUTION)
    keys = jax.random.split(jax.random.PRNGKey(123), 512)  # the same episodes for all

    @jax.jit
    def evaluate(net):
        baseline = _episode_returns(penv, almgren_chriss_policy(penv), keys)
        ppo = jax.vmap(
            lambda n: _episode_returns(penv, lambda s: policy_mean(n, s.observation), keys)
        )(net)
        return baseline, ppo

    baseline, ppo = jax.device_get(evaluate(net))
    assert baseline < 0.0  # rewards are costs: within 10% means >= 1.1 * baseline
    assert (ppo >= 1.1 * baseline).all(), (ppo, baseline)
    assert (np.asarray(metrics["episode_return"][:, 0]) < 1.5 * baseline).all()  # it learned


def test_state_is_the_parallax_state():
    env = to_gymnax(parallax.make("GridWorld-v0"))
    _, state = env.reset(jax.random.PRNGKey(0))
    assert isinstance(state.parallax_state, State)
    assert repr(env) == "to_gymnax(GridWorld())"
