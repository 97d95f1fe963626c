"""Terminal templates, group ``files``: archives (tar, zip) and directory surgery.

Archives the agent made are read in the parent under streaming limits: a gzip stream is
decompressed only up to :data:`MAX_TAR_BYTES` (more is a refusal), no single read of the tar
parser may ask for more than :data:`MAX_READ_BYTES` (a GNU long-name or pax header that declares
1 GiB is refused, not read), and the member count, every declared size and their total are capped
before a member is read. So a bomb costs at most about :data:`MAX_TAR_BYTES` of memory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import posixpath
import tarfile
import zipfile

import numpy as np

from verigym.envs.tool.terminal.core import (
    WORDS,
    Snapshot,
    Template,
    Verdict,
    choice,
    sample,
    scored,
)

MAX_MEMBERS = 500
MAX_MEMBER_BYTES = 1 << 20
MAX_TOTAL_BYTES = 8 << 20
MAX_TAR_BYTES = MAX_TOTAL_BYTES + (2 << 20)
"""Most bytes of uncompressed tar read from an archive (the members' cap plus room for headers)."""
MAX_READ_BYTES = 8192
"""Most bytes one read of the tar parser may ask for: a header, a long name or a pax record set
(larger metadata is refused), or one chunk of a member (members are read in chunks this size)."""


class _BoundedTar(io.BytesIO):
    """The uncompressed tar, refusing any single read larger than :data:`MAX_READ_BYTES` (a header
    declaring a huge long name would otherwise be read whole before any cap applies)."""

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > MAX_READ_BYTES:
            raise tarfile.ReadError("a tar header asks for more than the read cap")
        return super().read(size)


def _tar_bytes(data: bytes) -> bytes | None:
    """The uncompressed tar of ``data`` (plain, or gzip decompressed as a stream and stopped past
    :data:`MAX_TAR_BYTES`); ``None`` when larger, or compressed another way."""
    if data[:2] == b"\x1f\x8b":
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            raw = stream.read(MAX_TAR_BYTES + 1)
    elif data[:3] in (b"BZh", b"\xfd7z") or data[:4] == b"\x28\xb5\x2f\xfd":
        return None  # bzip2, xz, zstd: not what the tasks ask for, and not bounded here
    else:
        raw = data
    return raw if len(raw) <= MAX_TAR_BYTES else None


def tar_members(data: bytes | None) -> dict[str, bytes] | None:
    """Regular-file members of a plain or gzip-compressed tar as ``{normalized name: bytes}``.

    ``None`` when ``data`` is not a readable tar or breaks a cap (:data:`MAX_TAR_BYTES`
    uncompressed, :data:`MAX_READ_BYTES` of metadata in one header, :data:`MAX_MEMBERS`,
    :data:`MAX_MEMBER_BYTES`, :data:`MAX_TOTAL_BYTES`). Never raises; memory stays within a few
    times :data:`MAX_TAR_BYTES` whatever the archive declares.
    """
    if data is None:
        return None
    out: dict[str, bytes] = {}
    total = 0
    try:
        raw = _tar_bytes(data)
        if raw is None:
            return None
        with tarfile.open(fileobj=_BoundedTar(raw), mode="r:") as archive:
            for count, member in enumerate(archive):
                if count >= MAX_MEMBERS or member.size > MAX_MEMBER_BYTES:
                    return None
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    return None
                if member.isfile():
                    handle = archive.extractfile(member)
                    if handle is None:
                        return None
                    chunks, left = [], member.size
                    while left > 0:
                        chunk = handle.read(min(left, MAX_READ_BYTES))
                        if not chunk:
                            break
                        chunks.append(chunk)
                        left -= len(chunk)
                    out[posixpath.normpath(member.name)] = b"".join(chunks)
    except Exception:  # noqa: BLE001 -- any malformed archive is simply "not the archive asked for"
        return None
    return out


def zip_members(data: bytes | None) -> dict[str, bytes] | None:
    """Regular-file members of a zip, capped like :func:`tar_members`; ``None`` when unreadable."""
    if data is None:
        return None
    out: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS or sum(i.file_size for i in infos) > MAX_TOTAL_BYTES:
                return None
            for info in infos:
                if info.file_size > MAX_MEMBER_BYTES:
                    return None
                if not info.is_dir():
                    out[posixpath.normpath(info.filename)] = archive.read(info)[:MAX_MEMBER_BYTES]
    except Exception:  # noqa: BLE001 -- any malformed archive is simply "not the archive asked for"
        return None
    return out


def make_tar_gz(files: dict[str, bytes]) -> bytes:
    """A deterministic ``.tar.gz`` of ``files`` (fixed times, owner and gzip header)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            archive.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as zipped:
        zipped.write(raw.getvalue())
    return out.getvalue()


def make_zip(files: dict[str, bytes]) -> bytes:
    """A deterministic zip of ``files`` (fixed times)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            archive.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def _text(rng: np.random.Generator, lines: int = 3) -> str:
    return "".join(
        " ".join(sample(rng, WORDS, 5)) + "\n" for _ in range(int(rng.integers(1, lines + 1)))
    )


def _tree(rng: np.random.Generator, top: str, exts: tuple[str, ...], n: int) -> dict[str, str]:
    files = {}
    names = sample(rng, WORDS, n)
    for name in names:
        depth = int(rng.integers(0, 3))
        folders = sample(rng, WORDS, depth)
        files[posixpath.join(top, *folders, name + choice(rng, exts))] = _text(rng)
    return files


# -- tar_create ----------------------------------------------------------------------------------
def _tar_create_generate(rng: np.random.Generator):
    files = _tree(rng, "data", (".txt", ".txt", ".log", ".tmp"), int(rng.integers(6, 12)))
    first = next(iter(files))
    files[posixpath.splitext(first)[0] + ".txt"] = files.pop(first)
    wanted = {p: t for p, t in files.items() if p.endswith(".txt")}
    stamp = f"2026{int(rng.integers(1, 13)):02d}{int(rng.integers(1, 29)):02d}"
    instruction = (
        f"Make a gzip-compressed tar archive backups/data-{stamp}.tar.gz holding every .txt file under data/ "
        "(at any depth) and nothing else, stored under its path relative to the workspace (data/...). "
        "Leave data/ as it is."
    )
    return (
        instruction,
        files,
        {"wanted": wanted, "archive": f"backups/data-{stamp}.tar.gz", "all": files},
    )


def _tar_create_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    raw = snap.data(expect["archive"])
    if raw is None or raw[:2] != b"\x1f\x8b":
        return False, 0.0, f"{expect['archive']} is missing or not gzip-compressed"
    members = tar_members(raw)
    if members is None:
        return False, 0.0, "the archive is not a readable tar (or breaks a size cap)"
    wanted = expect["wanted"]
    items = [members.get(p) == t.encode() for p, t in sorted(wanted.items())]
    guards = [set(members) == set(wanted)] + [snap.text(p) == t for p, t in expect["all"].items()]
    return scored(items, guards, f"members: {sorted(members)[:8]}")


def _tar_create_oracle(expect: dict) -> list[str]:
    a = expect["archive"]
    return [
        "mkdir -p backups && if command -v tar >/dev/null; then "
        f"find data -type f -name '*.txt' | sort | tar -czf {a} -T -; else "
        "python3 -c \"import tarfile, glob; t = tarfile.open('" + a + "', 'w:gz'); "
        "[t.add(p) for p in sorted(glob.glob('data/**/*.txt', recursive=True))]; t.close()\"; fi"
    ]


# -- tar_extract ---------------------------------------------------------------------------------
def _tar_extract_generate(rng: np.random.Generator):
    inner = _tree(rng, "site", (".html", ".css", ".txt"), int(rng.integers(4, 9)))
    blob = make_tar_gz({p: t.encode() for p, t in inner.items()})
    target = choice(rng, ("restore", "unpacked", "srv/www"))
    instruction = (
        f"incoming/bundle.tar.gz holds a site/ tree. Extract it into {target}/ so that its files land at "
        f"{target}/site/... with their contents unchanged."
    )
    expected = {posixpath.join(target, p): t for p, t in inner.items()}
    return instruction, {"incoming/bundle.tar.gz": blob}, {"expected": expected, "target": target}


def _expected_files_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    items = [snap.text(p) == t for p, t in sorted(expect["expected"].items())]
    return scored(items)


def _tar_extract_oracle(expect: dict) -> list[str]:
    t = expect["target"]
    return [
        f"mkdir -p {t} && if command -v tar >/dev/null; then tar -xzf incoming/bundle.tar.gz -C {t}; else "
        f"python3 -c \"import tarfile; tarfile.open('incoming/bundle.tar.gz').extractall('{t}', filter='data')\"; fi"
    ]


# -- zip_select ----------------------------------------------------------------------------------
def _zip_select_generate(rng: np.random.Generator):
    inner = _tree(rng, "export", (".csv", ".json", ".txt"), int(rng.integers(6, 11)))
    first = next(iter(inner))
    inner[posixpath.splitext(first)[0] + ".csv"] = inner.pop(first)
    blob = make_zip({p: t.encode() for p, t in inner.items()})
    expected = {
        "tables/" + posixpath.basename(p): t for p, t in inner.items() if p.endswith(".csv")
    }
    instruction = (
        "archive.zip holds an export/ tree. Extract only its .csv files, all directly into tables/ "
        "(flattened: tables/<file name>.csv, no subfolders; the names are unique). Nothing else goes into tables/."
    )
    return instruction, {"archive.zip": blob}, {"expected": expected}


def _zip_select_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    items = [snap.text(p) == t for p, t in sorted(expect["expected"].items())]
    extra = set(p for p, e in snap.entries.items() if p.startswith("tables/")) - set(
        expect["expected"]
    )
    return scored(
        items, [not extra], f"unexpected in tables/: {sorted(extra)[:5]}" if extra else ""
    )


def _zip_select_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport os, zipfile\nos.makedirs('tables', exist_ok=True)\n"
        "for i in zipfile.ZipFile('archive.zip').infolist():\n    if i.filename.endswith('.csv'):\n"
        "        open('tables/' + os.path.basename(i.filename), 'wb').write(zipfile.ZipFile('archive.zip').read(i))\nEOF"
    ]


