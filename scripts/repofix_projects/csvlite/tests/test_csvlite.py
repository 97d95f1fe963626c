import unittest

from csvlite import CSVError, Table, format_row, parse_line, read, write

DATA = "name,team,points,active\nada,red,10,true\nbob,blue,,false\ncyd,red,7.5,TRUE\ndee,blue,3,false\n"


class ReadTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(read("a,b\n1,2\n"), [["a", "b"], ["1", "2"]])

    def test_no_final_newline(self):
        self.assertEqual(read("a,b\n1,2"), [["a", "b"], ["1", "2"]])

    def test_quoted(self):
        self.assertEqual(read('"a,b","say ""hi""",c\n'), [["a,b", 'say "hi"', "c"]])

    def test_newline_in_quotes(self):
        self.assertEqual(read('x,"line1\nline2"\ny,z\n'), [["x", "line1\nline2"], ["y", "z"]])

    def test_crlf(self):
        self.assertEqual(read("a,b\r\n1,2\r\n"), [["a", "b"], ["1", "2"]])

    def test_empty_fields(self):
        self.assertEqual(read(",a,\n"), [["", "a", ""]])
        self.assertEqual(read('""\n'), [[""]])

    def test_blank_lines(self):
        self.assertEqual(read("a\n\nb\n"), [["a"], ["b"]])
        self.assertEqual(read("a\n\nb\n", skip_blank=False), [["a"], [""], ["b"]])

    def test_delimiter(self):
        self.assertEqual(
            read("a;b\n1;'x;y'\n", delimiter=";", quote="'"), [["a", "b"], ["1", "x;y"]]
        )

    def test_errors(self):
        with self.assertRaises(CSVError) as caught:
            read('a,b\nc,"d\n')
        self.assertEqual(caught.exception.line, 3)
        with self.assertRaises(CSVError):
            read('a,b"c\n')
        with self.assertRaises(CSVError) as caught:
            read('a\n"b"c\n')
        self.assertEqual(caught.exception.line, 2)

    def test_parse_line(self):
        self.assertEqual(parse_line('1,"2,3",4'), ["1", "2,3", "4"])
        with self.assertRaises(CSVError):
            parse_line("a\nb")


class WriteTest(unittest.TestCase):
    def test_format_row(self):
        self.assertEqual(format_row(["a", "b,c", 'q"', 3, None, ""]), 'a,"b,c","q""",3,,""')

    def test_leading_space_is_quoted(self):
        self.assertEqual(format_row([" x", "y "]), '" x","y "')

    def test_write(self):
        self.assertEqual(write([["a", "b"], [1, 2]]), "a,b\n1,2\n")
        self.assertEqual(write([]), "")

    def test_round_trip(self):
        rows = [["x", "a,b", 'he said "no"', "multi\nline", "", " pad"]]
        self.assertEqual(read(write(rows)), rows)


class TableTest(unittest.TestCase):
    def setUp(self):
        self.table = Table.from_csv(DATA)

    def test_types(self):
        self.assertEqual(self.table.rows[0], ["ada", "red", 10, True])
        self.assertEqual(self.table.rows[1], ["bob", "blue", None, False])
        self.assertEqual(self.table.column("points"), [10, None, 7.5, 3])

    def test_untyped(self):
        self.assertEqual(Table.from_csv(DATA, typed=False).column("points"), ["10", "", "7.5", "3"])

    def test_where_select(self):
        red = self.table.where("team", lambda t: t == "red").select("name", "points")
        self.assertEqual(red.rows, [["ada", 10], ["cyd", 7.5]])
        self.assertEqual(red.header, ["name", "points"])

    def test_sort_by(self):
        self.assertEqual(self.table.sort_by("points").column("name"), ["dee", "cyd", "ada", "bob"])
        self.assertEqual(
            self.table.sort_by("points", reverse=True).column("name"), ["ada", "cyd", "dee", "bob"]
        )

    def test_group_sum(self):
        self.assertEqual(self.table.group_sum("team", "points"), {"red": 17.5, "blue": 3})

    def test_to_csv(self):
        self.assertEqual(
            Table.from_csv(DATA).select("name", "points").to_csv(),
            "name,points\nada,10\nbob,\ncyd,7.5\ndee,3\n",
        )

    def test_ragged_and_duplicates(self):
        with self.assertRaises(CSVError) as caught:
            Table.from_csv("a,b\n1,2\n3\n")
        self.assertEqual(caught.exception.line, 3)
        with self.assertRaises(CSVError):
            Table.from_csv("a,a\n1,2\n")
        with self.assertRaises(CSVError):
            Table.from_csv("")
