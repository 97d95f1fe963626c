import unittest

from textkit import (
    camel_to_snake,
    center,
    justify,
    slugify,
    snake_to_camel,
    title_case,
    top_words,
    truncate,
    word_counts,
    wrap,
)

TEXT = "the quick brown fox jumps over the lazy dog"


class WrapTest(unittest.TestCase):
    def test_wrap(self):
        self.assertEqual(
            wrap(TEXT, 10), ["the quick", "brown fox", "jumps over", "the lazy", "dog"]
        )

    def test_wrap_exact_width(self):
        self.assertEqual(wrap("aaa bbb", 7), ["aaa bbb"])
        self.assertEqual(wrap("aaa bbb", 6), ["aaa", "bbb"])

    def test_long_word_is_split(self):
        self.assertEqual(wrap("ab abcdefgh c", 3), ["ab", "abc", "def", "gh", "c"])

    def test_wrap_whitespace(self):
        self.assertEqual(wrap("  a \n b  ", 5), ["a b"])
        self.assertEqual(wrap("", 5), [])
        with self.assertRaises(ValueError):
            wrap("x", 0)

    def test_justify(self):
        self.assertEqual(
            justify(TEXT, 16), ["the  quick brown", "fox  jumps  over", "the lazy dog"]
        )

    def test_justify_extra_spaces_go_left(self):
        self.assertEqual(justify("a b c dd", 7)[0], "a  b  c")
        self.assertEqual(justify("aa b c dddddddd", 8), ["aa  b  c", "dddddddd"])

    def test_center(self):
        self.assertEqual(center("ab", 7, "*"), "**ab***")
        self.assertEqual(center("abc", 2), "abc")
        self.assertEqual(center("ab", 4), " ab ")

    def test_truncate(self):
        self.assertEqual(truncate(TEXT, 20), "the quick brown...")
        self.assertEqual(truncate("short", 10), "short")
        self.assertEqual(truncate("abcdefghij", 6), "abc...")
        self.assertEqual(truncate("abcdefghij", 2), "..")
        self.assertEqual(truncate("abcdef", 6), "abcdef")

    def test_slugify(self):
        self.assertEqual(slugify("Héllo, World!"), "hello-world")
        self.assertEqual(slugify("  Über  café 2024 "), "uber-cafe-2024")
        self.assertEqual(slugify("a_b c", "_"), "a_b_c")
        self.assertEqual(slugify("!!!"), "")


class CaseTest(unittest.TestCase):
    def test_camel_to_snake(self):
        self.assertEqual(camel_to_snake("parseHTTPResponse2"), "parse_http_response2")
        self.assertEqual(camel_to_snake("userId"), "user_id")
        self.assertEqual(camel_to_snake("ID"), "id")
        self.assertEqual(camel_to_snake("Simple"), "simple")
        self.assertEqual(camel_to_snake("getA"), "get_a")
        self.assertEqual(camel_to_snake("version2Beta"), "version2_beta")

    def test_snake_to_camel(self):
        self.assertEqual(snake_to_camel("user_id_list"), "userIdList")
        self.assertEqual(snake_to_camel("user_id", upper_first=True), "UserId")
        self.assertEqual(snake_to_camel("__private_name"), "__privateName")
        self.assertEqual(snake_to_camel("a__b"), "aB")
        self.assertEqual(snake_to_camel("___"), "___")

    def test_title_case(self):
        self.assertEqual(title_case("the lord OF the rings"), "The Lord of the Rings")
        self.assertEqual(title_case("a tale of two cities"), "A Tale of Two Cities")
        self.assertEqual(title_case("what it is for"), "What It Is For")
        self.assertEqual(title_case(""), "")


class StatsTest(unittest.TestCase):
    def test_word_counts(self):
        self.assertEqual(
            word_counts("It's the cat's toy, the 'best' toy."),
            {"it's": 1, "the": 2, "cat's": 1, "toy": 2, "best": 1},
        )

    def test_stop_words(self):
        self.assertEqual(
            word_counts("The cat and THE hat", stop_words=["the", "AND"]), {"cat": 1, "hat": 1}
        )

    def test_top_words(self):
        self.assertEqual(top_words("b a c b a d b", 2), [("b", 3), ("a", 2)])
        self.assertEqual(top_words("z y x", 2), [("x", 1), ("y", 1)])
        self.assertEqual(top_words("", 3), [])
