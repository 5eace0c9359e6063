"""What one lease object holds, and the SQL that acquires, renews, releases
and fences it.

* one key: a lease (``dlock_acquire``), one of ``slots`` places of a
  counting semaphore (``dlock_acquire(..., slots)``), or a shared lease
  (``dlock_acquire_shared``); renewed, released and fenced as a lease
  (``dlock_renew``, ``dlock_release``, ``dlock_validate`` with the token);
* several keys, all or none (``dlock_acquire_all``): one token per key,
  each an ordinary lease, renewed, released and fenced together in one
  statement (over ``unnest`` of the keys and their tokens).

Every statement is one call without session state (pgbouncer in
transaction mode).  The arguments are checked here, before any connection.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any, List, Optional, Sequence, Tuple

__all__ = ["Target"]

Sql = Tuple[str, Tuple[Any, ...]]

_ACQUIRE = "SELECT dlock_acquire(%s, %s, %s::interval, %s::interval)"
_ACQUIRE_SLOTS = "SELECT dlock_acquire(%s, %s, %s::interval, %s::interval, %s::integer)"
_ACQUIRE_SHARED = "SELECT dlock_acquire_shared(%s, %s, %s::interval, %s::interval)"
_RENEW = "SELECT dlock_renew(%s, %s, %s::interval, %s::bigint)"
_RELEASE = "SELECT dlock_release(%s, %s, %s::bigint)"
_RELEASE_HOLDER = "SELECT dlock_release(%s, %s)"
_VALIDATE = "SELECT dlock_validate(%s, %s, %s::bigint)"

_ACQUIRE_ALL = "SELECT dlock_acquire_all(%s::text[], %s, %s::interval, %s::interval)"
# bool_and reads every row: each key is renewed (released, fenced), the
# answer is true only when every one was
_RENEW_ALL = ("SELECT bool_and(dlock_renew(k, %s, %s::interval, t))"
              " FROM unnest(%s::text[], %s::bigint[]) AS u(k, t)")
_RELEASE_ALL = ("SELECT bool_and(dlock_release(k, %s, t))"
                " FROM unnest(%s::text[], %s::bigint[]) AS u(k, t)")
_RELEASE_ALL_HOLDER = "SELECT bool_and(dlock_release(k, %s)) FROM unnest(%s::text[]) AS u(k)"
_VALIDATE_ALL = ("SELECT bool_and(dlock_validate(k, %s, t))"
                 " FROM unnest(%s::text[], %s::bigint[]) AS u(k, t)")


def _check_key(key: Any, name: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"{name} must be a non-empty string")
    return key


class Target:
    """One key (``Target.one``) or several, all or none (``Target.all``)."""

    def __init__(self, keys: List[str], slots: Optional[int], shared: bool, multi: bool):
        self.keys = keys                      # as given (acquire)
        self.unique = list(dict.fromkeys(keys))  # each once, in order (renew, release, fence)
        self.slots = slots
        self.shared = shared
        self.multi = multi
        self.label = f"leases {self.unique!r}" if multi else f"lease {keys[0]!r}"
        if multi:
            self.function = "dlock_acquire_all"
        else:
            self.function = "dlock_acquire_shared" if shared else "dlock_acquire"

    @classmethod
    def one(cls, key: str, slots: Optional[int] = None, shared: bool = False) -> "Target":
        """A lease on key; with slots, one of slots places of a counting
        semaphore; with shared, a shared lease."""
        _check_key(key)
        if slots is not None:
            if not isinstance(slots, int) or isinstance(slots, bool):
                raise TypeError("slots must be an integer (or None for a lease)")
            if slots < 1:
                raise ValueError("slots must be at least 1")
            if shared:
                raise ValueError("slots and shared do not go together: a shared lease has any number of holders")
        return cls([key], slots, bool(shared), False)

    @classmethod
    def all(cls, keys: Sequence[str]) -> "Target":
        """Every key of keys, or none."""
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
            raise TypeError("keys must be a list (or tuple) of key strings")
        if not keys:
            raise ValueError("keys must not be empty")
        return cls([_check_key(k, "every key") for k in keys], None, False, True)

    # -- the SQL -----------------------------------------------------------
    def acquire(self, holder: str, ttl: float, wait: float) -> Sql:
        t, w = timedelta(seconds=ttl), timedelta(seconds=wait)
        if self.multi:
            return _ACQUIRE_ALL, (self.keys, holder, t, w)
        if self.shared:
            return _ACQUIRE_SHARED, (self.keys[0], holder, t, w)
        if self.slots is not None:
            return _ACQUIRE_SLOTS, (self.keys[0], holder, t, w, self.slots)
        return _ACQUIRE, (self.keys[0], holder, t, w)

    def tokens(self, answer: Any) -> Optional[List[int]]:
        """The tokens of the keys (in the order of ``unique``) from the
        acquire's answer, or None when not acquired."""
        if answer is None:
            return None
        if not self.multi:
            return [int(answer)]
        by_key = dict(zip(self.keys, (int(t) for t in answer)))
        return [by_key[k] for k in self.unique]

    def renew(self, holder: str, ttl: float, tokens: List[int]) -> Sql:
        t = timedelta(seconds=ttl)
        if self.multi:
            return _RENEW_ALL, (holder, t, self.unique, tokens)
        return _RENEW, (self.keys[0], holder, t, tokens[0])

    def release(self, holder: str, tokens: List[int]) -> Sql:
        if self.multi:
            return _RELEASE_ALL, (holder, self.unique, tokens)
        return _RELEASE, (self.keys[0], holder, tokens[0])

    def forget(self, holder: str, tokens: Optional[List[int]]) -> Sql:
        """Give back what holder may hold (tokens unknown: by holder)."""
        if tokens is not None:
            return self.release(holder, tokens)
        if self.multi:
            return _RELEASE_ALL_HOLDER, (holder, self.unique)
        return _RELEASE_HOLDER, (self.keys[0], holder)

    def validate(self, holder: str, tokens: List[int]) -> Sql:
        if self.multi:
            return _VALIDATE_ALL, (holder, self.unique, tokens)
        return _VALIDATE, (self.keys[0], holder, tokens[0])
