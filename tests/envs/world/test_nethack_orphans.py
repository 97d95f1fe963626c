"""The NetHack tasks' per-process data folders (issue 39): one left by a process that ended
without its exit handlers (a forked worker's ``os._exit``, SIGKILL) is removed by the next build;
a live owner's, one being made and a forked copy's exit never remove a folder in use.
Needs no nle: the folders are made and reaped without building a level."""

from __future__ import annotations

import os
import tempfile

from verigym.envs.world import nethack_tasks


def _fork(work) -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            work()
        finally:
            os._exit(0)  # as a multiprocessing fork worker leaves: no atexit handlers
    os.waitpid(pid, 0)


def _folders(root, task):
    return {p for p in root.iterdir() if p.name.startswith(f"verigym-nethack-{task}-")}


def test_orphaned_folders_are_removed_and_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = nethack_tasks._owned_folder("room")  # this live process holds it
    try:
        # a forked copy of this process exits: its inherited exit handler keeps its parent's folder
        _fork(lambda: nethack_tasks._remove_if_mine(mine, os.getppid()))
        assert os.path.isdir(mine)
        # a forked worker builds its own folder and leaves through os._exit
        _fork(lambda: nethack_tasks._owned_folder("corridor"))
        (orphan,) = _folders(tmp_path, "corridor")
        (orphan / "nhdat").write_bytes(b"x" * 1000)
        play = tmp_path / "nleabc123"  # nle's play folder of that worker, linked to its data
        play.mkdir()
        (play / "nhdat").symlink_to(orphan / "nhdat")
        other_play = tmp_path / "nlexyz789"  # nle's play folder of the stock game: not ours
        other_play.mkdir()
        being_made = tmp_path / "verigym-nethack-pickup-new1"  # no pid in its owner file yet
        being_made.mkdir()
        (being_made / ".owner").touch()
        removed = nethack_tasks.remove_orphans()
        assert sorted(removed) == sorted([str(orphan), str(play)])
        assert not orphan.exists() and not play.exists()
        assert os.path.isdir(mine) and other_play.is_dir() and being_made.is_dir()
        # held by this live process (and by any forked child of it, which inherits the lock)
        assert nethack_tasks._orphaned(mine) is False
    finally:
        os.close(nethack_tasks._owner_fds.pop())
    assert nethack_tasks._orphaned(mine) is True  # its owner let go: now it would be removed
