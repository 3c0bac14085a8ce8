"""GymnasiumEnv / GymnasiumVectorEnv against the real Gymnasium 1.3.

The single-env export must pass `gymnasium.utils.env_checker.check_env`; the vector export
is compared with Gymnasium's own `SyncVectorEnv` over copies of the single-env export, in
both auto-reset modes, and must work under Gymnasium's vector wrappers.
"""

from __future__ import annotations

import dataclasses
import pathlib
import runpy
import warnings

import chex
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium import spaces as gs
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import parallax
from parallax import AutoResetWrapper, TimeLimit, VmapWrapper, Wrapper
from parallax.adapters import GymnasiumEnv, GymnasiumVectorEnv, to_gymnasium_space
from parallax.envs import GridWorld
from parallax.spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "gymnasium_eval.py"
# check_env's only complaint about an env built without gymnasium.make (so without a spec)
NO_SPEC = "Not able to test alternative render modes due to the environment not having a spec"


class DictGrid(Wrapper):
    """GridWorld with a dict observation and a (move, unused flag) tuple action."""

    observation_space = PyTreeSpace(
        {"goal": Box(0.0, 4.0, (2,)), "pos": Box(0.0, 4.0, (2,)), "steps": Discrete(100)}
    )
    action_space = PyTreeSpace((Discrete(4), MultiBinary(2)))

    def _view(self, state):
        obs = state.observation
        view = {"goal": obs[2:], "pos": obs[:2], "steps": jnp.minimum(state.step_count, 99)}
        return dataclasses.replace(state, observation=view)

    def reset(self, *, key):
        return self._view(self.env.reset(key=key))

    def step(self, state, action):
        inner = dataclasses.replace(
            state,
            observation=jnp.concatenate([state.observation["pos"], state.observation["goal"]]),
        )
        return self._view(self.env.step(inner, action[0]))


def _checked(env):
    """Run Gymnasium's checker; every warning it raises must be the benign no-spec one."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    messages = [str(w.message) for w in caught]
    assert all(NO_SPEC in m for m in messages), messages


def test_single_env_passes_gymnasium_check_env():
    _checked(GymnasiumEnv(TimeLimit(GridWorld(), max_steps=20)))


def test_dict_and_tuple_spaces_pass_gymnasium_check_env():
    env = GymnasiumEnv(TimeLimit(DictGrid(GridWorld()), max_steps=20))
    assert isinstance(env.observation_space, gs.Dict)
    assert isinstance(env.action_space, gs.Tuple)
    _checked(env)
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"goal", "pos", "steps"} and obs["pos"].dtype == np.float32
    obs, *_ = env.step((2, np.array([0, 1], np.int8)))
    assert obs["pos"].tolist() == [1.0, 0.0] and int(obs["steps"]) == 1


def test_adapted_gymnax_env_passes_gymnasium_check_env():
    gymnax = pytest.importorskip("gymnax")  # the gymnax adapter has its own tests
    from parallax.adapters import GymnaxAdapter

    with jax.numpy_dtype_promotion("standard"):
        catch, _ = gymnax.make("Catch-bsuite")
    env = GymnasiumEnv(GymnaxAdapter(catch))
    _checked(env)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.int32 and obs.shape == (10, 5)


def test_spaces_convert_with_bounds_and_dtypes():
    box = to_gymnasium_space(Box([-1.0, 0.0], [1.0, np.inf], (2,)))
    assert box == gs.Box(np.array([-1, 0], np.float32), np.array([1, np.inf], np.float32))
    assert box.dtype == np.float32
    int_box = to_gymnasium_space(Box(0, 9, (3,), np.int32))
    assert int_box.dtype == np.int32 and int_box.high.tolist() == [9, 9, 9]
    assert to_gymnasium_space(Discrete(5)) == gs.Discrete(5)  # int64, Gymnasium's convention
    assert to_gymnasium_space(Discrete(5, shape=(3,))) == gs.MultiDiscrete([5, 5, 5], np.int32)
    assert to_gymnasium_space(MultiDiscrete([2, 3])) == gs.MultiDiscrete([2, 3], np.int32)
    assert to_gymnasium_space(MultiBinary(4)) == gs.MultiBinary(4)
    nested = to_gymnasium_space(
        PyTreeSpace({"a": (Discrete(2), Box(0.0, 1.0, ())), "b": Discrete(3)})
    )
    assert nested == gs.Dict(
        {
            "a": gs.Tuple((gs.Discrete(2), gs.Box(0.0, 1.0, (), np.float32))),
            "b": gs.Discrete(3),
        }
    )
    with pytest.raises(TypeError, match="got str"):
        to_gymnasium_space("Box")


def test_seeds_give_the_parallax_episode_and_are_reproducible(x64):
    grid = GridWorld()
    env = GymnasiumEnv(grid)
    obs, _ = env.reset(seed=42)
    np.testing.assert_array_equal(obs, grid.reset(key=jax.random.key(42)).observation)
    unseeded = [env.reset()[0] for _ in range(3)]
    env.reset(seed=42)
    assert all(np.array_equal(a, env.reset()[0]) for a in unseeded)
    other = GymnasiumEnv(grid, seed=7)
    again = GymnasiumEnv(grid, seed=7)
    assert all(np.array_equal(other.reset()[0], again.reset()[0]) for _ in range(3))
    big, _ = env.reset(seed=2**40 + 3)  # hashed to 32 bits, still deterministic
    np.testing.assert_array_equal(big, env.reset(seed=2**40 + 3)[0])
    with pytest.raises(ValueError, match="seed must be None or a non-negative int, got -1"):
        env.reset(seed=-1)


def _traced_at_most_once(env):
    """`env` whose `reset` and `step` raise (chex) when they are traced a second time."""
    env.reset = chex.assert_max_traces(env.reset, n=1)
    env.step = chex.assert_max_traces(env.step, n=1)
    return env


def test_reset_and_step_are_compiled_once():
    env = GymnasiumEnv(_traced_at_most_once(TimeLimit(GridWorld(), max_steps=5)))
    chex.clear_trace_counter()  # the constructor's shape probe (eval_shape) is not a call
    env.reset(seed=0)
    ends = 0
    for action in (0, np.int64(1), np.array(2), 3, np.int32(0), 1, 1, 1, 1, 1):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            ends += 1
            env.reset()
    assert ends >= 1  # the reset after an episode end reused the compiled reset too


def test_usage_errors():
    env = GymnasiumEnv(GridWorld())
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(0)
    with pytest.raises(ValueError, match="unsupported options"):
        env.reset(options={"level": 3})
    with pytest.raises(TypeError, match="use GymnasiumVectorEnv"):
        GymnasiumEnv(VmapWrapper(GridWorld(), 2))
    with pytest.raises(TypeError, match="callable `reset`"):
        GymnasiumEnv(object())
    with pytest.raises(TypeError, match="single-agent `State`s, got MARLState"):
        GymnasiumEnv(parallax.make("Race-v0"))
    with pytest.raises(TypeError, match="use GymnasiumEnv for a single env"):
        GymnasiumVectorEnv(GridWorld())


# -- vector ------------------------------------------------------------------------------------
NUM_ENVS = 3
SEEDS = [11, 12, 13]


def _sync_reference(mode):
    """Gymnasium's SyncVectorEnv over copies of the single-env export."""
    return SyncVectorEnv(
        [lambda: GymnasiumEnv(TimeLimit(GridWorld(), max_steps=3)) for _ in range(NUM_ENVS)],
        autoreset_mode=mode,
    )


