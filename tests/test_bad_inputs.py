"""Every bad input gets a clear error, and none is silently remapped (issue 15).

Each test asserts the exception type and that the message names the argument and what is
accepted. Most checks happen at trace time, so the tests trace (`jax.eval_shape`) instead
of compiling wherever they can.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax import CheckedWrapper, TimeLimit, VmapWrapper
from parallax._validate import INT32_MAX, check_key, positive_int
from parallax._wrappers.base import check_positive_int
from parallax.envs import GridWorld, MaskedGridWorld, Race

KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def cartpole():
    return parallax.make("gymnax/CartPole-v1")


@pytest.fixture(scope="module")
def brax_fast():
    return parallax.make("brax/fast", episode_length=4)


# -- 1. one validation module ---------------------------------------------------------------
def test_positive_int_is_shared_and_names_owner_argument_and_value():
    assert check_positive_int is positive_int
    assert positive_int(np.int64(3), "num_envs", "VmapWrapper") == 3
    with pytest.raises(TypeError, match=r"VmapWrapper: num_envs must be a positive int, got 2\.5"):
        positive_int(2.5, "num_envs", "VmapWrapper")
    with pytest.raises(TypeError, match="got True"):
        positive_int(True, "num_envs", "VmapWrapper")
    with pytest.raises(ValueError, match=r"num_envs must be a positive int \(>= 1\), got 0"):
        VmapWrapper(GridWorld(), 0)


# -- 2. out-of-range actions clip into the space ---------------------------------------------
def _position_after(env, action):
    return env.step(env.reset(key=KEY), jnp.asarray(action)).env_state.pos.tolist()


@pytest.mark.parametrize("env", [GridWorld(), MaskedGridWorld()], ids=repr)
def test_gridworld_clips_out_of_range_actions(env):
    assert _position_after(env, -1) == _position_after(env, 0) == [0.0, 1.0]  # up
    assert _position_after(env, 7) == _position_after(env, 3)  # left, into the wall
    start = env.reset(key=KEY)
    right = env.step(start, jnp.asarray(2))
    assert env.step(right, jnp.asarray(7)).env_state.pos.tolist() == [0.0, 0.0]  # 7 acts as left
    assert env.step(right, jnp.asarray(-5)).env_state.pos.tolist() == [1.0, 1.0]  # -5 as up


def test_race_clips_out_of_range_actions():
    env = Race()
    state = env.step(env.reset(key=KEY), jnp.array([5, -1, 1]))
    assert state.agents.observation.tolist() == [1.0, 0.0, 1.0]


def test_gymnax_discrete_actions_are_clipped_before_gymnax_sees_them(cartpole):
    step = jax.jit(lambda a: cartpole.step(cartpole.reset(key=KEY), a).observation)
    # CartPole's force is force_mag * (2 * action - 1): unclipped, action 5 pushes 9x
    np.testing.assert_array_equal(step(jnp.int32(5)), step(jnp.int32(1)))
    np.testing.assert_array_equal(step(jnp.int32(-3)), step(jnp.int32(0)))


def test_checked_wrapper_refuses_float_and_batched_actions_at_trace_time():
    env = CheckedWrapper(GridWorld())
    state = env.reset(key=KEY)
    with pytest.raises(
        TypeError, match=r"CheckedWrapper.step: action for Discrete\(4\) must be an int32 array"
    ):
        jax.eval_shape(env.step, state, jnp.float32(1.0))
    with pytest.raises(ValueError, match=r"of shape \(\) .*, got int32 \(4,\)"):
        jax.eval_shape(env.step, state, jnp.zeros(4, jnp.int32))
    vec = CheckedWrapper(VmapWrapper(GridWorld(), 4))
    batch = vec.reset(key=KEY)
    with pytest.raises(ValueError, match=r"shape \(4,\), one action per env of 4 .*got int32 \(\)"):
        jax.eval_shape(vec.step, batch, jnp.int32(0))


def test_checked_wrapper_reports_out_of_space_actions_with_the_env_index():
    env = CheckedWrapper(VmapWrapper(GridWorld(), 4))
    state = env.reset(key=KEY)
    with pytest.raises(Exception, match="action outside action_space in env 1 of 4"):
        jax.block_until_ready(jax.jit(env.step)(state, jnp.array([0, -1, 2, 3])))


# -- 3. keys -------------------------------------------------------------------------------
BAD_KEYS = {
    "batch": (jax.random.split(KEY, 8), r"got key<fry> \(8,\); use VmapWrapper for a batch"),
    "int": (3, "got int 3"),
    "None": (None, "got None"),
    "float": (jnp.zeros(2), r"got float32 \(2,\)"),
    "uint32 (3,)": (jnp.zeros(3, jnp.uint32), r"got uint32 \(3,\)"),
}


@pytest.mark.parametrize("bad", list(BAD_KEYS))
@pytest.mark.parametrize("owner", ["GridWorld", "MaskedGridWorld", "Race", "gymnax", "brax"])
def test_reset_refuses_anything_but_one_key(owner, bad, cartpole, brax_fast):
    env = {
        "GridWorld": GridWorld(),
        "MaskedGridWorld": MaskedGridWorld(),
        "Race": Race(),
        "gymnax": cartpole,
        "brax": brax_fast,
    }[owner]
    key, shown = BAD_KEYS[bad]
    name = {"gymnax": "GymnaxAdapter", "brax": "BraxAdapter"}.get(owner, owner)
    with pytest.raises(TypeError, match=rf"{name}\.reset expects one PRNG key \(a typed key"):
        env.reset(key=key)
    with pytest.raises(TypeError, match=shown):
        env.reset(key=key)


def test_keys_are_checked_by_shape_under_jit_and_vmap():
    env = GridWorld()
    raw = jax.random.PRNGKey(0)
    for key in (KEY, raw):
        assert jax.eval_shape(jax.jit(lambda k: env.reset(key=k)), key).observation.shape == (4,)
    keys = jax.random.split(KEY, 3)
    assert jax.eval_shape(jax.vmap(lambda k: env.reset(key=k)), keys).observation.shape == (3, 4)
    check_key(jax.random.split(raw, 5), "VmapWrapper.reset", batch=5)


def test_vmap_wrapper_reset_takes_one_key_or_num_envs_keys():
    env = VmapWrapper(GridWorld(), 4)
    assert jax.eval_shape(lambda k: env.reset(key=k), jax.random.split(KEY, 4)).step_count.shape
    for key, shown in ((jax.random.split(KEY, 8), r"key<fry> \(8,\)"), (1, "int 1")):
        with pytest.raises(
            TypeError,
            match=rf"VmapWrapper.reset expects one PRNG key or a batch of 4 keys.*got {shown}",
        ):
            env.reset(key=key)


# -- 4. registry ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 123])
def test_make_needs_a_string_id(bad):
    with pytest.raises(TypeError, match=rf"make: id must be a string .*got {bad}"):
        parallax.make(bad)
    with pytest.raises(TypeError, match=rf"make_vec: id must be a string .*got {bad}"):
        parallax.make_vec(bad, 2)


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("gymnax/CartPol-v1", "gymnax/CartPole-v1"),
        ("brax/fastt", "brax/fast"),
        ("mjx/CartpoleBalanc", "mjx/CartpoleBalance"),
        ("CartPole-v1", "gymnax/CartPole-v1"),
        ("GridWrld-v0", "GridWorld-v0"),
    ],
)
def test_unknown_ids_suggest_the_closest(typo, meant):
    with pytest.raises(
        KeyError, match=rf"no environment registered as '{typo}'; did you mean '{meant}'"
    ):
        parallax.make(typo)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"episode_lenght": 5}, r"'episode_lenght'; did you mean 'episode_length'\?"),
        (
            {"nsteps": 5},
            r"TradingEnv has no keyword argument 'nsteps' \(it accepts .*episode_length",
        ),
    ],
)
def test_misspelt_keywords_name_what_the_env_accepts(kwargs, message):
    with pytest.raises(TypeError, match=rf"make\('Trading-v0'\): .*{message}"):
        parallax.make("Trading-v0", **kwargs)


def test_make_vec_reports_its_own_misspelt_keywords():
    with pytest.raises(
        TypeError,
        match=r"make_vec\('GridWorld-v0'\): .*'max_episode_step'; did you mean 'max_episode_steps'",
    ):
        parallax.make_vec("GridWorld-v0", 2, max_episode_step=5)


def test_keyword_free_envs_say_so():
    with pytest.raises(TypeError, match=r"GridWorld takes no keyword arguments, got size="):
        parallax.make("GridWorld-v0", size=7)


def test_namespaced_keywords_are_checked():
    with pytest.raises(ValueError, match=r"backend must be one of 'generalized', .*got 'bogus'"):
        parallax.make("brax/fast", backend="bogus")
    with pytest.raises(TypeError, match=r"'episode_lenght'; did you mean 'episode_length'"):
        parallax.make("brax/fast", episode_lenght=5)
    with pytest.raises(TypeError, match=r"'parms'; did you mean 'params'"):
        parallax.make("gymnax/CartPole-v1", parms=None)
    with pytest.raises(
        TypeError, match=r"MJXAdapter.load has no keyword argument 'episode_lenght'"
    ):
        parallax.make("mjx/CartpoleBalance", episode_lenght=5)


def test_brax_swimmer_is_refused_with_the_reason():
    from parallax._ids import UNSUPPORTED

    assert "brax/swimmer" in UNSUPPORTED
    with pytest.raises(NotImplementedError, match=r"unsupported: .*jnp\.clip\(a_min=\.\.\.\)"):
        parallax.make("brax/swimmer")


# -- 5. limits and shapes ------------------------------------------------------------------
def test_time_limit_refuses_limits_beyond_int32():
    assert TimeLimit(GridWorld(), INT32_MAX).max_steps == 2**31 - 1
    with pytest.raises(
        ValueError, match=r"max_steps must be a positive int at most 2\*\*31 - 1 = 2147483647"
    ):
        TimeLimit(GridWorld(), 2**40)


def test_rollout_names_the_expected_action_shape_of_a_vector_env():
    env = VmapWrapper(GridWorld(), 4)
    with pytest.raises(
        ValueError, match=r"num_envs=4 \(shape \(4,\)\), got an action of shape \(\)"
    ):
        jax.eval_shape(lambda k: parallax.rollout(env, lambda key, s: jnp.int32(0), k, 2), KEY)


def test_vmap_wrapper_checks_batch_shapes_at_trace_time():
    four, eight = VmapWrapper(GridWorld(), 4), VmapWrapper(GridWorld(), 8)
    state = four.reset(key=KEY)
    with pytest.raises(
        ValueError,
        match=r"VmapWrapper.reset: state must be a batch of num_envs=4 states.*shape \(8",
    ):
        four.reset(key=KEY, state=eight.reset(key=KEY), done=jnp.zeros(4, bool))
    with pytest.raises(
        ValueError, match=r"VmapWrapper.step: state must be a batch of num_envs=4.*unbatched"
    ):
        jax.eval_shape(four.step, GridWorld().reset(key=KEY), jnp.zeros(4, jnp.int32))
    with pytest.raises(
        ValueError, match=r"VmapWrapper.step: action .*num_envs=4 \(shape \(4,\)\), got shape \(\)"
    ):
        jax.eval_shape(four.step, state, jnp.int32(0))


# -- 6. x64 --------------------------------------------------------------------------------
def _first_step_shapes(vec):
    def first_step(key):
        state = vec.reset(key=key)
        actions = jax.vmap(lambda k: vec.action_space.sample(key=k))(jax.random.split(key, 2))
        return vec.step(state, actions)

    return jax.eval_shape(first_step, KEY)


def test_brax_metrics_keep_their_dtypes_under_x64():
    # brax computes some metrics as float64 at reset and float32 after a step under x64,
    # which broke the auto-reset's lax.cond; the adapter casts them to the
    # default float dtype (float64 under x64)
    with jax.enable_x64(True):
        state = _first_step_shapes(parallax.make_vec("brax/ant", 2))
    for metrics in (state.info["metrics"], state.env_state.metrics):
        assert {m.dtype for m in metrics.values()} == {jnp.dtype("float64")}


def test_gymnax_envs_that_cannot_run_under_x64_are_refused_at_construction():
    with jax.enable_x64(True):
        assert _first_step_shapes(parallax.make_vec("gymnax/CartPole-v1", 2)).reward.shape == (2,)
        with pytest.raises(
            ValueError,
            match=r"Freeway-MinAtar cannot run with x64 enabled \(jax.config.jax_enable_x64",
        ):
            parallax.make("gymnax/Freeway-MinAtar")
    assert parallax.make("gymnax/Freeway-MinAtar").name == "Freeway-MinAtar"


def test_reset_with_start_names_the_expected_length():
    import numpy as np

    from parallax.finance import reset_with_start

    prices = 100 * np.exp(np.cumsum(np.full(60, 0.001)))
    vec = parallax.make_vec("Trading-v0", 3, prices=prices, lookback=5, episode_length=10)
    with pytest.raises(
        ValueError, match=r"start must be one row or one row per env.*\(3,\), got shape \(2,\)"
    ):
        reset_with_start(vec, key=jax.random.key(0), start=[3, 4])


# -- 6. trace-time action checks: on by default, free at run time (issue 37) -----------------
# Each probe of the issue: (id, action, exception, what the message must say). Every one is
# tried eagerly and under `jit`; the check runs before the env touches the action, so the
# jitted probes only trace.
_TAKES_ONE = r"a batch of \d+ actions\? \S+ takes one action: batch envs with VmapWrapper"
_ACTION_PROBES = [
    (
        "GridWorld-v0",
        jnp.float32(1.0),
        TypeError,
        r"GridWorld.step: action for Discrete\(4\) must be an int32 array of shape \(\) .*"
        r"got float32 \(\)",
    ),
    (
        "Trading-v0",
        jnp.float32(1.0),
        TypeError,
        r"TradingEnv.step: action for Discrete\(3\) .*got float32 \(\)",
    ),
    (
        "gymnax/CartPole-v1",
        jnp.float32(0.5),
        TypeError,
        r"GymnaxAdapter\(CartPole-v1\).step: action for Discrete\(2\) .*got float32 \(\)",
    ),
    ("GridWorld-v0", jnp.zeros(2, jnp.int32), ValueError, r"got int32 \(2,\); " + _TAKES_ONE),
    ("GridWorld-v0", jnp.zeros(4, jnp.int32), ValueError, r"got int32 \(4,\); " + _TAKES_ONE),
    ("Trading-v0", jnp.zeros(2, jnp.int32), ValueError, r"got int32 \(2,\); " + _TAKES_ONE),
    ("Trading-v0", jnp.zeros(4, jnp.int32), ValueError, r"got int32 \(4,\); " + _TAKES_ONE),
    ("gymnax/CartPole-v1", jnp.zeros(4, jnp.int32), ValueError, r"got int32 \(4,\); " + _TAKES_ONE),
    (
        "gymnax/Pendulum-v1",
        jnp.zeros(3),
        ValueError,
        r"Pendulum-v1\).step: action for Box\(-2.0, 2.0, \(1,\), float32\) must be a float32 "
        r"array of shape \(1,\) .*got float32 \(3,\)",
    ),
    ("gymnax/Pendulum-v1", jnp.zeros((4, 1)), ValueError, r"got float32 \(4, 1\); " + _TAKES_ONE),
    ("GridWorld-v0", None, TypeError, r"GridWorld.step: action is missing \(got None\)"),
    ("Trading-v0", None, TypeError, r"TradingEnv.step: action is missing \(got None\)"),
    ("gymnax/Pendulum-v1", None, TypeError, r"action is missing \(got None\)"),
    ("GridWorld-v0", "1", TypeError, r"Discrete\(4\) must be .*, got str '1'"),
    (
        "MarketMaking-v0",
        jnp.zeros(4),
        ValueError,
        r"MarketMakingEnv.step: action for Box\(0.0, 5.0, \(2,\), float32\) must be a float32 "
        r"array of shape \(2,\) or another shape of 2 elements .*got float32 \(4,\)",
    ),
    ("MarketMaking-v0", True, TypeError, r"float or integer dtype is fine\), got (a Python )?bool"),
    ("Portfolio-v0", jnp.zeros(5), ValueError, r"shape \(6,\) or another shape of 6 elements"),
    ("OptimalExecution-v0", jnp.zeros(3), ValueError, r"got float32 \(3,\)"),
    ("brax/fast", jnp.zeros(3), ValueError, r"BraxAdapter\(Fast\).step: .*got float32 \(3,\)"),
    ("Race-v0", jnp.zeros(3), TypeError, r"Race.step: action for .*got float32 \(3,\)"),
    ("Race-v0", jnp.zeros(2, jnp.int32), ValueError, r"of shape \(3,\) .*got int32 \(2,\)"),
]


@pytest.fixture(scope="module")
def made():
    """`make(id)` and a concrete first state, once per id."""
    cache = {}

    def build(env_id, **kwargs):
        if (env_id, tuple(kwargs)) not in cache:
            env = parallax.make(env_id, **kwargs)
            cache[env_id, tuple(kwargs)] = env, jax.jit(env.reset)(key=KEY)
        return cache[env_id, tuple(kwargs)]

    return build


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize(
    ("env_id", "action", "error", "message"),
    _ACTION_PROBES,
    ids=[f"{probe[0]}-{i}" for i, probe in enumerate(_ACTION_PROBES)],
)
def test_wrong_actions_get_a_clear_error_eagerly_and_under_jit(
    made, env_id, action, error, message, jit
):
    env, state = made(env_id)
    if jit and isinstance(action, str):
        # jit refuses a string argument itself, with JAX's own clear message; a string
        # closed over by the jitted function still reaches the check
        step = jax.jit(lambda s: env.step(s, action))
        with pytest.raises(error, match=message):
            step(state)
        return
    step = jax.jit(env.step) if jit else env.step
    with pytest.raises(error, match=message):
        step(state, action)


@pytest.mark.standard_promotion  # GridWorld computes with a Python bool as NumPy does
def test_right_actions_in_any_integer_dtype_pass_and_true_acts_as_one(made):
    env, state = made("GridWorld-v0")
    one = env.step(state, jnp.int32(1)).env_state.pos.tolist()
    for action in (1, np.int64(1), jnp.uint8(1), jnp.int16(1), True, np.bool_(True)):
        assert env.step(state, action).env_state.pos.tolist() == one
    pendulum, start = made("gymnax/Pendulum-v1")
    assert pendulum.step(start, jnp.array([1], jnp.int32)).reward.shape == ()  # int for a Box


def test_a_batch_of_keys_to_one_env_names_vmapwrapper_and_make_vec():
    keys = jax.random.split(KEY, 4)
    for env_id in ("Trading-v0", "GridWorld-v0", "MarketMaking-v0", "gymnax/CartPole-v1"):
        env = parallax.make(env_id)
        with pytest.raises(
            TypeError,
            match=r"got key<fry> \(4,\); use VmapWrapper for a batch "
            r"of keys \(parallax.make_vec builds one\)",
        ):
            env.reset(key=keys)


def test_a_vector_env_names_the_batch_it_expects():
    vec = parallax.make_vec("GridWorld-v0", 4)
    batch = vec.reset(key=KEY)
    with pytest.raises(TypeError, match=r"GridWorld.step: action for Discrete\(4\) .*float32"):
        jax.eval_shape(vec.step, batch, jnp.zeros(4))
    with pytest.raises(
        ValueError,
        match=r"VmapWrapper.step: action must hold one action per env, leading with "
        r"num_envs=4 \(shape \(4,\)\), got shape \(\)",
    ):
        jax.eval_shape(vec.step, batch, jnp.int32(0))
    with pytest.raises(ValueError, match=r"GridWorld.step: .*of shape \(\) .*got int32 \(2,\)"):
        jax.eval_shape(vec.step, batch, jnp.zeros((4, 2), jnp.int32))


_DEBUG_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _optimised_hlo(env, state, action):
    """The optimised HLO of a jitted step, without its source-location debug info."""
    text = jax.jit(env.step).lower(state, action).compile().as_text()
    blocks = [b for b in text.split("\n\n") if not b.startswith(_DEBUG_TABLES)]
    return re.sub(r", metadata=\{[^}]*\}", "", "\n\n".join(blocks))


@pytest.mark.parametrize(
    ("env_id", "action"),
    [
        ("GridWorld-v0", jnp.int32(1)),
        ("Trading-v0", jnp.int32(2)),
        ("gymnax/CartPole-v1", jnp.int32(1)),
    ],
)
def test_the_checks_add_nothing_to_the_compiled_step(made, env_id, action):
    checked, state = made(env_id)
    unchecked = parallax.make(env_id, check_actions=False)
    assert checked.check_actions and not unchecked.check_actions
    assert _optimised_hlo(checked, state, action) == _optimised_hlo(unchecked, state, action)


def test_the_checks_add_nothing_to_a_vector_step():
    vec = parallax.make_vec("GridWorld-v0", 4)
    batch = vec.reset(key=KEY)
    actions = jnp.zeros(4, jnp.int32)
    with_checks = _optimised_hlo(vec, batch, actions)
    vec.check_actions = False
    assert not vec.check_actions
    assert _optimised_hlo(vec, batch, actions) == with_checks


def test_the_checks_can_be_turned_off(made):
    # gymnax's CartPole takes a float action as it is, once our check is off
    env = parallax.make("gymnax/CartPole-v1", check_actions=False)
    _, state = made("gymnax/CartPole-v1")
    assert env.step(state, jnp.float32(0.5)).reward.shape == ()
    vec = parallax.make_vec("GridWorld-v0", 2, check_actions=False)
    assert not vec.check_actions
    vec.check_actions = True
    with pytest.raises(TypeError, match=r"GridWorld\.step: action for Discrete"):
        jax.eval_shape(vec.step, vec.reset(key=KEY), jnp.zeros(2))
    with pytest.raises(TypeError, match=r"check_actions must be True or False, got 1"):
        parallax.make("GridWorld-v0", check_actions=1)
    with pytest.raises(TypeError, match=r"check_actions must be True or False, got 'no'"):
        vec.check_actions = "no"


class _Unchecked:
    """An env of someone else's: no `check_actions` of its own."""

    action_space = GridWorld.action_space
    observation_space = GridWorld.observation_space

    def reset(self, *, key):
        return _PLAIN.reset(key=key)

    def step(self, state, action):
        return _PLAIN.step(state, action)


