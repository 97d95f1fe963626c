"""Parse and format durations ("1h30m", ISO 8601 "PT1H30M", "01:30:00") and add them to dates."""

from durations.calendar import add_months, days_in_month, is_leap_year
from durations.format import format_clock, format_duration, format_iso
from durations.parse import DurationError, parse_clock, parse_duration, parse_iso

__all__ = [
    "DurationError",
    "add_months",
    "days_in_month",
    "format_clock",
    "format_duration",
    "format_iso",
    "is_leap_year",
    "parse_clock",
    "parse_duration",
    "parse_iso",
]
