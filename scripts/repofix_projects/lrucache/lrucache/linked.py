"""A doubly linked list of nodes with a sentinel, for O(1) move-to-front."""


class Node:
    __slots__ = ("key", "value", "expires", "prev", "next")

    def __init__(self, key=None, value=None, expires=None):
        self.key = key
        self.value = value
        self.expires = expires
        self.prev = self
        self.next = self


class LinkedList:
    def __init__(self):
        self.head = Node()
        self.size = 0

    def push_front(self, node):
        node.prev = self.head
        node.next = self.head.next
        self.head.next.prev = node
        self.head.next = node
        self.size += 1

    def unlink(self, node):
        node.prev.next = node.next
        node.next.prev = node.prev
        node.prev = node.next = node
        self.size -= 1

    def move_to_front(self, node):
        self.unlink(node)
        self.push_front(node)

    def back(self):
        """The least recently used node, or None."""
        if self.size == 0:
            return None
        return self.head.prev

    def keys(self):
        out = []
        node = self.head.next
        while node is not self.head:
            out.append(node.key)
            node = node.next
        return out
