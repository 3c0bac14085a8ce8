"""`to_brax`: a Parallax env as a brax `Env`, against brax 0.14's own training wrappers.

The contract: brax's interface (`reset(rng)`, `step(state, action)`, sizes, float32 `done`,
`metrics`, `info["truncation"]`); actions in `[-1, 1]` mapped affinely onto the env's `Box`;
every episode under brax's `AutoResetWrapper` is a new one (episode `i` of key `k` is the
Parallax episode of `jax.random.fold_in(k, i)`); spaces brax cannot express are refused;
`BraxAdapter(to_brax(env))` is `env` again (in brax's action units); and brax's
`training.wrap` trains a policy of ours on the export.

brax's wrappers are written for JAX's default numerics, so the tests that run them are
marked `standard_promotion`; the export alone runs under the suite's strict rules.
"""

from __future__ import annotations

import subprocess
import sys

import brax.envs
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.envs.wrappers import training

import parallax
from parallax import State, TimeLimit, spaces
from parallax.adapters import BraxAdapter
from parallax.adapters._to_brax import BraxPipelineState, flatten_observation, to_brax

pytestmark = pytest.mark.xdist_group("export_brax")

BOX_IDS = {
    "OptimalExecution-v0": {"n_steps": 4},
    "MarketMaking-v0": {"n_steps": 4},
    "Portfolio-v0": {"n_assets": 2, "episode_length": 3, "lookback": 2},
}
"""Every registered finance id with a Box action, made small (cheap to compile)."""


