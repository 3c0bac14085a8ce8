"""The battery checks of issue 18: invariant sweep, boundary actions, auto-reset, scripted
policies. Each passes on working envs and fails, naming the rule, on a planted bug."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import pytest

from parallax import AutoResetWrapper, State, TimeLimit, VmapAutoResetWrapper, spaces
from parallax.envs import GridWorld
from parallax.finance import MarketMakingEnv, OptimalExecutionEnv, PortfolioEnv, TradingEnv
from parallax.finance._invariants import invariants_for, scripted_policies_for
from parallax.testing import (
    Battery,
    CheckError,
    CheckSkipped,
    ScriptedPolicy,
    run_battery,
    run_scripted_policies,
)

NEW_CHECKS = ["invariant_sweep", "boundary_actions", "auto_reset", "scripted_policies"]
# (PortfolioEnv's Dict observation also runs structured_spaces, see the end)

# One size for the toy envs below (Line, Dial, GridWorld and their broken variants): equal
# spaces, lengths and batches give equal programs (the key schedules, the rollouts), which
# the battery's caches and the persistent compilation cache then compile only once. Six
# steps let every TimeLimit used here (3 or 4 steps) end an episode inside the run.
STEPS = 6
BATCH = 2


# -- Line: a position on 0..4, actions left / stay / right (Discrete) -------------------------
class Line:
    """Walk on 0..4; out-of-range actions clip (the documented rule)."""

    action_space = spaces.Discrete(3)
    observation_space = spaces.Box(0.0, 4.0, (1,))
    upper = 4.0

    @staticmethod
    def invariants_fn(state):
        return (state.env_state >= 0) & (state.env_state <= 4)

    invariants: ClassVar = {"position_on_the_line": invariants_fn}

    def move(self, action):
        return jnp.clip(jnp.asarray(action), 0, 2).astype(jnp.float32) - 1.0

    def reset(self, *, key):
        pos = jax.random.randint(key, (), 0, 5).astype(jnp.float32)
        return self._state(pos, jnp.float32(0.0), jnp.int32(0), key)

    def step(self, state, action):
        pos = jnp.clip(state.env_state + self.move(action), 0.0, self.upper)
        return self._state(pos, -jnp.abs(pos - 2.0), state.step_count + 1, state.key)

    def _state(self, pos, reward, count, key):
        return State(
            env_state=pos,
            observation=pos[None],
            reward=reward,
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={},
            step_count=count,
            key=key,
        )


class OffByOneLine(Line):
    """Planted bug: the wall is at 5, so the position leaves 0..4."""

    upper = 5.0


class WrappingLine(Line):
    """Planted bug: out-of-range actions wrap around (`action % 3`) instead of clipping."""

    def move(self, action):
        return (jnp.asarray(action) % 3).astype(jnp.float32) - 1.0


class Dial:
    """A Box action in [-1, 1] sets a dial; out-of-range actions clip."""

    action_space = spaces.Box(-1.0, 1.0, (2,))
    observation_space = spaces.Box(-1.0, 1.0, (2,))

    def clip(self, action):
        return jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)

    def reward(self, dial):
        return -jnp.sum(jnp.square(dial))

    def reset(self, *, key):
        dial = jax.random.uniform(key, (2,), jnp.float32, -1.0, 1.0)
        return self._state(dial, jnp.float32(0.0), jnp.int32(0), key)

    def step(self, state, action):
        dial = self.clip(action)
        return self._state(dial, self.reward(dial), state.step_count + 1, state.key)

    def _state(self, dial, reward, count, key):
        return State(dial, dial, reward, jnp.bool_(False), jnp.bool_(False), {}, count, key)


class UnclippedDial(Dial):
    """Planted bug: the action is used as it comes (and the observation leaves its space)."""

    def clip(self, action):
        return jnp.asarray(action, jnp.float32)


class SingularDial(Dial):
    """Planted bug: the reward divides by `1 - dial`, infinite on the edge `high`."""

    def reward(self, dial):
        return jnp.sum(1.0 / (1.0 - dial)).astype(jnp.float32)


def _fails(factory, check, **options):
    battery = Battery(factory, num_steps=STEPS, batch_size=BATCH, options=options)
    with pytest.raises(CheckError) as info:
        battery.run(check)
    return info.value


# -- invariant sweep ---------------------------------------------------------------------------
def test_invariant_sweep_passes_and_counts_what_it_swept():
    battery = Battery(lambda: TimeLimit(Line(), 4), num_steps=STEPS, batch_size=BATCH)
    report = battery.run("invariant_sweep")
    assert report.passed == ["position_on_the_line"]
    assert report.stats["envs"] == 32 and report.stats["steps"] == 24


def test_invariant_sweep_reports_the_first_violation():
    error = _fails(OffByOneLine, "invariant_sweep", invariant_envs=8, invariant_steps=12)
    assert error.check == "invariant_sweep/position_on_the_line"
    assert error.field == "position_on_the_line"
    assert error.step is not None and error.step >= 1
    assert error.env_index is not None and 0 <= error.env_index < 8
    assert error.got["env_state"] == 5.0  # the offending value, shown


def test_invariant_sweep_of_a_vector_env_names_the_env_of_the_batch():
    from parallax import VmapWrapper

    error = _fails(lambda: VmapWrapper(OffByOneLine(), 3), "invariant_sweep", invariant_envs=2)
    assert error.check == "invariant_sweep/position_on_the_line"
    assert error.env_index is not None and 0 <= error.env_index < 6


def test_invariants_given_as_an_option_and_validated():
    def never(state):
        return state.step_count < 0

    error = _fails(GridWorld, "invariant_sweep", invariants=[never], invariant_envs=2)
    assert error.check == "invariant_sweep/never" and error.step == 0
    sizes = {"num_steps": STEPS, "batch_size": BATCH}  # the session of _fails, compiled once
    with pytest.raises(TypeError, match="named function"):
        Battery(GridWorld, **sizes, options={"invariants": [lambda s: True]}).run("invariant_sweep")
    with pytest.raises(CheckSkipped, match="no invariants declared"):
        Battery(GridWorld, **sizes).run("invariant_sweep")


class DriftingTrading(TradingEnv):
    """Planted bug: the stored position drifts away from what the observation reports."""

    def step(self, state, action, params=None):
        out = super().step(state, action, params)
        es = out.env_state
        return dataclasses.replace(
            out, env_state=dataclasses.replace(es, position=es.position + 0.25)
        )


def test_finance_invariants_catch_a_drifting_position():
    env = DriftingTrading()
    assert set(invariants_for(env)) >= {"observation_ends_with_position", "info_reports_state"}
    error = _fails(lambda: env, "invariant_sweep", invariant_envs=2, invariant_steps=2)
    assert error.check in (
        "invariant_sweep/info_reports_state",
        "invariant_sweep/observation_ends_with_position",
    )
    assert error.step == 1


# -- boundary and invalid actions ---------------------------------------------------------------
def test_boundary_actions_pass_on_clipping_envs():
    for factory in (Line, Dial, GridWorld):
        report = Battery(factory, num_steps=STEPS, batch_size=BATCH).run("boundary_actions")
        assert report.passed == ["in_range", "out_of_range"]


def test_wrapping_discrete_actions_break_the_clip_rule():
    error = _fails(WrappingLine, "boundary_actions")
    assert error.check == "boundary_actions/out_of_range"
    assert "does not act as the clipped action" in str(error)


def test_unclipped_box_actions_break_the_clip_rule():
    error = _fails(UnclippedDial, "boundary_actions")
    assert error.check == "boundary_actions/out_of_range"
    assert "below low" in str(error)


def test_an_edge_action_that_gives_an_infinite_reward():
    error = _fails(SingularDial, "boundary_actions")
    assert error.check == "boundary_actions/in_range"
    assert error.field == "reward" and "high" in str(error)


# -- auto-reset ---------------------------------------------------------------------------------
class LosesFinalObservation(AutoResetWrapper):
    """Planted bug: a batch auto-reset that overwrites the terminal observation."""

    def step(self, state, action, params=None):
        out = super().step(state, action, params)
        return dataclasses.replace(out, info={**out.info, "final_observation": out.observation})


class DropsTheReward(AutoResetWrapper):
    """Planted bug: the reset state carries reward 0, not the finishing step's reward."""

    def step(self, state, action, params=None):
        out = super().step(state, action, params)
        return dataclasses.replace(out, reward=jnp.where(out.done, 0.0, out.reward))


