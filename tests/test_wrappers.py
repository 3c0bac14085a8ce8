"""The core wrappers keep the protocol: VmapWrapper, TimeLimit, AutoResetWrapper, CheckedWrapper."""

from __future__ import annotations

from dataclasses import replace

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from beartype.roar import BeartypeCallHintViolation

import parallax
from parallax import (
    AutoResetWrapper,
    CheckedWrapper,
    State,
    TimeLimit,
    VmapAutoResetWrapper,
    VmapWrapper,
    Wrapper,
    final_observation,
    spaces,
)
from parallax._wrappers.base import unwrap_layers
from parallax.envs import GridWorld, MaskedGridWorld, MaskedState

N = 8


def _key_data(tree):
    """`tree` with typed PRNG keys as their key data (chex compares arrays of numbers)."""

    def leaf(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(x)
        return x

    return jax.tree.map(leaf, tree)


def assert_tree_equal(a, b) -> None:
    """Bit-identical pytrees: same structure, shapes, dtypes and values (keys by key data)."""
    chex.assert_trees_all_equal(_key_data(a), _key_data(b), strict=True)


def signature(state):
    return jax.tree.structure(state), jax.tree.map(lambda x: (x.shape, x.dtype), state)


def walk_to_goal_actions(env, key, n):
    """Actions that walk every env to its goal (right first, then up), then keep pushing."""
    goal = env.reset(key=key).observation[..., 2:]
    acts = [2] * int(goal[..., 0].max()) + [0] * int(goal[..., 1].max()) + [0] * n
    return jnp.asarray(acts[:n], jnp.int32)


class IntRewardEnv:
    """A counter whose reward is an int32 (the 0.4.0 wrappers raised TypeError on it)."""

    action_space = spaces.Discrete(2)
    observation_space = spaces.Box(0, 100, (), dtype=jnp.int32)

    def reset(self, *, key):
        return State(
            env_state=jnp.int32(0),
            observation=jnp.int32(0),
            reward=jnp.int32(0),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={},
            step_count=jnp.int32(0),
            key=key,
        )

    def step(self, state, action):
        x = state.env_state + jnp.asarray(action, jnp.int32)
        return State(
            x, x, jnp.int32(1), x >= 3, jnp.bool_(False), {}, state.step_count + 1, state.key
        )


class CountingReset(Wrapper):
    """Counts executed resets on the host (one callback per env, also under vmap)."""

    def __init__(self, env, counter):
        super().__init__(env)
        self.counter = counter

    def reset(self, *, key, **kwargs):
        def bump(_):
            self.counter[0] += 1

        jax.debug.callback(bump, jax.random.key_data(key))  # batched under vmap: once per env
        return self.env.reset(key=key, **kwargs)


# -- construction --------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_vmap_wrapper_rejects_bad_num_envs(bad):
    if bad in (0, -1, True):
        with pytest.raises((ValueError, TypeError), match="num_envs must be a positive int"):
            VmapWrapper(GridWorld(), num_envs=bad)
    # a wrong type may be caught by the test suite's runtime type checker first; either way
    # the message names the parameter
    with pytest.raises((ValueError, TypeError, BeartypeCallHintViolation), match="num_envs"):
        VmapWrapper(GridWorld(), num_envs=bad)


@pytest.mark.parametrize("bad", [0, -1, 2.0, False])
def test_time_limit_rejects_bad_max_steps(bad):
    if bad in (0, -1, False):
        with pytest.raises((ValueError, TypeError), match="max_steps must be a positive int"):
            TimeLimit(GridWorld(), max_steps=bad)
    with pytest.raises((ValueError, TypeError, BeartypeCallHintViolation), match="max_steps"):
        TimeLimit(GridWorld(), max_steps=bad)


def test_bad_budget_and_mode_are_refused():
    with pytest.raises(
        ValueError, match=r"max_resets_per_step must be in \[1, num_envs=4\], got 5"
    ):
        VmapWrapper(GridWorld(), 4, max_resets_per_step=5)
    with pytest.raises(ValueError, match="mode must be one of"):
        AutoResetWrapper(GridWorld(), mode="sometimes")


def test_time_limit_outside_auto_reset_names_the_right_order():
    with pytest.raises(ValueError, match=r"AutoResetWrapper\(TimeLimit\(env, max_steps\)\)"):
        TimeLimit(AutoResetWrapper(GridWorld()), 10)


def test_selective_reset_needs_state_and_done_together():
    env = VmapWrapper(GridWorld(), N)
    state = env.reset(key=jax.random.key(0))
    with pytest.raises(ValueError, match="needs both `state` and `done`"):
        env.reset(key=jax.random.key(1), state=state)
    with pytest.raises(ValueError, match="needs both `state` and `done`"):
        env.reset(key=jax.random.key(1), done=state.done)
    with pytest.raises(ValueError, match=r"done must be a bool array of shape \(8,\)"):
        env.reset(key=jax.random.key(1), state=state, done=jnp.zeros(3, bool))


def test_protocols_answer_isinstance():
    assert isinstance(GridWorld(), parallax.Env)
    assert not isinstance(GridWorld(), parallax.VectorEnv)
    assert isinstance(VmapWrapper(GridWorld(), 2), parallax.VectorEnv)
    assert isinstance(parallax.envs.Race(), parallax.MARLEnv)
    assert not isinstance(object(), parallax.Env)


def test_attribute_forwarding_and_errors_name_the_stack():
    env = VmapAutoResetWrapper(TimeLimit(GridWorld(), 7), 4)
    assert env.max_steps == 7 and env.num_envs == 4 and env.mode == "same-step"
    assert env.unwrapped.__class__ is GridWorld
    with pytest.raises(
        AttributeError, match="VmapAutoResetWrapper -> VmapWrapper -> TimeLimit -> GridWorld"
    ):
        env.no_such_attribute
    assert repr(env) == (
        "VmapAutoResetWrapper(VmapWrapper(TimeLimit(GridWorld(), max_steps=7), num_envs=4))"
    )


# -- TimeLimit -----------------------------------------------------------------------------
def test_time_limit_sets_truncation_only(x64):
    env = TimeLimit(GridWorld(), 2)
    state = env.reset(key=jax.random.key(0))
    state = env.step(state, 1)  # into the wall: no termination
    assert not bool(state.truncation)
    state = env.step(state, 1)
    assert bool(state.truncation) and not bool(state.termination)


# -- AutoResetWrapper ----------------------------------------------------------------------
def test_auto_reset_keeps_final_reward_done_and_terminal_observation(x64):
    """The 0.4.0 wrapper turned the final reward into 0 and hid the episode end."""
    key = jax.random.key(3)
    raw, wrapped = GridWorld(), AutoResetWrapper(GridWorld())
    actions = walk_to_goal_actions(raw, key, 12)
    s_raw, s_wrap = raw.reset(key=key), wrapped.reset(key=key)
    ended = False
    for a in actions:
        s_raw, s_wrap = raw.step(s_raw, a), wrapped.step(s_wrap, a)
        assert float(s_wrap.reward) == float(s_raw.reward)
        assert bool(s_wrap.termination) == bool(s_raw.termination)
        if bool(s_raw.done):
            ended = True
            np.testing.assert_array_equal(s_wrap.info["final_observation"], s_raw.observation)
            np.testing.assert_array_equal(final_observation(s_wrap), s_raw.observation)
            assert float(s_wrap.reward) == 1.0  # reaching the goal pays exp(0)
            assert int(s_wrap.step_count) == 0
            np.testing.assert_array_equal(s_wrap.observation[:2], [0.0, 0.0])
            break
    assert ended


def test_auto_reset_over_a_vector_env_works_per_env():
    """0.4.0 failed deep inside jax.random.split; ours resets per env. The three stacks run
    side by side in one compiled program and agree on every step (each crosses resets)."""
    inner = AutoResetWrapper(VmapWrapper(TimeLimit(GridWorld(), 3), N))
    outer = VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), N)
    per_env = AutoResetWrapper(TimeLimit(GridWorld(), 3))
    keys = jax.random.split(jax.random.key(0), N)
    actions = jax.random.randint(jax.random.key(1), (7, N), 0, 4)

    def trajectory(step, state):
        return jax.lax.scan(lambda s, a: (lambda n: (n, n))(step(s, a)), state, actions)[1]

    @jax.jit
    def run(keys):
        a = trajectory(inner.step, inner.reset(key=keys))
        b = trajectory(outer.step, outer.reset(key=keys))
        c = trajectory(jax.vmap(per_env.step), jax.vmap(lambda k: per_env.reset(key=k))(keys))
        return a, b, c

    a, b, c = run(keys)
    assert bool(jnp.any(a.truncation)), "the time limit must end episodes"
    assert_tree_equal(a, b)
    assert_tree_equal(b, c)


