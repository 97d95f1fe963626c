"""Parser: declare options and positionals, then parse a list of argument strings."""


class ArgumentError(Exception):
    pass


class Option:
    def __init__(
        self,
        name,
        short=None,
        kind=str,
        default=None,
        flag=False,
        choices=None,
        repeat=False,
        required=False,
    ):
        self.name = name
        self.short = short
        self.kind = kind
        self.default = default
        self.flag = flag
        self.choices = choices
        self.repeat = repeat
        self.required = required

    @property
    def dest(self):
        return self.name.replace("-", "_")

    def convert(self, text):
        try:
            value = self.kind(text)
        except ValueError:
            raise ArgumentError(
                f"--{self.name}: invalid {self.kind.__name__} value {text!r}"
            ) from None
        if self.choices is not None and value not in self.choices:
            raise ArgumentError(f"--{self.name}: {value!r} is not one of {sorted(self.choices)}")
        return value


class Parser:
    def __init__(self, prog):
        self.prog = prog
        self.options = {}
        self.shorts = {}
        self.positionals = []
        self.commands = {}

    def option(self, name, **kwargs):
        option = Option(name, **kwargs)
        self.options[name] = option
        if option.short:
            self.shorts[option.short] = option
        return self

    def positional(self, name, kind=str, optional=False):
        self.positionals.append((name, kind, optional))
        return self

    def command(self, name):
        sub = Parser(f"{self.prog} {name}")
        self.commands[name] = sub
        return sub

    def _defaults(self):
        values = {}
        for option in self.options.values():
            if option.flag:
                values[option.dest] = False
            elif option.repeat:
                values[option.dest] = []
            else:
                values[option.dest] = option.default
        return values

    def parse(self, args):
        """A dict of values; subcommands add 'command' and their own values."""
        values = self._defaults()
        seen = set()
        positional = []
        args = list(args)
        i = 0
        only_positional = False
        while i < len(args):
            arg = args[i]
            if only_positional or arg == "-" or not arg.startswith("-"):
                if not positional and not self.positionals and arg in self.commands:
                    values["command"] = arg
                    values.update(self.commands[arg].parse(args[i + 1 :]))
                    break
                positional.append(arg)
                i += 1
                continue
            if arg == "--":
                only_positional = True
                i += 1
                continue
            if arg.startswith("--"):
                name, eq, inline = arg[2:].partition("=")
                option = self.options.get(name)
            else:
                name, inline, eq = arg[1:2], arg[2:], bool(arg[2:])
                option = self.shorts.get(name)
            if option is None:
                raise ArgumentError(f"{self.prog}: unknown option {arg}")
            seen.add(option.name)
            if option.flag:
                if eq:
                    raise ArgumentError(f"--{option.name} takes no value")
                values[option.dest] = True
                i += 1
                continue
            if eq:
                text = inline
                i += 1
            else:
                if i + 1 >= len(args):
                    raise ArgumentError(f"--{option.name} needs a value")
                text = args[i + 1]
                i += 2
            value = option.convert(text)
            if option.repeat:
                values[option.dest].append(value)
            else:
                values[option.dest] = value
        for option in self.options.values():
            if option.required and option.name not in seen:
                raise ArgumentError(f"{self.prog}: --{option.name} is required")
        needed = sum(1 for _, _, optional in self.positionals if not optional)
        if len(positional) < needed:
            raise ArgumentError(f"{self.prog}: expected at least {needed} arguments")
        if len(positional) > len(self.positionals):
            raise ArgumentError(
                f"{self.prog}: unexpected argument {positional[len(self.positionals)]!r}"
            )
        for index, (name, kind, _) in enumerate(self.positionals):
            values[name] = kind(positional[index]) if index < len(positional) else None
        return values

    def usage(self):
        parts = [self.prog]
        for option in self.options.values():
            text = f"--{option.name}" if option.flag else f"--{option.name} {option.dest.upper()}"
            parts.append(text if option.required else f"[{text}]")
        for name, _, optional in self.positionals:
            parts.append(f"[{name}]" if optional else name)
        if self.commands:
            parts.append("{" + ",".join(sorted(self.commands)) + "}")
        return " ".join(parts)