# -- the interface --------------------------------------------------------------------------
def test_importing_the_module_does_not_import_brax():
    code = (
        "import sys, parallax.adapters, parallax.adapters._to_brax; "
        "assert 'brax' not in sys.modules, 'brax was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_export_is_a_brax_env_with_brax_shapes_and_dtypes():
    base = parallax.make("MarketMaking-v0", n_steps=4)
    env = to_brax(base)
    assert isinstance(env, brax.envs.Env)
    assert (env.observation_size, env.action_size, env.backend) == (2, 2, "parallax")
    assert env.unwrapped is env
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    state = jax.jit(env.step)(state, jnp.zeros(2))
    assert state.obs.shape == (2,) and state.obs.dtype == jnp.float32
    for value in (state.reward, state.done, state.info["truncation"]):
        assert value.shape == () and value.dtype == jnp.float32
    info = base.reset(key=jax.random.PRNGKey(0)).info  # scalars only: all of them here
    assert {"inventory", "bid_filled", "wealth"} <= set(state.metrics) == set(info)
    assert all(m.shape == () and m.dtype == jnp.float32 for m in state.metrics.values())
    assert isinstance(state.pipeline_state, BraxPipelineState)
    assert isinstance(state.pipeline_state.state, State)
    assert int(state.pipeline_state.episode) == 0


def test_typed_and_raw_keys_start_the_same_episode_as_the_parallax_env():
    base = parallax.make("OptimalExecution-v0", n_steps=4)
    env = to_brax(base)
    raw = jax.random.PRNGKey(3)
    want = base.reset(key=jax.random.key(3))
    for key in (raw, jax.random.key(3)):
        got = env.reset(key).pipeline_state.state
        np.testing.assert_array_equal(got.env_state.episode_key, want.env_state.episode_key)


def test_class_is_built_once_and_resolves_by_name():
    from parallax.adapters import _to_brax

    a = to_brax(parallax.make("OptimalExecution-v0", n_steps=2))
    b = to_brax(parallax.make("MarketMaking-v0", n_steps=2))
    assert type(a) is type(b) is _to_brax.BraxEnv
    assert repr(a).startswith("to_brax(")


def test_dict_observations_are_flattened_in_pytree_order():
    base = parallax.make("Portfolio-v0", **BOX_IDS["Portfolio-v0"])
    env = to_brax(base)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    obs = jax.jit(base.reset)(key=jax.random.PRNGKey(0)).observation
    want = jnp.concatenate([obs["returns"].ravel(), obs["weights"].ravel()])
    assert env.observation_size == 2 * 2 + 3
    np.testing.assert_array_equal(state.obs, want)
    # non-scalar info entries (weights, asset_returns) are no metrics
    assert "weights" not in state.metrics and "portfolio_value" in state.metrics


# -- actions --------------------------------------------------------------------------------
def test_actions_in_minus_one_one_are_mapped_onto_the_box():
    env = to_brax(parallax.make("MarketMaking-v0", n_steps=4))  # Box(0, 5, (2,))
    np.testing.assert_array_equal(env.env_action(jnp.array([-1.0, 1.0])), [0.0, 5.0])
    np.testing.assert_array_equal(env.env_action(jnp.array([0.0, 0.5])), [2.5, 3.75])
    # clipped to [-1, 1] first
    np.testing.assert_array_equal(env.env_action(jnp.array([-7.0, 3.0])), [0.0, 5.0])
    assert env.env_action(jnp.zeros(2)).dtype == jnp.float32


def test_a_step_applies_the_rescaled_action():
    base = parallax.make("OptimalExecution-v0", n_steps=4)  # Box(0, 1, (1,)): sell fraction
    env = to_brax(base)
    state = env.step(env.reset(jax.random.PRNGKey(0)), jnp.array([-0.5]))
    assert float(state.metrics["shares_sold"]) == 0.25 * 1e6
    want = base.step(base.reset(key=jax.random.PRNGKey(0)), jnp.array([0.25]))
    np.testing.assert_array_equal(state.obs, want.observation)
    assert float(state.reward) == float(want.reward)


# -- flags and finished episodes ------------------------------------------------------------
def test_termination_is_done_and_truncation_is_in_info():
    terminating = to_brax(parallax.make("OptimalExecution-v0", n_steps=2))
    state = terminating.reset(jax.random.PRNGKey(0))
    for _ in range(2):
        state = terminating.step(state, jnp.zeros(1))
    assert (float(state.done), float(state.info["truncation"])) == (1.0, 0.0)

    truncating = to_brax(TimeLimit(parallax.make("OptimalExecution-v0", n_steps=9), 2))
    state = truncating.reset(jax.random.PRNGKey(0))
    state = truncating.step(state, jnp.zeros(1))
    assert (float(state.done), float(state.info["truncation"])) == (0.0, 0.0)
    state = truncating.step(state, jnp.zeros(1))
    assert (float(state.done), float(state.info["truncation"])) == (1.0, 1.0)


def test_stepping_a_finished_episode_changes_nothing_and_rewards_zero():
    env = to_brax(parallax.make("OptimalExecution-v0", n_steps=1))
    done = env.step(env.reset(jax.random.PRNGKey(0)), jnp.zeros(1))
    again = env.step(done, jnp.ones(1))
    assert float(done.done) == float(again.done) == 1.0
    assert float(again.reward) == 0.0
    np.testing.assert_array_equal(again.obs, done.obs)
    assert int(again.pipeline_state.state.step_count) == 1


# -- refusals -------------------------------------------------------------------------------
class _Stub:
    """A Parallax-shaped env whose action space is the only thing that matters."""

    observation_space = spaces.Box(0.0, 1.0, (1,))

    def __init__(self, action_space):
        self.action_space = action_space

    def reset(self, *, key):  # pragma: no cover - never reached
        raise AssertionError

    def step(self, state, action):  # pragma: no cover - never reached
        raise AssertionError


@pytest.mark.parametrize(
    ("space", "match"),
    [
        (spaces.Discrete(3), "must be a Box, got Discrete"),
        (spaces.MultiDiscrete([2, 3]), "must be a Box, got MultiDiscrete"),
        (spaces.MultiBinary(2), "must be a Box, got MultiBinary"),
        (spaces.PyTreeSpace({"a": spaces.Box(0.0, 1.0, (1,))}), "must be a Box, got PyTreeSpace"),
        (spaces.Box(0, 3, (2,), jnp.int32), "must be a float Box"),
        (spaces.Box(-np.inf, 1.0, (2,)), "must be bounded"),
    ],
)
def test_spaces_without_a_brax_equivalent_are_refused(space, match):
    with pytest.raises(ValueError, match=f"to_brax: env.action_space {match}"):
        to_brax(_Stub(space))


@pytest.mark.parametrize("env_id", ["Trading-v0", "GridWorld-v0", "MaskedGridWorld-v0"])
def test_registered_discrete_action_envs_are_refused(env_id):
    with pytest.raises(ValueError, match=r"to_brax: env.action_space must be a Box.*brax"):
        to_brax(parallax.make(env_id))


def test_batched_and_non_envs_are_refused():
    with pytest.raises(TypeError, match="vector env"):
        to_brax(parallax.make_vec("OptimalExecution-v0", 2))
    with pytest.raises(TypeError, match="callable `reset`"):
        to_brax(object())


# -- brax's auto-reset ----------------------------------------------------------------------
def _direct_episode(base, key, actions):
    """The Parallax episode of `key` under `actions` (brax units): rewards and observations."""

    def body(state, action):
        state = base.step(state, action)
        return state, (state.reward, state.observation)

    start = base.reset(key=key)
    _, (rewards, observations) = jax.lax.scan(body, start, actions)
    return start.observation, rewards, observations


@pytest.mark.standard_promotion
@pytest.mark.parametrize(
    ("n_steps", "episode_length"),
    [(3, 10), (50, 3)],
    ids=["env-terminates", "brax-truncates"],
)
def test_every_episode_after_brax_auto_reset_is_a_new_one(n_steps, episode_length):
    base = parallax.make("OptimalExecution-v0", n_steps=n_steps)
    export = to_brax(base)
    env = training.wrap(export, episode_length=episode_length, action_repeat=1)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    length = min(n_steps, episode_length)
    episodes = 3
    actions = jnp.tile(jnp.array([[-0.6], [0.2]]), (episodes * length, 1, 1))

    def run(keys, actions):
        def body(state, action):
            state = env.step(state, action)
            return state, (state.reward, state.obs, state.done, state.info["truncation"])

        first = env.reset(keys)
        last, out = jax.lax.scan(body, first, actions)
        return first, last, out

    first, last, (rewards, obs, dones, truncations) = jax.jit(run)(keys, actions)
    ends = np.flatnonzero(np.asarray(dones[:, 0]))
    np.testing.assert_array_equal(ends, np.arange(length - 1, episodes * length, length))
    assert np.all(np.asarray(truncations)[ends] == (episode_length < n_steps))
    np.testing.assert_array_equal(last.pipeline_state.episode, [episodes] * 2)
    returns = np.asarray(rewards).reshape(episodes, length, 2).sum(axis=1)
    assert len(np.unique(returns)) == returns.size, f"repeated episodes: {returns}"
    # episode i of env b is the Parallax episode of fold_in(keys[b], i) (i = 0: keys[b]),
    # each run by one compiled program
    direct = jax.jit(lambda key, a: _direct_episode(base, key, jax.vmap(export.env_action)(a)))
    for b in range(2):
        for i in range(episodes):
            key = keys[b] if i == 0 else jax.random.fold_in(keys[b], i)
            window = slice(i * length, (i + 1) * length)
            start, want_rewards, want_obs = direct(key, actions[window, b])
            got_start = first.obs[b] if i == 0 else obs[i * length - 1, b]  # restored obs
            np.testing.assert_allclose(got_start, start, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(rewards[window, b], want_rewards, rtol=1e-6)
            # the last step's observation was replaced by the next episode's first one
            np.testing.assert_allclose(obs[window, b][:-1], want_obs[:-1], rtol=1e-6, atol=1e-7)


def test_batched_advance_of_the_first_state_is_the_unbatched_one_per_env():
    """Under vmap the advance resets only batch-wide when some env needs it; each env still
    gets exactly what the unbatched advance gives it, and nothing changes when none needs it."""
    env = to_brax(parallax.make("OptimalExecution-v0", n_steps=4))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    first, first_obs = jax.jit(jax.vmap(env._start))(keys, jnp.array([1, 1, 2, 2], jnp.int32))
    batched = jax.jit(jax.vmap(env._advance))
    one = jax.jit(env._advance)

    def row(tree, i):
        return jax.tree.map(lambda x: x[i], tree)

    for episodes in ([0, 1, 0, 2], [0, 0, 1, 1]):  # some envs start an episode; none does
        episode = jnp.array(episodes, jnp.int32)
        got = batched(first, first_obs, keys, episode)
        for i in range(4):
            want = one(row(first, i), first_obs[i], keys[i], episode[i])
            chex.assert_trees_all_equal(row(got, i), want)
        ahead = np.asarray(first.episode) > np.asarray(episode)
        np.testing.assert_array_equal(got[0].episode, np.where(ahead, first.episode, episode + 1))
    chex.assert_trees_all_equal(got, (first, first_obs))  # the second case: nothing to do


@pytest.mark.standard_promotion
def test_gradients_flow_through_brax_wrapped_steps():
    """brax's analytic-gradient trainers (APG) differentiate through `step`: the export's
    batched advance must not stop them."""
    env = training.wrap(
        to_brax(parallax.make("OptimalExecution-v0", n_steps=3)), episode_length=3, action_repeat=1
    )
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))

    def total_reward(actions):
        def body(state, action):
            state = env.step(state, action)
            return state, state.reward

        return jax.lax.scan(body, state, actions)[1].sum()

    grad = jax.jit(jax.grad(total_reward))(jnp.zeros((4, 2, 1)))
    assert grad.shape == (4, 2, 1)
    assert np.isfinite(np.asarray(grad)).all() and np.abs(np.asarray(grad)).sum() > 0


