"""dlock.lease and dlock.leases: a lease (a semaphore's slot, a shared lease)
or several keys held for a block of code, renewed in the background."""
from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Callable, Optional, Sequence, Type

from psycopg import Cursor
from psycopg.rows import tuple_row

from . import _core
from ._core import Seconds
from ._loop import LoopThread
from .errors import Error

__all__ = ["Lease", "lease", "Leases", "leases"]


class _Held(_core.LeaseState):
    """The blocking API of what `Lease` and `Leases` share: acquiring,
    releasing, ``with``, and fenced statements, each a call of the
    asyncio core in the lease's own thread (a `LoopThread`)."""

    lost: threading.Event
    _loop: Optional[LoopThread] = None

    def _new_flag(self) -> threading.Event:
        return threading.Event()

    # -- acquiring and releasing ------------------------------------------
    def _acquire(self) -> None:
        if self._loop is not None or self._done:
            raise Error(f"a {type(self).__name__} is acquired once; make a new one")
        self._reserve()
        try:
            self._loop = LoopThread(f"dlock {self._target.label}")
            try:
                self._loop.run(self._start())
            except BaseException:
                self._loop.stop()
                self._done = True
                raise
        except BaseException:
            self._unreserved()
            raise

    def release(self) -> Optional[bool]:
        """Stop renewing and release with the token(s).  Returns the
        server's answer (False: lost already; of several keys, one at
        least), or None when no server answered before the lease lapsed.
        Idempotent."""
        if self._loop is None or self._done:
            return self.released
        self._done = True
        try:
            keeper = self._keeper
            assert keeper is not None and self._tokens is not None
            self.released = self._loop.run(self._finish(keeper, self._tokens))
        finally:
            self._loop.stop()
        return self.released

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            self.release()
            return
        try:
            self.release()
        except Exception as rel_exc:  # never hide the block's own exception
            _core.log.warning("dlock: releasing %s failed: %s", self._target.label, rel_exc)

    # -- while held ---------------------------------------------------------
    def execute(self, cursor: "Cursor[Any]", query: Any, params: Any = None) -> "Cursor[Any]":
        """Run query on cursor fenced by the token(s): in one transaction (a
        savepoint inside yours), ``dlock_validate`` first (of every key),
        then query.  If the fence fails, query is not run, the transaction
        block is rolled back, the lease is declared lost and `LeaseLost` is
        raised.  Returns cursor (fetch query's rows from it).  Use a
        connection of the same role as the lease's; the fence holds until
        your transaction ends."""
        self.check()
        conn = cursor.connection
        with conn.transaction():
            with conn.cursor(row_factory=tuple_row) as fence:
                fence.execute(*self._fence())
                row = fence.fetchone()
            if not row or not row[0]:
                self._declare_lost()
                raise self._fence_refused()
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


class Lease(_core.OneKeyState, _Held):
    """A lease on ``key``: acquired by ``with`` (or `acquire`), renewed every
    ttl/3 on a connection of its own, released (with its token) at the end
    of the block, whether it raised or not.

    With ``slots=n``, one of n places of the counting semaphore ``key``
    (``dlock_acquire(key, holder, ttl, wait, slots)``: up to n holders at
    once, each with its own token; every holder names the same n).  With
    ``shared=True``, a shared lease (``dlock_acquire_shared``: any number of
    shared holders at once, or the one holder of the lease).  Renewed,
    released and fenced as a lease.

    Attributes: ``key``, ``holder``, ``ttl`` and ``wait`` (seconds),
    ``slots``, ``shared``, ``token`` (the fencing token, once acquired),
    ``lost`` (a `threading.Event`, set once the lease is lost: a renewal
    was refused, or none was confirmed within the ttl), ``lost_reason``,
    ``released`` (the server's answer to the release, None before it or
    when unreachable).
    """

    def acquire(self) -> "Lease":
        """Acquire the key, waiting up to ``wait`` seconds; raises
        `NotAcquired` if someone else kept it, `DatabaseError` on errors
        (``sqlstate`` 22023 for a ``slots`` other than the key's holders')."""
        self._acquire()
        return self

    def __enter__(self) -> "Lease":
        return self.acquire()

    def __repr__(self) -> str:
        shape = f" slots={self.slots}" if self.slots is not None else (" shared" if self.shared else "")
        return f"<dlock.Lease {self.key!r}{shape} holder={self.holder!r} token={self.token} {self._state()}>"


class Leases(_core.AllKeysState, _Held):
    """Several keys, all or none (``dlock_acquire_all``): acquired by
    ``with`` (or `acquire`), each an ordinary lease with its own token,
    renewed together every ttl/3 on a connection of their own, released
    together at the end of the block.  Lost as soon as any of them is.

    Attributes: ``keys`` (each once, in the order given), ``tokens`` (a
    dict: key -> fencing token, once acquired), ``holder``, ``ttl``,
    ``wait``, ``lost``, ``lost_reason``, ``released`` (True when every key
    was still held and is released).
    """

    def acquire(self) -> "Leases":
        """Acquire every key or none, waiting up to ``wait`` seconds in all;
        raises `NotAcquired` if not all could be had (nothing is then held
        or queued), `DatabaseError` on errors."""
        self._acquire()
        return self

    def __enter__(self) -> "Leases":
        return self.acquire()

    def __repr__(self) -> str:
        return f"<dlock.Leases {self.keys!r} holder={self.holder!r} tokens={self.tokens} {self._state()}>"


def lease(conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
          holder: Optional[str] = None, on_lost: Optional[Callable[[Lease], Any]] = None,
          slots: Optional[int] = None, shared: bool = False,
          **connect_kwargs: Any) -> Lease:
    """A `Lease` on key, for ``with``: ``with dlock.lease(conninfo, key, ttl=30,
    wait=0) as lease: ...``.  ttl and wait are seconds (or timedelta);
    holder defaults to HOST:PID:RANDOM, unique to this lease; on_lost(lease)
    is called once, from the lease's own thread, when it is lost; slots=n
    takes one of n places of a counting semaphore, shared=True a shared
    lease; connect_kwargs go to psycopg's connect."""
    return Lease(conninfo, key, ttl, wait, holder=holder, on_lost=on_lost, slots=slots,
                 shared=shared, **connect_kwargs)


def leases(conninfo: str, keys: Sequence[str], ttl: Seconds = 30, wait: Seconds = 0, *,
           holder: Optional[str] = None, on_lost: Optional[Callable[[Leases], Any]] = None,
           **connect_kwargs: Any) -> Leases:
    """`Leases` on every key of keys or none, for ``with``: ``with
    dlock.leases(conninfo, ["a", "b"], ttl=30, wait=10) as held:
    held.tokens["a"] ...``.  Arguments as `lease`'s."""
    return Leases(conninfo, keys, ttl, wait, holder=holder, on_lost=on_lost, **connect_kwargs)
