"""dlock.claims: a loop over batches of claimed rows of your table, the
claims renewed in the background while you work on a batch."""
from __future__ import annotations

import threading
import weakref
from datetime import timedelta
from types import TracebackType
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Sequence, Type

from psycopg import Cursor
from psycopg.rows import tuple_row

from . import _core
from ._core import Seconds
from ._loop import LoopThread
from .errors import Error, LeaseLost

__all__ = ["Batch", "Claims", "claims", "ClaimsCore"]


class ClaimsCore:
    """What the blocking and the asyncio claim loops share (runs in a loop)."""

    def __init__(self, conninfo: str, table: str, holder: str, n: int, ttl: Seconds,
                 filter: Optional[str], order_by: Optional[str], max_attempts: Optional[int],
                 connect_kwargs: Dict[str, Any]):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError("n must be a positive integer")
        if not isinstance(holder, str) or not holder:
            raise ValueError("holder must be a non-empty string")
        self.table_arg = table
        self.holder = holder
        self.n = n
        self.ttl = _core.seconds(ttl, "ttl")
        self.filter = filter
        self.order_by = order_by
        self.max_attempts = max_attempts
        self.conn = _core.Conn(conninfo, connect_kwargs)       # claims, completions
        self.renew_conn = _core.Conn(conninfo, connect_kwargs)  # the keeper's
        self.table: Optional[_core.ClaimTable] = None

    async def claim(self) -> Optional["_BatchState"]:
        """The next batch, or None when no row is to be had now."""
        budget = max(self.ttl, 30.0)
        if self.table is None:
            self.table = await _core.describe(self.conn, self.table_arg, _core.now() + budget)
        t = self.table
        sent = _core.now()
        rows = await _core.call_retrying(
            self.conn, f"dlock_claim({t.name})", t.claim_sql,
            _core.claim_params(self.holder, self.n, self.ttl, self.filter, self.order_by,
                               self.max_attempts), budget, rows=True)
        if not rows:
            return None
        return _BatchState(self, rows, sent)

    async def complete(self, state: "_BatchState", keys: Sequence[Any]) -> List[Any]:
        t = state.table
        done = await _core.call_retrying(
            self.conn, f"dlock_complete({t.name})", t.complete_sql, (t.name, self.holder, list(keys)),
            self.ttl, rows=True)
        out = [next(iter(r.values())) for r in done]
        state.forget(keys)
        return out

    async def unclaim(self, state: "_BatchState", keys: Sequence[Any]) -> int:
        t = state.table
        n = await _core.call_retrying(
            self.conn, f"dlock_unclaim({t.name})", t.unclaim_sql, (t.name, self.holder, list(keys)),
            self.ttl)
        state.forget(keys)
        return int(n or 0)

    async def finish(self, state: "_BatchState") -> None:
        """Stop renewing the batch; give back the claims it still holds."""
        await state.keeper.stop()
        left = list(state.outstanding)
        if left:
            try:
                await self.unclaim(state, left)
            except Error as exc:
                _core.log.warning("dlock: could not give back %d claim(s) (they lapse by themselves): %s",
                                  len(left), exc)

    async def close(self) -> None:
        await self.conn.close()
        await self.renew_conn.close()


class _BatchState:
    """A batch's rows, the keys it still holds, and its keeper."""

    def __init__(self, core: ClaimsCore, rows: List[Dict[str, Any]], sent: float):
        assert core.table is not None
        self.core = core
        self.table = core.table
        self.rows = rows
        self.keys = [r[self.table.pk] for r in rows]
        self.outstanding = list(self.keys)
        self.lost_reason: Optional[str] = None
        self.on_lost: Callable[[LeaseLost], None] = lambda exc: None
        self.keeper = _core.Keeper(core.ttl, sent, self._renew, lambda exc: self.on_lost(exc))

    async def _renew(self, deadline: float) -> bool:
        if not self.outstanding:
            return True
        t = self.table
        n = await self.core.renew_conn.call(
            t.renew_sql, (t.name, self.core.holder, timedelta(seconds=self.core.ttl)), deadline)
        return int(n or 0) >= len(self.outstanding)

    def forget(self, keys: Sequence[Any]) -> None:
        gone = {str(k) for k in keys}  # 1 and "1" name one row, as for the server
        self.outstanding = [k for k in self.outstanding if str(k) not in gone]


def _keys_arg(state: _BatchState, keys: Optional[Sequence[Any]]) -> List[Any]:
    return list(state.outstanding if keys is None else keys)


def complete_in(cursor: "Cursor[Any]", state: _BatchState, keys: Sequence[Any]) -> List[Any]:
    t = state.table
    with cursor.connection.cursor(row_factory=tuple_row) as c:
        c.execute(t.complete_sql, (t.name, state.core.holder, list(keys)))
        done = [r[0] for r in c.fetchall()]
    state.forget(keys)
    return done


def unclaim_in(cursor: "Cursor[Any]", state: _BatchState, keys: Sequence[Any]) -> int:
    t = state.table
    with cursor.connection.cursor(row_factory=tuple_row) as c:
        c.execute(t.unclaim_sql, (t.name, state.core.holder, list(keys)))
        row = c.fetchone()
    state.forget(keys)
    return int(row[0] if row else 0)


