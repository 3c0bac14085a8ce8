"""The battery passes on the bundled example envs and wrapper stacks around them, and the
check functions validate their arguments."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallax import AutoResetWrapper, TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax.envs import GridWorld, MaskedGridWorld, Race
from parallax.testing import (
    BATTERY_CHECKS,
    Battery,
    CheckError,
    FloatRule,
    NearThreshold,
    Tolerance,
    check_batch_independence,
    check_env,
    check_marl_env,
    check_matches_reference,
    run_battery,
    ulp_distance,
)


def eager_racer(key, state):
    """Race policy: each agent advances with probability 0.8, so agents finish (and become
    inactive) within the short rollouts of the battery."""
    return jax.random.bernoulli(key, 0.8, (3,)).astype(jnp.int32)


RACE = {"deterministic": True, "policy": eager_racer, "marl_num_steps": 16}

# name -> (factory, options, precisions). Every check of the battery must pass, or skip for
# the stated reason. GridWorld itself runs in test_testing_star_import.py (f32 and x64),
# Race here in both; the other envs and wrapper stacks are split between the two
# precisions to bound the time.
ENVS = {
    "MaskedGridWorld": (MaskedGridWorld, {}, (False,)),
    "Race": (Race, RACE, (False, True)),
    "AutoReset(TimeLimit(MaskedGridWorld))": (
        lambda: AutoResetWrapper(TimeLimit(MaskedGridWorld(), 4)),
        {},
        (True,),
    ),
    "AutoReset[next-step](TimeLimit(GridWorld))": (
        lambda: AutoResetWrapper(TimeLimit(GridWorld(), 3), mode="next-step"),
        {},
        (True,),
    ),
    "Vmap(AutoReset(TimeLimit(GridWorld)))": (
        lambda: VmapAutoResetWrapper(TimeLimit(GridWorld(), 4), 3),
        {},
        (True,),
    ),
    "Vmap(AutoReset(TimeLimit(Race)))": (
        lambda: VmapAutoResetWrapper(TimeLimit(Race(), 12), 2),
        RACE,
        (False,),
    ),
}
CASES = [
    pytest.param(
        name,
        x64,
        id=f"{'x64' if x64 else 'f32'}-{name}",
        marks=[pytest.mark.slow] if x64 else [],  # the x64 runs: `make test-slow`
    )
    for name, (_, _, precisions) in ENVS.items()
    for x64 in precisions
]


@pytest.mark.parametrize(("name", "x64_mode"), CASES)
def test_battery_passes_on_bundled_envs(name, x64_mode):
    factory, options, _ = ENVS[name]
    with jax.enable_x64(x64_mode):
        outcomes = run_battery(factory, num_steps=10, batch_size=3, options=options)
    assert [o.check for o in outcomes] == list(BATTERY_CHECKS)
    failed = [f"{o.check}: {o.message}" for o in outcomes if o.status not in ("pass", "skip")]
    assert not failed, "\n\n".join(failed)
    skipped = {o.check: o.message for o in outcomes if o.status == "skip"}
    assert "no reference" in skipped.pop("matches_reference")
    if "Race" in name:
        marl = next(o for o in outcomes if o.check == "marl_rules").report
        assert marl is not None and marl.stats["steps_with_inactive_agents"] > 0
        assert "multi-agent env" in skipped.pop("training_parity", "multi-agent env")
    else:
        assert "single-agent env" in skipped.pop("marl_rules")
    # the bundled example envs declare no invariants or scripted policies
    assert "no invariants declared" in skipped.pop("invariant_sweep")
    assert "no scripted policies declared" in skipped.pop("scripted_policies")
    assert "Dict/Tuple" in skipped.pop("structured_spaces", "Dict/Tuple")
    assert not skipped


def test_check_env_report_lists_what_ran():
    report = check_env(TimeLimit(GridWorld(), 3), num_steps=7, checks=["contract", "structure"])
    assert report.passed == [
        "dtypes",
        "reset",
        "observation_in_space",
        "action_in_space",
        "reward",
        "flags",
        "step_count",
        "structure",
    ]
    assert report.stats["episodes_ended"] == 2  # the checker reset the env after each limit


def test_marl_report_counts_the_exercised_rules():
    report = check_marl_env(Race(), num_steps=16, policy=eager_racer, require_inactive=True)
    assert report.stats["steps_with_inactive_agents"] > 0
    assert report.stats["inactive_action_probes"] == 2 * report.stats["steps_with_inactive_agents"]
    with pytest.raises(CheckError, match="no agent was inactive"):
        check_marl_env(Race(), num_steps=3, require_inactive=True)
    with pytest.raises(CheckError, match="needs a multi-agent env"):
        check_marl_env(GridWorld(), num_steps=3)


def test_marl_rules_do_not_depend_on_running_the_driver_under_disable_jit():
    # the driver's resets run op by op either way; only `lax` control flow differs (Python
    # under disable_jit), so the rules see the same states and count the same probes
    eager = check_marl_env(Race(), num_steps=16, policy=eager_racer, require_inactive=True)
    compiled = check_marl_env(
        Race(), num_steps=16, policy=eager_racer, require_inactive=True, disable_jit=False
    )
    assert compiled.passed == eager.passed
    assert compiled.stats == eager.stats
    with pytest.raises(TypeError, match="disable_jit must be a bool, got 1"):
        check_marl_env(Race(), num_steps=3, disable_jit=1)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_env(GridWorld(), num_steps=0), "num_steps must be a positive int"),
        (lambda: check_env(GridWorld(), num_steps=2.5), "num_steps must be a positive int"),
        (lambda: check_env(GridWorld(), checks=["speed"]), "checks must be a non-empty subset"),
        (lambda: check_env(GridWorld(), num_keys=1), "num_keys must be an int >= 2"),
        (lambda: check_env(GridWorld(), policy=3), "policy must be a callable"),
        (lambda: check_env(GridWorld(), autoreset="yes"), "autoreset must be None, True or False"),
        (lambda: check_env(GridWorld(), tolerance=1e-6), "tolerance must be a Tolerance"),
        (lambda: check_env(GridWorld(), key=jnp.zeros(3)), "key must be a PRNG key"),
        (lambda: check_batch_independence(GridWorld(), 1), "num_envs must be an int >= 2"),
        (
            lambda: check_batch_independence(VmapWrapper(GridWorld(), 2), 3),
            "num_envs must be None or the vector env's own num_envs=2",
        ),
        (
            lambda: check_matches_reference(VmapWrapper(GridWorld(), 2), object()),
            "reference must have a callable `reset`",
        ),
        (lambda: check_matches_reference(GridWorld(), None, num_episodes=0), "num_episodes"),
        (lambda: Tolerance(ulp=-1), "ulp must be a non-negative int"),
        (lambda: Tolerance(rtol=float("nan")), "rtol must be a finite non-negative float"),
        (lambda: Tolerance(per_field={"reward": 1e-3}), "per_field must map str prefixes"),
        (lambda: NearThreshold("termination", "x", atol=-1.0), "atol must be a finite"),
        (lambda: Battery(GridWorld, batch_size=1), "batch_size must be an int >= 2"),
        (lambda: Battery(GridWorld, options={"speed": 1}), "unknown options"),
        (lambda: run_battery(GridWorld, checks=["speed"]), "unknown checks"),
    ],
)
def test_arguments_are_validated(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call()


def test_vector_reference_is_refused():
    with pytest.raises(ValueError, match="single \\(unbatched\\) env"):

        class Ref:
            def reset(self, key, initial):
                return {}

            def step(self, action):
                return {}

        check_matches_reference(VmapWrapper(GridWorld(), 2), Ref())


def test_tolerance_rule():
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2.0))
    assert int(ulp_distance(one, up)) == 1
    assert int(ulp_distance(np.float32(0.0), np.float32(-0.0))) == 0
    assert int(ulp_distance(-up, up)) == 2 * int(ulp_distance(np.float32(0.0), up))
    assert np.isinf(ulp_distance(np.float32(np.nan), one))
    exact = Tolerance()
    assert not exact.close("reward", up, one).all()
    assert exact.close("reward", np.float32(np.nan), np.nan).all()  # NaN matches NaN
    assert exact.close("reward", one, 1.0).all()  # the expected value is rounded first
    assert Tolerance(ulp=1).close("reward", up, one).all()
    assert Tolerance(atol=1e-6).close("reward", np.float32(1e-7), 0.0).all()
    assert not Tolerance(atol=1e-6).close("reward", np.float32(np.inf), 0.0).all()
    per_field = Tolerance(per_field={"info": FloatRule(rtol=1e-3), "info.exact": FloatRule()})
    assert per_field.close("info.cash", np.float32(1.0005), 1.0).all()
    assert not per_field.close("info.exact", np.float32(1.0005), 1.0).all()
    assert not per_field.close("reward", np.float32(1.0005), 1.0).all()
    assert per_field.describe("info.cash").startswith("|got - expected| <= 0")
    assert Tolerance().close("step_count", np.int32(3), np.int64(3)).all()
    assert not Tolerance(ulp=100).close("step_count", np.int32(3), np.int64(4)).all()


def test_check_error_message_names_everything():
    err = CheckError(
        "check_env/reward",
        "the reward must be finite",
        step=3,
        env_index=2,
        field="reward",
        expected="a finite float",
        got=np.float32(np.nan),
        hint="look at the log",
    )
    text = str(err)
    assert text.startswith("check_env/reward failed at step 3, env 2 of the batch, field `reward`")
    assert "expected: a finite float" in text and "got:      nan (float32)" in text
    assert "hint: look at the log" in text
    assert isinstance(err, AssertionError)


def test_vector_env_keys_and_policy_shapes():
    """A user policy sees one unbatched instance, also inside a vector env."""
    seen = []

    def policy(key, state):
        seen.append(state.observation.shape)
        return jax.random.randint(key, (), 0, 4)

    check_env(VmapWrapper(GridWorld(), 2), num_steps=2, policy=policy, checks=["contract"])
    assert seen and all(shape == (4,) for shape in seen)