# -- flatten_dir ---------------------------------------------------------------------------------
def _flatten_generate(rng: np.random.Generator):
    files = _tree(rng, "nested", (".txt", ".md", ".cfg"), int(rng.integers(6, 12)))
    expected = {"flat/" + posixpath.basename(p): t for p, t in files.items()}
    instruction = (
        "Move every file under nested/ (at any depth) directly into flat/ (flat/<file name>; the names are "
        "unique). Afterwards no file may remain under nested/ (empty folders may)."
    )
    return instruction, files, {"expected": expected}


def _flatten_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    items = [snap.text(p) == t for p, t in sorted(expect["expected"].items())]
    left = [p for p, e in snap.entries.items() if p.startswith("nested/") and e.kind != "d"]
    return scored(items, [not left], f"left under nested/: {left[:5]}" if left else "")


def _flatten_oracle(expect: dict) -> list[str]:
    return ["mkdir -p flat && find nested -type f -exec mv {} flat/ \\;"]


# -- dedupe_content ------------------------------------------------------------------------------
def _dedupe_generate(rng: np.random.Generator):
    blobs = [rng.bytes(int(rng.integers(50, 400))) for _ in range(int(rng.integers(4, 8)))]
    names = sample(rng, WORDS, int(rng.integers(len(blobs) + 3, len(blobs) + 10)))
    files: dict[str, bytes] = {}
    for i, name in enumerate(names):
        blob = blobs[i] if i < len(blobs) else choice(rng, blobs)
        folder = choice(rng, ("photos", "photos/2024", "photos/trip"))
        files[f"{folder}/{name}.jpg"] = blob
    groups: dict[str, list[str]] = {}
    for p, b in files.items():
        groups.setdefault(hashlib.sha256(b).hexdigest(), []).append(p)
    keep = {min(ps): files[min(ps)] for ps in groups.values()}
    drop = sorted(p for ps in groups.values() for p in ps if p != min(ps))
    instruction = (
        "Several files under photos/ (any depth) have identical contents. For each set of identical files keep "
        "only the one whose path (relative to the workspace, compared as a plain string) sorts first, and delete "
        "the others. Do not change or move the files you keep."
    )
    return instruction, files, {"keep": {p: b.hex() for p, b in keep.items()}, "drop": drop}