class KeepsTheOldEpisode(AutoResetWrapper):
    """Planted bug: the 'new' episode keeps the finished episode's env_state."""

    def step(self, state, action, params=None):
        inner = self.env.step(self._strip(state), action)
        out = super().step(state, action, params)
        return dataclasses.replace(out, env_state=inner.env_state)


def _vector_line(wrapper):
    from parallax import VmapWrapper

    return lambda: wrapper(VmapWrapper(TimeLimit(Line(), 3), 3))


def test_auto_reset_passes_for_single_vector_and_autoreset_envs():
    for factory in (
        Line,
        lambda: VmapAutoResetWrapper(TimeLimit(GridWorld(), 4), 3),
        _vector_line(AutoResetWrapper),
    ):
        report = Battery(factory, num_steps=STEPS, batch_size=BATCH).run("auto_reset")
        assert report.passed == ["final_observation", "outcome_kept", "fresh_reset"]
        assert report.stats["episodes_ended"] > 0


@pytest.mark.parametrize(
    ("wrapper", "rule"),
    [
        (LosesFinalObservation, "final_observation"),
        (DropsTheReward, "outcome_kept"),
        (KeepsTheOldEpisode, "fresh_reset"),
    ],
)
def test_broken_batch_auto_resets_are_caught(wrapper, rule):
    error = _fails(_vector_line(wrapper), "auto_reset")
    assert error.check == f"auto_reset/{rule}"
    assert error.step is not None and error.env_index is not None


