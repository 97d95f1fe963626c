"""Machine: states, event-triggered transitions with optional guards and actions."""


class InvalidTransition(Exception):
    """No transition for the event in the current state (or every guard refused)."""


class Transition:
    __slots__ = ("source", "event", "target", "guard", "action")

    def __init__(self, source, event, target, guard=None, action=None):
        self.source = source
        self.event = event
        self.target = target
        self.guard = guard
        self.action = action


class Machine:
    def __init__(self, initial, states, final=()):
        if initial not in states:
            raise ValueError(f"unknown initial state {initial!r}")
        self.states = set(states)
        self.final = set(final)
        self.initial = initial
        self.state = initial
        self.history = [initial]
        self._transitions = {}
        self._listeners = []

    def add(self, source, event, target, guard=None, action=None):
        for state in (source, target):
            if state not in self.states:
                raise ValueError(f"unknown state {state!r}")
        self._transitions.setdefault((source, event), []).append(
            Transition(source, event, target, guard, action)
        )
        return self

    def on_change(self, listener):
        """``listener(old, event, new)`` after every transition."""
        self._listeners.append(listener)

    def events(self):
        """The events with a transition from the current state, sorted."""
        return sorted({event for (source, event) in self._transitions if source == self.state})

    def can(self, event, **context):
        return self._find(event, context) is not None

    def _find(self, event, context):
        for transition in self._transitions.get((self.state, event), []):
            if transition.guard is None or transition.guard(context):
                return transition
        return None

    def fire(self, event, **context):
        if self.state in self.final:
            raise InvalidTransition(f"{self.state!r} is final")
        transition = self._find(event, context)
        if transition is None:
            raise InvalidTransition(f"no transition for {event!r} from {self.state!r}")
        old = self.state
        if transition.action is not None:
            transition.action(context)
        self.state = transition.target
        self.history.append(self.state)
        for listener in self._listeners:
            listener(old, event, self.state)
        return self.state

    def reset(self):
        self.state = self.initial
        self.history = [self.initial]

    def done(self):
        return self.state in self.final

    def reachable(self):
        """States reachable from the initial state (ignoring guards), sorted."""
        seen = {self.initial}
        frontier = [self.initial]
        while frontier:
            state = frontier.pop()
            for (source, _), transitions in self._transitions.items():
                if source != state:
                    continue
                for transition in transitions:
                    if transition.target not in seen:
                        seen.add(transition.target)
                        frontier.append(transition.target)
        return sorted(seen)
