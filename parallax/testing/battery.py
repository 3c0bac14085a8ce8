"""The pytest battery: one star-import gives one named test per check.

In your test directory, name the factories in `conftest.py`:

```python
# conftest.py
import pytest
from my_package import MyEnv, MyReference


@pytest.fixture
def env_factory():
    return MyEnv  # any callable returning the env


@pytest.fixture
def reference_factory():  # optional: enables test_matches_reference
    return MyReference
```

and add a test module:

```python
# test_battery.py
from parallax.testing.battery import *  # noqa: F403
```

Tests: `test_contract`, `test_structure_stable`, `test_jit_vmap_scan_agree`,
`test_no_recompilation`, `test_determinism`, `test_batch_independence`,
`test_matches_reference` (skipped without `reference_factory`), `test_marl_rules`
(skipped for single-agent envs), `test_invariant_sweep` (skipped unless the env declares
`invariants`), `test_boundary_actions`, `test_auto_reset`, `test_scripted_policies`
(skipped unless the env declares `scripted_policies`), `test_structured_spaces` (skipped
unless a space is a Dict/Tuple `PyTreeSpace`), each run with `jax_enable_x64` off and on
(`[f32]`/`[x64]`, from the `battery_x64` fixture; redefine it after the import to choose).

Optional fixtures: `reference_factory` (None), `num_steps` (16), `batch_size` (8),
`check_options` (a dict, see `parallax.testing.Battery`: e.g. `{"deterministic": True}`)
and `reference_options` (a dict of `check_matches_reference` options, e.g.
`{"tolerance": Tolerance(ulp=2)}`). They are looked up by name, so defining them in
`conftest.py` or in the test module both work.

When `test_determinism`, `test_jit_vmap_scan_agree`, `test_batch_independence`,
`test_training_parity` or `test_matches_reference` fails, the diverging trajectory is
written (as `parallax check` writes it) to `DIR/<test module>.<check>.<f32|x64>.trajectory.npz`
and the failure message names it: `parallax replay FILE` re-runs it. DIR is the
`PARALLAX_TRAJECTORY_DIR` environment variable when set, else the optional `trajectory_dir`
fixture, else the test's pytest `tmp_path`. The file names the factory as
`module:qualname` when that imports back to it, else replay with `--env SPEC`.
A relative directory is taken from the working directory; the message gives the absolute path.

The checks of one env and precision share one session (compiled functions, rollouts), so
the battery costs little more than one `check_env`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import jax
import pytest

from ._battery import Battery, CheckSkipped
from ._errors import CheckError
from ._replay import failure_note, write_failure_trajectory
from ._targets import load_factory

TRAJECTORY_DIR_ENV = "PARALLAX_TRAJECTORY_DIR"
"""The environment variable naming the directory failing checks write trajectories to."""

__all__ = [
    "battery_x64",
    "test_auto_reset",
    "test_batch_independence",
    "test_boundary_actions",
    "test_contract",
    "test_determinism",
    "test_invariant_sweep",
    "test_jit_vmap_scan_agree",
    "test_marl_rules",
    "test_matches_reference",
    "test_no_recompilation",
    "test_scripted_policies",
    "test_structure_stable",
    "test_structured_spaces",
    "test_training_parity",
]

_BATTERIES: dict[tuple[Any, ...], Battery] = {}


@pytest.fixture(params=[False, True], ids=["f32", "x64"])
def battery_x64(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Run a battery test with `jax_enable_x64` off (`f32`) and on (`x64`)."""
    with jax.enable_x64(request.param):
        yield request.param


def _optional(request: pytest.FixtureRequest, name: str, default: Any) -> Any:
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        return default


def _battery(request: pytest.FixtureRequest, x64: bool) -> Battery:
    factory = _optional(request, "env_factory", None)
    if factory is None:
        pytest.fail(
            "parallax battery: define a fixture `env_factory` returning a callable that "
            "builds the env (e.g. in conftest.py: `@pytest.fixture\\ndef env_factory(): "
            "return MyEnv`)",
            pytrace=False,
        )
    reference = _optional(request, "reference_factory", None)
    num_steps = _optional(request, "num_steps", 16)
    batch_size = _optional(request, "batch_size", 8)
    options = dict(_optional(request, "check_options", {}) or {})
    ref_options = dict(_optional(request, "reference_options", {}) or {})
    key = (
        request.node.path,
        factory,
        reference,
        x64,
        num_steps,
        batch_size,
        repr(sorted(options.items())),
        repr(sorted(ref_options.items())),
    )
    if key not in _BATTERIES:
        _BATTERIES[key] = Battery(factory, reference, num_steps, batch_size, options, ref_options)
    return _BATTERIES[key]


