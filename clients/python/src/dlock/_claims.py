"""dlock.claims: a loop over batches of claimed rows of your table, the
claims renewed in the background while you work on a batch."""
from __future__ import annotations

import asyncio
import threading
import weakref
from types import TracebackType
from typing import Any, Callable, Dict, Generator, Iterator, List, Optional, Sequence, Tuple, Type

from psycopg import Cursor
from psycopg.rows import tuple_row

from ._claim_core import BatchBase, BatchState, ClaimsBase, Sql
from ._core import Seconds, log
from .errors import Error
from ._loop import LoopThread

__all__ = ["Batch", "Claims", "claims", "work"]


def _rows(cursor: "Cursor[Any]", query: Sql) -> List[Tuple[Any, ...]]:
    """query's rows, run on cursor's connection (in its transaction)."""
    with cursor.connection.cursor(row_factory=tuple_row) as c:
        c.execute(*query)
        return c.fetchall()


class Batch(BatchBase):
    """Rows claimed in one call, for this holder, until completed, given
    back or expired; renewed every ttl/3 while the loop body works on them.

    ``rows`` (dicts, whole rows of the table), ``keys`` (their primary
    keys), ``lost`` (a `threading.Event`, set when a renewal is refused or
    none is confirmed within the ttl), ``lost_reason``.  Claims neither
    completed nor given back by the end of the loop body are given back
    (their attempts kept).
    """

    lost: threading.Event

    def __init__(self, loop: LoopThread, state: BatchState,
                 on_lost: Optional[Callable[["Batch"], Any]]):
        super().__init__(state, on_lost, threading.Event())
        self._loop = loop

    def complete(self, keys: Optional[Sequence[Any]] = None,
                 cursor: Optional["Cursor[Any]"] = None) -> List[Any]:
        """Complete (dlock_complete) the claims on keys (default: all the
        batch still holds) and return the keys whose claims it still held:
        only those count as done.  With cursor, in your transaction (mark
        the rows done in the same transaction: nobody can claim them before
        it ends); else at once, on the loop's own connection."""
        ks = self._keys(keys)
        if cursor is None:
            return self._loop.run(self._state.core.complete(self._state, ks))
        return self._state.completed(ks, _rows(cursor, self._state.complete_sql(ks)))

    def unclaim(self, keys: Optional[Sequence[Any]] = None,
                cursor: Optional["Cursor[Any]"] = None) -> int:
        """Give back (dlock_unclaim) the claims on keys (default: all the
        batch still holds), keeping their attempts; returns how many."""
        ks = self._keys(keys)
        if cursor is None:
            return self._loop.run(self._state.core.unclaim(self._state, ks))
        return self._state.unclaimed(ks, _rows(cursor, self._state.unclaim_sql(ks)))

    def fail(self, keys: Optional[Sequence[Any]] = None,
             cursor: Optional["Cursor[Any]"] = None,
             retry_after: Optional[Seconds] = None) -> int:
        """Give back the claims on keys (default: all the batch still holds)
        as failed: ``dlock_unclaim(table, holder, keys, retry_after)``, the
        rows not claimable again before retry_after seconds (default: the
        loop's ``retry_after``; when that is None too, the backoff the claim
        asked for).  Attempts kept; returns how many."""
        ks = self._keys(keys)
        after = self._retry_after(retry_after)
        if cursor is None:
            return self._loop.run(self._state.core.fail(self._state, ks, after))
        return self._state.unclaimed(ks, _rows(cursor, self._state.fail_sql(ks, after)))

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return iter(self.rows)