# -- round trip ------------------------------------------------------------------------------
def _metrics_of(info):
    return {k: v.astype(jnp.float32) for k, v in info.items() if jnp.shape(v) == ()}


@pytest.mark.parametrize("env_id", sorted(BOX_IDS))
def test_brax_adapter_of_the_export_is_the_env_again(env_id):
    base = parallax.make(env_id, **BOX_IDS[env_id])
    export = to_brax(base)
    again = BraxAdapter(export)
    assert again.action_space == spaces.Box(-1.0, 1.0, (export.action_size,))
    steps = 5  # past the first episode's end: both sides stay consistent until then
    key = jax.random.key(7)
    actions = jax.random.uniform(
        jax.random.key(8), (steps, export.action_size), minval=-1.0, maxval=1.0
    )

    def both(key, actions):
        # BraxAdapter starts brax with the raw key split(key)[1]; the env gets that key
        _, reset_key = jax.random.split(key)
        direct0 = base.reset(key=jax.random.key_data(reset_key))
        round0 = again.reset(key=key)

        def body(carry, action):
            direct, rounded = carry
            direct = base.step(direct, export.env_action(action))
            rounded = again.step(rounded, action)
            return (direct, rounded), (direct, rounded)

        _, (directs, rounds) = jax.lax.scan(body, (direct0, round0), actions)
        return direct0, round0, directs, rounds

    direct0, round0, directs, rounds = jax.jit(both)(key, actions)
    length = int(np.argmax(np.asarray(directs.done))) + 1 if directs.done.any() else steps
    assert length >= 3
    for d, r in [(direct0, round0)] + [
        (jax.tree.map(lambda x, t=t: x[t], directs), jax.tree.map(lambda x, t=t: x[t], rounds))
        for t in range(length)
    ]:
        np.testing.assert_array_equal(r.observation, flatten_observation(d.observation))
        np.testing.assert_allclose(r.reward, d.reward.astype(jnp.float32), rtol=1e-6)
        assert int(r.step_count) == int(d.step_count)
        assert bool(r.done) == bool(d.done)
        assert bool(r.termination) == bool(d.termination)
        assert bool(r.truncation) == bool(d.truncation)
        chex.assert_trees_all_equal(r.info["metrics"], _metrics_of(d.info))  # keys and values


