import unittest

from semver import Range, Version, VersionError, max_satisfying


def v(text):
    return Version.parse(text)


class VersionTest(unittest.TestCase):
    def test_parse(self):
        x = v("1.2.3-alpha.1+build.5")
        self.assertEqual(
            (x.major, x.minor, x.patch, x.prerelease, x.build),
            (1, 2, 3, ("alpha", "1"), ("build", "5")),
        )
        self.assertEqual(str(v("v2.0.0")), "2.0.0")

    def test_parse_errors(self):
        for text in ("1.2", "01.2.3", "1.2.3-", "1.2.3-01", "a.b.c", "1.2.3.4", "1.2.-3"):
            with self.assertRaises(VersionError):
                v(text)

    def test_order(self):
        chain = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1.0",
            "2.0.0",
        ]
        for a, b in zip(chain, chain[1:]):
            self.assertEqual(v(a) < v(b), True, f"{a} < {b}")
            self.assertEqual(v(b) > v(a), True, f"{b} > {a}")

    def test_sorting(self):
        self.assertEqual(
            [str(x) for x in sorted(map(v, ["1.10.0", "1.2.0", "1.2.0-rc.1", "0.9.9"]))],
            ["0.9.9", "1.2.0-rc.1", "1.2.0", "1.10.0"],
        )

    def test_build_ignored(self):
        self.assertEqual(v("1.0.0+a") == v("1.0.0+b"), True)
        self.assertEqual(v("1.0.0") <= v("1.0.0+x"), True)

    def test_bump(self):
        self.assertEqual(str(v("1.2.3").bump("major")), "2.0.0")
        self.assertEqual(str(v("1.2.3").bump("minor")), "1.3.0")
        self.assertEqual(str(v("1.2.3").bump("patch")), "1.2.4")
        self.assertEqual(str(v("1.2.3-rc.1").bump("patch")), "1.2.3")
        with self.assertRaises(VersionError):
            v("1.0.0").bump("build")

    def test_negative(self):
        with self.assertRaises(VersionError):
            Version(1, -1, 0)


class RangeTest(unittest.TestCase):
    def check(self, text, inside, outside):
        rng = Range(text)
        for item in inside:
            self.assertEqual(rng.satisfied_by(item), True, f"{item} in {text}")
        for item in outside:
            self.assertEqual(rng.satisfied_by(item), False, f"{item} not in {text}")

    def test_comparators(self):
        self.check(">=1.2.0 <2.0.0", ["1.2.0", "1.9.9"], ["1.1.9", "2.0.0"])
        self.check(">1.0.0 <=1.5.0", ["1.0.1", "1.5.0"], ["1.0.0", "1.5.1"])
        self.check("=1.2.3", ["1.2.3"], ["1.2.4"])
        self.check("1.2.3", ["1.2.3"], ["1.2.2"])

    def test_caret(self):
        self.check("^1.2.3", ["1.2.3", "1.9.0"], ["1.2.2", "2.0.0"])
        self.check("^0.2.3", ["0.2.3", "0.2.9"], ["0.3.0", "0.2.2"])
        self.check("^0.0.3", ["0.0.3"], ["0.0.4", "0.0.2"])
        self.check("^1", ["1.0.0", "1.99.0"], ["2.0.0"])
        self.check("^0.0", ["0.0.5"], ["0.1.0"])

    def test_tilde(self):
        self.check("~1.2.3", ["1.2.3", "1.2.9"], ["1.3.0", "1.2.2"])
        self.check("~1.2", ["1.2.0", "1.2.7"], ["1.3.0"])
        self.check("~1", ["1.0.0", "1.5.0"], ["2.0.0", "0.9.0"])

    def test_x_ranges(self):
        self.check("1.x", ["1.0.0", "1.8.2"], ["2.0.0", "0.1.0"])
        self.check("1.2.x", ["1.2.0", "1.2.5"], ["1.3.0"])
        self.check("*", ["0.0.1", "9.9.9"], ["1.0.0-rc.1"])

    def test_alternatives(self):
        self.check("^1.0.0 || ^3.0.0", ["1.5.0", "3.1.0"], ["2.0.0", "4.0.0"])

    def test_prereleases(self):
        self.check(
            ">=1.2.3-alpha.3",
            ["1.2.3-alpha.7", "1.2.3", "3.4.5"],
            ["3.4.5-alpha.9", "1.2.3-alpha.1"],
        )
        self.check("^1.2.3", [], ["1.3.0-beta"])

    def test_max_satisfying(self):
        versions = ["1.2.3", "1.2.10", "1.3.0-rc.1", "2.0.0", "1.9.1"]
        self.assertEqual(max_satisfying(versions, "^1.2.0"), "1.9.1")
        self.assertEqual(max_satisfying(versions, "~1.2.0"), "1.2.10")
        self.assertEqual(max_satisfying(versions, ">=3.0.0"), None)
