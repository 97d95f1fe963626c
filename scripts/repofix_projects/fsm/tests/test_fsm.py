import unittest

from fsm import InvalidTransition, Machine, VendingMachine
from fsm.vending import make_change


def door():
    m = Machine("closed", ["closed", "open", "locked", "broken"], final=["broken"])
    m.add("closed", "open", "open")
    m.add("open", "close", "closed")
    m.add("closed", "lock", "locked", guard=lambda c: c.get("key") == "k1")
    m.add("locked", "unlock", "closed", guard=lambda c: c.get("key") == "k1")
    m.add("locked", "kick", "broken")
    return m


class MachineTest(unittest.TestCase):
    def test_fire(self):
        m = door()
        self.assertEqual(m.fire("open"), "open")
        self.assertEqual(m.fire("close"), "closed")
        self.assertEqual(m.history, ["closed", "open", "closed"])

    def test_invalid_event(self):
        m = door()
        with self.assertRaises(InvalidTransition):
            m.fire("close")
        self.assertEqual(m.state, "closed")

    def test_guard(self):
        m = door()
        self.assertEqual(m.can("lock", key="k2"), False)
        self.assertEqual(m.can("lock", key="k1"), True)
        with self.assertRaises(InvalidTransition):
            m.fire("lock", key="nope")
        self.assertEqual(m.fire("lock", key="k1"), "locked")

    def test_first_passing_guard_wins(self):
        m = Machine("a", ["a", "b", "c"])
        m.add("a", "go", "b", guard=lambda c: c["n"] > 5)
        m.add("a", "go", "c")
        self.assertEqual(m.fire("go", n=3), "c")
        m.reset()
        self.assertEqual(m.fire("go", n=9), "b")

    def test_final_state(self):
        m = door()
        m.fire("lock", key="k1")
        m.fire("kick")
        self.assertEqual(m.done(), True)
        with self.assertRaises(InvalidTransition):
            m.fire("unlock", key="k1")

    def test_events(self):
        m = door()
        self.assertEqual(m.events(), ["lock", "open"])
        m.fire("open")
        self.assertEqual(m.events(), ["close"])

    def test_action_and_listener(self):
        m = door()
        log = []
        m.add("open", "slam", "closed", action=lambda c: log.append(("slam", c["force"])))
        m.on_change(lambda old, event, new: log.append((old, event, new)))
        m.fire("open")
        m.fire("slam", force=3)
        self.assertEqual(log, [("closed", "open", "open"), ("slam", 3), ("open", "slam", "closed")])

    def test_reset(self):
        m = door()
        m.fire("open")
        m.reset()
        self.assertEqual((m.state, m.history), ("closed", ["closed"]))

    def test_unknown_states(self):
        with self.assertRaises(ValueError):
            Machine("x", ["a"])
        with self.assertRaises(ValueError):
            door().add("closed", "fly", "sky")

    def test_reachable(self):
        m = door()
        m.states.add("attic")
        self.assertEqual(m.reachable(), ["broken", "closed", "locked", "open"])


class VendingTest(unittest.TestCase):
    def setUp(self):
        self.vm = VendingMachine({"tea": 65, "gum": 25}, {"tea": 1, "gum": 5})

    def test_buy_with_change(self):
        self.vm.insert(100)
        self.assertEqual(self.vm.choose("tea"), [25, 10])
        self.assertEqual(self.vm.sales, 65)
        self.assertEqual(self.vm.machine.state, "idle")
        self.assertEqual(self.vm.credit, 0)

    def test_exact_payment(self):
        self.vm.insert(25)
        self.assertEqual(self.vm.choose("gum"), [])

    def test_not_enough_credit(self):
        self.vm.insert(25)
        self.vm.insert(25)
        with self.assertRaises(InvalidTransition):
            self.vm.choose("tea")
        self.assertEqual(self.vm.credit, 50)
        self.vm.insert(25)
        self.assertEqual(self.vm.choose("tea"), [10])

    def test_out_of_stock(self):
        self.vm.insert(100)
        self.vm.choose("tea")
        self.vm.insert(100)
        with self.assertRaises(InvalidTransition):
            self.vm.choose("tea")

    def test_cancel_refunds(self):
        self.vm.insert(25)
        self.vm.insert(10)
        self.vm.insert(5)
        self.assertEqual(self.vm.cancel(), [25, 10, 5])
        self.assertEqual(self.vm.machine.state, "idle")

    def test_choose_without_coins(self):
        with self.assertRaises(InvalidTransition):
            self.vm.choose("gum")

    def test_bad_coin_and_product(self):
        with self.assertRaises(ValueError):
            self.vm.insert(3)
        self.vm.insert(5)
        with self.assertRaises(KeyError):
            self.vm.choose("soda")

    def test_make_change(self):
        self.assertEqual(make_change(190), [100, 25, 25, 25, 10, 5])
        self.assertEqual(make_change(0), [])
        with self.assertRaises(InvalidTransition):
            make_change(-5)