def test_every_episode_starts_from_a_fresh_key():
    env = jax.jit(AutoResetWrapper(TimeLimit(GridWorld(), 1)).step)
    state = AutoResetWrapper(TimeLimit(GridWorld(), 1)).reset(key=jax.random.key(0))
    goals, keys = set(), set()
    for _ in range(30):
        state = env(state, 0)
        goals.add(tuple(state.observation[2:].tolist()))
        keys.add(tuple(jax.random.key_data(state.key).tolist()))
    assert len(keys) == 30, "a cached start state or a reused key would repeat"
    assert len(goals) > 5


def test_auto_reset_preserves_integer_reward_dtypes_and_float64():
    env = VmapAutoResetWrapper(IntRewardEnv(), 4)
    state = env.reset(key=jax.random.key(0))
    step = jax.jit(env.step)
    for _ in range(4):
        state = step(state, jnp.ones(4, jnp.int32))
        assert state.reward.dtype == jnp.int32
    state = env.reset(key=jax.random.key(1), state=state, done=state.done)
    assert state.reward.dtype == jnp.int32


def test_next_step_mode_returns_the_reset_on_the_step_after_the_end():
    env = AutoResetWrapper(TimeLimit(GridWorld(), 2), mode="next-step")
    state = env.reset(key=jax.random.key(0))
    state = env.step(state, 2)
    state = env.step(state, 2)
    assert bool(state.truncation) and int(state.step_count) == 2  # the end is shown as it is
    terminal = state.observation
    nxt = env.step(state, 2)  # action ignored, reset returned
    assert int(nxt.step_count) == 0 and float(nxt.reward) == 0.0 and not bool(nxt.done)
    np.testing.assert_array_equal(nxt.observation[:2], [0.0, 0.0])
    assert not np.array_equal(np.asarray(nxt.observation), np.asarray(terminal))


