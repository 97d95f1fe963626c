"""Duration parsers; every parser returns whole seconds (int)."""

import re

UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([wdhms])")
_ISO = re.compile(r"^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")


class DurationError(ValueError):
    pass


def parse_duration(text):
    """'1h30m', '2d 4h', '45s', '-5m': units w d h m s, each at most once, largest first."""
    text = text.strip().lower().replace(" ", "")
    sign = 1
    if text.startswith("-"):
        sign = -1
        text = text[1:]
    if not text:
        raise DurationError("empty duration")
    total = 0
    position = 0
    last_rank = -1
    order = list(UNITS)
    for match in _PART.finditer(text):
        if match.start() != position:
            raise DurationError(f"unexpected text at {position}: {text[position:]!r}")
        unit = match.group(2)
        rank = order.index(unit)
        if rank <= last_rank:
            raise DurationError(f"unit {unit!r} out of order or repeated")
        last_rank = rank
        total += int(match.group(1)) * UNITS[unit]
        position = match.end()
    if position != len(text):
        raise DurationError(f"unexpected text at {position}: {text[position:]!r}")
    return sign * total


def parse_iso(text):
    """ISO 8601 durations without years/months: 'P1W', 'P2DT3H', 'PT1H30M5S'."""
    match = _ISO.match(text.strip().upper())
    if not match or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise DurationError(f"not an ISO 8601 duration: {text!r}")
    weeks, days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_clock(text):
    """'[-]H:MM:SS' or '[-]MM:SS' -> seconds; minutes and seconds below 60."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    parts = text.lstrip("-").split(":")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        raise DurationError(f"not a clock duration: {text!r}")
    numbers = [int(p) for p in parts]
    if len(numbers) == 2:
        numbers = [0] + numbers
    hours, minutes, seconds = numbers
    if minutes >= 60 or seconds >= 60:
        raise DurationError(f"minutes and seconds must be below 60: {text!r}")
    return sign * (hours * 3600 + minutes * 60 + seconds)
