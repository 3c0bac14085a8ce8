"""Every Python example of the parallax-rl 0.4.0 documentation runs verbatim.

The examples are copied byte for byte from `../shared/seeds/002_917533f449243c0d.txt` (a test
checks that each one still appears there verbatim) and executed in document order in one
namespace, as a reader would paste them. Where an example needs a name the document leaves to
the reader (`agent`, `action`, `actions`, `reset_key`, `compute_mask`, `state_t`, ...), the
smallest honest stand-in is defined next to it. The examples are written for JAX's standard
dtype promotion (the Race example multiplies an int action by a bool mask), so these tests are
marked `standard_promotion`; our shipped envs pass the strict configuration.
"""

from __future__ import annotations

import pathlib

import pytest

SEED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "seeds" / "002_917533f449243c0d.txt"

EXAMPLES: dict[str, str] = {}

EXAMPLES["quick_start"] = r"""import jax

env = GridWorld()
state = env.reset(key=jax.random.key(0))

for _ in range(200):
    action = agent(state.observation)
    state = env.step(state, action)

    if state.done:
        break
"""

EXAMPLES["protocol_calls"] = r"""state = env.reset(key=jax.random.key(0))
state = env.step(state, action)
"""

EXAMPLES["protocol_fields"] = r"""state.env_state    # raw environment data (any pytree)
state.observation  # what the agent sees
state.reward       # scalar reward
state.termination  # episode ended naturally
state.truncation   # episode was cut short
state.done         # termination | truncation
state.info         # extra metadata (dict)
state.step_count   # current timestep
state.key          # JAX RNG key
"""

EXAMPLES["building_an_environment"] = r"""import jax
import jax.numpy as jnp
from typing import NamedTuple
from jaxtyping import Array, PRNGKeyArray
from parallax import Space, State, spaces


class GridState(NamedTuple):
    pos: Array
    goal: Array


class GridWorld:
    action_space: Space = spaces.Discrete(4)
    observation_space: Space = spaces.Box(0.0, 4.0, (4,))

    def reset(self, *, key: PRNGKeyArray) -> State:
        key, goal_key = jax.random.split(key)
        pos = jnp.zeros(2, dtype=jnp.float32)
        goal = jax.random.randint(goal_key, (2,), minval=1, maxval=5).astype(jnp.float32)
        return State(
            env_state=GridState(pos=pos, goal=goal),
            observation=jnp.concatenate([pos, goal]),
            reward=jnp.float32(0.0),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={},
            step_count=jnp.int32(0),
            key=key,
        )

    def step(self, state: State, action: Array) -> State:
        moves = jnp.array([[0, 1], [0, -1], [1, 0], [-1, 0]], dtype=jnp.float32)
        pos = jnp.clip(state.env_state.pos + moves[action], 0.0, 4.0)
        goal = state.env_state.goal
        return State(
            env_state=GridState(pos=pos, goal=goal),
            observation=jnp.concatenate([pos, goal]),
            reward=jnp.exp(-jnp.linalg.norm(pos - goal)),
            termination=jnp.all(pos == goal),
            truncation=jnp.bool_(False),
            info={},
            step_count=state.step_count + 1,
            key=state.key,
        )
"""

EXAMPLES["wrappers"] = r"""from parallax import TimeLimit, VmapWrapper

env = VmapWrapper(TimeLimit(GridWorld(), max_steps=200), num_envs=128)
state = env.reset(key=jax.random.key(0))
state = env.step(state, actions)

# Terminal observations are still in state, reset only the finished envs
state = env.reset(key=reset_key, state=state, done=state.done)
"""

EXAMPLES["marl_fields"] = r"""state.env_state           # raw environment data (any pytree)
state.termination         # the MDP ended naturally
state.truncation          # the MDP was cut short
state.done                # termination | truncation

state.agents.observation  # per-agent observations, leading dim num_agents
state.agents.active       # which agents act on the next step
state.agents.reward       # per-agent rewards, zeros in inactive slots
state.agents.action_mask  # per-agent legal actions, or None
state.global_observation  # full-state view for centralised critics, or None
"""

EXAMPLES["marl_timing"] = r"""state_1 = env.step(state_0, actions_0)
# state_0.agents.active  marks whose actions in actions_0 are used
# state_1.agents.reward  pairs with state_0.agents.active
"""

EXAMPLES[
    "marl_one_liners"
] = r"""valid = state_t.agents.active                               # transition is real, use it in the loss
bootstrap = state_t1.agents.active & ~state_t1.termination  # died or terminated, no bootstrap
rewards = state_t1.agents.reward                            # pairs with state_t.agents.active
"""