class OwnAutoReset:
    """A user's own batch auto-reset (not Parallax's wrapper) that forgets final_observation."""

    autoreset_mode = "same-step"
    num_envs = 2

    def __init__(self):
        from parallax import VmapWrapper

        self.inner = VmapWrapper(TimeLimit(Line(), 3), 2)
        self.action_space = self.inner.action_space
        self.observation_space = self.inner.observation_space

    def reset(self, *, key):
        return self.inner.reset(key=key)

    def step(self, state, action):
        out = self.inner.step(state, action)
        return self.inner.reset(key=out.key, state=out, done=out.done)


def test_a_users_own_auto_reset_must_keep_the_final_observation():
    error = _fails(OwnAutoReset, "auto_reset")
    assert error.check == "auto_reset/final_observation"


# -- scripted policies --------------------------------------------------------------------------
RIGHT_TO_THE_WALL = ScriptedPolicy(
    policy=lambda key, state: jnp.int32(2),
    expect=lambda traj: traj.states.env_state[-1] == 4.0,
    measure=lambda traj: traj.states.env_state[-1],
    num_steps=5,
    description="always right ends on the wall at 4",
)


def test_scripted_policy_passes_and_fails_on_a_planted_bug():
    options = {"scripted_policies": {"right": RIGHT_TO_THE_WALL}}
    battery = Battery(Line, num_steps=STEPS, batch_size=BATCH, options=options)
    report = battery.run("scripted_policies")
    assert report.passed == ["right"]
    error = _fails(OffByOneLine, "scripted_policies", **options)
    assert error.check == "scripted_policies/right"
    assert float(error.got) == 5.0 and "wall at 4" in str(error)


class CountedLine(Line):
    """`Line` that counts how often its `step` is traced."""

    traces = 0

    def step(self, state, action):
        CountedLine.traces += 1
        return super().step(state, action)


