"""Format seconds as text."""

from durations.parse import UNITS


def format_duration(seconds, largest="w", max_units=None):
    """Compact form: 5400 -> '1h30m'; 0 -> '0s'; negative -> '-...'.

    ``largest``: the largest unit used; ``max_units``: keep only that many leading units
    (the rest is truncated, not rounded).
    """
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    remaining = abs(seconds)
    units = list(UNITS)
    parts = []
    for unit in units[units.index(largest) :]:
        size = UNITS[unit]
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    if max_units is not None:
        parts = parts[:max_units]
    return sign + "".join(parts)


def format_clock(seconds):
    """'H:MM:SS' (hours unbounded), negative with a leading '-'."""
    sign = "-" if seconds < 0 else ""
    minutes, secs = divmod(abs(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours}:{minutes:02d}:{secs:02d}"


def format_iso(seconds):
    """ISO 8601 'P[nD][T[nH][nM][nS]]'; zero is 'PT0S'; negative durations are refused."""
    if seconds < 0:
        raise ValueError("ISO 8601 durations are not negative")
    if seconds == 0:
        return "PT0S"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    out = "P"
    if days:
        out += f"{days}D"
    if hours or minutes or secs:
        out += "T"
        if hours:
            out += f"{hours}H"
        if minutes:
            out += f"{minutes}M"
        if secs:
            out += f"{secs}S"
    return out
