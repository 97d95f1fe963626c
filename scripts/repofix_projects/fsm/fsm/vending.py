"""A vending machine: insert coins, choose a product, get it and the change."""

from fsm.machine import InvalidTransition, Machine

COINS = (5, 10, 25, 100)


class VendingMachine:
    def __init__(self, prices, stock):
        self.prices = dict(prices)
        self.stock = dict(stock)
        self.credit = 0
        self.sales = 0
        self.machine = Machine("idle", ["idle", "paying", "dispensing"])
        self.machine.add("idle", "coin", "paying")
        self.machine.add("paying", "coin", "paying")
        self.machine.add("paying", "choose", "dispensing", guard=self._affordable)
        self.machine.add("paying", "cancel", "idle")
        self.machine.add("dispensing", "take", "idle")

    def _affordable(self, context):
        product = context["product"]
        return self.stock.get(product, 0) > 0 and self.credit >= self.prices[product]

    def insert(self, coin):
        if coin not in COINS:
            raise ValueError(f"coin {coin} is not accepted")
        self.machine.fire("coin")
        self.credit += coin
        return self.credit

    def choose(self, product):
        """Dispense ``product``; returns the change as a list of coins, largest first."""
        if product not in self.prices:
            raise KeyError(product)
        self.machine.fire("choose", product=product)
        change = self.credit - self.prices[product]
        self.stock[product] -= 1
        self.sales += self.prices[product]
        self.credit = 0
        self.machine.fire("take")
        return make_change(change)

    def cancel(self):
        refund = make_change(self.credit)
        self.machine.fire("cancel")
        self.credit = 0
        return refund


def make_change(amount):
    """Greedy change in COINS, largest first."""
    if amount < 0:
        raise InvalidTransition("negative change")
    coins = []
    for coin in sorted(COINS, reverse=True):
        while amount >= coin:
            coins.append(coin)
            amount -= coin
    return coins
