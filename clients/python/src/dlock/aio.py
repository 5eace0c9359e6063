"""dlock for asyncio: ``async with dlock.aio.lease(...)`` and
``async for batch in dlock.aio.claims(...)``, over psycopg's
AsyncConnection.  The same rules as the blocking API; renewals run as a
task of the running loop (a loop blocked for longer than the ttl loses the
lease, as it should)."""
from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncIterator, Callable, List, Optional, Sequence, Type

from psycopg import AsyncCursor
from psycopg.rows import tuple_row

from . import _core
from ._claims import ClaimsCore, _BatchState, _keys_arg
from ._core import Seconds
from .errors import Error, LeaseLost

__all__ = ["Lease", "lease", "Batch", "Claims", "claims"]


class Lease(_core.LeaseState):
    """The asyncio twin of `dlock.Lease`: ``lost`` is an `asyncio.Event`,
    `execute` takes an `AsyncCursor`, the rest is the same.  A task
    cancelled inside the block releases the lease on its way out; one
    cancelled while it waits to acquire leaves nothing held."""

    lost: asyncio.Event

    def __init__(self, conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
                 holder: Optional[str] = None,
                 on_lost: Optional[Callable[["Lease"], Any]] = None,
                 **connect_kwargs: Any):
        super().__init__(conninfo, key, ttl, wait, holder, on_lost, connect_kwargs,
                         asyncio.Event())
        self._started = False

    async def acquire(self) -> "Lease":
        """Acquire the key, waiting up to ``wait``; raises `NotAcquired`."""
        if self._started:
            raise Error("a Lease is acquired once; make a new one")
        self._started = True
        try:
            token, sent = await _core.acquire(self._conn, self.key, self.holder, self.ttl, self.wait)
        except BaseException:
            self._done = True
            await self._conn.close()
            raise
        self.token = token
        self._keeper = _core.Keeper(
            self.ttl, sent, _core.lease_renewer(self._conn, self.key, self.holder, self.ttl, token),
            self._lose)
        self._keeper.start()
        return self

    async def release(self) -> Optional[bool]:
        """Stop renewing and release with the token; the server's answer
        (None: unreachable until the lease lapsed).  Idempotent."""
        if self._keeper is None or self._done:
            return self.released
        self._done = True
        keeper = self._keeper
        assert self.token is not None
        # finish even if the calling task is cancelled meanwhile
        self.released = await asyncio.shield(self._finish(keeper, self.token))
        return self.released

    async def _finish(self, keeper: _core.Keeper, token: int) -> Optional[bool]:
        await keeper.stop()
        try:
            return await _core.release(self._conn, self.key, self.holder, token, keeper.deadline)
        finally:
            await self._conn.close()

    async def __aenter__(self) -> "Lease":
        return await self.acquire()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            await self.release()
            return
        try:
            await self.release()
        except Exception as rel_exc:
            _core.log.warning("dlock: releasing %r failed: %s", self.key, rel_exc)

    @property
    def deadline(self) -> float:
        """When the lease lapses unless renewed (`time.monotonic`'s clock)."""
        if self._keeper is None:
            raise Error("the lease is not acquired")
        return self._keeper.deadline

    def remaining(self) -> float:
        if self.lost.is_set():
            return 0.0
        return max(0.0, self.deadline - _core.now())

    def check(self) -> None:
        """Raise `LeaseLost` if the lease is lost or not held."""
        if self.lost.is_set():
            raise LeaseLost(f"lease {self.key!r} lost: {self.lost_reason}")
        if self._keeper is None or self._done:
            raise LeaseLost(f"lease {self.key!r} is not held")
        if _core.now() >= self._keeper.deadline:
            raise LeaseLost(f"lease {self.key!r} lost: no renewal confirmed within the ttl")

    async def execute(self, cursor: "AsyncCursor[Any]", query: Any,
                      params: Any = None) -> "AsyncCursor[Any]":
        """Run query fenced by the token, as `dlock.Lease.execute`."""
        self.check()
        conn = cursor.connection
        async with conn.transaction():
            async with conn.cursor(row_factory=tuple_row) as fence:
                await fence.execute(_core.VALIDATE, (self.key, self.holder, self.token))
                row = await fence.fetchone()
            if not row or not row[0]:
                if self._keeper is not None:
                    self._keeper.declare_lost("the fence (dlock_validate) refused the token")
                raise LeaseLost(f"lease {self.key!r} lost: the fence (dlock_validate) refused token {self.token}")
            await cursor.execute(query, params)
        return cursor


def lease(conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
          holder: Optional[str] = None, on_lost: Optional[Callable[[Lease], Any]] = None,
          **connect_kwargs: Any) -> Lease:
    """``async with dlock.aio.lease(conninfo, key, ttl=30, wait=0) as lease:``"""
    return Lease(conninfo, key, ttl, wait, holder=holder, on_lost=on_lost, **connect_kwargs)


