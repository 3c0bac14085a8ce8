"""Configuration of `make clients-sb3` (Stable-Baselines3 on the Gymnasium export).

`make clients-sb3` runs pytest with `--confcutdir=tests/clients_sb3` in `.venv-sb3`, so
`tests/conftest.py` is not loaded (its beartype import hook, its x64 fixture and its
compilation cache settings need the test extra). What this folder keeps of it: the strict
numerics every test of the main suite runs under, here around the Parallax env code that
the export jits (SB3 and torch never see JAX arrays, only the export's NumPy).

PyTorch runs on one CPU thread: the networks are two layers of 64 units, for which more
threads only contend with JAX on the 2-core machines CI runs on, and one thread keeps each
seed's run reproducible.
"""

from __future__ import annotations

import jax
import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _strict_jax():
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield
