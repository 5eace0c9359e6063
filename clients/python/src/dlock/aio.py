"""dlock for asyncio: ``async with dlock.aio.lease(...)`` (or
``dlock.aio.leases(...)``) and ``async for batch in dlock.aio.claims(...)``, over psycopg's
AsyncConnection.  The same rules as the blocking API; renewals run as a
task of the running loop (a loop blocked for longer than the ttl loses the
lease, as it should)."""
from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, List, Optional, Sequence, Tuple, Type

from psycopg import AsyncCursor
from psycopg.rows import tuple_row

from . import _core
from ._claim_core import BatchBase, BatchState, ClaimsBase, Sql
from ._core import Seconds
from .errors import Error

__all__ = ["Lease", "lease", "Leases", "leases", "Batch", "Claims", "claims", "work"]


class _Held(_core.LeaseState):
    """The asyncio API of what `Lease` and `Leases` share: the calls of
    the asyncio core, awaited in the running loop."""

    lost: asyncio.Event
    _started = False

    def _new_flag(self) -> asyncio.Event:
        return asyncio.Event()

    async def _acquire(self) -> None:
        if self._started:
            raise Error(f"a {type(self).__name__} is acquired once; make a new one")
        self._started = True
        self._reserve()
        try:
            await self._start()
        except BaseException:
            self._done = True
            await self._conn.close()
            self._unreserved()
            raise

    async def release(self) -> Optional[bool]:
        """Stop renewing and release with the token(s); the server's answer
        (None: unreachable until the lease lapsed).  Idempotent."""
        if self._keeper is None or self._done:
            return self.released
        self._done = True
        keeper = self._keeper
        assert self._tokens is not None
        # finish even if the calling task is cancelled meanwhile
        self.released = await asyncio.shield(self._finish(keeper, self._tokens))
        return self.released

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            await self.release()
            return
        try:
            await self.release()
        except Exception as rel_exc:
            _core.log.warning("dlock: releasing %s failed: %s", self._target.label, rel_exc)

    async def execute(self, cursor: "AsyncCursor[Any]", query: Any,
                      params: Any = None) -> "AsyncCursor[Any]":
        """Run query fenced by the token(s), as `dlock.Lease.execute`."""
        self.check()
        conn = cursor.connection
        async with conn.transaction():
            async with conn.cursor(row_factory=tuple_row) as fence:
                await fence.execute(*self._fence())
                row = await fence.fetchone()
            if not row or not row[0]:
                if self._keeper is not None:
                    self._keeper.declare_lost("the fence (dlock_validate) refused the token")
                raise self._fence_refused()
            await cursor.execute(query, params)
        return cursor


class Lease(_core.OneKeyState, _Held):
    """The asyncio twin of `dlock.Lease` (``slots`` and ``shared`` too):
    ``lost`` is an `asyncio.Event`, `execute` takes an `AsyncCursor`, the
    rest is the same.  A task cancelled inside the block releases the lease
    on its way out; one cancelled while it waits to acquire leaves nothing
    held."""

    async def acquire(self) -> "Lease":
        """Acquire the key, waiting up to ``wait``; raises `NotAcquired`."""
        await self._acquire()
        return self

    async def __aenter__(self) -> "Lease":
        return await self.acquire()


class Leases(_core.AllKeysState, _Held):
    """The asyncio twin of `dlock.Leases`: every key or none."""

    async def acquire(self) -> "Leases":
        """Acquire every key or none, waiting up to ``wait`` in all; raises
        `NotAcquired` (nothing held or queued then)."""
        await self._acquire()
        return self

    async def __aenter__(self) -> "Leases":
        return await self.acquire()


def lease(conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
          holder: Optional[str] = None, on_lost: Optional[Callable[[Lease], Any]] = None,
          slots: Optional[int] = None, shared: bool = False,
          **connect_kwargs: Any) -> Lease:
    """``async with dlock.aio.lease(conninfo, key, ttl=30, wait=0) as lease:``"""
    return Lease(conninfo, key, ttl, wait, holder=holder, on_lost=on_lost, slots=slots,
                 shared=shared, **connect_kwargs)


def leases(conninfo: str, keys: Sequence[str], ttl: Seconds = 30, wait: Seconds = 0, *,
           holder: Optional[str] = None, on_lost: Optional[Callable[[Leases], Any]] = None,
           **connect_kwargs: Any) -> Leases:
    """``async with dlock.aio.leases(conninfo, keys, ttl=30, wait=0) as held:``"""
    return Leases(conninfo, keys, ttl, wait, holder=holder, on_lost=on_lost, **connect_kwargs)


async def _rows(cursor: "AsyncCursor[Any]", query: Sql) -> List[Tuple[Any, ...]]:
    """query's rows, run on cursor's connection (in its transaction)."""
    async with cursor.connection.cursor(row_factory=tuple_row) as c:
        await c.execute(*query)
        return await c.fetchall()


