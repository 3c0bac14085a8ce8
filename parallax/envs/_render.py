"""Pixel helpers for the example environments' `render`: pure `jnp`, so a render is jit-able
and vmappable (`jax.vmap(env.render)(trajectory_states)` renders a whole episode at once)."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Bool, UInt8

WHITE = (255, 255, 255)
GRID = (200, 200, 200)
AGENT = (31, 119, 180)
GOAL = (44, 160, 44)
FINISH = (255, 221, 153)
AGENTS = ((31, 119, 180), (255, 127, 14), (214, 39, 40))  # one colour per Race agent


def canvas(height: int, width: int) -> UInt8[Array, "h w 3"]:
    """A white `uint8` image."""
    return jnp.full((height, width, 3), 255, dtype=jnp.uint8)


def paint(image: Array, mask: Bool[Array, "h w"], color: tuple[int, int, int]) -> Array:
    """`image` with the pixels of `mask` set to `color`."""
    return jnp.where(mask[..., None], jnp.asarray(color, dtype=jnp.uint8), image)


def cells(count: int, cell_pixels: int) -> tuple[Array, Array]:
    """For each pixel along an axis of `count` cells: its cell index, and whether it lies
    inside the cell's inner square (one pixel of grid line and one of margin excluded)."""
    pixel = jnp.arange(count * cell_pixels)
    offset = pixel % cell_pixels
    return pixel // cell_pixels, (offset >= 2) & (offset < cell_pixels - 1)


def grid_lines(count_y: int, count_x: int, cell_pixels: int) -> Bool[Array, "h w"]:
    """The one-pixel lines between cells."""
    rows = jnp.arange(count_y * cell_pixels) % cell_pixels == 0
    cols = jnp.arange(count_x * cell_pixels) % cell_pixels == 0
    return rows[:, None] | cols[None, :]


def check_cell_pixels(cell_pixels: object) -> int:
    """`cell_pixels` as an int of at least 4, or a `ValueError` naming it."""
    if isinstance(cell_pixels, bool) or not isinstance(cell_pixels, int) or cell_pixels < 4:
        raise ValueError(f"render: cell_pixels must be an int >= 4, got {cell_pixels!r}")
    return cell_pixels