class Batch:
    """The asyncio twin of `dlock.Batch` (``lost`` is an `asyncio.Event`)."""

    def __init__(self, state: _BatchState, on_lost: Optional[Callable[["Batch"], Any]]):
        self._state = state
        self.rows = state.rows
        self.keys = list(state.keys)
        self.lost = asyncio.Event()
        self.lost_reason: Optional[str] = None
        self._on_lost = on_lost
        state.on_lost = self._lose

    def _lose(self, exc: LeaseLost) -> None:
        self.lost_reason = str(exc)
        self.lost.set()
        if self._on_lost is not None:
            self._on_lost(self)

    @property
    def outstanding(self) -> List[Any]:
        return list(self._state.outstanding)

    def check(self) -> None:
        if self.lost.is_set():
            raise LeaseLost(f"claims lost: {self.lost_reason}")
        if _core.now() >= self._state.keeper.deadline:
            raise LeaseLost("claims lost: no renewal confirmed within the ttl")

    async def complete(self, keys: Optional[Sequence[Any]] = None,
                       cursor: Optional["AsyncCursor[Any]"] = None) -> List[Any]:
        """As `dlock.Batch.complete`."""
        ks = _keys_arg(self._state, keys)
        if cursor is None:
            return await self._state.core.complete(self._state, ks)
        t = self._state.table
        async with cursor.connection.cursor(row_factory=tuple_row) as c:
            await c.execute(t.complete_sql, (t.name, self._state.core.holder, ks))
            done = [r[0] for r in await c.fetchall()]
        self._state.forget(ks)
        return done

    async def unclaim(self, keys: Optional[Sequence[Any]] = None,
                      cursor: Optional["AsyncCursor[Any]"] = None) -> int:
        """As `dlock.Batch.unclaim`."""
        ks = _keys_arg(self._state, keys)
        if cursor is None:
            return await self._state.core.unclaim(self._state, ks)
        t = self._state.table
        async with cursor.connection.cursor(row_factory=tuple_row) as c:
            await c.execute(t.unclaim_sql, (t.name, self._state.core.holder, ks))
            row = await c.fetchone()
        self._state.forget(ks)
        return int(row[0] if row else 0)

    def __len__(self) -> int:
        return len(self.rows)


class Claims:
    """``async for batch in dlock.aio.claims(...)``; also ``async with``."""

    def __init__(self, conninfo: str, table: str, holder: str, n: int = 10, ttl: Seconds = 30, *,
                 filter: Optional[str] = None, order_by: Optional[str] = None,
                 max_attempts: Optional[int] = None, poll: Seconds = 1.0,
                 until_empty: bool = False, stop: Optional[asyncio.Event] = None,
                 on_lost: Optional[Callable[[Batch], Any]] = None, **connect_kwargs: Any):
        self._core = ClaimsCore(conninfo, table, holder, n, ttl, filter, order_by,
                                max_attempts, connect_kwargs)
        self.holder = holder
        self.poll = _core.seconds(poll, "poll")
        self.until_empty = until_empty
        self.stop = stop if stop is not None else asyncio.Event()
        self._on_lost = on_lost
        self._gen: Optional[AsyncIterator[Batch]] = None

    def __aiter__(self) -> AsyncIterator[Batch]:
        if self._gen is None:
            self._gen = self._iterate()
        return self._gen

    async def _iterate(self) -> AsyncIterator[Batch]:
        core = self._core
        try:
            while not self.stop.is_set():
                state = await core.claim()
                if state is None:
                    if self.until_empty:
                        return
                    try:
                        await asyncio.wait_for(self.stop.wait(), self.poll)
                        return
                    except asyncio.TimeoutError:
                        continue
                batch = Batch(state, self._on_lost)
                state.keeper.start()
                try:
                    yield batch
                finally:
                    await asyncio.shield(core.finish(state))
        finally:
            await core.close()

    async def aclose(self) -> None:
        self.stop.set()
        gen = self._gen
        if gen is not None:
            await gen.aclose()  # type: ignore[attr-defined]

    async def __aenter__(self) -> "Claims":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.aclose()


def claims(conninfo: str, table: str, holder: str, n: int = 10, ttl: Seconds = 30, *,
           filter: Optional[str] = None, order_by: Optional[str] = None,
           max_attempts: Optional[int] = None, poll: Seconds = 1.0, until_empty: bool = False,
           stop: Optional[asyncio.Event] = None,
           on_lost: Optional[Callable[[Batch], Any]] = None, **connect_kwargs: Any) -> Claims:
    """The asyncio claim loop; arguments as `dlock.claims`."""
    return Claims(conninfo, table, holder, n, ttl, filter=filter, order_by=order_by,
                  max_attempts=max_attempts, poll=poll, until_empty=until_empty, stop=stop,
                  on_lost=on_lost, **connect_kwargs)