class Batch(BatchBase):
    """The asyncio twin of `dlock.Batch` (``lost`` is an `asyncio.Event`)."""

    lost: asyncio.Event

    def __init__(self, state: BatchState, on_lost: Optional[Callable[["Batch"], Any]]):
        super().__init__(state, on_lost, asyncio.Event())

    async def complete(self, keys: Optional[Sequence[Any]] = None,
                       cursor: Optional["AsyncCursor[Any]"] = None) -> List[Any]:
        """As `dlock.Batch.complete`."""
        ks = self._keys(keys)
        if cursor is None:
            return await self._state.core.complete(self._state, ks)
        return self._state.completed(ks, await _rows(cursor, self._state.complete_sql(ks)))

    async def unclaim(self, keys: Optional[Sequence[Any]] = None,
                      cursor: Optional["AsyncCursor[Any]"] = None) -> int:
        """As `dlock.Batch.unclaim`."""
        ks = self._keys(keys)
        if cursor is None:
            return await self._state.core.unclaim(self._state, ks)
        return self._state.unclaimed(ks, await _rows(cursor, self._state.unclaim_sql(ks)))

    async def fail(self, keys: Optional[Sequence[Any]] = None,
                   cursor: Optional["AsyncCursor[Any]"] = None,
                   retry_after: Optional[Seconds] = None) -> int:
        """As `dlock.Batch.fail`."""
        ks = self._keys(keys)
        after = self._retry_after(retry_after)
        if cursor is None:
            return await self._state.core.fail(self._state, ks, after)
        return self._state.unclaimed(ks, await _rows(cursor, self._state.fail_sql(ks, after)))


class Claims(ClaimsBase[Batch, asyncio.Event]):
    """``async for batch in dlock.aio.claims(...)``; also ``async with``.
    Arguments as `claims`."""

    _gen: Optional[AsyncIterator[Batch]] = None

    def _new_flag(self) -> asyncio.Event:
        return asyncio.Event()

    def __aiter__(self) -> AsyncIterator[Batch]:
        if self._gen is None:
            self._gen = self._iterate()
        return self._gen

    async def _iterate(self) -> AsyncIterator[Batch]:
        core = self._core
        try:
            turn_end = self._turn_end()
            while not self.stop.is_set():
                state = await core.claim(self._call_wait(turn_end), self.stop.wait)
                if state is None:
                    if self.stop.is_set():
                        return
                    if self._keep_waiting(turn_end):
                        continue
                    if self.until_empty:
                        return
                    if not self.wait:
                        try:
                            await asyncio.wait_for(self.stop.wait(), self.poll)
                            return
                        except asyncio.TimeoutError:
                            pass
                    turn_end = self._turn_end()
                    continue
                batch = Batch(state, self._on_lost)
                state.keeper.start()
                try:
                    yield batch
                finally:
                    await asyncio.shield(core.finish(state, self._failed))
                turn_end = self._turn_end()
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
        # the block raised: the current batch's claims are given back as failed
        self._failed = isinstance(exc, Exception)
        await self.aclose()

    async def run(self, handler: Callable[[Batch], Awaitable[Any]]) -> None:
        """await handler(batch) for each batch until the loop ends; see `work`."""
        async with self:
            async for batch in self:
                try:
                    await handler(batch)
                except Exception as exc:
                    _core.log.warning("dlock: the handler failed on %d claimed row(s), given back"
                                      " to be retried: %r", len(batch.outstanding), exc)
                    try:
                        await batch.fail()
                    except Error as err:
                        _core.log.warning("dlock: could not give back %d claim(s) (they lapse by"
                                          " themselves): %s", len(batch.outstanding), err)


def claims(conninfo: str, table: str, holder: str, n: int = 10, ttl: Seconds = 30, *,
           filter: Optional[str] = None, order_by: Optional[str] = None,
           max_attempts: Optional[int] = None, wait: Optional[Seconds] = None,
           poll: Seconds = 1.0, group_by: Optional[str] = None, per_group: Optional[int] = None,
           fair: bool = False, backoff: Optional[Seconds] = None,
           backoff_max: Optional[Seconds] = None, retry_after: Optional[Seconds] = None,
           until_empty: bool = False, stop: Optional[asyncio.Event] = None,
           on_lost: Optional[Callable[[Batch], Any]] = None, **connect_kwargs: Any) -> Claims:
    """The asyncio claim loop; arguments as `dlock.claims`."""
    return Claims(conninfo, table, holder, n, ttl, filter=filter, order_by=order_by,
                  max_attempts=max_attempts, wait=wait, poll=poll, group_by=group_by,
                  per_group=per_group, fair=fair, backoff=backoff, backoff_max=backoff_max,
                  retry_after=retry_after, until_empty=until_empty, stop=stop,
                  on_lost=on_lost, **connect_kwargs)


async def work(conninfo: str, table: str, holder: str, handler: Callable[[Batch], Awaitable[Any]],
               n: int = 10, ttl: Seconds = 30, **options: Any) -> None:
    """The asyncio twin of `dlock.work` (handler is awaited)."""
    await claims(conninfo, table, holder, n, ttl, **options).run(handler)
