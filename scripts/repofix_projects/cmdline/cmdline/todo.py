"""A todo-list command line: add, done, list, over a list of dicts kept by the caller."""

from cmdline.parser import ArgumentError, Parser


def build():
    parser = Parser("todo")
    parser.option("verbose", short="v", flag=True)
    add = parser.command("add")
    add.option("priority", short="p", kind=int, default=2, choices={1, 2, 3})
    add.option("tag", short="t", repeat=True)
    add.positional("title")
    done = parser.command("done")
    done.positional("number", kind=int)
    listing = parser.command("list")
    listing.option("all", short="a", flag=True)
    listing.option("tag", short="t")
    return parser


def main(args, items):
    """Run one command on ``items`` (mutated); returns (exit status, output lines)."""
    try:
        values = build().parse(args)
    except ArgumentError as exc:
        return 2, [f"error: {exc}"]
    command = values.get("command")
    if command is None:
        return 2, ["error: a command is required: " + build().usage()]
    if command == "add":
        items.append(
            {
                "title": values["title"],
                "priority": values["priority"],
                "tags": values["tag"],
                "done": False,
            }
        )
        return 0, [f"added #{len(items)}"]
    if command == "done":
        number = values["number"]
        if not 1 <= number <= len(items):
            return 1, [f"error: no item #{number}"]
        items[number - 1]["done"] = True
        return 0, [f"done #{number}"]
    lines = []
    order = sorted(range(len(items)), key=lambda k: (items[k]["priority"], k))
    for k in order:
        item = items[k]
        if item["done"] and not values["all"]:
            continue
        if values["tag"] is not None and values["tag"] not in item["tags"]:
            continue
        mark = "x" if item["done"] else " "
        lines.append(f"[{mark}] #{k + 1} p{item['priority']} {item['title']}")
    return 0, lines