def test_scripted_policies_of_one_action_type_share_one_program_and_keep_their_lengths():
    seen = {}

    def expect_length(name, num_steps, end):
        def expect(traj):
            seen[name] = (traj.states.env_state.shape, traj.actions.shape)
            return traj.states.env_state[-1] == end

        return expect

    policies = {
        "right": ScriptedPolicy(lambda k, s: jnp.int32(2), expect_length("right", 5, 4.0), 5),
        # a Python int: cast to the others' int32, so it joins their program
        "left": ScriptedPolicy(lambda k, s: 0, expect_length("left", 4, 0.0), 4),
        "stay": ScriptedPolicy(
            lambda k, s: jnp.int32(1),
            lambda traj: traj.states.env_state[-1] == traj.states.env_state[0],
            num_steps=2,
        ),
    }
    # from any start in 0..4, four steps left end at 0 and five right at 4
    env = CountedLine()
    CountedLine.traces = 0
    report = run_scripted_policies(env, policies, jax.random.key(0), num_keys=3)
    assert report.passed == ["right", "left", "stay"]
    assert CountedLine.traces == 1  # one program: step traced once for the three policies
    # each expectation saw its own trajectory's length (one episode: vmapped over keys)
    assert seen == {"right": ((6,), (5,)), "left": ((5,), (4,))}
    # the shared program gives each policy the outcome it gets alone
    one = {name: {name: pol} for name, pol in policies.items()}
    for name in policies:
        alone = run_scripted_policies(env, one[name], jax.random.key(0), num_keys=3)
        assert alone.passed == [name]
    # a failing policy is still named, with its own episode's measure
    policies["right"] = ScriptedPolicy(
        lambda k, s: jnp.int32(2),
        lambda traj: traj.states.env_state[-1] == 3.0,
        5,
        measure=lambda traj: traj.states.env_state[-1],
    )
    with pytest.raises(CheckError) as info:
        run_scripted_policies(env, policies, jax.random.key(0), num_keys=3)
    assert info.value.check == "scripted_policies/right" and float(info.value.got) == 4.0
    with pytest.raises(CheckError) as alone_info:
        run_scripted_policies(env, {"right": policies["right"]}, jax.random.key(0), num_keys=3)
    assert str(alone_info.value) == str(info.value)


def test_scripted_policies_of_different_action_types_run_one_program_each():
    policies = {
        "int": ScriptedPolicy(lambda k, s: jnp.int32(2), lambda t: t.states.env_state[-1] == 4, 5),
        "pair": ScriptedPolicy(
            lambda k, s: (jnp.int32(2), jnp.int32(0)),
            lambda t: t.states.env_state[-1] == 4,
            5,
        ),
    }

    class PairLine(CountedLine):
        def step(self, state, action):
            return super().step(state, action[0] if isinstance(action, tuple) else action)

    CountedLine.traces = 0
    report = run_scripted_policies(PairLine(), policies, jax.random.key(0), num_keys=2)
    assert report.passed == ["int", "pair"] and CountedLine.traces == 2


def test_scripted_policy_arguments_are_validated():
    with pytest.raises(ValueError, match="num_steps must be a positive int, got 0"):
        ScriptedPolicy(policy=lambda k, s: 0, expect=lambda t: True, num_steps=0)
    with pytest.raises(TypeError, match="expect must be callable"):
        ScriptedPolicy(policy=lambda k, s: 0, expect=True)


class ImpactFreeExecution(OptimalExecutionEnv):
    """Planted bug: selling costs no temporary impact (the shortfall is not recorded)."""

    def step(self, state, action, params=None):
        out = super().step(state, action, params)
        return dataclasses.replace(
            out, info={**out.info, "implementation_shortfall": jnp.zeros_like(out.reward)}
        )


def test_finance_scripted_policy_catches_a_missing_impact():
    env = ImpactFreeExecution()
    assert "sell_all_at_once_costs_full_impact" in scripted_policies_for(env)
    error = _fails(lambda: env, "scripted_policies", scripted_keys=1)
    assert error.check == "scripted_policies/sell_all_at_once_costs_full_impact"


