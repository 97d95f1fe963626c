"""``verigym doctor``'s world line (issue 39): Crafter and whether the optional NetHack ids exist."""

from __future__ import annotations

from verigym.envs.world import doctor


def test_world_line_says_whether_nle_is_installed(monkeypatch):
    versions = {"crafter": "1.8.3", "numba": "0.68.1", "nle": None}
    monkeypatch.setattr(doctor, "_version", versions.get)
    line = doctor.probe()
    assert line.ok and "nle not installed" in line.detail and "--no-deps" in line.detail
    versions["nle"] = "1.3.0"
    assert "nle 1.3.0 (NetHack-v0 and 4 tasks)" in doctor.probe().detail
    versions["crafter"] = None
    assert not doctor.probe().ok
