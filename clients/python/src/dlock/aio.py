"""dlock for asyncio: ``async with dlock.aio.lease(...)`` (or
``dlock.aio.leases(...)``) and ``async for batch in dlock.aio.claims(...)``, over psycopg's
AsyncConnection.  The same rules as the blocking API; renewals run as a
task of the running loop (a loop blocked for longer than the ttl loses the
lease, as it should)."""
from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Type

from psycopg import AsyncCursor
from psycopg.rows import tuple_row

from . import _core
from ._claims import ClaimsCore, _BatchState, _keys_arg
from ._core import Seconds
from ._target import Target
from .errors import Error, LeaseLost

__all__ = ["Lease", "lease", "Leases", "leases", "Batch", "Claims", "claims"]


class _Held(_core.LeaseState):
    """The asyncio API of what `Lease` and `Leases` share."""

    lost: asyncio.Event

    def __init__(self, conninfo: str, target: Target, ttl: Seconds, wait: Seconds,
                 holder: Optional[str], on_lost: Optional[Callable[[Any], Any]],
                 connect_kwargs: Any):
        super().__init__(conninfo, target, ttl, wait, holder, on_lost, connect_kwargs,
                         asyncio.Event())
        self._started = False

    async def _acquire(self) -> None:
        if self._started:
            raise Error(f"a {type(self).__name__} is acquired once; make a new one")
        self._started = True
        self._reserve()
        try:
            tokens, sent = await _core.acquire(self._conn, self._target, self.holder,
                                               self.ttl, self.wait)
        except BaseException:
            self._done = True
            await self._conn.close()
            self._unreserved()
            raise
        self._held(tokens, sent)

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

    async def _finish(self, keeper: _core.Keeper, tokens: List[int]) -> Optional[bool]:
        await keeper.stop()
        try:
            return await _core.release(self._conn, self._target, self.holder, tokens,
                                       keeper.deadline)
        finally:
            await self._conn.close()
            self._unreserved()  # only now: another lease of this holder would get this token

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


class Lease(_Held):
    """The asyncio twin of `dlock.Lease` (``slots`` and ``shared`` too):
    ``lost`` is an `asyncio.Event`, `execute` takes an `AsyncCursor`, the
    rest is the same.  A task cancelled inside the block releases the lease
    on its way out; one cancelled while it waits to acquire leaves nothing
    held."""

    def __init__(self, conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
                 holder: Optional[str] = None,
                 on_lost: Optional[Callable[["Lease"], Any]] = None,
                 slots: Optional[int] = None, shared: bool = False,
                 **connect_kwargs: Any):
        target = Target.one(key, slots, shared)
        super().__init__(conninfo, target, ttl, wait, holder, on_lost, connect_kwargs)
        self.key = key
        self.slots = slots
        self.shared = target.shared

    @property
    def token(self) -> Optional[int]:
        """The fencing token (None before the acquire)."""
        return None if self._tokens is None else self._tokens[0]

    async def acquire(self) -> "Lease":
        """Acquire the key, waiting up to ``wait``; raises `NotAcquired`."""
        await self._acquire()
        return self

    async def __aenter__(self) -> "Lease":
        return await self.acquire()


class Leases(_Held):
    """The asyncio twin of `dlock.Leases`: every key or none."""

    def __init__(self, conninfo: str, keys: Sequence[str], ttl: Seconds = 30, wait: Seconds = 0, *,
                 holder: Optional[str] = None,
                 on_lost: Optional[Callable[["Leases"], Any]] = None,
                 **connect_kwargs: Any):
        target = Target.all(keys)
        super().__init__(conninfo, target, ttl, wait, holder, on_lost, connect_kwargs)
        self.keys: List[str] = list(target.unique)

    @property
    def tokens(self) -> Dict[str, int]:
        """key -> fencing token (empty before the acquire)."""
        return {} if self._tokens is None else dict(zip(self.keys, self._tokens))

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
