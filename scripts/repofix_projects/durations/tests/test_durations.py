import unittest

from durations import (
    DurationError,
    add_months,
    days_in_month,
    format_clock,
    format_duration,
    format_iso,
    is_leap_year,
    parse_clock,
    parse_duration,
    parse_iso,
)
from durations.calendar import day_of_year


class ParseDurationTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(parse_duration("45s"), 45)
        self.assertEqual(parse_duration("1h30m"), 5400)
        self.assertEqual(parse_duration("2d 4h"), 187200)
        self.assertEqual(parse_duration("1w1s"), 604801)

    def test_case_and_spaces(self):
        self.assertEqual(parse_duration(" 1H 5M "), 3900)

    def test_negative(self):
        self.assertEqual(parse_duration("-5m"), -300)

    def test_errors(self):
        for text in ("", "-", "5", "5x", "1m1h", "1h1h", "h", "1h 30"):
            with self.assertRaises(DurationError):
                parse_duration(text)


class ParseIsoTest(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(parse_iso("PT1H30M"), 5400)
        self.assertEqual(parse_iso("P2DT3H"), 183600)
        self.assertEqual(parse_iso("P1W"), 604800)
        self.assertEqual(parse_iso("PT5S"), 5)
        self.assertEqual(parse_iso("p1d"), 86400)

    def test_errors(self):
        for text in ("P", "PT", "P1DT", "1H", "PT1S1M", "P1Y"):
            with self.assertRaises(DurationError):
                parse_iso(text)


class ParseClockTest(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(parse_clock("01:30:00"), 5400)
        self.assertEqual(parse_clock("2:05"), 125)
        self.assertEqual(parse_clock("100:00:01"), 360001)
        self.assertEqual(parse_clock("-0:10"), -10)

    def test_errors(self):
        for text in ("1:60", "1:00:60", "1", "a:b", "1:2:3:4"):
            with self.assertRaises(DurationError):
                parse_clock(text)


class FormatTest(unittest.TestCase):
    def test_format_duration(self):
        self.assertEqual(format_duration(5400), "1h30m")
        self.assertEqual(format_duration(0), "0s")
        self.assertEqual(format_duration(-61), "-1m1s")
        self.assertEqual(format_duration(694861), "1w1d1h1m1s")

    def test_largest_unit(self):
        self.assertEqual(format_duration(694861, largest="h"), "193h1m1s")
        self.assertEqual(format_duration(90061, largest="d"), "1d1h1m1s")

    def test_max_units(self):
        self.assertEqual(format_duration(694861, max_units=2), "1w1d")
        self.assertEqual(format_duration(3601, max_units=1), "1h")

    def test_round_trip(self):
        for seconds in (1, 59, 60, 3599, 3600, 86399, 604800, 1234567):
            self.assertEqual(parse_duration(format_duration(seconds)), seconds)
            self.assertEqual(parse_iso(format_iso(seconds)), seconds)
            self.assertEqual(parse_clock(format_clock(seconds)), seconds)

    def test_format_clock(self):
        self.assertEqual(format_clock(5400), "1:30:00")
        self.assertEqual(format_clock(59), "0:00:59")
        self.assertEqual(format_clock(-3661), "-1:01:01")

    def test_format_iso(self):
        self.assertEqual(format_iso(0), "PT0S")
        self.assertEqual(format_iso(86400), "P1D")
        self.assertEqual(format_iso(90061), "P1DT1H1M1S")
        self.assertEqual(format_iso(3605), "PT1H5S")
        with self.assertRaises(ValueError):
            format_iso(-1)


class CalendarTest(unittest.TestCase):
    def test_leap_years(self):
        self.assertEqual(
            [y for y in (1900, 2000, 2023, 2024, 2100) if is_leap_year(y)], [2000, 2024]
        )

    def test_days_in_month(self):
        self.assertEqual(
            [days_in_month(2023, m) for m in range(1, 13)],
            [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31],
        )
        self.assertEqual(days_in_month(2024, 2), 29)
        with self.assertRaises(ValueError):
            days_in_month(2024, 13)
        with self.assertRaises(ValueError):
            days_in_month(2024, 0)

    def test_add_months(self):
        self.assertEqual(add_months((2024, 1, 31), 1), (2024, 2, 29))
        self.assertEqual(add_months((2023, 11, 15), 3), (2024, 2, 15))
        self.assertEqual(add_months((2024, 3, 31), -1), (2024, 2, 29))
        self.assertEqual(add_months((2024, 1, 10), -13), (2022, 12, 10))
        self.assertEqual(add_months((2024, 12, 1), 0), (2024, 12, 1))

    def test_day_of_year(self):
        self.assertEqual(day_of_year((2024, 1, 1)), 1)
        self.assertEqual(day_of_year((2024, 3, 1)), 61)
        self.assertEqual(day_of_year((2023, 12, 31)), 365)
