"""A real multi-process run: JAX's multi-controller runtime, two processes on this machine.

The module fixture starts this file twice as a script (`--child 0` and `--child 1`). Each
child calls `jax.distributed.initialize` (coordinator on 127.0.0.1 at a free port, CPU
collectives over gloo), owns 2 fake CPU devices, and so sees a global mesh of 4 devices
of which 2 are its own. On that mesh the children run

- `shard_rollout` of a finance env (a reset on the mesh, then a continuation from the
  returned global state, and one from a host-built state placed with `shard_batch`), and
- one data-parallel PPO update with `parallax.train`'s own `Learner.step`: each process
  contributes half of the batch (`jax.make_array_from_process_local_data`), the parameters
  are replicated, and XLA all-reduces the gradients across the processes,

gather the global results (one jitted program whose output is replicated) and save them
in the test's temporary folder. The parent (this pytest process) computes the same rollout and
update in one process without sharding and compares: ints, bools and keys bit for bit,
floats with the suite's transform tolerance (an all-reduce sums in another order).

One pair of processes runs both scenarios (the module fixture `run`; each test reads its
results). What is built on the host and is the same in every process (the reset state placed
with `shard_batch`, the PPO parameters, optimiser state and batch) the parent builds once and
hands to the children in a file, so that neither child compiles it again. The sizes are
small but still show what is proved: every device holds envs and rows of the batch, and
episodes end (and auto-reset) inside the first rollout.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import parallax

ENV_ID = "OptimalExecution-v0"
NUM_ENVS = 8  # 2 envs on each of the 4 devices
NUM_STEPS = 8
MORE_STEPS = 4  # the continuation from the returned (global) state
HORIZON = 5  # the env's own episode length: episodes end (and auto-reset) inside the run
BATCH = 16  # PPO transitions: 8 per process, 4 per device
OBS_SIZE = 6
NUM_PROCESSES = 2
DEVICES_PER_PROCESS = 2
# A guard against hangs, not a benchmark: on an idle 2-core machine the pair finishes in
# well under a minute, but 8 test processes sharing 2 cores can stretch that several times.
TIMEOUT_S = 240.0


# -- shared by the children and the parent ------------------------------------------------------------
def make_env() -> Any:
    return parallax.make_vec(ENV_ID, NUM_ENVS, n_steps=HORIZON)


def policy(key: jax.Array, state: Any) -> jax.Array:
    """Sell a random fraction, more when little time is left (reads the batched state)."""
    noise = jax.random.uniform(key, (NUM_ENVS, 1), jnp.float32)
    steps = state.step_count.astype(jnp.float32).reshape(NUM_ENVS, 1)
    return jnp.clip(noise * 0.3 + steps / HORIZON, 0.0, 1.0)


def ppo_config() -> Any:
    from parallax import train

    return train.preset(ENV_ID, hidden=16)


def ppo_inputs(learner: Any) -> tuple[Any, Any, dict[str, jax.Array]]:
    """Parameters, optimiser state and a full batch, the same in every process."""
    from parallax import train

    def make(key: jax.Array) -> tuple[Any, Any, dict[str, jax.Array]]:
        keys = jax.random.split(key, 6)
        params = train.init_params(keys[0], OBS_SIZE, learner.head, learner.config.hidden)
        obs = jax.random.normal(keys[1], (BATCH, OBS_SIZE), jnp.float32)
        out = train.actor(params, obs)
        u = learner.head.sample(keys[2], out, params["log_std"])
        log_prob = learner.head.log_prob(out, params["log_std"], u)
        value = train.critic(params, obs)
        advantage = jax.random.normal(keys[3], (BATCH,), jnp.float32)
        batch = {
            "obs": obs,
            "u": u,
            # an older acting policy: ratios away from 1, some of them clipped
            "log_prob": log_prob + 0.3 * jax.random.normal(keys[4], (BATCH,), jnp.float32),
            "value": value + 0.3 * jax.random.normal(keys[5], (BATCH,), jnp.float32),
            "advantage": advantage,
            "target": value + advantage,
        }
        return params, learner.optimizer.init(params), batch

    return jax.jit(make)(jax.random.key(7))


def update_and_grads(learner: Any, params: Any, opt_state: Any, batch: dict[str, jax.Array]):
    """`Learner.step` on `batch`, and the gradients it applied (before clipping)."""
    grads = jax.grad(lambda p: learner.loss(p, batch)[0])(params)
    return learner.step(params, opt_state, batch), grads


def flat(tree: Any) -> dict[str, np.ndarray]:
    """`{path: array}` of a pytree, key arrays as their raw data."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out[jax.tree_util.keystr(path)] = np.asarray(leaf)
    return out