class Batch:
    """Rows claimed in one call, for this holder, until completed, given
    back or expired; renewed every ttl/3 while the loop body works on them.

    ``rows`` (dicts, whole rows of the table), ``keys`` (their primary
    keys), ``lost`` (a `threading.Event`, set when a renewal is refused or
    none is confirmed within the ttl), ``lost_reason``.  Claims neither
    completed nor given back by the end of the loop body are given back
    (their attempts kept).
    """

    def __init__(self, loop: LoopThread, state: _BatchState,
                 on_lost: Optional[Callable[["Batch"], Any]]):
        self._loop = loop
        self._state = state
        self.rows = state.rows
        self.keys = list(state.keys)
        self.lost = threading.Event()
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
        """The keys this batch still holds claims on (as far as it knows)."""
        return list(self._state.outstanding)

    def check(self) -> None:
        """Raise `LeaseLost` if the batch's claims are lost."""
        if self.lost.is_set():
            raise LeaseLost(f"claims lost: {self.lost_reason}")
        if _core.now() >= self._state.keeper.deadline:
            raise LeaseLost("claims lost: no renewal confirmed within the ttl")

    def complete(self, keys: Optional[Sequence[Any]] = None,
                 cursor: Optional["Cursor[Any]"] = None) -> List[Any]:
        """Complete (dlock_complete) the claims on keys (default: all the
        batch still holds) and return the keys whose claims it still held:
        only those count as done.  With cursor, in your transaction (mark
        the rows done in the same transaction: nobody can claim them before
        it ends); else at once, on the loop's own connection."""
        ks = _keys_arg(self._state, keys)
        if cursor is not None:
            return complete_in(cursor, self._state, ks)
        return self._loop.run(self._state.core.complete(self._state, ks))

    def unclaim(self, keys: Optional[Sequence[Any]] = None,
                cursor: Optional["Cursor[Any]"] = None) -> int:
        """Give back (dlock_unclaim) the claims on keys (default: all the
        batch still holds), keeping their attempts; returns how many."""
        ks = _keys_arg(self._state, keys)
        if cursor is not None:
            return unclaim_in(cursor, self._state, ks)
        return self._loop.run(self._state.core.unclaim(self._state, ks))

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return iter(self.rows)


class Claims:
    """The claim loop: ``for batch in dlock.claims(...)``.  Also a context
    manager (``with dlock.claims(...) as loop: for batch in loop: ...``)
    that gives back what is still claimed when the block ends."""

    def __init__(self, conninfo: str, table: str, holder: str, n: int = 10, ttl: Seconds = 30, *,
                 filter: Optional[str] = None, order_by: Optional[str] = None,
                 max_attempts: Optional[int] = None, poll: Seconds = 1.0,
                 until_empty: bool = False, stop: Optional[threading.Event] = None,
                 on_lost: Optional[Callable[[Batch], Any]] = None, **connect_kwargs: Any):
        self._core = ClaimsCore(conninfo, table, holder, n, ttl, filter, order_by,
                                max_attempts, connect_kwargs)
        self.holder = holder
        self.poll = _core.seconds(poll, "poll")
        self.until_empty = until_empty
        self.stop = stop if stop is not None else threading.Event()
        self._on_lost = on_lost
        self._loop: Optional[LoopThread] = None
        # weakly: the generator refers to self, and must be closed (its
        # claims given back) as soon as the for loop drops it
        self._gen: Optional["weakref.ref[Generator[Batch, None, None]]"] = None

    def __iter__(self) -> Iterator[Batch]:
        gen = self._gen() if self._gen is not None else None
        if gen is None:
            gen = self._iterate()
            self._gen = weakref.ref(gen)
        return gen

    def _iterate(self) -> Generator[Batch, None, None]:
        self._loop = loop = LoopThread(f"dlock claims {self.holder}")
        try:
            while not self.stop.is_set():
                state = loop.run(self._core.claim())
                if state is None:
                    if self.until_empty or self.stop.wait(self.poll):
                        return
                    continue
                batch = Batch(loop, state, self._on_lost)
                loop.run(_start(state))
                try:
                    yield batch
                finally:
                    loop.run(self._core.finish(state))
        finally:
            try:
                loop.run(self._core.close())
            finally:
                loop.stop()

    def close(self) -> None:
        """End the loop: the current batch's claims are given back."""
        self.stop.set()
        gen = self._gen() if self._gen is not None else None
        if gen is not None:
            gen.close()

    def __enter__(self) -> "Claims":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()


async def _start(state: _BatchState) -> None:
    state.keeper.start()


def claims(conninfo: str, table: str, holder: str, n: int = 10, ttl: Seconds = 30, *,
           filter: Optional[str] = None, order_by: Optional[str] = None,
           max_attempts: Optional[int] = None, poll: Seconds = 1.0, until_empty: bool = False,
           stop: Optional[threading.Event] = None,
           on_lost: Optional[Callable[[Batch], Any]] = None, **connect_kwargs: Any) -> Claims:
    """Claim batches of up to n rows of table (dlock_claim with filter,
    order_by and max_attempts) for holder, ttl seconds each, renewed while
    the loop body works on them.  When no row is to be had, waits poll
    seconds and tries again, or ends (until_empty), or ends when stop (a
    threading.Event) is set."""
    return Claims(conninfo, table, holder, n, ttl, filter=filter, order_by=order_by,
                  max_attempts=max_attempts, poll=poll, until_empty=until_empty, stop=stop,
                  on_lost=on_lost, **connect_kwargs)
