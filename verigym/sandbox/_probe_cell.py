"""Sandbox-side code of ``verigym doctor``'s sandbox probe (``verigym.sandbox.doctor_probe``).

The doctor sends this file's source to a sandbox as one cell and calls :func:`probe_line` there;
the host never runs it. Standard library only.
"""

from __future__ import annotations

import os


def creatable(place: str) -> int:
    """1 when a file can be created in the folder ``place`` (and is removed again), else 0."""
    path = os.path.join(place, ".probe")
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY))
    except OSError:
        return 0
    os.unlink(path)
    return 1


def probe_line() -> str:
    """``"<uid> <root writable> <dev writable> <tmp MiB> <shm MiB>"`` as seen inside the sandbox."""
    sizes = []
    for place in ("/tmp", "/dev/shm"):
        stat = os.statvfs(place)
        sizes.append(stat.f_blocks * stat.f_frsize >> 20)
    return " ".join(map(str, (os.getuid(), creatable("/"), creatable("/dev"), *sizes)))
