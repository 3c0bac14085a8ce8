"""MJXAdapter against the real MuJoCo Playground 0.2 (MJX with `impl="jax"` on a CPU).

Reference: the wrappers playground's own training uses, `wrapper.wrap_for_brax_training`
without its outermost auto-reset (brax's `EpisodeWrapper(VmapWrapper(env))`: the time limit
and action repeat, the terminal observation intact), driven with the raw keys the adapter
documents and the same actions, inside one program: results must match exactly.

An MJX program takes ~10 s of CPU to compile, so each env is compiled for one purpose:
PointMass (which has metrics) is compared with playground, PendulumSwingup (the cheapest)
runs the Parallax battery; the other tests only trace.
"""

from __future__ import annotations

import logging
import re
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mujoco_playground import MjxEnv, registry, wrapper

import parallax
from parallax import VmapWrapper
from parallax.adapters import MJXAdapter
from parallax.spaces import Box, PyTreeSpace
from parallax.testing import TRANSFORM_TOLERANCE, check_batch_independence, check_env

NUM_ENVS = 3
NUM_STEPS = 5

# one worker runs this file, so the module fixtures (and their compilations) exist once
pytestmark = pytest.mark.xdist_group("adapters_mjx")


@pytest.fixture(scope="module")
def pendulum():
    # episode_length from the public config, here overridden through playground itself
    return MJXAdapter.load("PendulumSwingup", config_overrides={"episode_length": 4})


@pytest.fixture(scope="module")
def point_mass():
    return MJXAdapter.load("PointMass", episode_length=3)


def _reference(adapter):
    """playground's training wrappers, without the auto-reset that hides terminal obs."""
    wrapped = wrapper.wrap_for_brax_training(
        adapter.env, episode_length=adapter.episode_length, action_repeat=adapter.action_repeat
    )
    assert isinstance(wrapped, wrapper.BraxAutoResetWrapper)
    return wrapped.env


def _compare_with_playground(adapter):
    ours = VmapWrapper(adapter, NUM_ENVS)
    theirs = _reference(adapter)
    size = adapter.action_space.shape[0]

    @jax.jit
    def run(key):
        keys = jax.random.split(key, NUM_ENVS)
        raw = jax.vmap(lambda k: jax.random.key_data(jax.random.split(k)[1]))(keys)
        actions = jax.random.uniform(
            jax.random.fold_in(key, 1), (NUM_STEPS, NUM_ENVS, size), minval=-1.0, maxval=1.0
        )
        with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
            first_ref = theirs.reset(raw)
        first = ours.reset(key=keys)

        def body(carry, action):
            state, ref = carry
            with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
                ref = theirs.step(ref, action)
            state = ours.step(state, action)
            return (state, ref), (state, ref)

        _, out = jax.lax.scan(body, (first, first_ref), actions)
        return first, first_ref, out

    first, first_ref, (states, refs) = run(jax.random.key(11))
    dtype = first.observation.dtype
    np.testing.assert_array_equal(first.observation, np.asarray(first_ref.obs).astype(dtype))
    done = np.asarray(states.done)
    valid = (np.cumsum(done, axis=0) - done) == 0  # up to each env's first done
    ref_done = np.asarray(refs.done) > 0
    ref_truncation = np.asarray(refs.info["truncation"]) > 0
    np.testing.assert_array_equal(
        np.asarray(states.observation)[valid], np.asarray(refs.obs).astype(dtype)[valid]
    )
    np.testing.assert_array_equal(
        np.asarray(states.reward)[valid], np.asarray(refs.reward).astype(np.float32)[valid]
    )
    np.testing.assert_array_equal(done[valid], ref_done[valid])
    np.testing.assert_array_equal(np.asarray(states.truncation)[valid], ref_truncation[valid])
    up_to_done = lambda tree: jax.tree.map(lambda x: np.asarray(x)[valid], tree)  # noqa: E731
    chex.assert_trees_all_equal(up_to_done(states.info["metrics"]), up_to_done(dict(refs.metrics)))
    # the contract: stable tree, fixed dtypes, step_count counts agent steps
    sig = lambda t: jax.tree.map(lambda x: (jnp.shape(x), jnp.result_type(x)), t)  # noqa: E731
    assert sig(jax.tree.map(lambda x: x[0], states)) == sig(first)
    assert states.reward.dtype == jnp.float32 and states.step_count.dtype == jnp.int32
    assert states.termination.dtype == states.truncation.dtype == jnp.bool_
    np.testing.assert_array_equal(np.asarray(states.step_count)[:, 0], np.arange(1, NUM_STEPS + 1))
    assert bool(jax.vmap(jax.vmap(adapter.observation_space.contains))(states.observation).all())
    return states


@pytest.mark.slow  # compiles playground's training wrappers around MJX (`make test-slow`)
def test_point_mass_matches_playground_training_wrappers(point_mass):
    states = _compare_with_playground(point_mass)
    assert set(states.info["metrics"]) == {"reward/near_target", "reward/small_control"}
    # episode_length=3: every episode is truncated on the 3rd step
    assert np.asarray(states.truncation)[2].all() and not np.asarray(states.truncation)[:2].any()