def test_vector_export_defaults_to_next_step_and_declares_it():
    plain = GymnasiumVectorEnv(VmapWrapper(GridWorld(), 2))
    assert plain.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    vec = parallax.make_vec("GridWorld-v0", 2, max_episode_steps=3)  # same-step by default
    default = GymnasiumVectorEnv(vec)
    assert default.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert default.env.autoreset_mode == "next-step"
    assert vec.autoreset_mode == "same-step"  # the given stack is not modified
    kept = GymnasiumVectorEnv(vec, autoreset_mode=None)
    assert kept.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP and kept.env is vec
    same = GymnasiumVectorEnv(vec, autoreset_mode=AutoresetMode.SAME_STEP)
    assert same.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    off = VmapWrapper(AutoResetWrapper(GridWorld(), mode="off"), 2)
    assert GymnasiumVectorEnv(off, autoreset_mode=None).metadata["autoreset_mode"] == (
        AutoresetMode.DISABLED
    )
    per_env = VmapWrapper(AutoResetWrapper(TimeLimit(GridWorld(), 3)), 2)  # rebuilt too
    assert GymnasiumVectorEnv(per_env).metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    with pytest.raises(ValueError, match="autoreset_mode must be 'next-step'"):
        GymnasiumVectorEnv(vec, autoreset_mode="sometimes")
    buried = parallax.TransformReward(vec, lambda r: 2.0 * r)
    with pytest.raises(ValueError, match="auto-resets in mode 'same-step' below other wrappers"):
        GymnasiumVectorEnv(buried)
    assert GymnasiumVectorEnv(buried, autoreset_mode="same-step").env is buried


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_env_follows_gymnasiums_autoreset_convention(mode):
    ours_mode = "next-step" if mode == AutoresetMode.NEXT_STEP else "same-step"
    vec = parallax.make_vec("GridWorld-v0", NUM_ENVS, max_episode_steps=3, autoreset=ours_mode)
    ours, ref = GymnasiumVectorEnv(vec, autoreset_mode=ours_mode), _sync_reference(mode)
    assert ours.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"] == mode
    assert ours.single_observation_space == ref.single_observation_space
    assert ours.single_action_space == ref.single_action_space == gs.Discrete(4)
    obs, info = ours.reset(seed=SEEDS)
    ref_obs, ref_info = ref.reset(seed=SEEDS)
    np.testing.assert_array_equal(obs, ref_obs)  # seed s_i: jax.random.key(s_i) in both
    assert info == ref_info == {}
    first_episode = True
    actions = np.full(NUM_ENVS, 1, np.int64)  # "down" never reaches a goal: time limits only
    for _ in range(8):
        obs, rew, term, trunc, info = ours.step(actions)
        r_obs, r_rew, r_term, r_trunc, r_info = ref.step(actions)
        assert (
            obs.dtype == np.float32 and obs.shape == (NUM_ENVS, 4) and obs in ours.observation_space
        )
        assert rew.dtype == np.float32 and rew.shape == (NUM_ENVS,)
        assert term.dtype == trunc.dtype == np.bool_
        np.testing.assert_array_equal(term, r_term)
        np.testing.assert_array_equal(trunc, r_trunc)
        np.testing.assert_array_equal(obs[:, :2], r_obs[:, :2])  # positions (goals re-drawn)
        if first_episode:
            np.testing.assert_allclose(rew, r_rew, rtol=1e-6)
        np.testing.assert_array_equal(rew == 0.0, r_rew == 0.0)  # the next-step reset step
        assert sorted(info) == sorted(r_info)
        if mode == AutoresetMode.SAME_STEP and trunc.any():
            np.testing.assert_array_equal(info["_final_obs"], r_info["_final_obs"])
            np.testing.assert_array_equal(info["_final_info"], r_info["_final_info"])
            for i in np.flatnonzero(trunc):
                np.testing.assert_array_equal(info["final_obs"][i][:2], r_info["final_obs"][i][:2])
            assert info["final_obs"][~trunc].tolist() == [None] * int((~trunc).sum())
        first_episode &= not trunc.any()


