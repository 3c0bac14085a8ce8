"""GymnaxAdapter against the real gymnax 1.0.1.

Reference: gymnax itself, with the keys the adapter documents and the same actions:
`reset(key=key)` is gymnax's `env.reset(jax.random.split(key)[1], params)` and step `t` is its
public `env.step(k_t, state, action, params)` (auto-reset included) with
`k_t = jax.random.fold_in(state.key, t | 2**31)`. Two comparisons, inside one compiled program:

- step by step: gymnax's `step` applied to the adapter's own pre-step state must give
  bit-identical observations (its `info["final_observation"]`), rewards, flags and info:
  both run the same `step_env` on the same inputs;
- whole episode: gymnax driven on its own trajectory from its own reset must agree until its
  first episode ends (its auto-reset then starts another): integers, bools and the reset
  exactly, floats within `TRANSFORM_TOLERANCE`, because XLA may fuse the two float chains
  differently (MountainCarContinuous' velocity differs by one ulp after two steps).
"""

from __future__ import annotations

import dataclasses
import functools

import chex
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax import TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax.adapters import GymnaxAdapter, GymnaxEnvState, from_gymnax_space
from parallax.spaces import Box, Discrete, PyTreeSpace
from parallax.testing import TRANSFORM_TOLERANCE, check_batch_independence, check_env

NETWORK = {"MNISTBandit-bsuite": "downloads MNIST from the network when constructed"}
NUM_STEPS = 6
MAX_STEPS = 4  # time limit used by the sweep, so every env meets it within NUM_STEPS

# gymnax's own observation spaces that do not contain the observations its envs return
# (a gymnax defect, not the conversion's). The sweep asserts that these envs do leave the
# space, so the list cannot go stale silently.
GYMNAX_SPACE_DEFECTS = {
    "MemoryChain-bsuite": "Box(0, 2) but the first observation shows the context as -1/+1",
    "GaussianBandit-misc": "Box low 0 but the observation holds the last reward, often < 0",
}


def _standard(fn):
    """Run gymnax's own functions under JAX's default promotion (they need it)."""

    def wrapped(*args, **kwargs):
        with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
            return fn(*args, **kwargs)

    return wrapped


def _make(name):
    """`gymnax.make(name)` (some constructors need JAX's default promotion)."""
    return _standard(gymnax.make)(name)


@functools.cache
def _sweep_adapter(name):
    """One adapter per env, shared by the tests so that their compiled rollouts are reused."""
    env, default = _make(name)
    limit = type(default.max_steps_in_episode)(MAX_STEPS)  # BernoulliBandit's is a float
    return GymnaxAdapter(env, default.replace(max_steps_in_episode=limit))


def _gymnax_key(state):
    """The `k` the adapter documents for gymnax's `step(k, ...)` on this state's step."""
    data = jnp.asarray(state.step_count).astype(jnp.uint32) | jnp.uint32(1 << 31)
    return jax.random.fold_in(state.key, data)


def _rollout(adapter, key):
    """Reset, then NUM_STEPS random steps (past the end of the episode: stepping a done
    state is undefined for Parallax but deterministic for gymnax); alongside, gymnax's `step`
    on the adapter's pre-step state, and gymnax's own `reset` and `step` on its own state."""
    gstep, greset = _standard(adapter.env.step), _standard(adapter.env.reset)

    def body(carry, action_key):
        state, gymnax_state = carry
        action = adapter.action_space.sample(key=action_key)
        k, params = _gymnax_key(state), state.env_state.params  # params: run-time values
        pre = gstep(k, state.env_state.gymnax_state, action, params)
        own = gstep(k, gymnax_state, action, params)
        nxt = adapter.step(state, action)
        return (nxt, own[1]), (nxt, pre, own)

    reset_key, actions_key = jax.random.split(key)
    first = adapter.reset(key=reset_key)
    first_ref = greset(jax.random.split(reset_key)[1], adapter.params)
    carry = (first, first_ref[1])
    _, (states, pre, own) = jax.lax.scan(body, carry, jax.random.split(actions_key, NUM_STEPS))
    return first, first_ref, states, pre, own