class Compiled(parallax.Wrapper):
    """`reset` / `step` compiled once. The battery also steps envs one call at a time; an
    MJX step run op by op compiles thousands of primitives (minutes on a CPU), so the
    battery runs with `disable_jit=False` over this wrapper, and the wrapper keeps its
    compiled programs even inside `jax.disable_jit()` (check_batch_independence resets its
    solo runs there). `jit` does not change what the adapter computes, and the battery still
    checks every state."""

    def __init__(self, env):
        super().__init__(env)
        self._reset = jax.jit(lambda key: env.reset(key=key))
        self._step = jax.jit(env.step)

    def reset(self, *, key):
        with jax.disable_jit(False):
            return self._reset(key)

    def step(self, state, action):
        with jax.disable_jit(False):
            return self._step(state, action)


@pytest.fixture(scope="module")
def compiled_pendulum(pendulum):
    return Compiled(pendulum)


def test_time_limit_from_the_config_is_a_truncation(compiled_pendulum):
    env = compiled_pendulum  # the config's episode_length is 4 (overridden via playground)
    state = env.reset(key=jax.random.key(0))
    flags = []
    for _ in range(4):
        state = env.step(state, jnp.ones(1))
        flags.append((bool(state.termination), bool(state.truncation), int(state.step_count)))
    assert flags == [(False, False, 1), (False, False, 2), (False, False, 3), (False, True, 4)]


@pytest.mark.slow  # the whole battery on an MJX env (`make test-slow`)
def test_passes_the_parallax_battery(compiled_pendulum):
    check_env(compiled_pendulum, num_steps=5, num_keys=2, disable_jit=False)
    # MuJoCo's float sums are reassociated under vmap (e.g. cinert differs by 5e-12), so
    # the batch is compared with the transform tolerance, not bit for bit; the solo runs
    # reuse the wrapper's compiled step (as the star-import battery passes its session's)
    # instead of compiling `jax.jit(env.step)` of the wrapper once more
    check_batch_independence(
        compiled_pendulum,
        num_envs=2,
        num_steps=5,
        tolerance=TRANSFORM_TOLERANCE,
        _solo_step=compiled_pendulum.step,
    )


def test_dtypes_are_fixed_with_and_without_x64(pendulum, x64):
    # traced, not compiled (an MJX compilation costs tens of seconds on a CPU); the f32 and
    # x64 numbers themselves are compared with playground in the tests above
    env = VmapWrapper(pendulum, NUM_ENVS)
    first, stepped = jax.eval_shape(
        lambda k: (lambda s: (s, env.step(s, jnp.zeros((NUM_ENVS, 1)))))(env.reset(key=k)),
        jax.random.key(0),
    )
    sig = lambda t: jax.tree.map(lambda x: (x.shape, x.dtype), t)  # noqa: E731
    assert sig(stepped) == sig(first)
    assert stepped.reward.dtype == jnp.float32 and stepped.step_count.dtype == jnp.int32
    assert stepped.termination.dtype == stepped.truncation.dtype == jnp.bool_
    assert stepped.observation.dtype == pendulum.observation_space.dtype == np.float32
    assert stepped.observation.shape == (NUM_ENVS, 3)


def test_episode_length_comes_from_public_config_or_wrappers(pendulum, caplog):
    env = pendulum.env
    assert isinstance(env, MjxEnv) and pendulum.config.episode_length == 4
    assert pendulum.episode_length == 4 and pendulum.action_repeat == 1
    config = registry.get_default_config("PendulumSwingup")
    config.episode_length, config.action_repeat = 321, 2
    trained = wrapper.wrap_for_brax_training(env, episode_length=77, action_repeat=3)
    # each adapter traces playground's reset (seconds for MJX), so each case is built once;
    # all of these find the time limit somewhere public: nothing to say
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="parallax.adapters"):
        from_config = MJXAdapter(env, config=config)
        stripped = MJXAdapter(trained)
        explicit = MJXAdapter(trained, episode_length=5, action_repeat=1)
        given = MJXAdapter(env, episode_length=9)
    assert caplog.records == []
    assert (from_config.episode_length, from_config.action_repeat) == (321, 2)
    assert stripped.env is env and (stripped.episode_length, stripped.action_repeat) == (77, 3)
    assert (explicit.episode_length, explicit.action_repeat) == (5, 1)
    assert (given.episode_length, given.action_repeat) == (9, 1)
    # no config, no wrapper: the env's private config is not read, so no time limit, and
    # the user is told how to give one
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="parallax.adapters"):
        bare = MJXAdapter(env)
    assert bare.episode_length is None and bare.action_repeat == 1
    assert len(caplog.records) == 1 and caplog.records[0].levelno == logging.WARNING
    assert re.search(r"no episode length for SwingUp.*episode_length=.*load", caplog.text)


