"""Every Python example of the parallax-rl 0.4.0 documentation runs verbatim against our package.

The examples are not stored here: they are read from the specification document
`shared/seeds/002_917533f449243c0d.txt` beside the repository (or the file named by the
environment variable `PARALLAX_SPEC_SEED`). `SPEC_EXAMPLES` locates each example by its line
range and pins its content with a short SHA-256 prefix, so an edit of the document fails
loudly instead of testing something else. A clone without the document skips these tests with
that reason; our own documentation's examples are tested unconditionally by
`test_docs_code.py`.

The examples run in document order in one namespace, as a reader would paste them. Where an
example needs a name the document leaves to the reader (`agent`, `action`, `actions`,
`reset_key`, `compute_mask`, `state_t`, ...), the smallest honest stand-in is defined next to
it. The examples are written for JAX's standard dtype promotion (the Race example multiplies an
int action by a bool mask), so these tests are marked `standard_promotion`; our shipped envs
pass the strict configuration.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib

import pytest

DEFAULT_SEED = (
    pathlib.Path(__file__).resolve().parents[2] / "shared" / "seeds" / "002_917533f449243c0d.txt"
)

# name: (first line, last line, sha256 prefix of those lines joined with newlines, plus a newline)
SPEC_EXAMPLES: dict[str, tuple[int, int, str]] = {
    "quick_start": (32, 42, "c3608e71f2025c90"),
    "protocol_calls": (52, 53, "a7137978d4291011"),
    "protocol_fields": (55, 63, "bd87d4c0d00d95a8"),
    "building_an_environment": (69, 113, "e30bdf9371e16736"),
    "wrappers": (121, 128, "5ad68b1d5a7383cc"),
    "marl_fields": (143, 152, "2b259be3acaf581f"),
    "marl_timing": (167, 169, "ed1d3d81511ea380"),
    "marl_one_liners": (173, 175, "90e5b2357867d381"),
    "building_a_marl_environment": (187, 231, "4ac9fef6ecbe78f9"),
    "adapter_gymnax": (239, 243, "bb1aacf2ca19a251"),
    "adapter_brax": (245, 249, "336ba1ca968f359a"),
    "adapter_mjx": (251, 255, "bee4d9a435cce63f"),
    "masked_state": (263, 268, "5641b3b45321d9a0"),
    "masked_gridworld": (272, 281, "5ab604813da21d46"),
    "collecting_experience": (289, 331, "9bae9e503883ab6e"),
}


def seed_path() -> pathlib.Path:
    """Where the specification document is read from (`PARALLAX_SPEC_SEED` overrides)."""
    return pathlib.Path(os.environ.get("PARALLAX_SPEC_SEED", DEFAULT_SEED))


def load_examples(path: pathlib.Path) -> dict[str, str]:
    """Cut the examples out of the document at `path`; skip (with the reason) when it is absent.

    Raises `AssertionError` naming the example whose lines no longer hash to the pinned value.
    """
    if not path.is_file():
        pytest.skip(
            f"the parallax-rl 0.4.0 specification is not at {path} (it lives in the project's "
            "shared/seeds/, beside the repository, not inside it); set PARALLAX_SPEC_SEED to "
            "run the conformance examples"
        )
    lines = path.read_text(encoding="utf-8").split("\n")
    examples = {}
    for name, (first, last, digest) in SPEC_EXAMPLES.items():
        block = "\n".join(lines[first - 1 : last]) + "\n"
        actual = hashlib.sha256(block.encode()).hexdigest()[: len(digest)]
        assert actual == digest, (
            f"example {name!r} (lines {first}-{last} of {path}) changed: sha256 {actual}, "
            f"expected {digest}; update SPEC_EXAMPLES"
        )
        examples[name] = block
    return examples


@functools.cache
def _examples_of(path: pathlib.Path) -> dict[str, str]:
    return load_examples(path)


pytestmark = pytest.mark.standard_promotion


def run(*names: str, **stand_ins: object) -> dict[str, object]:
    """Execute the named examples in order in one namespace seeded with `stand_ins`."""
    examples = _examples_of(seed_path())
    namespace: dict[str, object] = {**stand_ins, "__name__": "docs_example"}
    for name in names:
        exec(compile(examples[name], f"<docs:{name}>", "exec", dont_inherit=True), namespace)
    return namespace


def test_a_missing_specification_skips_with_its_reason(tmp_path):
    missing = tmp_path / "no-such-seed.txt"
    with pytest.raises(pytest.skip.Exception, match=r"specification is not at .*no-such-seed"):
        load_examples(missing)


def test_an_edited_specification_fails_naming_the_example(tmp_path):
    edited = tmp_path / "seed.txt"
    edited.write_text("\n".join(f"line {i}" for i in range(400)), encoding="utf-8")
    with pytest.raises(AssertionError, match=r"example 'quick_start' .* changed"):
        load_examples(edited)


def test_every_example_is_found_in_the_specification():
    examples = _examples_of(seed_path())
    assert set(examples) == set(SPEC_EXAMPLES)
    assert "GridWorld" in examples["building_an_environment"]


@pytest.fixture(params=[False, True], ids=["f32", "x64"])
def precision(request):
    import jax

    with jax.enable_x64(request.param):
        yield request.param


def _agent(observation):
    """Smallest honest agent: move towards the goal (observation is [x, y, gx, gy])."""
    import jax.numpy as jnp

    dx, dy = observation[2] - observation[0], observation[3] - observation[1]
    # actions: 0 up (+y), 1 down (-y), 2 right (+x), 3 left (-x)
    return jnp.where(dx > 0, 2, jnp.where(dx < 0, 3, jnp.where(dy > 0, 0, 1)))


def test_quick_start(precision):
    from parallax import State

    ns = run("building_an_environment")
    ns = run("quick_start", GridWorld=ns["GridWorld"], agent=_agent)
    state = ns["state"]
    assert isinstance(state, State)
    assert bool(state.done), "a goal-seeking agent reaches the goal within 200 steps"
    assert 2 <= int(state.step_count) <= 8


def test_protocol_fields(precision):
    import jax.numpy as jnp

    ns = run("building_an_environment")
    ns = run(
        "protocol_calls",
        "protocol_fields",
        env=ns["GridWorld"](),
        action=jnp.int32(2),
        jax=ns["jax"],
    )
    state = ns["state"]
    assert int(state.step_count) == 1
    assert state.observation.tolist()[:2] == [1.0, 0.0]
    assert bool(state.done) == bool(state.termination | state.truncation)


def test_wrappers_example(precision):
    import jax
    import jax.numpy as jnp

    grid = run("building_an_environment")
    ns = run(
        "wrappers",
        GridWorld=grid["GridWorld"],
        jax=jax,
        actions=jnp.full((128,), 2, dtype=jnp.int32),
        reset_key=jax.random.key(7),
    )
    env, state = ns["env"], ns["state"]
    assert env.num_envs == 128 and env.max_steps == 200
    assert state.observation.shape == (128, 4)
    assert state.step_count.tolist() == [1] * 128  # nothing was done, so nothing was reset


def test_multi_agent_examples(precision):
    import jax
    import jax.numpy as jnp

    race = run("building_a_marl_environment")
    env = race["Race"]()
    assert env.action_space.shape == (3,)
    state = env.reset(key=jax.random.key(0))
    run("marl_fields", state=state)
    # advance agent 0 to the finish line: it finishes on the 10th step
    for _ in range(9):
        state = env.step(state, jnp.array([1, 0, 1]))
    ns = run("marl_timing", env=env, state_0=state, actions_0=jnp.array([1, 1, 1]))
    state_1 = ns["state_1"]
    ns = run("marl_one_liners", state_t=state, state_t1=state_1)
    assert ns["valid"].tolist() == [True, True, True]
    assert ns["rewards"].tolist() == [1.0, 0.0, 1.0]  # the finishing step carries reward
    assert ns["bootstrap"].tolist() == [False, True, False]  # finished agents stop
    assert state_1.agents.observation.tolist() == [0.0, 1.0, 0.0]  # inactive slots are zero


def test_custom_state_fields(precision):
    import jax
    from jaxtyping import Array, Bool

    from parallax import TimeLimit, VmapWrapper
    from parallax.envs import compute_mask

    ns = run("building_an_environment")
    ns = run("masked_state", **{**ns, "Bool": Bool, "Array": Array})
    grid_state = ns["GridWorld"]().reset(key=jax.random.key(0))
    ns["state"] = ns["MaskedState"](
        **vars(grid_state), action_mask=compute_mask(grid_state.env_state)
    )
    ns = run("masked_gridworld", **{**ns, "compute_mask": compute_mask})
    masked_state_cls = ns["MaskedState"]
    env = VmapWrapper(TimeLimit(ns["MaskedGridWorld"](), max_steps=5), num_envs=4)
    state = jax.jit(env.step)(env.reset(key=jax.random.key(1)), jax.numpy.zeros(4, jax.numpy.int32))
    assert type(state) is masked_state_cls
    assert state.action_mask.shape == (4, 4)


def test_collecting_experience(precision):
    import jax.numpy as jnp

    ns = run("building_an_environment")
    ns = run("collecting_experience", GridWorld=ns["GridWorld"], jax=ns["jax"])
    experiences = ns["experiences"]
    assert experiences.observation.shape == (256, 128, 4)
    assert experiences.action.shape == (256, 128)
    ended = experiences.termination
    assert bool(ended.any()), "some random walks reach their goal in 256 steps"
    # terminal observations are kept: at an ending step the agent stands on its goal
    nxt = experiences.next_observation
    assert bool(jnp.all(jnp.where(ended[..., None], nxt[..., :2] == nxt[..., 2:], True)))
    # ... and the next step starts from the reset position
    obs = experiences.observation
    restarted = obs[1:][ended[:-1]]
    assert bool(jnp.all(restarted[:, :2] == 0.0))


def test_adapter_example_gymnax():
    from parallax import VmapWrapper

    ns = run("adapter_gymnax", VmapWrapper=VmapWrapper)
    assert ns["env"].num_envs == 128


def test_adapter_example_brax():
    from parallax import VmapWrapper

    ns = run("adapter_brax", VmapWrapper=VmapWrapper)
    assert ns["env"].num_envs == 128


def test_adapter_example_mjx():
    from parallax import VmapWrapper

    ns = run("adapter_mjx", VmapWrapper=VmapWrapper)
    assert ns["env"].num_envs == 128