def host_inputs(learner: Any) -> tuple[Any, tuple[Any, Any, dict[str, jax.Array]]]:
    """What every process builds on the host alike: a reset state and the PPO inputs."""
    return make_env().reset(key=jax.random.key(3)), ppo_inputs(learner)


def unflat(arrays: Any, like: Any) -> Any:
    """The inverse of `flat`: the pytree `like` (e.g. from `jax.eval_shape`) with the values
    of `arrays`, key arrays rebuilt from their raw data."""
    leaves = []
    for path, spec in jax.tree_util.tree_flatten_with_path(like)[0]:
        value = arrays[jax.tree_util.keystr(path)]
        if jnp.issubdtype(spec.dtype, jax.dtypes.prng_key):
            value = jax.random.wrap_key_data(value)
        assert value.shape == spec.shape and value.dtype == spec.dtype, (path, value, spec)
        leaves.append(value)
    return jax.tree.unflatten(jax.tree.structure(like), leaves)


# -- the child: one process of the distributed run ----------------------------------------------------
def child(process_id: int, port: int, out_dir: pathlib.Path) -> None:
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from parallax import train

    start = time.monotonic()

    def log(what: str) -> None:  # progress, for the parent's failure message
        print(f"[process {process_id}] {time.monotonic() - start:6.1f} s: {what}", flush=True)

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_numpy_dtype_promotion", "strict")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=NUM_PROCESSES,
        process_id=process_id,
        coordinator_bind_address=f"127.0.0.1:{port}",
        initialization_timeout=40,
        heartbeat_timeout_seconds=20,
        shutdown_timeout_seconds=20,
    )
    log("jax.distributed initialized")
    facts: dict[str, Any] = {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "collectives": jax.config.jax_cpu_collectives_implementation,
    }
    mesh = parallax.batch_mesh()  # every device of both processes
    replicated = NamedSharding(mesh, P())

    @functools.partial(jax.jit, out_shardings=replicated)
    def _replicate(tree: Any) -> Any:
        return jax.tree.map(
            lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x,
            tree,
        )

    def gather(tree: Any) -> Any:
        """The global value of every leaf, on every process: one all-gather program."""
        return jax.tree.map(lambda x: np.asarray(x.addressable_data(0)), _replicate(tree))

    # what the parent built on the host (the same values every process would build)
    learner = train.make_learner(ppo_config())
    host_state, (params, opt_state, batch) = unflat(
        np.load(out_dir / "inputs.npz"), jax.eval_shape(lambda: host_inputs(learner))
    )

    # 1. the sharded rollout, then a continuation from the global state it returned
    env = make_env()
    state, traj = parallax.shard_rollout(env, policy, jax.random.key(0), NUM_STEPS, mesh=mesh)
    state2, traj2 = parallax.shard_rollout(
        env, policy, jax.random.key(1), MORE_STEPS, state=state, mesh=mesh
    )
    # a state built on the host (the same on every process) placed with `shard_batch`
    placed = parallax.shard_batch(host_state, mesh)
    facts["placed_fully_addressable"] = placed.observation.is_fully_addressable
    state3, traj3 = parallax.shard_rollout(
        env, policy, jax.random.key(1), MORE_STEPS, state=placed, mesh=mesh
    )
    log("rollouts done")
    facts["rollout_devices"] = len(traj.reward.sharding.device_set)
    facts["rollout_fully_addressable"] = traj.reward.is_fully_addressable
    facts["rollout_local_shapes"] = sorted(
        list(s.data.shape) for s in traj.reward.addressable_shards
    )
    gathered = gather((traj, state2, traj2, state3, traj3))
    np.savez(out_dir / f"rollout_{process_id}.npz", **flat(gathered))
    log("rollout gathered and saved")

    # 2. one data-parallel PPO update: this process holds half the batch
    half = BATCH // NUM_PROCESSES
    rows = slice(process_id * half, (process_id + 1) * half)
    split = NamedSharding(mesh, P("batch"))
    global_batch = {
        name: jax.make_array_from_process_local_data(
            split, np.asarray(x)[rows], (BATCH, *x.shape[1:])
        )
        for name, x in batch.items()
    }
    params, opt_state = multihost_utils.host_local_array_to_global_array(
        (params, opt_state), mesh, P()
    )  # replicated: every process holds the same values
    log("batch and parameters placed")
    update = (
        jax.jit(functools.partial(update_and_grads, learner), out_shardings=replicated)
        .lower(params, opt_state, global_batch)
        .compile()
    )
    facts["update_has_all_reduce"] = "all-reduce" in (update.as_text() or "")
    (new_params, new_opt_state, loss), grads = update(params, opt_state, global_batch)
    log("update done")
    facts["batch_local_rows"] = sorted(
        s.data.shape[0] for s in global_batch["obs"].addressable_shards
    )
    result = gather((new_params, new_opt_state, loss, grads))
    np.savez(out_dir / f"ppo_{process_id}.npz", **flat(result))
    (out_dir / f"facts_{process_id}.json").write_text(json.dumps(facts))
    log("update gathered and saved")


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    child(int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
    sys.exit(0)


# -- the parent: pytest -----------------------------------------------------------------------------
import pytest  # noqa: E402

from parallax.testing import EXACT, TRANSFORM_TOLERANCE, Tolerance  # noqa: E402

pytestmark = [
    pytest.mark.xdist_group("multihost"),  # one worker runs every test here on one pair
    pytest.mark.slow,  # two spawned processes, about half a minute of CPU (`make test-slow`)
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    flags = [
        f
        for f in env.get("XLA_FLAGS", "").split()
        if not f.startswith("--xla_force_host_platform_device_count")
    ]
    flags.append(f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS}")
    env["XLA_FLAGS"] = " ".join(flags)
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("JAX_ENABLE_X64", None)
    return env


def _logs(out: pathlib.Path) -> str:
    parts = []
    for i in range(NUM_PROCESSES):
        log = out / f"child_{i}.log"
        text = log.read_text(errors="replace") if log.exists() else "(no output)"
        parts.append(f"--- process {i} (stdout+stderr, last 4000 chars) ---\n{text[-4000:]}")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def learner() -> Any:
    from parallax import train

    return train.make_learner(ppo_config())


@pytest.fixture(scope="module")
def inputs(learner: Any) -> tuple[Any, tuple[Any, Any, dict[str, jax.Array]]]:
    """The host-built inputs, computed once here and handed to both children."""
    return host_inputs(learner)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, inputs: Any) -> dict[str, Any]:
    """Start both children, wait for them (at most TIMEOUT_S), load what they wrote."""
    out = tmp_path_factory.mktemp("multihost")
    np.savez(out / "inputs.npz", **flat(inputs))
    port = _free_port()
    procs: list[subprocess.Popen[bytes]] = []
    start = time.monotonic()
    with contextlib.ExitStack() as files:
        try:
            for i in range(NUM_PROCESSES):
                # a file, not a pipe: a child that writes much never blocks on a full pipe
                log = files.enter_context(open(out / f"child_{i}.log", "wb"))
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-P", __file__, "--child", str(i), str(port), str(out)],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=_child_env(),
                        start_new_session=True,  # its own process group, killed as one below
                    )
                )
            # wait for both; when one fails, stop at once (the other would wait for it)
            while any(proc.poll() is None for proc in procs):
                if any(proc.poll() not in (None, 0) for proc in procs):
                    break
                if time.monotonic() - start > TIMEOUT_S:
                    pytest.fail(
                        f"the two-process run did not finish in {TIMEOUT_S:.0f} s "
                        f"(coordinator 127.0.0.1:{port})\n{_logs(out)}"
                    )
                time.sleep(0.2)
        finally:
            for proc in procs:  # no process outlives the test, whatever happened
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    codes = [proc.returncode for proc in procs]
    if codes != [0] * NUM_PROCESSES:
        pytest.fail(
            f"a child process failed: exit codes {codes} (-9: stopped by this test once the "
            f"other had failed)\n{_logs(out)}"
        )
    return {
        "facts": [json.loads((out / f"facts_{i}.json").read_text()) for i in range(2)],
        "rollout": [dict(np.load(out / f"rollout_{i}.npz")) for i in range(2)],
        "ppo": [dict(np.load(out / f"ppo_{i}.npz")) for i in range(2)],
    }