def _assert_close(ours, theirs, what):
    """Exact for integers and bools, `TRANSFORM_TOLERANCE` for floats."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if np.issubdtype(ours.dtype, np.floating):
        close = TRANSFORM_TOLERANCE.close(what, ours, theirs.astype(ours.dtype))
        assert np.all(close), f"{what}: {ours[~close]} vs {theirs[~close]}"
    else:
        _assert_equal(ours, theirs, what)


def _first_episode(states):
    """Mask of the steps up to and including the first done (gymnax resets after it)."""
    done = np.asarray(states.done)
    assert done.any(), "the sweep's time limit ends every episode"
    return np.arange(done.shape[0]) <= int(np.argmax(done))


ROLLOUT = jax.jit(_rollout, static_argnums=0)


def _signature(tree):
    return jax.tree.map(lambda x: (jnp.shape(x), jnp.result_type(x)), tree)


def _unstack_signature(tree):
    return jax.tree.map(lambda x: (jnp.shape(x)[1:], jnp.result_type(x)), tree)


def _assert_equal(ours, theirs, what):
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=what)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.skip(reason=NETWORK[n]))
        if n in NETWORK
        # the sweep over every registered env compiles each one twice: `make test-slow`
        else pytest.param(n, marks=pytest.mark.slow)
        for n in gymnax.registered_envs
    ],
)
def test_every_registered_env_keeps_the_contract_and_matches_gymnax(name):
    adapter = _sweep_adapter(name)
    assert isinstance(adapter, parallax.Env)
    first, first_ref, states, pre, own = ROLLOUT(adapter, jax.random.key(7))
    # the reset state: gymnax's reset with the same key, the fixed dtypes
    _assert_equal(first.observation, first_ref[0], "reset observation")
    chex.assert_trees_all_equal(first.env_state.gymnax_state, first_ref[1])  # reset state
    assert first.reward.dtype == jnp.float32 and float(first.reward) == 0.0
    assert first.termination.dtype == jnp.bool_ and not bool(first.termination)
    assert first.truncation.dtype == jnp.bool_ and not bool(first.truncation)
    assert first.step_count.dtype == jnp.int32 and int(first.step_count) == 0
    # every step: the same tree, shapes and dtypes as the reset state, the same episode key
    assert jax.tree.structure(states) == jax.tree.structure(first)
    assert _unstack_signature(states) == _signature(first)
    assert states.reward.shape == (NUM_STEPS,)
    np.testing.assert_array_equal(states.step_count, np.arange(1, NUM_STEPS + 1))
    keys = np.asarray(jax.random.key_data(states.key))
    assert (keys == np.asarray(jax.random.key_data(first.key))).all()
    # every step: identical to gymnax's step on the same state, key and action
    _, _, reward, terminated, truncated, info = pre
    _assert_equal(states.observation, info["final_observation"], "terminal observation")
    _assert_equal(states.reward, np.asarray(reward).astype(np.float32), "reward")
    _assert_equal(states.termination, terminated, "termination")
    _assert_equal(states.truncation, np.asarray(truncated) & ~np.asarray(terminated), "trunc")
    for key in info:
        if key in states.info:
            _assert_equal(states.info[key], info[key], f"info[{key!r}]")
    # gymnax on its own trajectory agrees up to the end of its first episode
    valid = _first_episode(states)
    _, gymnax_states, reward, terminated, truncated, info = own
    pick = lambda x: np.asarray(x)[valid]  # noqa: E731
    _assert_close(pick(states.observation), pick(info["final_observation"]), "observation")
    _assert_close(pick(states.reward), pick(reward).astype(np.float32), "reward")
    _assert_equal(pick(states.termination), pick(terminated), "own termination")
    _assert_equal(pick(states.truncation), pick(truncated) & ~pick(terminated), "own trunc")
    before = np.arange(NUM_STEPS) < int(np.argmax(np.asarray(states.done)))
    for ours, theirs in zip(
        jax.tree.leaves(states.env_state.gymnax_state), jax.tree.leaves(gymnax_states), strict=True
    ):
        _assert_close(np.asarray(ours)[before], np.asarray(theirs)[before], "gymnax state")
    # every step: never both flags; the time limit is a truncation unless the step terminated
    assert not np.any(states.termination & states.truncation)
    expected = (np.asarray(states.step_count) >= MAX_STEPS) & ~np.asarray(states.termination)
    _assert_equal(states.truncation, expected, "truncation at the time limit")
    # observations up to the end of the first episode lie in the converted space (except
    # where gymnax's own space is wrong)
    contains = jax.vmap(adapter.observation_space.contains)
    inside = bool(adapter.observation_space.contains(first.observation)) and bool(
        np.all(np.asarray(contains(states.observation))[valid])
    )
    assert inside == (name not in GYMNAX_SPACE_DEFECTS), GYMNAX_SPACE_DEFECTS.get(name, name)


def test_passes_the_parallax_battery():
    adapter = GymnaxAdapter(_make("CartPole-v1")[0], _sweep_adapter("CartPole-v1").params)
    check_env(adapter, num_steps=8, num_keys=2)  # episodes end (time limit 4): driver resets
    # a batched and a solo program may round a float differently (XLA fuses them apart:
    # CartPole's reset draw differs in the last bit), hence the transform tolerance
    check_batch_independence(adapter, num_envs=3, num_steps=8, tolerance=TRANSFORM_TOLERANCE)


@pytest.mark.parametrize("name", ["Catch-bsuite", "Pendulum-v1"])  # int / float obs
def test_dtypes_are_fixed_with_and_without_x64(name, x64):
    adapter = _sweep_adapter(name)
    first, _, states, ref, _ = ROLLOUT(adapter, jax.random.key(7))  # f32: the sweep's program
    obs_dtype = jax.dtypes.canonicalize_dtype(adapter.observation_space.dtype)
    assert first.observation.dtype == states.observation.dtype == obs_dtype
    assert states.reward.dtype == jnp.float32 and states.step_count.dtype == jnp.int32
    assert states.termination.dtype == states.truncation.dtype == jnp.bool_
    assert _unstack_signature(states) == _signature(first)
    final = np.asarray(ref[5]["final_observation"]).astype(obs_dtype)
    _assert_equal(states.observation, final, "observation")
    _assert_equal(states.reward, np.asarray(ref[2]).astype(np.float32), "reward")


def test_terminal_observation_is_kept_and_gymnax_would_reset():
    env, params = _make("CartPole-v1")
    adapter = GymnaxAdapter(env)
    step = jax.jit(adapter.step)
    gstep = _standard(env.step)  # jitted by gymnax
    state = adapter.reset(key=jax.random.key(0))
    for _ in range(200):  # always pushing right tips the pole within ~10 steps
        k = _gymnax_key(state)
        g_obs, _, _, g_term, _, g_info = gstep(k, state.env_state.gymnax_state, 1, params)
        state = step(state, jnp.int32(1))
        if bool(state.done):
            break
    assert bool(state.termination) and bool(g_term) and not bool(state.truncation)
    _assert_equal(state.observation, g_info["final_observation"], "terminal observation")
    assert abs(float(state.observation[2])) > float(params.theta_threshold_radians)
    assert not np.array_equal(np.asarray(g_obs), np.asarray(state.observation))
    assert abs(float(g_obs[2])) < 0.05  # gymnax's step returned a fresh reset


def test_time_limit_is_truncation_not_termination():
    env, params = _make("Pendulum-v1")  # never terminates
    adapter = GymnaxAdapter(env, params.replace(max_steps_in_episode=3))
    state = adapter.reset(key=jax.random.key(1))
    step = jax.jit(adapter.step)
    flags = []
    for _ in range(3):
        state = step(state, jnp.zeros(1))
        flags.append((bool(state.termination), bool(state.truncation)))
    assert flags == [(False, False), (False, False), (False, True)]


def test_terminal_step_at_the_time_limit_is_a_termination():
    # DeepSea reaches its bottom row exactly when time == size == max_steps_in_episode;
    # gymnax's step reports terminated and truncated, the adapter a termination only.
    env, params = _make("DeepSea-bsuite")
    adapter = GymnaxAdapter(env)
    state = adapter.reset(key=jax.random.key(0))
    step, gstep = jax.jit(adapter.step), _standard(env.step)
    for _ in range(params.max_steps_in_episode):
        k = _gymnax_key(state)
        ref = gstep(k, state.env_state.gymnax_state, jnp.int32(0), state.env_state.params)
        state = step(state, jnp.int32(0))
    assert bool(ref[3]) and bool(ref[4])  # gymnax: both
    assert bool(state.termination) and not bool(state.truncation)


def test_spaces_keep_per_dimension_bounds_and_dtypes():
    env, params = _make("Acrobot-v1")
    original = env.observation_space(params)
    space = GymnaxAdapter(env).observation_space
    assert isinstance(space, Box) and space.dtype == np.float32 and space.shape == (6,)
    np.testing.assert_array_equal(space.low, np.asarray(original.low, np.float64))
    np.testing.assert_array_equal(space.high, np.asarray(original.high, np.float64))

    @jax.jit
    def count_inside(key):
        samples = jax.vmap(lambda k: space.sample(key=k))(jax.random.split(key, 1000))
        return jax.vmap(original.contains)(samples).sum(), jax.vmap(space.contains)(samples).sum()

    in_original, in_ours = count_inside(jax.random.key(0))
    assert int(in_original) == 1000 and int(in_ours) == 1000  # parallax-rl 0.4.0: 0 of 1000
    catch_space = GymnaxAdapter(_make("Catch-bsuite")[0]).observation_space
    assert catch_space.dtype == np.int32 and catch_space.shape == (10, 5)
    assert GymnaxAdapter(_make("FrozenLake-misc")[0]).observation_space == Discrete(16)


def test_dict_and_tuple_spaces_convert_recursively():
    gs = gymnax.environments.spaces
    space = gs.Dict(
        {
            "pos": gs.Box(jnp.array([-1.0, 0.0]), jnp.array([1.0, 2.0]), (2,), jnp.float32),
            "pair": gs.Tuple([gs.Discrete(3), gs.Box(0, 5, (), jnp.int32)]),
        }
    )
    converted = from_gymnax_space(space)
    assert isinstance(converted, PyTreeSpace)  # one tree of leaf spaces, nested like gymnax's
    assert converted.spaces["pair"] == (Discrete(3), Box(0, 5, (), np.int32))
    assert converted.spaces["pos"] == Box([-1.0, 0.0], [1.0, 2.0], (2,), np.float32)
    x = converted.sample(key=jax.random.key(0))
    assert bool(converted.contains(x))


def test_unconvertible_spaces_are_refused():
    gs = gymnax.environments.spaces
    with pytest.raises(TypeError, match="Box dtype must be a float or integer dtype"):
        from_gymnax_space(gs.Box(0, 1, (2,), jnp.bool_))
    with pytest.raises(ValueError, match="n=0"):
        from_gymnax_space(gs.Discrete(0))
    with pytest.raises(TypeError, match="got str"):
        from_gymnax_space("Discrete(2)")


def test_constructor_checks_its_arguments():
    env, _ = _make("CartPole-v1")
    with pytest.raises(TypeError, match=r"env must be a gymnax Environment.*got GridWorld"):
        GymnaxAdapter(parallax.make("GridWorld-v0"))
    with pytest.raises(ValueError, match="params must have the tree structure"):
        GymnaxAdapter(env, _make("Acrobot-v1")[1])


def test_params_can_be_vmapped_for_domain_randomisation():
    env, params = _make("CartPole-v1")
    adapter = GymnaxAdapter(env)
    gravity = jnp.array([1.0, 9.8, 30.0, 100.0], jnp.float32)
    batch = jax.vmap(lambda g: jax.tree.map(jnp.asarray, params.replace(gravity=g)))(gravity)
    keys = jax.random.split(jax.random.key(0), 4)
    reset = jax.jit(jax.vmap(lambda k, p: adapter.reset(key=k, params=p)))
    states = reset(keys, batch)
    vec = VmapWrapper(adapter, num_envs=4)
    chex.clear_trace_counter()
    step = jax.jit(chex.assert_max_traces(vec.step, n=1))  # a retrace raises
    actions = jnp.ones(4, jnp.int32)
    for _ in range(5):
        prev = states
        states = step(states, actions)
    # each env used its own gravity: gymnax's step_env with that env's params agrees (up to
    # float rounding: the two programs are compiled separately, so XLA may fuse differently)
    ref = jax.jit(
        jax.vmap(lambda s, p, k: _standard(env.step_env)(jax.random.split(k)[0], s, 1, p))
    )(prev.env_state.gymnax_state, batch, jax.vmap(_gymnax_key)(prev))
    np.testing.assert_allclose(states.observation, ref[0], rtol=1e-6, atol=1e-7)
    theta_dot = np.asarray(states.observation[:, 3])
    assert len(set(theta_dot.round(6).tolist())) == 4  # different physics per env
    # new params batch: same shapes, no retrace (assert_max_traces above would raise)
    states2 = reset(keys, batch)
    step(states2, actions)


def test_vmap_wrapper_autoreset_and_scan():
    adapter = GymnaxAdapter(_make("CartPole-v1")[0])
    env = VmapAutoResetWrapper(TimeLimit(adapter, 5), 3)
    state = env.reset(key=jax.random.key(0))

    def body(s, k):
        s = env.step(s, jax.random.randint(k, (3,), 0, 2))
        return s, (s.truncation, s.step_count, parallax.final_observation(s))

    _, (trunc, count, final) = jax.jit(
        lambda s: jax.lax.scan(body, s, jax.random.split(jax.random.key(1), 6))
    )(state)
    assert np.asarray(trunc)[4].all() and np.asarray(count)[4].tolist() == [0, 0, 0]
    assert final.shape == (6, 3, 4)


def test_step_keeps_the_episode_key_and_a_deterministic_step_draws_no_key():
    # the step key is fold_in(episode key, t): nothing is split and carried per step, and
    # XLA drops the derivation where step_env ignores its key (CartPole), so the compiled
    # step holds no threefry hash; a bandit, whose step_env draws, keeps it
    counts = {}
    for name in ("CartPole-v1", "BernoulliBandit-misc"):
        adapter = GymnaxAdapter(_make(name)[0])
        state = adapter.reset(key=jax.random.key(2))
        action = adapter.action_space.sample(key=jax.random.key(3))
        compiled = jax.jit(adapter.step).lower(state, action).compile()
        stepped = compiled(state, action)
        _assert_equal(jax.random.key_data(stepped.key), jax.random.key_data(state.key), name)
        counts[name] = compiled.as_text().count("threefry")
    assert counts["CartPole-v1"] == 0 and counts["BernoulliBandit-misc"] > 0, counts


def test_isinstance_env_and_typed_and_raw_keys():
    adapter = GymnaxAdapter(_make("CartPole-v1")[0])
    assert isinstance(adapter, parallax.Env)
    typed = adapter.reset(key=jax.random.key(5))
    raw = adapter.reset(key=jax.random.PRNGKey(5))
    _assert_equal(typed.observation, raw.observation, "typed and raw keys give one episode")
    assert isinstance(typed.env_state, GymnaxEnvState)


def test_registry_namespace():
    from parallax.adapters import _registry

    assert _registry.gymnax_names() == list(gymnax.registered_envs)
    env = parallax.make("gymnax/Acrobot-v1")
    assert isinstance(env, GymnaxAdapter) and env.name == "Acrobot-v1"
    params = dataclasses.replace(env.params, max_steps_in_episode=7)
    assert parallax.make("gymnax/Acrobot-v1", params=params).params.max_steps_in_episode == 7
    vec = parallax.make_vec("gymnax/CartPole-v1", 2, max_episode_steps=3)
    assert vec.reset(key=jax.random.key(0)).observation.shape == (2, 4)


def test_docstring_examples_run():
    import doctest

    from parallax.adapters import _gymnax

    for module in (_gymnax,):
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_no_step_key_equals_the_next_episode_key():
    # AutoResetWrapper starts the next episode with fold_in(episode key, 0x5EED); the step key
    # of step 0x5EED must not be that key (the adapter sets the folded word's top bit).
    from parallax import next_episode_key
    from parallax.adapters._gymnax import step_key_of

    key = jax.random.key(3)
    steps = jnp.arange(0, 1 << 16, dtype=jnp.int32)
    step_keys = jax.vmap(lambda t: jax.random.key_data(step_key_of(key, t)))(steps)
    reset_key = jax.random.key_data(next_episode_key(key))
    assert not bool(jnp.any(jnp.all(step_keys == reset_key[None, :], axis=-1)))
    # without the top bit, step 0x5EED would collide
    assert bool(jnp.all(jax.random.key_data(jax.random.fold_in(key, 0x5EED)) == reset_key))