def test_off_mode_is_transparent():
    env, raw = AutoResetWrapper(GridWorld(), mode="off"), GridWorld()
    k = jax.random.key(0)
    assert_tree_equal(env.step(env.reset(key=k), 1), raw.step(raw.reset(key=k), 1))


# -- VmapWrapper selective reset -----------------------------------------------------------
@pytest.mark.parametrize("budget", [None, 2, 5])
def test_selective_reset_touches_only_done_envs(budget, x64):
    env = VmapWrapper(GridWorld(), N, max_resets_per_step=budget)
    state = env.reset(key=jax.random.key(0))
    state = env.step(state, jnp.arange(N, dtype=jnp.int32) % 4)
    done = jnp.array([True, False, False, True, False, False, True, False])
    out = jax.jit(env.reset)(key=jax.random.key(5), state=state, done=done)
    fresh = VmapWrapper(GridWorld(), N).reset(key=jax.random.key(5))
    for i in range(N):
        pick = lambda t, i=i: jax.tree.map(lambda x: x[i], t)  # noqa: E731
        expected = pick(fresh) if bool(done[i]) else pick(state)
        assert_tree_equal(pick(out), expected)  # env i


@pytest.mark.parametrize(
    ("budget", "num_done", "expected_resets"),
    [(None, 0, 0), (None, 3, N), (4, 3, 4), (2, 3, N), (4, 0, 0)],
)
def test_resets_cost_only_what_they_must(budget, num_done, expected_resets):
    counter = [0]
    env = VmapWrapper(CountingReset(GridWorld(), counter), N, max_resets_per_step=budget)
    state = env.reset(key=jax.random.key(0))
    jax.effects_barrier()
    counter[0] = 0
    done = jnp.arange(N) < num_done
    jax.jit(env.reset)(key=jax.random.key(1), state=state, done=done)
    jax.effects_barrier()
    assert counter[0] == expected_resets