def _dedupe_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    items = [p not in snap.entries for p in expect["drop"]]
    guards = [snap.data(p) == bytes.fromhex(h) for p, h in expect["keep"].items()]
    return scored(items, guards)


def _dedupe_oracle(expect: dict) -> list[str]:
    return [
        "python3 - <<'EOF'\nimport hashlib, os\nseen = {}\n"
        "paths = sorted(os.path.join(d, f) for d, _, fs in os.walk('photos') for f in fs)\n"
        "for p in paths:\n    h = hashlib.sha256(open(p, 'rb').read()).hexdigest()\n"
        "    if h in seen:\n        os.remove(p)\n    else:\n        seen[h] = p\nEOF"
    ]


# -- sort_by_extension ---------------------------------------------------------------------------
def _sort_ext_generate(rng: np.random.Generator):
    exts = sample(rng, ("txt", "csv", "log", "json", "png", "pdf"), int(rng.integers(3, 6)))
    files, expected = {}, {}
    for name in sample(rng, WORDS, int(rng.integers(6, 14))):
        ext = choice(rng, exts)
        content = _text(rng, 2)
        files[f"inbox/{name}.{ext}"] = content
        expected[f"inbox/{ext}/{name}.{ext}"] = content
    instruction = (
        "Sort the files directly in inbox/ into subfolders by extension: inbox/<extension>/<file name> (for "
        "example inbox/notes.txt goes to inbox/txt/notes.txt). No file may stay directly in inbox/."
    )
    return instruction, files, {"expected": expected}


