"""The notebooks in `notebooks/` run top to bottom and report what they should.

Each notebook is executed with nbclient in a fresh `python3` kernel (ipykernel) running this
interpreter (checked with a probe cell appended in memory), from the `notebooks/` folder, at
the small sizes the notebooks choose for a CPU. Its last cell, tagged `summary`, prints one
JSON line with the numbers it measured; the tests assert on them (the planted bug is caught,
the adapter follows gymnax step for step, PPO beats the random policy, ...).

The notebooks are stored without outputs (`notebooks/strip_outputs.py` strips them), each
with an "Open in Colab" badge and an install cell that is skipped when `parallax` imports.
"""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib
import sys
import time

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_output

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"
NAMES = ("quickstart", "validate_your_env", "adapters", "finance_ppo")
PROBE = "import sys\nprint('KERNEL_EXECUTABLE=' + sys.executable)"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _strip_module():
    return _script("strip_outputs")


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def _run(name: str) -> tuple[dict, str, float]:
    """Execute a notebook; return its summary, the kernel's executable and the seconds taken."""
    nb = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    nb.cells.append(new_code_cell(PROBE))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=600,
        allow_errors=False,
        resources={"metadata": {"path": str(FOLDER)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    summaries = [c for c in nb.cells if "summary" in c.metadata.get("tags", [])]
    assert len(summaries) == 1, f"{name}: expected one cell tagged 'summary'"
    lines = [line for line in _text(summaries[0]).splitlines() if line.startswith("{")]
    assert lines, f"{name}: the summary cell printed no JSON line: {_text(summaries[0])!r}"
    probe = _text(nb.cells[-1]).strip().removeprefix("KERNEL_EXECUTABLE=")
    return json.loads(lines[-1]), probe, seconds


def _summary(name: str) -> dict:
    summary, probe, seconds = _run(name)
    # the kernel ran this interpreter (the venv's), not whatever `python` is first on PATH
    assert pathlib.Path(probe).parent == pathlib.Path(sys.executable).parent, (
        probe,
        sys.executable,
    )
    print(f"{name}: {seconds:.1f} s")
    return summary


pytestmark = pytest.mark.xdist_group("notebooks")  # one kernel at a time on a 2-core machine


@pytest.mark.slow  # a whole notebook in its own kernel (`make test-slow`)
def test_quickstart_runs_and_plots_a_batch_of_finance_episodes():
    s = _summary("quickstart")
    assert s["steps_per_second"] > 0
    assert s["rendered_frames"] == 7  # the first state and six steps, drawn by env.render
    # 2048 envs, 100 steps, a 20-step time limit: at least five episode ends per env
    assert s["episodes_ended"] >= 5 * 2048
    assert s["equity_shape"] == [128, 32] and s["equity_finite"]
    # Avellaneda-Stoikov skews its quotes against the inventory; fixed quotes do not
    assert s["mean_abs_inventory_as"] < s["mean_abs_inventory_fixed"], s


@pytest.mark.slow  # a whole notebook in its own kernel (`make test-slow`)
def test_validate_your_env_catches_the_planted_bugs():
    s = _summary("validate_your_env")
    assert s["reference_steps_compared"] > 0
    assert s["slot_bug"]["caught"] and s["slot_bug"]["check"] == "check_matches_reference", s
    assert s["slot_bug"]["step"] >= 1 and s["slot_bug"]["field"], s
    assert s["key_bug"]["caught"] and s["key_bug"]["check"].startswith("check_env"), s
    assert s["paths_agree"], "the plotted reference and JAX paths are the same episode"


@pytest.mark.slow  # a whole notebook in its own kernel (`make test-slow`)
def test_adapters_notebook_matches_gymnax_and_exports_to_gymnasium():
    s = _summary("adapters")
    assert s["gymnax_same_trajectory"] and 1 <= s["gymnax_terminal_step"] < 200, s
    assert s["gymnax_episodes"] > 0
    assert s["brax_truncations"] >= 16  # 16 envs, 150 steps, episode_length 100
    assert s["mjx_rewards_finite"]
    assert s["vector_autoreset_mode"] == "NextStep"  # Gymnasium's default, not make_vec's
    assert s["gymnax_export_episodes"] == 10  # 100 steps of 10-step episodes, gymnax's count
    assert s["pettingzoo_finished"] == ["agent_0", "agent_1", "agent_2"]


@pytest.mark.slow  # a whole notebook in its own kernel (`make test-slow`)
def test_finance_ppo_small_run_beats_random_and_selling_at_once():
    s = _summary("finance_ppo")
    assert s["small"] and s["num_seeds"] >= 1
    assert s["mean_episode_reward"] > s["random_policy_reward"] + 300, s
    assert s["mean_episode_reward"] > s["sell_all_reward"], s
    assert s["last_return"] > s["first_return"], s  # the learning curve went up
    # LimitOrderBook-v0: PPO, the fixed-spread rule and a random policy on the same episodes
    policies = ("ppo", "fixed_spread", "random")
    episodes = {s[f"lob_{p}_episodes"] for p in policies}
    assert len(episodes) == 1 and episodes.pop() >= 32, s
    for p in policies:
        assert math.isfinite(s[f"lob_{p}_return"]), s
        # the inventory is bounded by the env's max_inventory (20 lots)
        assert 0.0 <= s[f"lob_{p}_abs_inventory"] <= 20.0, s
    assert s["lob_num_updates"] >= 16, s
    # quoting at the touch earns the spread; random market orders pay it
    assert s["lob_fixed_spread_return"] > s["lob_random_return"] + 5, s
    # over four training seeds PPO ended 7 to 10 ticks above random (it stops crossing the
    # spread): a broken MultiDiscrete head or update stays near the random policy
    assert s["lob_ppo_return"] > s["lob_random_return"] + 3, s
    # LimitOrderBookReplayExecution-v0 on the synthetic LOBSTER day: both baselines sell the
    # whole block, and selling it at once walks the bids (a worse shortfall than TWAP's,
    # -0.78 against -0.52 bps when written); a broken replay or accounting moves either
    assert s["replay_episodes"] >= 64 and s["replay_messages"] == 4000, s
    assert s["replay_twap_unsold"] == 0 and s["replay_immediate_unsold"] == 0, s
    assert -5.0 < s["replay_immediate_bps"] < s["replay_twap_bps"] - 0.1 < 0.0, s


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_stripped_with_badge_install_and_device_cells(name):
    nb = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert _strip_module().problems(nb) == [], f"run: python notebooks/strip_outputs.py {name}"
    sync = _script("sync_notebooks")
    source = sync.source_url()
    assert sync.colab_url(source, name) in nb.cells[0].source, "the first cell has the badge"
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    install = tags.index(["install"])
    assert tags[install + 1] == ["device"], "the device cell follows the install cell"
    assert f'@ git+{source}"' in nb.cells[install].source
    assert 'find_spec("parallax") is None' in nb.cells[install].source
    assert "jax.devices()" in nb.cells[install + 1].source
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_the_docs_site_shows_every_notebook_executed():
    render = _script("render_docs")
    assert render.main(["--check"]) == 0, "run: python notebooks/render_docs.py"
    for name in NAMES:
        nb = nbformat.read(ROOT / "docs" / "notebooks" / f"{name}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"{name}: a cell was not executed"
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"{name}: no plot in the executed copy"


def test_generated_cells_match_pyproject():
    assert _script("sync_notebooks").main(["--check"]) == 0, (
        "run: python notebooks/sync_notebooks.py"
    )


def test_generated_cells_follow_the_source_address():
    sync = _script("sync_notebooks")
    nb = nbformat.read(FOLDER / "quickstart.ipynb", as_version=4)
    moved = sync.synced(nb, "quickstart", "https://github.com/someone/fork")
    badge = (
        "https://colab.research.google.com/github/someone/fork/blob/main/notebooks/quickstart.ipynb"
    )
    assert badge in moved.cells[0].source
    assert "@ git+https://github.com/someone/fork" in "".join(c.source for c in moved.cells)
    assert "parallax-rl/parallax" not in "".join(c.source for c in moved.cells)
    with pytest.raises(ValueError, match="must be a GitHub repository"):
        sync.synced(nb, "quickstart", "https://example.org/parallax")


def test_strip_outputs_strips_and_checks(tmp_path):
    strip_outputs = _strip_module()
    nb = nbformat.v4.new_notebook(cells=[new_code_cell("print(1)"), new_code_cell("2")])
    nb.cells[0].outputs = [new_output("stream", name="stdout", text="1\n")]
    nb.cells[0].execution_count = 1
    nb.cells[1].metadata["execution"] = {"iopub.status.busy": "2025-01-01T00:00:00"}
    path = tmp_path / "dirty.ipynb"
    nbformat.write(nb, path)
    assert strip_outputs.main(["--check", str(path)]) == 1
    assert strip_outputs.main([str(path)]) == 0
    assert strip_outputs.main(["--check", str(path)]) == 0
    clean = nbformat.read(path, as_version=4)
    assert [c.source for c in clean.cells] == ["print(1)", "2"]
    assert strip_outputs.problems(clean) == []
