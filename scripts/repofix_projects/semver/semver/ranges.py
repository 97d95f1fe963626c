"""npm-style ranges: '>=1.2.0 <2.0.0', '^1.2.3', '~1.2', '1.x', '*', alternatives with '||'."""

from semver.version import Version, VersionError

_OPERATORS = (">=", "<=", ">", "<", "=")


def _partial(text):
    """'1', '1.2', '1.2.3', '1.x' -> (numbers given, Version with zeros filled)."""
    parts = text.split(".")
    numbers = []
    for part in parts:
        if part in ("x", "X", "*"):
            break
        if not part.isdigit():
            raise VersionError(f"bad version in range: {text!r}")
        numbers.append(int(part))
    if len(parts) > 3 or (len(numbers) == 3 and len(parts) == 3 and "-" in text):
        return 3, Version.parse(text)
    return len(numbers), Version(*(numbers + [0] * (3 - len(numbers))))


def _caret(text):
    given, low = _partial(text)
    if low.major > 0 or given == 1:
        high = Version(low.major + 1, 0, 0)
    elif low.minor > 0 or given == 2:
        high = Version(0, low.minor + 1, 0)
    else:
        high = Version(0, 0, low.patch + 1)
    return [(">=", low), ("<", high)]


def _tilde(text):
    given, low = _partial(text)
    if given <= 1:
        high = Version(low.major + 1, 0, 0)
    else:
        high = Version(low.major, low.minor + 1, 0)
    return [(">=", low), ("<", high)]


def _comparators(clause):
    out = []
    for token in clause.split():
        if token in ("*", "x", "X"):
            continue
        if token.startswith("^"):
            out.extend(_caret(token[1:]))
        elif token.startswith("~"):
            out.extend(_tilde(token[1:]))
        else:
            for op in _OPERATORS:
                if token.startswith(op):
                    out.append((op, Version.parse(token[len(op) :])))
                    break
            else:
                given, low = _partial(token)
                if given == 3:
                    out.append(("=", low))
                else:
                    out.extend(_tilde(token) if given else [])
    return out


def _holds(op, version, bound):
    if op == ">=":
        return version >= bound
    if op == "<=":
        return version <= bound
    if op == ">":
        return version > bound
    if op == "<":
        return version < bound
    return version == bound


class Range:
    def __init__(self, text):
        self.text = text
        self.clauses = [_comparators(c) for c in text.split("||")]

    def satisfied_by(self, version):
        """Pre-releases match only a clause with a bound on the same major.minor.patch."""
        if isinstance(version, str):
            version = Version.parse(version)
        for clause in self.clauses:
            if not all(_holds(op, version, bound) for op, bound in clause):
                continue
            if version.prerelease and not any(
                bound.prerelease
                and (bound.major, bound.minor, bound.patch)
                == (version.major, version.minor, version.patch)
                for _, bound in clause
            ):
                continue
            return True
        return False


def max_satisfying(versions, text):
    """The highest version string in ``versions`` inside the range, or None."""
    rng = Range(text)
    best = None
    for item in versions:
        version = Version.parse(item)
        if rng.satisfied_by(version) and (best is None or version > best[0]):
            best = (version, item)
    return best[1] if best else None