def _factory_spec(factory: Any) -> str | None:
    """`module:qualname` of `factory` when it imports back to the same object, else None."""
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    spec = f"{module}:{qualname}"
    try:
        return spec if load_factory(spec) is factory else None
    except Exception:
        return None


def _trajectory_dir(request: pytest.FixtureRequest) -> str:
    directory = os.environ.get(TRAJECTORY_DIR_ENV) or _optional(request, "trajectory_dir", None)
    if not directory:
        return str(request.getfixturevalue("tmp_path"))
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    return directory


def _write_trajectory(
    request: pytest.FixtureRequest, battery: Battery, x64: bool, name: str, error: CheckError
) -> str:
    """Write the failed check's trajectory; the line for the failure message ("" if none)."""
    spec = _factory_spec(battery.env_factory)
    mode = "x64" if x64 else "f32"
    try:
        stem = os.path.join(_trajectory_dir(request), request.node.path.stem)
        written = write_failure_trajectory(
            name,
            battery.env_factory,
            stem,
            mode=mode,
            num_steps=battery.num_steps,
            env_spec=spec,
            note=f"pytest {request.node.nodeid}: {name} failed ({mode})",
            mismatch=getattr(error, "dump_path", None),
        )
    except Exception as failure:  # the env is broken already; keep its own failure
        return f"could not write a trajectory: {type(failure).__name__}: {failure}"
    return "" if written is None else failure_note(written, spec)


def _run(request: pytest.FixtureRequest, x64: bool, name: str) -> None:
    battery = _battery(request, x64)
    try:
        battery.run(name)
    except CheckSkipped as skip:
        pytest.skip(str(skip))
    except CheckError as error:
        line = _write_trajectory(request, battery, x64, name, error)
        if line:
            error.args = (f"{error.args[0] if error.args else ''}\n{line}", *error.args[1:])
        raise


def test_contract(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Spaces, reset state, observations/actions in space, reward, flags, step_count."""
    _run(request, battery_x64, "contract")


def test_structure_stable(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Same structure, shapes and dtypes across reset, step, lax.cond and jnp.where."""
    _run(request, battery_x64, "structure_stable")


def test_jit_vmap_scan_agree(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """jit, vmap and lax.scan rollouts agree with the eager rollout."""
    _run(request, battery_x64, "jit_vmap_scan_agree")


def test_no_recompilation(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """A jitted step is traced once; nothing compiles on later steps."""
    _run(request, battery_x64, "no_recompilation")


def test_determinism(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Same key, same trajectory; reset depends on the key alone; keys matter."""
    _run(request, battery_x64, "determinism")


def test_batch_independence(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Instance i alone and inside a batch give bit-identical trajectories."""
    _run(request, battery_x64, "batch_independence")


def test_matches_reference(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """The differential test against the reference implementation."""
    _run(request, battery_x64, "matches_reference")


def test_marl_rules(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """The six multi-agent rules (skipped for single-agent envs)."""
    _run(request, battery_x64, "marl_rules")


def test_training_parity(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Donated jit, vmap over seeds and shard_rollout reproduce the batched rollout bit for bit."""
    _run(request, battery_x64, "training_parity")


def test_invariant_sweep(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """The env's declared invariants hold over many envs, keys and steps (inside jit)."""
    _run(request, battery_x64, "invariant_sweep")


def test_boundary_actions(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Edge actions are valid; out-of-range actions act as the clipped action."""
    _run(request, battery_x64, "boundary_actions")


def test_auto_reset(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Under a batch auto-reset: terminal observation, outcome and fresh reset are right."""
    _run(request, battery_x64, "auto_reset")


def test_scripted_policies(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """The env's scripted policies produce their expected outcomes."""
    _run(request, battery_x64, "scripted_policies")


def test_structured_spaces(request: pytest.FixtureRequest, battery_x64: bool) -> None:
    """Dict/Tuple spaces round-trip through flatten/unflatten and the Gymnasium export."""
    _run(request, battery_x64, "structured_spaces")
