"""memoize: cache a function's results by its arguments in an LRUCache."""

from lrucache.cache import LRUCache


def _key(args, kwargs):
    return args + tuple(sorted(kwargs.items()))


def memoize(capacity=128):
    def decorate(function):
        cache = LRUCache(capacity)
        sentinel = object()

        def wrapper(*args, **kwargs):
            key = _key(args, kwargs)
            value = cache.get(key, sentinel)
            if value is sentinel:
                value = function(*args, **kwargs)
                cache.put(key, value)
            return value

        wrapper.cache = cache
        wrapper.__name__ = function.__name__
        return wrapper

    return decorate
