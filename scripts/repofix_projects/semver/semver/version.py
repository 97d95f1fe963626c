"""Version: MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]."""

import re

_PATTERN = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


class VersionError(ValueError):
    pass


def _compare_identifiers(a, b):
    """Pre-release identifiers: numbers compare numerically and sort before text."""
    a_num, b_num = a.isdigit(), b.isdigit()
    if a_num and b_num:
        return (int(a) > int(b)) - (int(a) < int(b))
    if a_num != b_num:
        return -1 if a_num else 1
    return (a > b) - (a < b)


class Version:
    def __init__(self, major, minor=0, patch=0, prerelease=(), build=()):
        if min(major, minor, patch) < 0:
            raise VersionError("version numbers are not negative")
        self.major, self.minor, self.patch = major, minor, patch
        self.prerelease = tuple(prerelease)
        self.build = tuple(build)

    @classmethod
    def parse(cls, text):
        match = _PATTERN.match(text.strip().lstrip("v"))
        if not match:
            raise VersionError(f"not a semantic version: {text!r}")
        major, minor, patch, pre, build = match.groups()
        prerelease = tuple(pre.split(".")) if pre else ()
        for part in prerelease:
            if part.isdigit() and len(part) > 1 and part[0] == "0":
                raise VersionError(f"leading zero in pre-release {part!r}")
        return cls(
            int(major), int(minor), int(patch), prerelease, tuple(build.split(".")) if build else ()
        )

    def __str__(self):
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self):
        return f"Version({str(self)!r})"

    def compare(self, other):
        """-1, 0 or 1; build metadata is ignored."""
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if not self.prerelease or not other.prerelease:
            return (not self.prerelease) - (not other.prerelease)
        for a, b in zip(self.prerelease, other.prerelease):
            result = _compare_identifiers(a, b)
            if result:
                return result
        return (len(self.prerelease) > len(other.prerelease)) - (
            len(self.prerelease) < len(other.prerelease)
        )

    def __eq__(self, other):
        return isinstance(other, Version) and self.compare(other) == 0

    def __lt__(self, other):
        return self.compare(other) < 0

    def __le__(self, other):
        return self.compare(other) <= 0

    def __gt__(self, other):
        return self.compare(other) > 0

    def __ge__(self, other):
        return self.compare(other) >= 0

    def __hash__(self):
        return hash((self.major, self.minor, self.patch, self.prerelease))

    def bump(self, part):
        """The next 'major', 'minor' or 'patch' release (pre-release and build dropped)."""
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            if self.prerelease:
                return Version(self.major, self.minor, self.patch)
            return Version(self.major, self.minor, self.patch + 1)
        raise VersionError(f"unknown part {part!r}")
