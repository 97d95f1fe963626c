"""A finite state machine with guards, actions, history, and a vending machine built on it."""

from fsm.machine import InvalidTransition, Machine, Transition
from fsm.vending import VendingMachine

__all__ = ["InvalidTransition", "Machine", "Transition", "VendingMachine"]