def _sort_ext_check(expect: dict, snap: Snapshot, runner) -> Verdict:
    items = [snap.text(p) == t for p, t in sorted(expect["expected"].items())]
    left = [
        p
        for p, e in snap.entries.items()
        if p.count("/") == 1 and p.startswith("inbox/") and e.kind != "d"
    ]
    return scored(items, [not left], f"left in inbox/: {left[:5]}" if left else "")


def _sort_ext_oracle(expect: dict) -> list[str]:
    return [
        'cd inbox && for f in *.*; do [ -f "$f" ] || continue; e="${f##*.}"; mkdir -p "$e" && mv "$f" "$e/"; done'
    ]


TEMPLATES = [
    Template("tar_create", "files", _tar_create_generate, _tar_create_check, _tar_create_oracle),
    Template(
        "tar_extract", "files", _tar_extract_generate, _expected_files_check, _tar_extract_oracle
    ),
    Template("zip_select", "files", _zip_select_generate, _zip_select_check, _zip_select_oracle),
    Template("flatten_dir", "files", _flatten_generate, _flatten_check, _flatten_oracle),
    Template("dedupe_content", "files", _dedupe_generate, _dedupe_check, _dedupe_oracle),
    Template("sort_by_extension", "files", _sort_ext_generate, _sort_ext_check, _sort_ext_oracle),
]