def test_vector_selective_reset_with_reset_mask():
    off = VmapWrapper(AutoResetWrapper(TimeLimit(GridWorld(), 50), mode="off"), NUM_ENVS)
    envs = GymnasiumVectorEnv(off, seed=0, autoreset_mode="off")
    assert envs.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    envs.reset(seed=SEEDS)
    obs = None
    for _ in range(2):
        obs, *_ = envs.step(np.full(NUM_ENVS, 2))
    mask = np.array([True, False, True])
    new_obs, _ = envs.reset(options={"reset_mask": mask})
    assert new_obs[mask, :2].tolist() == [[0.0, 0.0]] * 2
    np.testing.assert_array_equal(new_obs[~mask], obs[~mask])
    assert np.asarray(envs.state.step_count).tolist() == [0, 2, 0]
    with pytest.raises(ValueError, match="reset_mask must be a bool array of shape"):
        envs.reset(options={"reset_mask": np.ones(2, bool)})
    with pytest.raises(ValueError, match="needs num_envs=3 entries, got 2"):
        envs.reset(seed=[1, 2])


def test_vector_env_works_under_gymnasium_vector_wrappers():
    vec = parallax.make_vec("GridWorld-v0", NUM_ENVS, max_episode_steps=4)
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(GymnasiumVectorEnv(vec))
    envs.reset(seed=0)
    for _ in range(4):  # "down" never reaches a goal: every episode lasts the 4 steps
        *_, info = envs.step(np.full(NUM_ENVS, 1))
    assert info["_episode"].all() and info["episode"]["l"].tolist() == [4] * NUM_ENVS


def test_gymnasium_vector_observation_wrappers_accept_the_default_export():
    # they refuse same-step auto-reset (a bare AssertionError); make_vec's default is same-step
    vec = parallax.make_vec("GridWorld-v0", NUM_ENVS, max_episode_steps=5)
    for wrap in (
        gymnasium.wrappers.vector.NormalizeObservation,
        gymnasium.wrappers.vector.FlattenObservation,
    ):
        envs = wrap(GymnasiumVectorEnv(vec))
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (NUM_ENVS, 4)
        for _ in range(7):
            obs, *_ = envs.step(np.full(NUM_ENVS, 1))
        assert obs.shape == (NUM_ENVS, 4) and np.isfinite(obs).all()


def test_record_episode_statistics_counts_every_episode_length():
    # under same-step auto-reset Gymnasium's wrapper counted 24 for every episode after the first
    length, episodes = 25, 4
    vec = parallax.make_vec("GridWorld-v0", 2, max_episode_steps=length)
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(GymnasiumVectorEnv(vec))
    envs.reset(seed=0)
    lengths = []
    for _ in range(episodes * (length + 1)):  # + 1: next-step's reset step per episode
        *_, info = envs.step(np.full(2, 1))  # "down": only the time limit ends episodes
        if "episode" in info:
            lengths += info["episode"]["l"][info["_episode"]].tolist()
    assert lengths == [length] * (2 * episodes)


