"""Semantic versions (semver.org 2.0): parse, compare, bump, and npm-style ranges."""

from semver.ranges import Range, max_satisfying
from semver.version import Version, VersionError

__all__ = ["Range", "Version", "VersionError", "max_satisfying"]