_PLAIN = GridWorld()
_PLAIN.check_actions = False


def test_make_puts_static_action_check_over_an_env_without_its_own():
    parallax.register("Unchecked-v0", _Unchecked, override=True)
    env = parallax.make("Unchecked-v0")
    assert isinstance(env, parallax.StaticActionCheck) and env.check_actions
    state = env.reset(key=KEY)
    with pytest.raises(TypeError, match=r"_Unchecked.step: action for Discrete\(4\) .*float32"):
        jax.eval_shape(env.step, state, jnp.float32(1.0))
    with pytest.raises(ValueError, match=r"a batch of 3 actions\? _Unchecked takes one action"):
        jax.eval_shape(env.step, state, jnp.zeros(3, jnp.int32))
    assert not isinstance(
        parallax.make("Unchecked-v0", check_actions=False), parallax.StaticActionCheck
    )
    bare = TimeLimit(_Unchecked(), 5)
    with pytest.raises(AttributeError, match="wrap it in StaticActionCheck"):
        bare.check_actions = False


# -- 7. the Gymnasium export after an episode ends (issue 37) ----------------------------------
@pytest.mark.parametrize(("max_steps", "ended"), [(2, "truncated"), (50, "terminated")])
def test_gymnasium_step_after_the_episode_ended_needs_a_reset(max_steps, ended):
    import gymnasium

    from parallax.adapters import GymnasiumEnv

    env = GymnasiumEnv(TimeLimit(GridWorld(), max_steps))
    with pytest.raises(gymnasium.error.ResetNeeded, match=r"call reset\(\) before step\(\)"):
        env.step(0)  # before the first reset
    env.reset(seed=0)
    flags = (False, False)
    steps = 0
    while not any(flags):  # up (0) and right (2) in turn reach the goal, given the time
        _, _, *flags, _ = env.step(steps % 2 * 2)
        steps += 1
    assert flags == [ended == "terminated", ended == "truncated"]
    kept = env.state
    with pytest.raises(
        gymnasium.error.ResetNeeded,
        match=rf"the episode ended \(the last step returned {ended}=True\); call reset\(\)",
    ):
        env.step(0)
    assert env.state is kept  # nothing stepped
    env.reset(seed=1)
    env.step(0)  # a new episode steps again