# -- training through brax's wrappers -------------------------------------------------------
N_STEPS = 8
NUM_ENVS = 16
POPULATION = 16  # antithetic pairs: 8


@pytest.mark.standard_promotion
def test_brax_training_wrappers_train_a_policy_on_the_export():
    """A tiny evolution strategy of ours, through `training.wrap(to_brax(env))`."""
    base = parallax.make("OptimalExecution-v0", n_steps=N_STEPS)
    env = training.wrap(to_brax(base), episode_length=N_STEPS, action_repeat=1)

    def policy(theta, obs):
        return jnp.tanh(obs @ theta[:3] + theta[3])[..., None]

    def mean_return(theta, key, num_envs):
        def body(state, _):
            state = env.step(state, policy(theta, state.obs))
            return state, state.reward

        state = env.reset(jax.random.split(key, num_envs))
        _, rewards = jax.lax.scan(body, state, None, length=2 * N_STEPS)  # two episodes each
        return rewards.sum(axis=0).mean() / 2

    def es_step(theta, key):
        noise_key, env_key = jax.random.split(key)
        half = jax.random.normal(noise_key, (POPULATION // 2, 4))
        eps = jnp.concatenate([half, -half])
        fitness = jax.vmap(lambda e: mean_return(theta + 0.3 * e, env_key, NUM_ENVS))(eps)
        fitness = (fitness - fitness.mean()) / (fitness.std() + 1e-8)
        return theta + 0.2 * (eps * fitness[:, None]).mean(axis=0) / 0.3, None

    @jax.jit
    def train(theta, key):
        theta, _ = jax.lax.scan(es_step, theta, jax.random.split(key, 25))
        return theta

    evaluate = jax.jit(lambda theta: mean_return(theta, jax.random.PRNGKey(99), 64))
    theta0 = jnp.array([0.0, 0.0, 0.0, -2.0])  # sells ~2% a step: dumps it all at the end
    before = float(evaluate(theta0))
    after = float(evaluate(train(theta0, jax.random.PRNGKey(1))))
    print(f"OptimalExecution-v0 mean episode reward (bps): before {before:.1f}, after {after:.1f}")
    assert after > before + 100.0, (before, after)


def test_docstring_examples_run():
    import doctest

    from parallax.adapters import _to_brax

    result = doctest.testmod(_to_brax, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def _jax_has(name):
    try:
        getattr(jax, name)
    except AttributeError:
        return False
    return True


@pytest.mark.slow  # ~50 s on 2 CPU cores, mostly brax's compilation
@pytest.mark.standard_promotion
def test_brax_ppo_trains_on_the_export():
    import inspect

    from brax.training.agents.ppo import train as ppo

    if "jax.device_put_replicated(" in inspect.getsource(ppo) and not _jax_has(
        "device_put_replicated"
    ):
        pytest.skip(
            "brax's ppo.train calls jax.device_put_replicated, which this JAX removed (brax "
            "0.14.2 with JAX >= 0.10; fixed on brax's main branch after 0.14.2); `make "
            "clients-brax` runs it on JAX 0.9.2 (.venv-brax, tests/clients_brax)"
        )
    env = to_brax(parallax.make("OptimalExecution-v0", n_steps=5))
    _, _, metrics = ppo.train(
        environment=env,
        num_timesteps=800,
        episode_length=5,
        num_envs=8,
        batch_size=8,
        num_minibatches=2,
        unroll_length=5,
        num_updates_per_batch=1,
        num_evals=2,
        num_eval_envs=4,
        seed=0,
    )
    assert np.isfinite(metrics["eval/episode_reward"])