# -- structured spaces (rung 7) -----------------------------------------------------------------
class Pocket:
    """Dict observation `{"pos": Box(2), "mode": Discrete(3)}`, Tuple action (mode, push)."""

    observation_space = spaces.PyTreeSpace(
        {"pos": spaces.Box(-1.0, 1.0, (2,)), "mode": spaces.Discrete(3)}
    )
    action_space = spaces.PyTreeSpace((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,))))

    def pos(self, pos):
        return pos

    def reset(self, *, key):
        pos = jax.random.uniform(key, (2,), jnp.float32, -1.0, 1.0)
        return self._state(pos, jnp.int32(0), jnp.float32(0.0), jnp.int32(0), key)

    def step(self, state, action):
        mode, push = action
        mode = jnp.clip(jnp.asarray(mode), 0, 2).astype(jnp.int32)
        pos = jnp.clip(state.env_state["pos"] + 0.5 * jnp.clip(push, -1.0, 1.0), -1.0, 1.0)
        reward = -jnp.sum(jnp.square(pos)).astype(jnp.float32)
        return self._state(pos.astype(jnp.float32), mode, reward, state.step_count + 1, state.key)

    def _state(self, pos, mode, reward, count, key):
        inner = {"pos": pos, "mode": mode}
        obs = {"pos": self.pos(pos), "mode": mode}
        return State(inner, obs, reward, jnp.bool_(False), jnp.bool_(False), {}, count, key)


class WidePocket(Pocket):
    """Planted bug: under x64 the position is reported as float64 (the space says float32);
    the parallax contract accepts any float kind, the Gymnasium equivalent does not."""

    def pos(self, pos):
        return pos.astype(jnp.float64)


def test_structured_spaces_round_trip():
    with jax.enable_x64(True):
        report = Battery(Pocket, num_steps=4, batch_size=2).run("structured_spaces")
    assert report.passed == ["gymnasium_space", "flatten_roundtrip", "gymnasium_export"]
    assert report.stats["values_round_tripped"] == 8 + 8 + 5
    with pytest.raises(CheckSkipped, match="Dict/Tuple"):
        Battery(Line).run("structured_spaces")


def test_a_leaf_in_the_wrong_dtype_breaks_the_gymnasium_space():
    with jax.enable_x64(True):
        battery = Battery(WidePocket, num_steps=4, batch_size=2)  # one session for both
        battery.run("contract")  # the contract passes
        with pytest.raises(CheckError) as info:
            battery.run("structured_spaces")
    error = info.value
    assert error.check == "structured_spaces/gymnasium_space"
    assert "float64" in str(error) and "the reset observation" in str(error)


# -- the bundled finance envs pass all four ------------------------------------------------------
# disable_jit=False: the eager rollout (whose states boundary_actions and structured_spaces
# probe) runs op by op with the env's lax loops compiled, not as Python (cheaper for these
# envs); none of the checks here is about the eager run itself (check_env's are elsewhere).
FINANCE_OPTIONS = {
    "invariant_envs": 4,
    "invariant_steps": 8,
    "scripted_keys": 2,
    "disable_jit": False,
}
# Small instances: no rule checked here depends on the horizon, the window or the number of
# assets, and 6-step episodes make the 8-step sweep cross an episode end and a reset (and
# reach OptimalExecution's horizon, where everything must be sold).
FINANCE_ENVS = {
    "TradingEnv": lambda: TradingEnv(episode_length=6, lookback=4),
    "PortfolioEnv": lambda: PortfolioEnv(n_assets=2, episode_length=6, lookback=4),
    "MarketMakingEnv": lambda: MarketMakingEnv(n_steps=6),
    "OptimalExecutionEnv": lambda: OptimalExecutionEnv(n_steps=6),
}


@pytest.mark.parametrize("name", list(FINANCE_ENVS))
def test_finance_envs_pass_the_new_checks(name):
    # PortfolioEnv's Dict observation space runs structured_spaces too, on the same session
    checks = [*NEW_CHECKS, "structured_spaces"] if name == "PortfolioEnv" else NEW_CHECKS
    outcomes = run_battery(
        FINANCE_ENVS[name], num_steps=4, batch_size=2, checks=checks, options=FINANCE_OPTIONS
    )
    assert [(o.check, o.status, o.message) for o in outcomes] == [
        (check, "pass", "") for check in checks
    ]
    sweep = outcomes[0].report
    assert sweep is not None and len(sweep.passed) == 4
    assert len(outcomes[3].report.passed) == 2
