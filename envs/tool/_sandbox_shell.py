"""The code that runs inside a workspace's sandbox (stdlib only, Python 3.9+).

The parent never calls these functions in its own process, except :func:`_vg_snapshot`, which
:func:`verigym.envs.tool.terminal.core.host_snapshot` runs on a stopped sandbox's tree. The file's
text (:data:`verigym.envs.tool.workspace.SANDBOX_SOURCE`) is sent to a
:class:`verigym.sandbox.PythonSandbox` as one cell, as RepoFix sends ``repofix/_runner.py``; its
functions are then called with ``PythonSandbox.call``, so what they answer reaches the parent as
type-checked JSON. Every name the cell binds that another cell could also use starts with
``_vg``: RepoFix loads its runner into the same notebook.

* ``_vgw_*``: the :class:`~verigym.envs.tool.workspace.Workspace` tools (``/tmp/work`` tree, shell
  with merged and capped output, text files).
* ``_vg_snapshot``, ``_vg_fresh_snapshot``: Terminal's full tree (kinds, modes, bytes) under caps,
  never following a link; the second runs the first in a new ``python -I -S``.
* ``_vg_write_files``, ``_vg_run``: Terminal's files with modes, and the checker's shell run.

Run as a script (``python -I -S -c <this file> --vg-snapshot ARGS`` or ``--vg-write-files ARGS``)
it does one of those jobs in a new interpreter; that is how :func:`_vg_fresh_snapshot` and
:func:`verigym.envs.tool.terminal.core.tree_command` use it.
"""

import base64
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import zlib

_VG_PATH = "/tmp/.bin:/usr/local/bin:/usr/bin:/bin"
"""``PATH`` of every shell command; ``/tmp/.bin`` holds ``python`` and ``python3``."""
_VG_BIN = "/tmp/.bin"


def _vg_python_links():
    """``/tmp/.bin/python`` and ``python3`` -> this interpreter (where missing)."""
    os.makedirs(_VG_BIN, exist_ok=True)
    for name in ("python", "python3"):
        link = _VG_BIN + "/" + name
        if not os.path.lexists(link):
            os.symlink(sys.executable, link)


def _vg_spawn(command, cwd, env, stdin, out, stderr, timeout):
    """``/bin/sh -c command`` in its own session; ``(exit status, timed out)``.

    At ``timeout`` seconds its process group is killed (status: the negative signal). Output goes
    to the open file ``out``, not a pipe: a process that left the group (setsid, a daemon) would
    hold a pipe open past the shell's end and its kill, and the call with it.
    """
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=out,
        stderr=stderr,
        start_new_session=True,
    )
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        process.wait()
        return process.returncode, True
    return process.returncode, False


# -- the workspace tools ------------------------------------------------------------------------


def _vgw_inside(root, rel):
    """The real path of ``rel`` below ``root``; ``PermissionError`` when it leaves ``root``."""
    path = os.path.realpath(os.path.join(root, rel))
    if path != root and not path.startswith(root + "/"):
        raise PermissionError("the path leaves the workspace: " + rel)
    return path


def _vgw_write_tree(root, files, clear=False):
    """Write ``{relative path: text}`` below ``root`` (emptied first when ``clear``); the count."""
    if clear and os.path.isdir(root):
        shutil.rmtree(root)
    os.makedirs(root, exist_ok=True)
    for rel, text in files.items():
        path = _vgw_inside(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    _vg_python_links()
    return len(files)


def _vgw_read(root, rel, cap):
    """``{"text", "cut"}`` of the first ``cap`` bytes of a file, or ``{"missing": True}``."""
    path = _vgw_inside(root, rel)
    if not os.path.isfile(path):
        return {"missing": True}
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    return {"text": data[:cap].decode("utf-8", "replace"), "cut": len(data) > cap}


def _vgw_write(root, rel, text):
    """Create or replace a file with ``text``; its length."""
    path = _vgw_inside(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return len(text)


def _vgw_count(data, size, cap):
    """``(shown text, total characters)`` of output whose first bytes are ``data`` of ``size``."""
    text = data.decode("utf-8", "replace")
    return text[:cap], (len(text) if len(data) >= size else max(size, len(text)))


def _vgw_shell(root, command, timeout, cap):
    """Run ``command`` in ``root``: ``{"status", "output" (first cap characters), "chars",
    "timed_out"}``; stdout and stderr together through an unlinked file."""
    env = {
        "PATH": _VG_PATH,
        "HOME": root,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": "/tmp",
    }
    with tempfile.TemporaryFile(dir="/tmp") as out:
        status, timed_out = _vg_spawn(
            command, root, env, subprocess.DEVNULL, out, subprocess.STDOUT, timeout
        )
        size = os.fstat(out.fileno()).st_size
        out.seek(0)
        data = out.read(4 * cap + 4)
    output, chars = _vgw_count(data, size, cap)
    return {"status": status, "output": output, "chars": chars, "timed_out": timed_out}


def _vgw_snapshot(root, max_files, cap, under=""):
    """``{"files": {relative path: text}, "skipped": [up to 100 paths]}``: the regular files below
    ``root`` (or its folder ``under``), without ``__pycache__`` and ``.git``; links, files over
    ``cap`` bytes and files past ``max_files`` are skipped."""
    out = {}
    skipped = []
    top = _vgw_inside(root, under) if under else root
    for folder, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".git"))
        for name in sorted(names):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path) or not os.path.isfile(path):
                skipped.append(rel)
                continue
            if len(out) >= max_files:
                skipped.append(rel)
                continue
            with open(path, "rb") as handle:
                data = handle.read(cap + 1)
            if len(data) > cap:
                skipped.append(rel)
                continue
            out[rel] = data.decode("utf-8", "replace")
    return {"files": out, "skipped": skipped[:100]}


