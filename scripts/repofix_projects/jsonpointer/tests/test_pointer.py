import unittest

from jsonpointer import (
    JsonPointerError,
    Pointer,
    add,
    escape,
    remove,
    replace,
    resolve,
    unescape,
    walk,
)

DOC = {
    "foo": ["bar", "baz"],
    "": 0,
    "a/b": 1,
    "c%d": 2,
    "m~n": 8,
    " ": 7,
    "nested": {"list": [{"x": 1}, {"x": 2}], "empty": {}},
}


class EscapeTest(unittest.TestCase):
    def test_escape(self):
        self.assertEqual(escape("a/b~c"), "a~1b~0c")
        self.assertEqual(escape("~1"), "~01")

    def test_unescape(self):
        self.assertEqual(unescape("a~1b~0c"), "a/b~c")
        self.assertEqual(unescape("~01"), "~1")

    def test_bad_escape(self):
        for token in ("~", "a~2", "x~"):
            with self.assertRaises(JsonPointerError):
                unescape(token)


class PointerTest(unittest.TestCase):
    def test_parse_and_str(self):
        self.assertEqual(Pointer.parse("/a~1b/0").tokens, ("a/b", "0"))
        self.assertEqual(str(Pointer(["m~n", "x"])), "/m~0n/x")
        self.assertEqual(Pointer.parse("").tokens, ())
        self.assertEqual(Pointer.parse("/").tokens, ("",))

    def test_parse_needs_slash(self):
        with self.assertRaises(JsonPointerError):
            Pointer.parse("foo")

    def test_join_and_parent(self):
        p = Pointer() / "a" / 3
        self.assertEqual(str(p), "/a/3")
        self.assertEqual(str(p.parent()), "/a")
        self.assertEqual(p.last(), "3")
        with self.assertRaises(JsonPointerError):
            Pointer().parent()

    def test_prefix(self):
        a, b = Pointer.parse("/a"), Pointer.parse("/a/b/c")
        self.assertEqual(a.is_prefix_of(b), True)
        self.assertEqual(b.is_prefix_of(a), False)
        self.assertEqual(str(b.relative_to(a)), "/b/c")
        with self.assertRaises(JsonPointerError):
            a.relative_to(b)

    def test_equality(self):
        self.assertEqual(Pointer.parse("/x/y") == Pointer(["x", "y"]), True)
        self.assertEqual(len({Pointer.parse("/x"), Pointer(["x"])}), 1)


class ResolveTest(unittest.TestCase):
    def test_rfc_examples(self):
        self.assertEqual(resolve(DOC, "/foo"), ["bar", "baz"])
        self.assertEqual(resolve(DOC, "/foo/0"), "bar")
        self.assertEqual(resolve(DOC, "/"), 0)
        self.assertEqual(resolve(DOC, "/a~1b"), 1)
        self.assertEqual(resolve(DOC, "/c%d"), 2)
        self.assertEqual(resolve(DOC, "/m~0n"), 8)
        self.assertEqual(resolve(DOC, "/ "), 7)

    def test_root(self):
        self.assertEqual(resolve(DOC, "") is DOC, True)

    def test_nested(self):
        self.assertEqual(resolve(DOC, "/nested/list/1/x"), 2)

    def test_last_index(self):
        self.assertEqual(resolve(DOC, "/foo/1"), "baz")

    def test_bad_indexes(self):
        for pointer in ("/foo/2", "/foo/01", "/foo/-", "/foo/x", "/foo/-1"):
            with self.assertRaises(JsonPointerError):
                resolve(DOC, pointer)

    def test_missing_and_default(self):
        with self.assertRaises(JsonPointerError):
            resolve(DOC, "/nope")
        self.assertEqual(resolve(DOC, "/nope/x", default=None), None)
        self.assertEqual(resolve(DOC, "/foo/9", default="d"), "d")

    def test_scalar_has_no_children(self):
        with self.assertRaises(JsonPointerError):
            resolve(DOC, "/ /x")


class EditTest(unittest.TestCase):
    def test_add_member(self):
        self.assertEqual(add({"a": 1}, "/b", 2), {"a": 1, "b": 2})

    def test_add_into_list(self):
        self.assertEqual(add({"a": [1, 3]}, "/a/1", 2), {"a": [1, 2, 3]})
        self.assertEqual(add({"a": [1, 3]}, "/a/-", 4), {"a": [1, 3, 4]})
        self.assertEqual(add({"a": [1, 3]}, "/a/2", 4), {"a": [1, 3, 4]})

    def test_add_out_of_range(self):
        with self.assertRaises(JsonPointerError):
            add({"a": [1]}, "/a/3", 0)

    def test_add_does_not_mutate(self):
        doc = {"a": [1]}
        add(doc, "/a/0", 0)
        self.assertEqual(doc, {"a": [1]})

    def test_add_root(self):
        self.assertEqual(add({"a": 1}, "", [1]), [1])

    def test_remove(self):
        self.assertEqual(remove({"a": 1, "b": 2}, "/a"), {"b": 2})
        self.assertEqual(remove({"a": [1, 2, 3]}, "/a/0"), {"a": [2, 3]})
        with self.assertRaises(JsonPointerError):
            remove({"a": 1}, "/b")
        with self.assertRaises(JsonPointerError):
            remove({"a": 1}, "")

    def test_replace(self):
        self.assertEqual(replace({"a": [1, 2]}, "/a/1", 5), {"a": [1, 5]})
        self.assertEqual(replace({"a": 1}, "/a", {"b": 2}), {"a": {"b": 2}})
        with self.assertRaises(JsonPointerError):
            replace({"a": 1}, "/b", 0)

    def test_walk(self):
        doc = {"a": [1, {"b": None}], "c~": "x", "d": {}}
        self.assertEqual(walk(doc), [("/a/0", 1), ("/a/1/b", None), ("/c~0", "x")])

    def test_walk_scalar(self):
        self.assertEqual(walk(5), [("", 5)])
