"""Stored frames are read within bounds: a stored frame set is untrusted like a trajectory.

A few dozen bytes of PNG may declare gigapixels in its header, and a store may hold any number of
frame rows of any size; ``ResultsStore.frames`` counts and measures them in SQL and reads each PNG
header before anything is loaded or handed to a browser, and the viewer shows a refused frame set
as not shown, the rest of the episode's page and every other page still written.
"""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest

from tests.leaderboards.rows import episode_row, trajectory_doc
from verigym.cli import main
from verigym.leaderboards.store import MAX_FRAME_PIXEL_BYTES, MAX_FRAMES, ResultsStore
from verigym.leaderboards.suite import EVAL_SEED_START
from verigym.leaderboards.trajectories import Recorder, _png
from verigym.leaderboards.viewer import episode_filename

SEED = EVAL_SEED_START
DOC = trajectory_doc()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` RGBA pixels (its data: one empty row)."""
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
    return (
        b"\x89PNG\r\n\x1a\n"
        + header
        + _chunk(b"IDAT", zlib.compress(b"\0", 9))
        + _chunk(b"IEND", b"")
    )


HONEST = _png(np.zeros((4, 4, 3), np.uint8))
BAD_FRAMES = {
    "a gigapixel header": [(0, _png_declaring(1 << 16, 1 << 16))],
    "too many frames": [(step, HONEST) for step in range(MAX_FRAMES + 1)],
    "not a PNG": [(0, b"GIF89a" + bytes(40))],
}


def _store(tmp_path, frames_by_seed: list) -> ResultsStore:
    with ResultsStore(tmp_path) as store:
        for index, frames in enumerate(frames_by_seed):
            row = episode_row(seed=SEED + index, score=0.0, success=False, length=1)
            doc = zlib.compress(json.dumps({**DOC, "seed": SEED + index}).encode())
            store.add(row, doc, frames)
    return tmp_path


@pytest.mark.parametrize("name", BAD_FRAMES)
def test_a_stored_frame_set_past_the_bounds_is_not_shown_and_stops_no_other_page(
    tmp_path, capsys, name
):
    bomb = BAD_FRAMES["a gigapixel header"][0][1]
    assert len(bomb) < 128 and (1 << 32) > MAX_FRAME_PIXEL_BYTES, "a tiny blob declaring 16 GiB"
    out = _store(tmp_path, [BAD_FRAMES[name], [(0, HONEST), (1, HONEST)]])
    with ResultsStore(out, create=False) as store:
        with pytest.raises(ValueError, match="frame"):
            store.frames(episode_row(seed=SEED))
        assert store.frames(episode_row(seed=SEED + 1)) == [(0, HONEST), (1, HONEST)]
    code = main(["leaderboard", "--out", str(out)])
    assert code == 0, capsys.readouterr()
    bad = (out / "episodes" / episode_filename(episode_row(seed=SEED))).read_text()
    assert "frames are not shown" in bad and "<img" not in bad
    assert 'id="transcript"' in bad or "step 1" in bad, "the trajectory itself is still shown"
    assert bad.count("data:image/png") == 0 and len(bad) < 64 << 10
    good = (out / "episodes" / episode_filename(episode_row(seed=SEED + 1))).read_text()
    assert good.count("data:image/png") == 2 and "not shown" not in good


class _Painter:
    """Just enough env for a Recorder: ``render()`` paints a 4x4 RGB frame."""

    def render(self):
        return np.zeros((4, 4, 3), np.uint8)


def _recorder() -> Recorder:
    """A Recorder of a frame every step, ready for ``reset``."""
    return Recorder(
        _Painter(),
        None,
        env_id=DOC["env_id"],
        env_kwargs={},
        seed=SEED,
        text_view=False,
        frames_every=1,
    )


def test_the_recorder_keeps_within_the_bounds_so_an_honest_filmstrip_is_read(tmp_path, monkeypatch):
    """An honest long episode recorded every step keeps the first frames and the last, within
    ``MAX_FRAMES``, instead of writing more than ``ResultsStore.frames`` will read back."""
    from verigym.leaderboards import store as store_module

    monkeypatch.setattr(store_module, "MAX_FRAMES", 6)
    recorder = _recorder()
    recorder.reset("start", {})
    for step in range(1, 21):
        recorder.step(5, "x", 0.0, step == 20, False, {})
    _, frames = recorder.finish()
    assert [step for step, _ in frames] == [0, 1, 2, 3, 4, 20]
    with ResultsStore(tmp_path) as store:
        row = episode_row(seed=SEED, score=0.0, success=False, length=20)
        store.add(row, zlib.compress(json.dumps(DOC).encode()), frames)
        assert [step for step, _ in store.frames(row)] == [0, 1, 2, 3, 4, 20]

    monkeypatch.setattr(store_module, "MAX_FRAME_PIXEL_BYTES", 47)  # a 4x4 RGB frame is 48
    recorder = _recorder()
    recorder.reset("start", {})
    recorder.step(5, "x", 0.0, True, False, {})
    assert recorder.finish()[1] == []