def _assert_matches(
    got: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    what: str,
    tolerance: Tolerance = TRANSFORM_TOLERANCE,
) -> None:
    assert sorted(got) == sorted(expected), f"{what}: different leaves"
    for name, want in expected.items():
        have = got[name]
        assert have.shape == want.shape and have.dtype == want.dtype, (
            f"{what} {name}: {have.shape} {have.dtype} != {want.shape} {want.dtype}"
        )
        close = tolerance.close(name, have, want)
        assert bool(np.all(close)), (
            f"{what} {name}: {int(np.size(close) - np.sum(close))} of {np.size(close)} "
            f"elements differ ({tolerance.describe(name)} for floats, exact "
            f"otherwise); max |diff| "
            f"{np.max(np.abs(have.astype(np.float64) - want.astype(np.float64)))}"
        )


def test_two_processes_form_one_mesh_of_four_devices(run):
    for i, facts in enumerate(run["facts"]):
        assert facts["process_index"] == i
        assert facts["process_count"] == NUM_PROCESSES
        assert facts["device_count"] == NUM_PROCESSES * DEVICES_PER_PROCESS
        assert facts["local_device_count"] == DEVICES_PER_PROCESS
        assert facts["collectives"] == "gloo"
        # the trajectory spans all 4 devices; each process holds 2 envs on each of its own 2
        assert not facts["placed_fully_addressable"]
        assert facts["rollout_devices"] == 4 and not facts["rollout_fully_addressable"]
        assert facts["rollout_local_shapes"] == [[NUM_STEPS, 2], [NUM_STEPS, 2]]
        assert facts["batch_local_rows"] == [BATCH // 4, BATCH // 4]


def test_sharded_rollout_over_two_processes_equals_the_unsharded_rollout(run, inputs):
    env = make_env()
    go = jax.jit(parallax.rollout, static_argnums=(0, 1, 3))
    state, traj = go(env, policy, jax.random.key(0), NUM_STEPS)
    state2, traj2 = parallax.rollout(env, policy, jax.random.key(1), MORE_STEPS, state=state)
    host_state = inputs[0]  # env.reset(key=jax.random.key(3)), as the children placed it
    state3, traj3 = parallax.rollout(env, policy, jax.random.key(1), MORE_STEPS, state=host_state)
    expected = flat((traj, state2, traj2, state3, traj3))
    assert bool(traj.done.any()), "episodes must end (and auto-reset) inside the run"
    # both processes gathered the same global arrays
    _assert_matches(run["rollout"][1], run["rollout"][0], "process 1 vs process 0", EXACT)
    for i in range(NUM_PROCESSES):
        _assert_matches(run["rollout"][i], expected, f"process {i} vs one process")


def test_data_parallel_ppo_update_over_two_processes_equals_the_full_batch_update(
    run, learner, inputs
):
    params, opt_state, batch = inputs[1]
    (new_params, new_opt_state, loss), grads = jax.jit(
        functools.partial(update_and_grads, learner)
    )(params, opt_state, batch)
    expected = flat((new_params, new_opt_state, loss, grads))
    for i, facts in enumerate(run["facts"]):
        assert facts["update_has_all_reduce"], f"process {i}: no all-reduce in the update"
    # every process applied the same all-reduced update
    _assert_matches(run["ppo"][1], run["ppo"][0], "process 1 vs process 0", EXACT)
    for i in range(NUM_PROCESSES):
        _assert_matches(run["ppo"][i], expected, f"process {i} vs one process")
    # the update did something: the parameters moved
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), new_params, params)
    assert all(jax.tree.leaves(moved))