EXAMPLES["building_a_marl_environment"] = r"""import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray
from parallax import Agents, MARLState, Space, spaces, stack_space


class Race:
    num_agents = 3
    action_space: Space = stack_space(spaces.Discrete(2), num_agents)
    observation_space: Space = stack_space(spaces.Box(0.0, 10.0, ()), num_agents)

    def reset(self, *, key: PRNGKeyArray) -> MARLState:
        positions = jnp.zeros(self.num_agents)
        return MARLState(
            env_state=positions,
            agents=Agents(
                observation=positions,
                active=jnp.ones(self.num_agents, dtype=bool),
                reward=jnp.zeros(self.num_agents),
            ),
            termination=jnp.bool_(False),
            truncation=jnp.bool_(False),
            info={},
            step_count=jnp.int32(0),
            key=key,
        )

    def step(self, state: MARLState, action: Array) -> MARLState:
        acted = state.agents.active
        positions = state.env_state + action * acted       # inactive actions are ignored
        active = positions < 10.0                          # finished agents become inactive
        finished_now = acted & ~active
        return MARLState(
            env_state=positions,
            agents=Agents(
                observation=jnp.where(active, positions, 0.0),  # zeros for inactive agents
                active=active,
                reward=jnp.where(finished_now, 1.0, 0.0),       # the finishing step carries reward
            ),
            termination=~active.any(),
            truncation=jnp.bool_(False),
            info={},
            step_count=state.step_count + 1,
            key=state.key,
        )
"""

EXAMPLES["adapter_gymnax"] = r"""import gymnax
from parallax.adapters import GymnaxAdapter

env = GymnaxAdapter(gymnax.make("CartPole-v1")[0])
env = VmapWrapper(env, num_envs=128)
"""

EXAMPLES["adapter_brax"] = r"""import brax.envs
from parallax.adapters import BraxAdapter

env = BraxAdapter(brax.envs.get_environment("ant"))
env = VmapWrapper(env, num_envs=128)
"""

EXAMPLES["adapter_mjx"] = r"""from mujoco_playground import registry
from parallax.adapters import MJXAdapter

env = MJXAdapter(registry.load("HumanoidWalk", config_overrides={"impl": "jax"}))
env = VmapWrapper(env, num_envs=128)
"""

EXAMPLES["masked_state"] = r"""from dataclasses import dataclass

@jax.tree_util.register_dataclass
@dataclass
class MaskedState(State):
    action_mask: Bool[Array, "4"]
"""

EXAMPLES["masked_gridworld"] = r"""class MaskedGridWorld(GridWorld):
    def reset(self, *, key: PRNGKeyArray) -> MaskedState:
        state = super().reset(key=key)
        return MaskedState(**vars(state), action_mask=compute_mask(state.env_state))

    def step(self, state: MaskedState, action: Array) -> MaskedState:
        state = super().step(state, action)
        return MaskedState(**vars(state), action_mask=compute_mask(state.env_state))

state.action_mask  # fully typed, works with jit/vmap/wrappers
"""

EXAMPLES["collecting_experience"] = r"""from dataclasses import dataclass
from parallax import VmapWrapper

@jax.tree_util.register_dataclass
@dataclass
class Experience:
    observation: jax.Array
    next_observation: jax.Array
    action: jax.Array
    reward: jax.Array
    termination: jax.Array

num_envs = 128
env = VmapWrapper(GridWorld(), num_envs=num_envs)

key = jax.random.key(0)
key, reset_key = jax.random.split(key)
state = env.reset(key=reset_key)
obs = state.observation

def step_fn(carry, _):
    state, obs, key = carry
    key, action_key, reset_key = jax.random.split(key, 3)
    action = jax.vmap(env.action_space.sample)(key=jax.random.split(action_key, num_envs))

    state = env.step(state, action)
    next_obs = state.observation

    experience = Experience(
        observation=obs,
        next_observation=next_obs,
        action=action,
        reward=state.reward,
        termination=state.termination,
    )

    # Reset environments where done, terminal obs captured above
    state = env.reset(key=reset_key, state=state, done=state.done)
    obs = state.observation

    return (state, obs, key), experience

(state, obs, key), experiences = jax.lax.scan(step_fn, (state, obs, key), None, length=256)
"""

pytestmark = pytest.mark.standard_promotion


def run(*names: str, **stand_ins: object) -> dict[str, object]:
    """Execute the named examples in order in one namespace seeded with `stand_ins`."""
    namespace: dict[str, object] = {**stand_ins, "__name__": "docs_example"}
    for name in names:
        exec(compile(EXAMPLES[name], f"<docs:{name}>", "exec", dont_inherit=True), namespace)
    return namespace


def test_examples_are_verbatim_copies_of_the_documentation():
    if not SEED.exists():
        pytest.fail(f"the documentation seed is missing at {SEED}")
    text = SEED.read_text()
    for name, example in EXAMPLES.items():
        assert example in text + "\n", f"example {name!r} differs from the documentation"


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