class Claims(ClaimsBase[Batch, threading.Event]):
    """The claim loop: ``for batch in dlock.claims(...)``.  Also a context
    manager (``with dlock.claims(...) as loop: for batch in loop: ...``)
    that gives back what is still claimed when the block ends.  Arguments
    as `claims`."""

    _loop: Optional[LoopThread] = None
    # weakly: the generator refers to self, and must be closed (its
    # claims given back) as soon as the for loop drops it
    # (a ``with`` block too: a ``break`` gives the batch back at once, as
    # before 0.5; Python cannot tell a break from an exception leaving the
    # for loop, so a blocking loop gives its batch back as failed only when
    # the block raises while the generator is still alive: see __exit__)
    _gen: Optional["weakref.ref[Generator[Batch, None, None]]"] = None

    def _new_flag(self) -> threading.Event:
        return threading.Event()

    def __iter__(self) -> Iterator[Batch]:
        gen = self._gen() if self._gen is not None else None
        if gen is None:
            gen = self._iterate()
            self._gen = weakref.ref(gen)
        return gen

    def _iterate(self) -> Generator[Batch, None, None]:
        self._loop = loop = LoopThread(f"dlock claims {self.holder}")
        try:
            turn_end = self._turn_end()
            while not self.stop.is_set():
                state = loop.run(self._core.claim(self._call_wait(turn_end), self._stopped))
                if state is None:
                    if self.stop.is_set():
                        return
                    if self._keep_waiting(turn_end):
                        continue
                    if self.until_empty:
                        return
                    if not self.wait and self.stop.wait(self.poll):
                        return
                    turn_end = self._turn_end()
                    continue
                batch = Batch(loop, state, self._on_lost)
                loop.run(_start(state))
                try:
                    yield batch
                finally:
                    loop.run(self._core.finish(state, self._failed))
                turn_end = self._turn_end()
        finally:
            try:
                loop.run(self._core.close())
            finally:
                loop.stop()

    async def _stopped(self) -> None:
        """Returns once stop is set (looked at every 50 ms: a
        threading.Event cannot wake the loop's thread)."""
        while not self.stop.is_set():
            await asyncio.sleep(0.05)

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
        # the block raised and the batch is still held (its iterator kept
        # alive, e.g. by next()): given back as failed.  A for loop that the
        # exception left has given its batch back already, plainly.
        self._failed = isinstance(exc, Exception)
        self.close()

    def run(self, handler: Callable[[Batch], Any]) -> None:
        """handler(batch) for each batch until the loop ends; see `work`."""
        with self:
            for batch in self:
                try:
                    handler(batch)
                except Exception as exc:
                    log.warning("dlock: the handler failed on %d claimed row(s), given back to be"
                                " retried: %r", len(batch.outstanding), exc)
                    try:
                        batch.fail()
                    except Error as err:
                        log.warning("dlock: could not give back %d claim(s) (they lapse by"
                                    " themselves): %s", len(batch.outstanding), err)


async def _start(state: BatchState) -> None:
    state.keeper.start()


def claims(conninfo: str, table: str, holder: str, n: int = 10, ttl: Seconds = 30, *,
           filter: Optional[str] = None, order_by: Optional[str] = None,
           max_attempts: Optional[int] = None, wait: Optional[Seconds] = None,
           poll: Seconds = 1.0, group_by: Optional[str] = None, per_group: Optional[int] = None,
           fair: bool = False, backoff: Optional[Seconds] = None,
           backoff_max: Optional[Seconds] = None, retry_after: Optional[Seconds] = None,
           until_empty: bool = False, stop: Optional[threading.Event] = None,
           on_lost: Optional[Callable[[Batch], Any]] = None, **connect_kwargs: Any) -> Claims:
    """Claim batches of up to n rows of table (dlock_claim with filter,
    order_by, max_attempts, group_by, per_group, fair, backoff and
    backoff_max) for holder, ttl seconds each, renewed while the loop body
    works on them.  When no row is to be had: with wait, the claim waits in
    the server up to wait seconds for one (woken when an insert commits);
    else waits poll seconds and tries again; or ends (until_empty), or ends
    when stop (a threading.Event) is set."""
    return Claims(conninfo, table, holder, n, ttl, filter=filter, order_by=order_by,
                  max_attempts=max_attempts, wait=wait, poll=poll, group_by=group_by,
                  per_group=per_group, fair=fair, backoff=backoff, backoff_max=backoff_max,
                  retry_after=retry_after, until_empty=until_empty, stop=stop,
                  on_lost=on_lost, **connect_kwargs)


def work(conninfo: str, table: str, holder: str, handler: Callable[[Batch], Any],
         n: int = 10, ttl: Seconds = 30, **options: Any) -> None:
    """The claim loop with a handler: handler(batch) for each batch (options
    as `claims`).  Claims the handler neither completed nor gave back are
    given back when it returns; when it raises, as failed (`Batch.fail`,
    with ``retry_after``), logged, and the loop goes on.  Returns when the
    loop ends (until_empty, stop)."""
    claims(conninfo, table, holder, n, ttl, **options).run(handler)
