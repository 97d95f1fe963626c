"""How the MiniWoB++ oracles read what a page draws, without a browser: count-sides' polygon fit
on drawn polygons, click-checkboxes-soft's synonym groups from the installed page, and
find-greatest's card places on a drawn screenshot (issue 38, item 6). The oracles' 100-seed runs
in a browser are ``test_oracle_solves_99_of_100_seeds`` (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from verigym.envs.gui.miniwob import oracles


def _polygon(sides: int, rotation: float, size: float = 35.0) -> np.ndarray:
    """A 100 x 150 canvas with the regular polygon count-sides draws: vertices ``size`` px from
    the centre, a 3-px dark outline."""
    angles = rotation + 2 * np.pi * np.arange(sides + 1) / sides
    xs, ys = 75 + size * np.cos(angles), 50 + size * np.sin(angles)
    t = np.linspace(0, 1, 200)[:, None]
    px = np.rint(xs[:-1] + t * (xs[1:] - xs[:-1])).astype(int).ravel()
    py = np.rint(ys[:-1] + t * (ys[1:] - ys[:-1])).astype(int).ravel()
    dark = np.zeros((100, 150), dtype=bool)
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            dark[py + dy, px + dx] = True
    return dark


def test_count_sides_fits_the_drawn_polygon_at_any_rotation():
    for sides, rotation in ((3, 0.37), (6, 2.1), (7, 0.9)):  # 6 and 7 differ least
        assert oracles._polygon_sides(_polygon(sides, rotation), 75, 50) == sides


def test_click_checkboxes_soft_reads_the_pages_own_synonym_groups():
    pytest.importorskip("miniwob")
    groups = oracles._synonyms()
    assert groups["bunny"] == groups["rabbit"] == groups["rabbits"]
    assert groups["TVs"] == groups["television"]
    assert groups["stop"] != groups["rabbit"]


def test_find_greatest_finds_the_three_face_down_cards_on_the_screenshot():
    class Page:
        _screenshot = np.full((210, 160, 3), 255, dtype=np.uint8)

    for left in (8, 60, 112):  # three red cards, 40 px wide, white stripes across them
        Page._screenshot[67:127, left : left + 40] = (234, 42, 58)
        Page._screenshot[67:127:6, left : left + 40] = (255, 255, 255)
    assert oracles._card_centres(Page, 52, 140) == [27.5, 79.5, 131.5]
    Page._screenshot[67:127, 60:100] = 255  # the middle one turned: white with a number
    assert oracles._card_centres(Page, 52, 140) == [27.5, 131.5]
