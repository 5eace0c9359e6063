"""dlock.lease: a lease held for a block of code, renewed in the background."""
from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Callable, Optional, Type

from psycopg import Cursor
from psycopg.rows import tuple_row

from . import _core
from ._core import Seconds
from ._loop import LoopThread
from .errors import Error, LeaseLost

__all__ = ["Lease", "lease"]


class Lease(_core.LeaseState):
    """A lease on ``key``: acquired by ``with`` (or `acquire`), renewed every
    ttl/3 on a connection of its own, released (with its token) at the end
    of the block, whether it raised or not.

    Attributes: ``key``, ``holder``, ``ttl`` and ``wait`` (seconds),
    ``token`` (the fencing token, once acquired), ``lost`` (a
    `threading.Event`, set once the lease is lost: a renewal was refused, or
    none was confirmed within the ttl), ``lost_reason``, ``released`` (the
    server's answer to the release, None before it or when unreachable).
    """

    lost: threading.Event

    def __init__(self, conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
                 holder: Optional[str] = None,
                 on_lost: Optional[Callable[["Lease"], Any]] = None,
                 **connect_kwargs: Any):
        super().__init__(conninfo, key, ttl, wait, holder, on_lost, connect_kwargs,
                         threading.Event())
        self._loop: Optional[LoopThread] = None

    # -- acquiring and releasing ------------------------------------------
    def acquire(self) -> "Lease":
        """Acquire the key, waiting up to ``wait`` seconds; raises
        `NotAcquired` if someone else kept it, `DatabaseError` on errors."""
        if self._loop is not None or self._done:
            raise Error("a Lease is acquired once; make a new one")
        self._loop = LoopThread(f"dlock lease {self.key}")
        try:
            self.token = self._loop.run(self._start())
        except BaseException:
            self._loop.stop()
            self._done = True
            raise
        return self

    async def _start(self) -> int:
        token, sent = await _core.acquire(self._conn, self.key, self.holder, self.ttl, self.wait)
        self._keeper = _core.Keeper(
            self.ttl, sent, _core.lease_renewer(self._conn, self.key, self.holder, self.ttl, token),
            self._lose)
        self._keeper.start()
        return token

    def release(self) -> Optional[bool]:
        """Stop renewing and release the lease with its token.  Returns the
        server's answer (False: it was lost already), or None when no server
        answered before the lease lapsed.  Idempotent."""
        if self._loop is None or self._done:
            return self.released
        self._done = True
        try:
            self.released = self._loop.run(self._finish())
        finally:
            self._loop.stop()
        return self.released

    async def _finish(self) -> Optional[bool]:
        keeper = self._keeper
        assert keeper is not None and self.token is not None
        await keeper.stop()
        try:
            return await _core.release(self._conn, self.key, self.holder, self.token,
                                       keeper.deadline)
        finally:
            await self._conn.close()

    def __enter__(self) -> "Lease":
        return self.acquire()

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            self.release()
            return
        try:
            self.release()
        except Exception as rel_exc:  # never hide the block's own exception
            _core.log.warning("dlock: releasing %r failed: %s", self.key, rel_exc)

    # -- while held ---------------------------------------------------------
    @property
    def deadline(self) -> float:
        """When the lease lapses unless renewed, on `time.monotonic`'s clock
        (counted from the sending of the last confirmed renewal)."""
        if self._keeper is None:
            raise Error("the lease is not acquired")
        return self._keeper.deadline

    def remaining(self) -> float:
        """Seconds left until the lease lapses unless renewed (0 when lost)."""
        if self.lost.is_set():
            return 0.0
        return max(0.0, self.deadline - _core.now())

    def check(self) -> None:
        """Raise `LeaseLost` if the lease is lost (or released, or its
        ttl has run out since the last confirmed renewal)."""
        if self.lost.is_set():
            raise LeaseLost(f"lease {self.key!r} lost: {self.lost_reason}")
        if self._keeper is None or self._done:
            raise LeaseLost(f"lease {self.key!r} is not held")
        if _core.now() >= self._keeper.deadline:
            raise LeaseLost(f"lease {self.key!r} lost: no renewal confirmed within the ttl")

    def execute(self, cursor: "Cursor[Any]", query: Any, params: Any = None) -> "Cursor[Any]":
        """Run query on cursor fenced by the token: in one transaction (a
        savepoint inside yours), ``dlock_validate`` first, then query.  If
        the fence fails, query is not run, the transaction block is rolled
        back, the lease is declared lost and `LeaseLost` is raised.  Returns
        cursor (fetch query's rows from it).  Use a connection of the same
        role as the lease's; the fence holds until your transaction ends."""
        self.check()
        conn = cursor.connection
        with conn.transaction():
            with conn.cursor(row_factory=tuple_row) as fence:
                fence.execute(_core.VALIDATE, (self.key, self.holder, self.token))
                row = fence.fetchone()
            if not row or not row[0]:
                self._declare_lost()
                raise LeaseLost(f"lease {self.key!r} lost: the fence (dlock_validate) refused token {self.token}")
            cursor.execute(query, params)
        return cursor

    def _declare_lost(self) -> None:
        keeper = self._keeper
        if self._loop is None or keeper is None or self._done:
            return
        k: _core.Keeper = keeper

        async def declare() -> None:
            k.declare_lost("the fence (dlock_validate) refused the token")

        self._loop.run(declare())

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("held" if self._keeper and not self._done else "not held")
        return f"<dlock.Lease {self.key!r} holder={self.holder!r} token={self.token} {state}>"


def lease(conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
          holder: Optional[str] = None, on_lost: Optional[Callable[[Lease], Any]] = None,
          **connect_kwargs: Any) -> Lease:
    """A `Lease` on key, for ``with``: ``with dlock.lease(conninfo, key, ttl=30,
    wait=0) as lease: ...``.  ttl and wait are seconds (or timedelta);
    holder defaults to HOST:PID:RANDOM, unique to this lease; on_lost(lease)
    is called once, from the lease's own thread, when it is lost;
    connect_kwargs go to psycopg's connect."""
    return Lease(conninfo, key, ttl, wait, holder=holder, on_lost=on_lost, **connect_kwargs)