def test_batched_auto_reset_skips_resets_when_no_env_is_done():
    counter = [0]
    env = VmapAutoResetWrapper(TimeLimit(CountingReset(GridWorld(), counter), 3), N)
    step = jax.jit(env.step)
    state = env.reset(key=jax.random.key(0))
    jax.effects_barrier()
    counter[0] = 0
    state = step(state, jnp.zeros(N, jnp.int32))
    state = step(state, jnp.zeros(N, jnp.int32))
    jax.effects_barrier()
    assert counter[0] == 0
    step(state, jnp.zeros(N, jnp.int32))  # the time limit ends every episode
    jax.effects_barrier()
    assert counter[0] == N


def test_the_stack_you_see_is_the_stack_that_runs():
    fused = VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), N)
    assert [type(layer).__name__ for layer in unwrap_layers(fused)] == [
        "VmapAutoResetWrapper",
        "VmapWrapper",
        "TimeLimit",
        "GridWorld",
    ]
    assert (
        repr(fused)
        == f"VmapAutoResetWrapper(VmapWrapper(TimeLimit(GridWorld(), max_steps=3), num_envs={N}))"
    )
    plain = VmapWrapper(AutoResetWrapper(TimeLimit(GridWorld(), 3)), N)
    assert [type(layer).__name__ for layer in unwrap_layers(plain)] == [
        "VmapWrapper",
        "AutoResetWrapper",
        "TimeLimit",
        "GridWorld",
    ]
    assert set(vars(plain)) <= {"env", "_own_num_envs", "max_resets_per_step"}, vars(plain)
    # each layer answers for the stack below it, no isinstance walk needed
    assert (fused.num_envs, plain.num_envs, TimeLimit(GridWorld(), 3).num_envs) == (N, N, None)
    assert fused.autoreset_mode == plain.autoreset_mode == "same-step"
    assert VmapWrapper(TimeLimit(GridWorld(), 3), N).autoreset_mode == "off"


NC = 64  # the default reset budget is then NC // 16 = 4 envs per step


def _counting(counter):
    """3-step GridWorld episodes; resets counted into `counter` unless it is None (a host
    callback makes each program its own, and compiling it costs seconds)."""
    env = GridWorld() if counter is None else CountingReset(GridWorld(), counter)
    return TimeLimit(env, 3)


def _over_keys(env):
    """`(reset(keys), step)` of a vector env, reset from a batch of keys."""
    return (lambda keys: env.reset(key=keys)), env.step


def _vmapped(env, depth=1):
    """`(reset(keys), step)` of `jax.vmap` (`depth` times) over a single env."""
    reset, step = (lambda k: env.reset(key=k)), env.step
    for _ in range(depth):
        reset, step = jax.vmap(reset), jax.vmap(step)
    return reset, step


# every way of batching an auto-reset: name -> (build(counter) -> (reset, step), seeds);
# `seeds` > 1 adds an outer batch axis (seeds x envs, as `jit(vmap(train))` does)
COMPOSITIONS = {
    "VmapAutoResetWrapper": (lambda c: _over_keys(VmapAutoResetWrapper(_counting(c), NC)), 1),
    "VmapWrapper(AutoResetWrapper)": (
        lambda c: _over_keys(VmapWrapper(AutoResetWrapper(_counting(c)), NC)),
        1,
    ),
    "vmap(AutoResetWrapper)": (lambda c: _vmapped(AutoResetWrapper(_counting(c))), 1),
    "vmap(vmap(AutoResetWrapper))": (lambda c: _vmapped(AutoResetWrapper(_counting(c)), 2), 2),
    "vmap(VmapAutoResetWrapper)": (
        lambda c: _vmapped(VmapAutoResetWrapper(_counting(c), NC)),
        2,
    ),
}


def _keys(seeds):
    keys = jax.random.split(jax.random.key(4), seeds * NC)
    return keys if seeds == 1 else keys.reshape(seeds, NC)