def test_only_public_attributes_of_the_env_are_read(pendulum):
    base = pendulum.env
    adapters_dir = str(__import__("pathlib").Path(parallax.adapters.__file__).parent)
    touched: list[str] = []

    class Spy(type(base)):  # records the attributes the adapter itself reads
        def __getattribute__(self, name):
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(adapters_dir):
                touched.append(name)
            return super().__getattribute__(name)

    spy = Spy.__new__(Spy)
    spy.__dict__.update(base.__dict__)
    adapter = MJXAdapter(spy)  # logs "no episode length": _config is not read
    jax.eval_shape(lambda k: adapter.step(adapter.reset(key=k), jnp.zeros(1)), jax.random.key(0))
    assert touched, "the spy must see the adapter's reads"
    private = sorted({n for n in touched if n.startswith("_") and not n.startswith("__")})
    assert private == [], private


def test_dict_observations_become_a_pytree_space(pendulum):
    class DictObs(wrapper.Wrapper):
        def reset(self, rng):
            state = self.env.reset(rng)
            return state.replace(obs={"state": state.obs, "time": jnp.zeros((1,))})

        def step(self, state, action):
            out = self.env.step(state.replace(obs=state.obs["state"]), action)
            return out.replace(obs={"state": out.obs, "time": state.obs["time"] + 1.0})

    adapter = MJXAdapter(DictObs(pendulum.env), episode_length=10)
    space = adapter.observation_space
    assert isinstance(space, PyTreeSpace)
    assert space.spaces == {"state": Box(-np.inf, np.inf, (3,)), "time": Box(-np.inf, np.inf, (1,))}
    shapes = jax.eval_shape(
        lambda k: adapter.step(adapter.reset(key=k), jnp.zeros(1)), jax.random.key(0)
    )
    assert jax.tree.map(lambda s: s.shape, shapes.observation) == space.shape


def test_cartpole_balance_builds_with_its_config():
    env = MJXAdapter.load("CartpoleBalance")
    assert (env.episode_length, env.action_repeat) == (1000, 1)
    assert env.action_space == Box(-1.0, 1.0, (1,))
    assert env.observation_space == Box(-np.inf, np.inf, (5,), np.float32)
    shapes = jax.eval_shape(lambda k: env.reset(key=k), jax.random.key(0))
    assert set(shapes.info["metrics"]) >= {"reward/upright", "reward/centered"}
    assert isinstance(env, parallax.Env)


def test_constructor_checks_its_arguments(pendulum):
    with pytest.raises(TypeError, match=r"MuJoCo Playground MjxEnv.*got GridWorld"):
        MJXAdapter(parallax.make("GridWorld-v0"))
    with pytest.raises(ValueError, match=r"episode_length must be a positive int.*got -1"):
        MJXAdapter(pendulum.env, episode_length=-1)
    with pytest.raises(ValueError, match="name must be one of"):
        MJXAdapter.load("NoSuchEnv")
    randomised = wrapper.BraxDomainRandomizationVmapWrapper.__new__(
        wrapper.BraxDomainRandomizationVmapWrapper
    )
    randomised.env = pendulum.env
    with pytest.raises(ValueError, match="cannot adapt an env wrapped in"):
        MJXAdapter(randomised)


def test_registry_namespace(pendulum):
    from parallax.adapters import _registry

    assert "PendulumSwingup" in _registry.mjx_names()
    assert tuple(_registry.mjx_names()) == tuple(registry.ALL_ENVS)


def test_docstring_examples_run():
    import doctest

    from parallax.adapters import _mjx

    for module in (_mjx,):
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
        assert result.attempted > 0 and result.failed == 0, module.__name__


@pytest.mark.parametrize("backend", ["cpu", "tpu"])
def test_load_picks_an_implementation_that_runs_on_the_backend(monkeypatch, backend):
    # playground's default is MuJoCo Warp, NVIDIA-only: on a CPU or a TPU (faked here, as a
    # Colab TPU runtime reports it) the adapter must build the pure-JAX implementation
    assert registry.get_default_config("CartpoleBalance").impl == "warp"
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    env = MJXAdapter.load("CartpoleBalance", episode_length=2)
    assert env.env._config.impl == "jax"


def test_warp_is_kept_only_where_it_runs():
    from parallax.adapters._mjx import implementation_for, warp_runs_on

    assert warp_runs_on("gpu") and warp_runs_on("cuda")
    assert not any(warp_runs_on(b) for b in ("cpu", "tpu", "rocm", "METAL"))
    assert implementation_for("gpu", "warp") == "warp"
    assert implementation_for("tpu", "warp") == "jax"
    assert implementation_for("tpu", "jax") == "jax"


def test_an_explicit_warp_off_an_nvidia_gpu_is_refused(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    with pytest.raises(ValueError, match=r"impl'\]='warp' needs an NVIDIA GPU.*'tpu'"):
        MJXAdapter.load("CartpoleBalance", config_overrides={"impl": "warp"})