def test_out_of_space_actions_are_refused_naming_action_and_space():
    env = GymnasiumEnv(GridWorld())
    env.reset(seed=0)
    for bad in (1.7, 7, -1, np.float32(1.0), "up", [1]):
        with pytest.raises(ValueError, match=r"action .* is not in the action space Discrete\(4\)"):
            env.step(bad)
    box = GymnasiumEnv(TimeLimit(DictGrid(GridWorld()), 5))
    box.reset(seed=0)
    with pytest.raises(
        ValueError, match=r"not in the action space Tuple\(Discrete\(4\), MultiBinary"
    ):
        box.step((2, np.array([0, 2], np.int8)))
    box.step((np.int64(2), [0, 1]))  # a list converts exactly to MultiBinary's int8
    envs = GymnasiumVectorEnv(VmapWrapper(GridWorld(), 3))
    envs.reset(seed=0)
    for bad in (np.array([0, 1, 4]), np.array([0.0, 1.7, 2.0]), np.array([0, 1]), -np.ones(3, int)):
        with pytest.raises(
            ValueError, match=r"is not in the action space MultiDiscrete\(\[4 4 4\]\)"
        ):
            envs.step(bad)
    envs.step(np.array([0, 1, 3], np.int32))  # any integer dtype whose values fit


def test_continuous_actions_convert_to_the_box_dtype_and_are_bounds_checked():
    class Push(Wrapper):
        action_space = Box(-1.0, 1.0, (2,))

        def step(self, state, action):
            return self.env.step(state, (action[0] > 0).astype(jnp.int32))

    env = GymnasiumEnv(_traced_at_most_once(TimeLimit(Push(GridWorld()), 5)))
    chex.clear_trace_counter()  # the constructor's shape probe (eval_shape) is not a call
    env.reset(seed=0)
    env.step(np.array([0.5, -0.5]))  # float64 in range: converted to float32
    env.step(np.array([1, 0]))
    for bad in (np.array([1.5, 0.0]), np.array([np.nan, 0.0]), np.zeros(3), np.array(["a", "b"])):
        with pytest.raises(
            ValueError, match=r"is not in the action space Box\(-1.0, 1.0, \(2,\), float32\)"
        ):
            env.step(bad)
    env.step(np.array([-1.0, 1.0], np.float32))  # still the one compiled step: no retrace


def test_each_step_is_one_jitted_call_and_one_transfer():
    env = GymnasiumEnv(TimeLimit(GridWorld(), max_steps=5))
    env.reset(seed=0)
    _, out = env._step_fn(env.state, np.int32(1))
    assert isinstance(out, jax.Array) and out.dtype == jnp.uint8  # all the host gets: one buffer
    obs, reward, *_ = env.step(1)
    assert isinstance(obs, np.ndarray) and obs.flags.writeable and isinstance(reward, float)
    envs = GymnasiumVectorEnv(parallax.make_vec("GridWorld-v0", 4, max_episode_steps=5))
    envs.reset(seed=0)
    _, out = envs._step_fn(envs.state, np.zeros(4, np.int32))
    assert isinstance(out, jax.Array) and out.dtype == jnp.uint8
    obs, rewards, terminations, *_ = envs.step(np.zeros(4, np.int64))
    assert obs.flags.writeable and rewards.flags.writeable and terminations.flags.writeable


def test_toggling_x64_after_building_keeps_the_outputs_right():
    grid = TimeLimit(GridWorld(), 10)
    env = GymnasiumEnv(grid)
    for flag in (False, True, False):  # one compiled program, and one layout, per setting
        with jax.enable_x64(flag):
            first = grid.reset(key=jax.random.key(3))
            then = grid.step(first, 1)
            obs, _ = env.reset(seed=3)
            np.testing.assert_array_equal(obs, first.observation)
            obs, reward, *_ = env.step(1)
            np.testing.assert_array_equal(obs, then.observation)
            assert reward == pytest.approx(float(then.reward))


def test_example_random_policy_evaluation(capsys):
    namespace = runpy.run_path(str(EXAMPLE), run_name="gymnasium_eval")
    mean = namespace["main"](episodes=3, max_steps=10)
    out = capsys.readouterr().out
    assert "mean return" in out and np.isfinite(mean) and mean > 0.0


def test_docstring_examples_run():
    import doctest

    from parallax.adapters import _gymnasium, _gymnasium_spaces, _gymnasium_vector

    for module in (_gymnasium, _gymnasium_spaces, _gymnasium_vector):
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
        assert result.attempted > 0 and result.failed == 0, module.__name__