@pytest.mark.parametrize("name", list(COMPOSITIONS))
def test_every_composition_resets_only_the_envs_whose_episode_ended(name):
    # the batch-level auto-reset however it is composed with vmap: a step where no episode
    # ends runs no reset, one where a few end runs the budget's resets (NC // 16 per batch),
    # one where every episode ends runs one reset per env
    counter = [0]
    build, seeds = COMPOSITIONS[name]
    reset, step = build(counter)
    state = reset(_keys(seeds))
    shape = state.step_count.shape
    action = jnp.zeros(shape, jnp.int32)
    step = jax.jit(step)
    # the first three envs of every batch are one step from their time limit
    few = jnp.broadcast_to(jnp.arange(NC) < 3, shape)
    late = replace(state, step_count=jnp.where(few, 2, state.step_count))
    jax.effects_barrier()
    counter[0] = 0
    state = step(step(state, action), action)
    jax.effects_barrier()
    assert counter[0] == 0
    ended = step(late, action)
    jax.effects_barrier()
    assert int(ended.truncation.sum()) == 3 * seeds
    assert counter[0] == seeds * (NC // 16)  # three ended per batch, within the budget
    counter[0] = 0
    step(state, action)  # the time limit ends every episode
    jax.effects_barrier()
    assert counter[0] == seeds * NC


def test_every_composition_gives_the_batch_level_auto_reset_results_bit_for_bit():
    actions = jax.random.randint(jax.random.key(9), (7, 2, NC), 0, 4)
    results = {}
    for name, (build, seeds) in COMPOSITIONS.items():
        reset, step = build(None)  # nothing counted: the results are compared

        def run(reset=reset, step=step, seeds=seeds):
            acts = actions if seeds > 1 else actions[:, 0]
            state = reset(_keys(seeds))
            return jax.lax.scan(lambda s, a: (lambda n: (n, n))(step(s, a)), state, acts)[1]

        results[name] = jax.device_get(jax.jit(run)())
    reference = results["VmapAutoResetWrapper"]
    assert int(reference.done.sum()) >= NC  # episodes ended, and were reset
    for name in ("VmapWrapper(AutoResetWrapper)", "vmap(AutoResetWrapper)"):
        assert_tree_equal(results[name], reference)
    # nested: seed 0's rows of the (seeds, envs) batch are the unnested batch's
    first = jax.tree.map(lambda x: x[:, 0], results["vmap(vmap(AutoResetWrapper))"])
    assert_tree_equal(first, reference)


def test_wrappers_import_one_way():
    import ast
    import pathlib

    folder = pathlib.Path(parallax.__file__).parent / "_wrappers"
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):  # function-local imports too
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                names.add(node.module.split(".")[0])
        graph[path.stem] = names & {p.stem for p in folder.glob("*.py")}

    def reaches(start: str, goal: str, seen: frozenset = frozenset()) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start]
        )

    cycles = sorted(m for m in graph if reaches(m, m))
    assert cycles == [], f"import cycles through {cycles}: {graph}"


# -- structure, transformations, recompilation ---------------------------------------------
STACKS = {
    "vmap": lambda: VmapWrapper(GridWorld(), 4),
    "vmap-autoreset-timelimit": lambda: VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), 4),
    "vmap-of-autoreset": lambda: VmapWrapper(AutoResetWrapper(TimeLimit(GridWorld(), 3)), 4),
    "vmap-budget": lambda: VmapWrapper(
        AutoResetWrapper(TimeLimit(GridWorld(), 3)), 4, max_resets_per_step=1
    ),
    "autoreset-vmap": lambda: AutoResetWrapper(VmapWrapper(TimeLimit(GridWorld(), 3), 4)),
    "next-step": lambda: VmapWrapper(
        AutoResetWrapper(TimeLimit(GridWorld(), 3), mode="next-step"), 4
    ),
    "checked": lambda: CheckedWrapper(VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), 4)),
    "masked": lambda: VmapAutoResetWrapper(TimeLimit(MaskedGridWorld(), 3), 4),
}


@pytest.mark.parametrize("name", list(STACKS))
def test_eager_jit_and_scan_agree_and_structure_is_stable(name, x64):
    env = STACKS[name]()
    actions = jax.random.randint(jax.random.key(2), (6, 4), 0, 4)
    state0 = env.reset(key=jax.random.key(0))
    sig = signature(state0)

    eager, states = state0, []
    for a in actions:
        eager = env.step(eager, a)
        states.append(eager)
        assert signature(eager) == sig
    jitted = state0
    step = jax.jit(env.step)
    for a in actions:
        jitted = step(jitted, a)
    scanned, _ = jax.lax.scan(lambda s, a: (env.step(s, a), None), state0, actions)
    if name != "checked":
        assert_tree_equal(eager, jitted)
    assert_tree_equal(jitted, scanned)
    reset = env.reset(key=jax.random.key(9), state=jitted, done=jitted.done)
    assert signature(reset) == sig
    cond = jax.lax.cond(True, lambda: reset, lambda: jitted)
    assert signature(cond) == sig


