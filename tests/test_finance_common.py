"""Shared finance machinery against sekai 0.2.0: costs, rewards, samplers, constructor checks."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
import sekai.finance as sf
from finance_support import ReplayGenerator, assert_values_match, values_match
from sekai.finance.costs import as_cost_model as sekai_as_cost_model
from sekai.finance.sampling import as_sampler as sekai_as_sampler

from parallax import finance as pf
from parallax.finance._market import correlation_default
from parallax.finance._rewards import outcome_from_growth

RNG = np.random.default_rng(1234)


# ----------------------------------------------------------------------------- costs
def _cost_pairs():
    return [
        (pf.NoCost(), sf.NoCost()),
        (pf.ProportionalCost(1e-3), sf.ProportionalCost(1e-3)),
        (pf.ProportionalCost([1e-3, 2e-3, 0.0]), sf.ProportionalCost([1e-3, 2e-3, 0.0])),
        (pf.SpreadCost(2e-4), sf.SpreadCost(half_spread=2e-4)),
        (pf.SpreadCost([1e-4, 3e-4, 5e-4]), sf.SpreadCost(half_spread=[1e-4, 3e-4, 5e-4])),
        (pf.FixedCost(5.0), sf.FixedCost(5.0)),
        (pf.FixedCost(5.0, threshold=0.1), sf.FixedCost(5.0, threshold=0.1)),
        (
            pf.ProportionalCost(1e-3) + pf.SpreadCost(1e-4) + pf.FixedCost(1.0),
            sf.ProportionalCost(1e-3) + sf.SpreadCost(half_spread=1e-4) + sf.FixedCost(1.0),
        ),
    ]


@pytest.mark.parametrize("index", range(8))
def test_cost_models_match_sekai(index, x64):
    ours, theirs = _cost_pairs()[index]
    trades = RNG.uniform(-1, 1, (20, 3))
    trades[::4, 1] = 0.0
    equity = RNG.uniform(0.0, 2e6, 20)
    equity[3] = 0.0
    got = jax.jit(jax.vmap(lambda t, e: ours(t, equity=e)))(
        jnp.asarray(trades), jnp.asarray(equity)
    )
    dtype = np.float64 if x64 else np.float32
    assert got.dtype == dtype
    for i in range(20):
        want = theirs(trades[i], equity=equity[i])
        if x64:
            assert_values_match(got[i], want, f"{ours!r} row {i}")
        else:
            np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-7)


def test_cost_parameter_checks_mirror_sekai():
    cases = [
        (pf.ProportionalCost, sf.ProportionalCost, (-1e-3,), {}),
        (pf.ProportionalCost, sf.ProportionalCost, (np.nan,), {}),
        (pf.ProportionalCost, sf.ProportionalCost, ([1e-3, -1.0],), {}),
        (pf.SpreadCost, sf.SpreadCost, (-1.0,), {}),
        (pf.FixedCost, sf.FixedCost, (-1.0,), {}),
        (pf.FixedCost, sf.FixedCost, ([1.0, 2.0],), {}),
        (pf.FixedCost, sf.FixedCost, (1.0,), {"threshold": np.inf}),
    ]
    for ours, theirs, args, kwargs in cases:
        with pytest.raises((ValueError, TypeError)) as want:
            theirs(*args, **kwargs)
        with pytest.raises(want.type):
            ours(*args, **kwargs)


@pytest.mark.parametrize(
    "value", [True, "0.1", np.array(0.1), [0.1], None, -0.1, np.nan, np.inf, np.float32(-1)]
)
def test_transaction_cost_argument_mirrors_sekai(value):
    with pytest.raises((ValueError, TypeError)) as want:
        sekai_as_cost_model(value)
    with pytest.raises(want.type, match="transaction_cost"):
        pf.as_cost_model(value)


def test_sekai_cost_models_are_converted():
    sekai_cost = sf.ProportionalCost([1e-3, 2e-3]) + sf.FixedCost(2.0, threshold=0.01)
    ours = pf.as_cost_model(sekai_cost)
    assert repr(ours) == "ProportionalCost([0.001, 0.002]) + FixedCost(2.0)"
    assert float(ours.models[1].threshold) == 0.01
    assert pf.as_cost_model(np.int64(0)) == pf.ProportionalCost(0.0)
    with pytest.raises(ValueError, match="spread"):
        pf.as_cost_model(sf.SpreadCost())
    with pytest.raises(ValueError, match="volume"):
        pf.as_cost_model(sf.SquareRootImpact())


# --------------------------------------------------------------------------- rewards
def _reward_pairs():
    return [
        (pf.LogReturn(), sf.LogReturn()),
        (pf.SimpleReturn(), sf.SimpleReturn()),
        (pf.ProfitAndLoss(), sf.ProfitAndLoss()),
        (pf.MeanVariance(3.0), sf.MeanVariance(3.0)),
        (pf.TurnoverPenalty(), sf.TurnoverPenalty()),
        (pf.DrawdownPenalty(), sf.DrawdownPenalty()),
        (pf.DifferentialSharpe(0.1), sf.DifferentialSharpe(0.1)),
        (
            pf.LogReturn() - 0.5 * pf.DrawdownPenalty() - 1e-3 * pf.TurnoverPenalty() + 0.25,
            sf.LogReturn() - 0.5 * sf.DrawdownPenalty() - 1e-3 * sf.TurnoverPenalty() + 0.25,
        ),
        (
            2.0 - (pf.DifferentialSharpe() + pf.MeanVariance()) * 0.5,
            2.0 - (sf.DifferentialSharpe() + sf.MeanVariance()) * 0.5,
        ),
    ]


def _outcomes(steps):
    growth = RNG.uniform(0.9, 1.1, steps)
    growth[7] = 0.0  # a wipe-out
    equity = np.cumprod(growth) * 1.3
    previous = np.concatenate([[1.0], equity[:-1]])
    turnover = RNG.uniform(0, 2, steps)
    cost = RNG.uniform(0, 1e-3, steps)
    return growth, equity, previous, turnover, cost


@pytest.mark.parametrize("index", range(9))
def test_rewards_match_sekai_over_an_episode(index, x64):
    ours, theirs = _reward_pairs()[index]
    assert repr(ours) == repr(theirs)
    assert repr(pf.as_reward(theirs)) == repr(theirs)
    growth, equity, previous, turnover, cost = _outcomes(30)
    dtype = jnp.float64 if x64 else jnp.float32

    def episode(reward, columns):
        def body(state, column):
            g, e, p, tu, c = column
            outcome = outcome_from_growth(g, equity=e, turnover=tu, cost=c, previous_equity=p)
            value, state = reward(outcome, state)
            return state, value

        _, values = jax.lax.scan(body, reward.init(dtype), columns)
        return values

    columns = tuple(jnp.asarray(c, dtype) for c in (growth, equity, previous, turnover, cost))
    got = np.asarray(jax.jit(episode)(ours, columns))
    assert got.dtype == dtype
    theirs.reset()
    for i in range(30):
        outcome = sf.StepOutcome.from_growth(
            growth[i], equity=equity[i], turnover=turnover[i], cost=cost[i],
            previous_equity=previous[i],
        )  # fmt: skip
        want = float(theirs(outcome))
        if x64:
            assert_values_match(got[i], want, f"{ours!r} step {i}")
        else:
            np.testing.assert_allclose(got[i], want, rtol=2e-4, atol=2e-5)


def test_reward_parameter_checks_mirror_sekai():
    for ours, theirs, value in [
        (pf.MeanVariance, sf.MeanVariance, -1.0),
        (pf.DifferentialSharpe, sf.DifferentialSharpe, 0.0),
        (pf.DifferentialSharpe, sf.DifferentialSharpe, 1.0),
        (pf.DifferentialSharpe, sf.DifferentialSharpe, -0.5),
    ]:
        with pytest.raises(ValueError):
            theirs(value)
        with pytest.raises(ValueError):
            ours(value)
    with pytest.raises(TypeError):
        pf.as_reward("LogReturn")
    with pytest.raises(TypeError):
        pf.LogReturn() + "x"


def test_reward_weights_are_leaves_for_domain_randomisation(x64):
    reward = pf.LogReturn() - 0.5 * pf.TurnoverPenalty()
    dtype = jnp.float64 if x64 else jnp.float32
    outcome = outcome_from_growth(
        jnp.asarray(1.01, dtype), equity=jnp.asarray(1.01, dtype),
        turnover=jnp.asarray(2.0, dtype), cost=jnp.asarray(0.0, dtype),
        previous_equity=jnp.asarray(1.0, dtype),
    )  # fmt: skip
    chex.clear_trace_counter()

    @chex.assert_max_traces(n=1)
    def value(weights):
        r = jax.tree_util.tree_unflatten(jax.tree.structure(reward), weights)
        return r(outcome, r.init(dtype))[0]

    batch = [jnp.asarray([1.0, 1.0, 1.0], dtype), jnp.asarray([-0.5, 0.0, -1.0], dtype)]
    got = jax.jit(jax.vmap(value))(batch)
    np.testing.assert_allclose(got, np.log(1.01) - np.array([1.0, 0.0, 2.0]), rtol=1e-5)


# -------------------------------------------------------------------------- samplers
def test_as_sampler_mirrors_sekai():
    assert pf.as_sampler("random") == pf.RandomStart()
    assert pf.as_sampler("sequential") == pf.SequentialStart()
    assert pf.as_sampler(np.int64(3)) == pf.FixedStart(3)
    assert pf.as_sampler(sf.SequentialStart(2, 5)) == pf.SequentialStart(2, 5)
    assert pf.as_sampler(sf.FixedStart(4)) == pf.FixedStart(4)
    assert pf.as_sampler(sf.RandomStart()) == pf.RandomStart()
    for bad in ("bogus", -1, 1.5, None, True):
        with pytest.raises((ValueError, TypeError)) as want:
            sekai_as_sampler(bad)
        with pytest.raises(want.type):
            pf.as_sampler(bad)
    with pytest.raises(ValueError, match="stride"):
        pf.SequentialStart(0, 0)


@pytest.mark.parametrize("start, stride, n_valid, length", [(0, None, 30, 7), (3, 5, 14, 5)])
def test_sequential_positions_match_sekai(start, stride, n_valid, length):
    theirs = sf.SequentialStart(start, stride)
    want = [theirs.sample(None, n_valid, length) for _ in range(12)]
    got = pf.SequentialStart(start, stride).positions(n_valid, length, 12)
    assert got.tolist() == want


# ---------------------------------------------------------------- constructor checks
def _history(rows, assets=None):
    shape = (rows,) if assets is None else (rows, assets)
    return 100 * np.exp(np.cumsum(RNG.normal(0, 0.01, shape), axis=0))


SHORT = {"episode_length": 5, "lookback": 3}
TRADING_CASES = [
    {"prices": sf.MarketData(_history(40)[:, None])},
    {"data": _history(40)},
    {"prices": _history(40), "model": sf.GBM()},
    {"episode_length": 0},
    {"lookback": 0},
    {"episode_length": "ten"},
    {"positions": [1.0]},
    {"positions": 5},
    {"model": sf.GBM(mu=[0.0, 0.1], sigma=[0.1, 0.2])},
    {"dt": 0.0},
    {"dt": np.nan},
    {"dt": "daily"},
    {"positions": [0.0, np.nan]},
    {"positions": [0.0, np.inf]},
    {"transaction_cost": -1e-3},
    {"transaction_cost": True},
    {"transaction_cost": "1e-3"},
    {"transaction_cost": np.array(1e-3)},
    {"mu": np.nan},
    {"mu": "high"},
    {"sigma": -0.1},
    {"s0": 0.0},
    {"s0": -5.0},
    {"capital": 0.0},
    {"capital": np.inf},
    {"prices": _history(40, 2)},
    {"prices": _history(5)},
    {"prices": np.full((40, 1, 1), 100.0)},
    {"prices": np.concatenate([_history(39), [np.nan]])},
    {"prices": np.concatenate([_history(39), [0.0]])},
    {"prices": _history(40), "sampler": "bogus"},
    {"prices": _history(40), "sampler": -1},
    {"prices": _history(40), "sampler": 1000},
    {"transaction_cost": sf.SpreadCost()},
    {"transaction_cost": sf.SquareRootImpact()},
]
PORTFOLIO_CASES = [
    {"prices": sf.MarketData(_history(40, 2))},
    {"data": _history(40, 2)},
    {"prices": _history(40, 2), "model": sf.GBM()},
    {"episode_length": 0},
    {"lookback": -1},
    {"dt": -1.0},
    {"transaction_cost": -1.0},
    {"transaction_cost": "x"},
    {"prices": np.full((40, 2, 2), 100.0)},
    {"prices": _history(6, 2)},
    {"prices": np.where(np.arange(80).reshape(40, 2) == 7, np.nan, _history(40, 2))},
    {"prices": _history(40, 2), "n_assets": 3},
    {"prices": np.zeros((40, 0))},
    {"prices": np.ones((40, 0))},
    {"n_assets": 0},
    {"capital": -1.0},
    {"mu": np.nan},
    {"mu": [0.1, 0.2]},
    {"mu": np.zeros((5, 1))},
    {"sigma": -0.1},
    {"sigma": [0.1, 0.2, 0.3]},
    {"corr": np.eye(3)},
    {"corr": np.eye(5) + np.triu(np.full((5, 5), 0.1), 1)},
    {"corr": 2 * np.eye(5)},
    {"corr": np.full((5, 5), 2.0) - np.eye(5)},
    {"corr": np.where(np.eye(5) > 0, 1.0, np.nan)},
    {"prices": _history(40, 2), "sampler": "bogus"},
    {"transaction_cost": sf.SpreadCost()},
    {"transaction_cost": sf.SquareRootImpact()},
]


def _sekai_error(env_id, kwargs):
    """The exception type sekai raises for `kwargs`, at construction or at the first reset."""
    try:
        env = sekai.make(env_id, **kwargs)
        env.reset(seed=0)
    except (ValueError, TypeError) as error:
        return type(error)
    raise AssertionError(f"sekai accepted {kwargs}")


@pytest.mark.parametrize("case", range(len(TRADING_CASES)))
def test_trading_refuses_what_sekai_refuses(case):
    kwargs = {**SHORT, **TRADING_CASES[case]}
    error = _sekai_error("Trading-v0", kwargs)
    with pytest.raises(error):
        pf.TradingEnv(**kwargs)


@pytest.mark.parametrize("case", range(len(PORTFOLIO_CASES)))
def test_portfolio_refuses_what_sekai_refuses(case):
    kwargs = {**SHORT, **PORTFOLIO_CASES[case]}
    error = _sekai_error("Portfolio-v0", kwargs)
    with pytest.raises(error):
        pf.PortfolioEnv(**kwargs)


def test_a_price_history_without_assets_is_refused_naming_its_shape():
    # sekai: "MarketData needs at least 2 rows and 1 asset, got shape (40, 0)"
    with pytest.raises(ValueError, match=r"at least 2 rows and 1 asset, got shape \(40, 0\)"):
        pf.PortfolioEnv(prices=np.ones((40, 0)), **SHORT)


@pytest.mark.parametrize(
    "env",
    [
        pf.TradingEnv(**SHORT),
        pf.PortfolioEnv(**SHORT),
        pf.MarketMakingEnv(),
        pf.OptimalExecutionEnv(),
    ],
    ids=lambda env: type(env).__name__,
)
def test_params_must_be_the_envs_params_class_and_the_error_says_how_to_build_one(env):
    name = type(env.params).__name__
    with pytest.raises(TypeError, match=rf"{name}, got dict; .*env\.params\.replace\(sigma=0\.2\)"):
        env.reset(key=jax.random.key(0), params={"sigma": 0.2})
    state = env.reset(key=jax.random.key(0), params=env.params.replace(sigma=0.2))
    with pytest.raises(TypeError, match=rf"params must be the env's params class, {name}"):
        env.step(state, env.action_space.sample(key=jax.random.key(1)), {"sigma": 0.2})
    assert float(env.params.replace(sigma=0.3).sigma) == 0.3


def test_valid_sekai_sources_are_accepted_and_untraceable_ones_refused_clearly():
    # (the step-by-step comparisons with sekai are in tests/test_finance_sources.py)
    trading = pf.TradingEnv(data=sf.MarketData(_history(40)[:, None]), **SHORT)
    assert trading.n_starts == 40 - 9 + 1 and trading.inputs is not None
    portfolio = pf.PortfolioEnv(model=sf.GBM(mu=[0.0, 0.1], sigma=[0.1, 0.2]), **SHORT)
    assert portfolio.n_assets == 2 and isinstance(portfolio.params.model, pf.GBM)
    factory = sf.Randomized(lambda rng: sf.GBM(sigma=rng.uniform(0.1, 0.3)))
    with pytest.raises(TypeError, match=r"TradingEnv: model= .*Randomized\(models, ranges\)"):
        pf.TradingEnv(model=factory, **SHORT)
    with pytest.raises(TypeError, match=r"model= takes a market model .*got str"):
        pf.TradingEnv(model="heston", **SHORT)


def test_default_correlation_is_sekais_matrix():
    for n in (1, 2, 5, 8):
        assert np.array_equal(correlation_default(n), sekai.make("Portfolio-v0", n_assets=n).corr)
    assert correlation_default(5)[np.diag_indices(5)].tolist().count(0.9999999999999999) >= 1


# ---------------------------------------------------------------------- support module
def test_replay_generator_checks_calls():
    shim = ReplayGenerator(
        [("integers", (0, 5), 3), ("standard_normal", ((2, 1),), np.ones((2, 1)))]
    )
    assert shim.integers(0, 5) == 3
    with pytest.raises(AssertionError, match="expected standard_normal"):
        shim.standard_normal((3, 1))
    assert shim.standard_normal((2, 1)).shape == (2, 1)
    shim.assert_exhausted()
    assert values_match(np.float32(1.0), np.float32(1.0))
    assert not values_match(1.0, 1.0 + 1e-8)
    assert values_match(1.0, 1.0 + 1e-13)
    assert not values_match(np.bool_(True), False)
