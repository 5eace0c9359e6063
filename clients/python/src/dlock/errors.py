"""The errors of dlock's Python client.

Every error the client raises is a `dlock.Error`.  One that the server
answered (or a connection failure) is a `DatabaseError` whose `sqlstate`
is the server's SQLSTATE (None when no server answered), with the psycopg
error as its ``__cause__``; a call that got no answer in time is a
`Timeout`, a kind of `DatabaseError`.  Errors of your own statements run through
`Lease.execute` are psycopg's, unchanged (they carry ``sqlstate`` too).
"""
from __future__ import annotations

from typing import Optional

__all__ = ["Error", "NotAcquired", "LeaseLost", "HolderInUse", "DatabaseError", "Timeout"]


class Error(Exception):
    """Base class of every error raised by dlock's client."""

    sqlstate: Optional[str] = None


class NotAcquired(Error):
    """The key was not acquired within ``wait`` (someone else holds it)."""


class LeaseLost(Error):
    """The lease (or a claim) is lost: stop working on what it guards."""


class HolderInUse(Error):
    """A lease of this process (acquiring, held, or lost but not yet
    released) already has this key with this holder.  The server gives a
    second acquire by the same holder the same token, so two blocks would
    each believe they hold the key alone: the client refuses the second
    before any call.  Use another holder, or wait for the first release."""


class DatabaseError(Error):
    """The server answered a dlock call with an error, or could not be reached.

    ``sqlstate`` is the server's SQLSTATE (for example ``22023`` for an
    invalid ttl, ``42501`` for a missing privilege), or None when the
    error did not come from a server (connection refused, timed out).
    """

    def __init__(self, message: str, sqlstate: Optional[str] = None):
        super().__init__(message)
        self.sqlstate = sqlstate


class Timeout(DatabaseError):
    """No answer in time: the call's outcome is unknown (an acquire's is
    given back), and its connection was dropped.  ``sqlstate`` is None."""

    def __init__(self, message: str):
        super().__init__(message, None)
