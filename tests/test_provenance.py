"""One git-SHA provenance (verigym/provenance.py) for saved agents and leaderboard rows, and the one
metrics writer (MetricsLogger) of the learners, ``verigym train`` and GRPO."""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import pytest

from verigym import provenance
from verigym.agents.common.callbacks import MetricsLogger
from verigym.leaderboards.runner import provenance as row_provenance

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def fresh_sha():
    provenance.git_sha.cache_clear()
    yield
    provenance.git_sha.cache_clear()


def _git(cwd, *args):
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _repo(path):
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    (path / "a.txt").write_text("one\n")
    _git(path, "add", "a.txt")
    _git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    return path


@needs_git
def test_sha_of_a_checkout_and_dirty_suffix(tmp_path, monkeypatch, fresh_sha):
    root = _repo(tmp_path / "checkout")
    monkeypatch.setattr(provenance, "source_root", lambda: root)
    head = _git(root, "rev-parse", "HEAD")
    assert provenance.git_sha() == head
    (root / "a.txt").write_text("two\n")
    provenance.git_sha.cache_clear()
    assert provenance.git_sha() == head + "-dirty"


@needs_git
def test_an_install_inside_another_repository_has_no_sha(tmp_path, monkeypatch, fresh_sha):
    outer = _repo(tmp_path / "project")
    site = outer / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(provenance, "source_root", lambda: site)
    assert provenance.git_sha() is None  # not the project's commit


def test_no_checkout_at_all(tmp_path, monkeypatch, fresh_sha):
    monkeypatch.setattr(provenance, "source_root", lambda: tmp_path)
    assert provenance.git_sha() is None


def test_rows_and_saved_agents_agree(fresh_sha):
    row_provenance.cache_clear()  # both are computed once per process; HEAD may have moved since
    sha = provenance.git_sha()
    assert row_provenance()["git_sha"] == (sha or "not-a-git-checkout")


def test_metrics_logger_jsonl_and_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    logger = MetricsLogger(tmp_path, tensorboard=True, tensorboard_dir=tmp_path / "tb", prefix="x/")
    logger({"global_step": 4, "loss": 0.5, "kl": math.nan})
    logger({"loss": 0.25})  # no step: JSONL only
    logger.flush()
    logger.close()
    logger.close()  # idempotent
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"global_step": 4.0, "loss": 0.5, "kl": None}, {"loss": 0.25}]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["x/kl", "x/loss"]
    assert [(e.step, e.value) for e in events.Scalars("x/loss")] == [(4, 0.5)]


def test_metrics_logger_without_directory_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    logger = MetricsLogger(None, tensorboard=True)
    logger({"global_step": 1, "loss": 1.0})
    logger.close()
    assert list(tmp_path.iterdir()) == []
