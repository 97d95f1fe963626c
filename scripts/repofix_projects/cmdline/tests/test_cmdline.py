import unittest

from cmdline import ArgumentError, Parser, todo_main


def parser():
    p = Parser("prog")
    p.option("count", short="n", kind=int, default=1)
    p.option("mode", choices={"fast", "slow"}, default="fast")
    p.option("verbose", short="v", flag=True)
    p.option("include", short="I", repeat=True)
    p.positional("src")
    p.positional("dst", optional=True)
    return p


class ParserTest(unittest.TestCase):
    def test_defaults(self):
        self.assertEqual(
            parser().parse(["a"]),
            {"count": 1, "mode": "fast", "verbose": False, "include": [], "src": "a", "dst": None},
        )

    def test_long_and_short(self):
        values = parser().parse(["--count", "3", "-v", "a", "b"])
        self.assertEqual((values["count"], values["verbose"], values["dst"]), (3, True, "b"))

    def test_inline_values(self):
        values = parser().parse(["--count=4", "-n5", "a"])
        self.assertEqual(values["count"], 5)
        self.assertEqual(parser().parse(["--mode=slow", "a"])["mode"], "slow")

    def test_repeat(self):
        self.assertEqual(parser().parse(["-I", "x", "--include=y", "a"])["include"], ["x", "y"])

    def test_double_dash(self):
        self.assertEqual(parser().parse(["--", "-v", "--count"])["src"], "-v")
        self.assertEqual(parser().parse(["-", "b"])["src"], "-")

    def test_errors(self):
        for args in (
            ["--nope", "a"],
            ["--count", "x", "a"],
            ["--mode", "medium", "a"],
            [],
            ["a", "b", "c"],
            ["--count"],
            ["--verbose=1", "a"],
        ):
            with self.assertRaises(ArgumentError):
                parser().parse(args)

    def test_required(self):
        p = Parser("p").option("name", required=True)
        with self.assertRaises(ArgumentError):
            p.parse([])
        self.assertEqual(p.parse(["--name", "x"]), {"name": "x"})

    def test_positional_kind(self):
        p = Parser("p").positional("n", kind=int)
        self.assertEqual(p.parse(["42"]), {"n": 42})

    def test_usage(self):
        self.assertEqual(
            parser().usage(),
            "prog [--count COUNT] [--mode MODE] [--verbose] [--include INCLUDE] src [dst]",
        )


class TodoTest(unittest.TestCase):
    def setUp(self):
        self.items = []
        todo_main(["add", "write report", "-p", "1", "-t", "work"], self.items)
        todo_main(["add", "buy milk", "--tag", "home", "-t", "shop"], self.items)
        todo_main(["add", "call bob"], self.items)

    def test_add(self):
        self.assertEqual(
            self.items[1],
            {"title": "buy milk", "priority": 2, "tags": ["home", "shop"], "done": False},
        )
        self.assertEqual(todo_main(["add", "x"], self.items), (0, ["added #4"]))

    def test_list_sorted_by_priority(self):
        status, lines = todo_main(["list"], self.items)
        self.assertEqual(status, 0)
        self.assertEqual(
            lines, ["[ ] #1 p1 write report", "[ ] #2 p2 buy milk", "[ ] #3 p2 call bob"]
        )

    def test_done_and_list_all(self):
        self.assertEqual(todo_main(["done", "2"], self.items), (0, ["done #2"]))
        self.assertEqual(
            todo_main(["list"], self.items)[1], ["[ ] #1 p1 write report", "[ ] #3 p2 call bob"]
        )
        self.assertEqual(todo_main(["list", "-a"], self.items)[1][1], "[x] #2 p2 buy milk")

    def test_list_by_tag(self):
        self.assertEqual(
            todo_main(["list", "--tag", "shop"], self.items)[1], ["[ ] #2 p2 buy milk"]
        )

    def test_errors(self):
        self.assertEqual(todo_main(["done", "9"], self.items), (1, ["error: no item #9"]))
        self.assertEqual(todo_main(["done", "0"], self.items), (1, ["error: no item #0"]))
        self.assertEqual(todo_main(["add", "x", "-p", "7"], self.items)[0], 2)
        self.assertEqual(todo_main([], self.items)[0], 2)
        self.assertEqual(todo_main(["-v"], self.items)[0], 2)

    def test_global_flag_before_command(self):
        self.assertEqual(todo_main(["-v", "done", "1"], self.items), (0, ["done #1"]))