def test_stacks_vmap_over_an_outer_seed_axis():
    env = VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), 4)
    keys = jax.random.split(jax.random.key(0), 3)
    states = jax.jit(jax.vmap(lambda k: env.reset(key=k)))(keys)
    actions = jnp.zeros((3, 4), jnp.int32)
    out = jax.jit(jax.vmap(env.step))(states, actions)
    single = jax.jit(env.step)(jax.tree.map(lambda x: x[1], states), actions[1])
    assert_tree_equal(jax.tree.map(lambda x: x[1], out), single)


def test_no_recompilation_on_the_second_step():
    chex.clear_trace_counter()
    env = VmapAutoResetWrapper(TimeLimit(GridWorld(), 3), 4)

    @chex.assert_max_traces(n=1)  # a second trace raises
    def step(state, action):
        return env.step(state, action)

    step = jax.jit(step)
    state = env.reset(key=jax.random.key(0))
    for _ in range(5):  # crosses an auto-reset
        state = step(state, jnp.zeros(4, jnp.int32))


def test_wrappers_preserve_the_state_type():
    env = VmapAutoResetWrapper(TimeLimit(MaskedGridWorld(), 3), 4)
    state = env.reset(key=jax.random.key(0))
    assert type(state) is MaskedState
    state = env.step(state, jnp.zeros(4, jnp.int32))
    assert type(state) is MaskedState and state.action_mask.shape == (4, 4)
    state = env.reset(key=jax.random.key(1), state=state, done=jnp.ones(4, bool))
    assert type(state) is MaskedState


def test_grad_flows_through_a_wrapped_step():
    """Everything composes with grad: d(reward)/d(position) through the wrapper stack."""
    env = VmapWrapper(TimeLimit(GridWorld(), 5), 2)
    state = env.reset(key=jax.random.key(0))

    def total_reward(pos):
        s = replace(state, env_state=state.env_state._replace(pos=pos))
        return env.step(s, jnp.zeros(2, jnp.int32)).reward.sum()

    g = jax.jit(jax.grad(total_reward))(jnp.full((2, 2), 0.5, jnp.float32))
    assert g.shape == (2, 2) and bool(jnp.all(jnp.isfinite(g))) and bool(jnp.any(g != 0))


# -- CheckedWrapper ------------------------------------------------------------------------
def test_checked_wrapper_reports_the_env_index():
    env = CheckedWrapper(VmapWrapper(GridWorld(), 4))
    state = env.reset(key=jax.random.key(0))
    ok = jax.jit(env.step)(state, jnp.array([0, 1, 2, 3]))
    assert ok.observation.shape == (4, 4)
    with pytest.raises(Exception, match="action outside action_space in env 2 of 4"):
        jax.block_until_ready(jax.jit(env.step)(state, jnp.array([0, 1, 9, 0])))


class NaNRewardEnv(GridWorld):
    def step(self, state, action):
        s = super().step(state, action)
        return replace(
            s, reward=jnp.where(s.step_count >= 2, jnp.nan, s.reward).astype(jnp.float32)
        )


def test_checked_wrapper_reports_nan_rewards():
    env = CheckedWrapper(NaNRewardEnv())
    state = env.step(env.reset(key=jax.random.key(0)), 0)
    with pytest.raises(Exception, match="NaN or inf in reward"):
        jax.block_until_ready(jax.jit(env.step)(state, 0))


def test_auto_budget_resets_only_finished_envs_in_large_batches():
    counter = [0]
    env = VmapWrapper(CountingReset(GridWorld(), counter), 64)
    assert env.max_resets_per_step == 4
    plain = VmapWrapper(GridWorld(), 64, max_resets_per_step=None)
    state = jax.jit(plain.reset)(key=jax.random.key(0))
    done = jnp.arange(64) % 20 == 0  # 4 envs
    jax.effects_barrier()
    counter[0] = 0
    out = jax.jit(env.reset)(key=jax.random.key(1), state=state, done=done)
    jax.effects_barrier()
    assert counter[0] == 4
    assert_tree_equal(out, jax.jit(plain.reset)(key=jax.random.key(1), state=state, done=done))
    with pytest.raises(ValueError, match="'auto', None or a positive int"):
        VmapWrapper(GridWorld(), 64, max_resets_per_step="some")