# -- Terminal: the full tree, written and read -------------------------------------------------


def _vg_write_files(root, payload):
    """Create ``root`` and write ``{relative path: [base64 bytes, mode]}`` below it (modes set
    after each write; the parent checked the paths); the count."""
    os.makedirs(root, exist_ok=True)
    for rel, (data, mode) in payload.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))
        os.chmod(path, mode)
    return len(payload)


def _vg_snapshot(root, max_files, max_bytes):
    """``{"error": str, "entries": {relative path: [kind, mode, base64 bytes, link target]}}``.

    Never follows a link, never opens anything but a regular file (``O_NOFOLLOW | O_NONBLOCK``),
    stops at ``max_files`` entries or ``max_bytes`` file bytes (``error`` says which); a folder
    is read one name past the entries left, never listed whole. A folder it cannot list (mode 0
    where the reader is not root) is an error: its files would read as absent.
    """
    entries, total, error = {}, 0, ""
    try:
        top = os.lstat(root)
    except OSError:
        return {"error": "the workspace folder is gone", "entries": {}}
    if not stat.S_ISDIR(top.st_mode):  # a link in its place would make another folder count
        return {"error": "the workspace folder was replaced by something else", "entries": {}}
    stack = [""]
    while stack and not error:
        rel_dir = stack.pop()
        here = os.path.join(root, rel_dir) if rel_dir else root
        room = max_files - len(entries)
        try:  # at most one name past the cap: a folder of a million names is not listed whole
            with os.scandir(here) as listing:
                names = sorted(entry.name for _, entry in zip(range(room + 1), listing))
        except OSError as exc:  # hidden children would pass "nothing is left there" checks
            error = "the folder " + (rel_dir or ".") + " is unreadable: " + type(exc).__name__
            break
        if len(names) > room:
            error = f"more than {max_files} entries"
            break
        for name in names:
            rel = rel_dir + "/" + name if rel_dir else name
            path = os.path.join(here, name)
            if len(entries) >= max_files:
                error = f"more than {max_files} entries"
                break
            try:
                st = os.lstat(path)
            except OSError:
                continue
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                entries[rel] = ["l", 0, "", os.readlink(path)]
            elif stat.S_ISDIR(st.st_mode):
                entries[rel] = ["d", mode, "", ""]
                stack.append(rel)
            elif stat.S_ISREG(st.st_mode):
                if total + st.st_size > max_bytes:
                    error = f"more than {max_bytes} bytes of files"
                    break
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    entries[rel] = ["f", mode, None, ""]
                    continue
                with os.fdopen(fd, "rb") as handle:
                    raw = handle.read(st.st_size + 1)[: max_bytes - total]
                total += len(raw)
                entries[rel] = ["f", mode, base64.b64encode(raw).decode("ascii"), ""]
            else:
                entries[rel] = ["o", mode, "", ""]
    return {"error": error, "entries": entries}


def _vg_fresh_snapshot(source, root, max_files, max_bytes, timeout):
    """:func:`_vg_snapshot` taken by a new ``python -I -S`` running ``source`` (this file's text):
    nothing the agent's commands did to the calling process counts."""
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            source,
            "--vg-snapshot",
            json.dumps([root, max_files, max_bytes]),
        ],
        capture_output=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        return {
            "error": "snapshot failed: " + done.stderr.decode("utf-8", "replace")[-300:],
            "entries": {},
        }
    return json.loads(done.stdout)


# -- Terminal: the checker's run of the agent's program -------------------------------------------


def _vg_run(command, cwd, timeout, stdin_text):
    """``[exit status (-1 when killed at timeout), stdout (first MiB), ""]`` of ``command`` in
    ``cwd`` with ``stdin_text`` as its input (stderr dropped)."""
    _vg_python_links()
    with open("/tmp/.vg_in", "wb") as handle:
        handle.write(stdin_text.encode("utf-8"))
    env = {"PATH": _VG_PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}
    with open("/tmp/.vg_in", "rb") as stdin, open("/tmp/.vg_out", "wb") as out:
        status, timed_out = _vg_spawn(command, cwd, env, stdin, out, subprocess.DEVNULL, timeout)
    with open("/tmp/.vg_out", "rb") as handle:
        data = handle.read(1 << 20)
    return [-1 if timed_out else status, data.decode("utf-8", "replace"), ""]


def _vg_main(argv):
    """The script entry: ``--vg-snapshot JSON`` prints the snapshot as JSON;
    ``--vg-write-files ROOT PACKED`` writes a :func:`_vg_write_files` payload (zlib, base64)."""
    if argv[0] == "--vg-snapshot":
        sys.stdout.write(json.dumps(_vg_snapshot(*json.loads(argv[1]))))
    elif argv[0] == "--vg-write-files":
        _vg_write_files(argv[1], json.loads(zlib.decompress(base64.b64decode(argv[2]))))


if __name__ == "__main__" and sys.argv[1:2] in (["--vg-snapshot"], ["--vg-write-files"]):
    _vg_main(sys.argv[1:])
