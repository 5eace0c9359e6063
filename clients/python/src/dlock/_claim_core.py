"""The claim core shared by `dlock.claims` and `dlock.aio.claims`.

Everything a claim loop does but its I/O style: the claim table's SQL
(`ClaimTable`), claiming, completing and giving back on the loop's own
connections and renewing the claims (`ClaimsCore` and `BatchState`, run in
an event loop: the asyncio API's own, or the blocking API's thread), the
statements of a completion or a give-back in the caller's transaction and
the reading of their answers (`BatchState`), and what a batch and a loop
object hold and check (`BatchBase`, `ClaimsBase`).  `dlock._claims` and
`dlock.aio` add only the calls: plain ones, or awaited.
"""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Awaitable, Callable, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar

from psycopg import sql

from . import _core
from ._core import Flag, LossSignal, Seconds
from .errors import Error, LeaseLost

__all__ = ["ClaimTable", "ClaimArgs", "ClaimsCore", "BatchState", "BatchBase", "ClaimsBase"]

Sql = Tuple[sql.Composed, Tuple[Any, ...]]
BatchT = TypeVar("BatchT")                 # the API's Batch
StopT = TypeVar("StopT", bound=Flag)       # the API's stop event

_DESCRIBE = """
SELECT c.oid::pg_catalog.regclass::text, a.attname::text,
       pg_catalog.format_type(a.atttypid, a.atttypmod)
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
  JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
 WHERE i.indrelid = %s::pg_catalog.regclass AND i.indisprimary AND i.indnatts = 1
"""


class ClaimTable:
    """A claim table: its name as the server spells it, its primary key
    column and type (for the keys arrays of dlock_complete and dlock_unclaim)."""

    def __init__(self, name: str, pk: str, pktype: str):
        self.name = name
        self.pk = pk
        self.pktype = pktype
        self.claim_head = sql.SQL(
            "SELECT * FROM dlock_claim(NULL::{}, %s, %s, %s::interval, %s, %s, %s"
        ).format(sql.SQL(name))
        self.complete_sql = sql.SQL(
            "SELECT k FROM dlock_complete(%s::regclass, %s, %s::{}[]) AS c(k)"
        ).format(sql.SQL(pktype))
        self.unclaim_sql = sql.SQL(
            "SELECT dlock_unclaim(%s::regclass, %s, %s::{}[])").format(sql.SQL(pktype))
        self.fail_sql = sql.SQL(
            "SELECT dlock_unclaim(%s::regclass, %s, %s::{}[], %s::interval)").format(sql.SQL(pktype))
        self.unclaim_all_sql = sql.SQL("SELECT dlock_unclaim(%s::regclass, %s)")
        self.renew_sql = sql.SQL("SELECT dlock_renew_claims(%s::regclass, %s, %s::interval)")


async def describe(conn: _core.Conn, table: str, deadline: float) -> ClaimTable:
    try:
        rows = await conn.call(_DESCRIBE, (table,), deadline, rows=True)
    except Exception as exc:
        raise _core.wrap(exc, f"claim table {table!r}")
    if not rows:
        raise Error(f"{table!r} has no single-column primary key: dlock_claim needs one")
    r = list(rows[0].values())
    return ClaimTable(r[0], r[1], r[2])


async def call_retrying(conn: _core.Conn, what: str, query: Any, params: Sequence[Any],
                        timeout: float, rows: bool = False, cancel: bool = False) -> Any:
    """A call repeated on a new connection while the server is unreachable,
    up to timeout seconds; DatabaseError at the end or for a server error.
    With cancel, a statement left running (cancellation) is cancelled on
    the server."""
    deadline = _core.now() + timeout
    while True:
        try:
            return await conn.call(query, params, deadline, rows=rows, cancel=cancel)
        except Exception as exc:
            if not _core.retryable(exc) or _core.now() + 0.2 >= deadline:
                raise _core.wrap(exc, what)
            await asyncio.sleep(0.2)


def claim_params(holder: str, n: int, ttl: float, filter: Optional[str],
                 order_by: Optional[str], max_attempts: Optional[int]) -> List[Any]:
    return [holder, n, timedelta(seconds=ttl), filter, order_by, max_attempts]


# The longest one waiting dlock_claim call waits in the server: a loop's
# longer wait is made of calls of at most this much.
WAIT_CAP = 10.0


class ClaimArgs:
    """dlock_claim's arguments after max_attempts (0.5: wait, backoff,
    backoff_max, group_by, per_group, fair), checked; only those set are
    passed, by name, so that a loop that sets none calls an older dlock."""

    def __init__(self, wait: Optional[Seconds], backoff: Optional[Seconds],
                 backoff_max: Optional[Seconds], group_by: Optional[str],
                 per_group: Optional[int], fair: bool, retry_after: Optional[Seconds]):
        self.wait = None if wait is None else _core.seconds(wait, "wait", positive=False)
        self.backoff = None if backoff is None else _core.seconds(backoff, "backoff")
        self.backoff_max = None if backoff_max is None else _core.seconds(backoff_max, "backoff_max")
        if group_by is not None and (not isinstance(group_by, str) or not group_by):
            raise ValueError("group_by must be a non-empty string (an SQL expression)")
        if per_group is not None and (not isinstance(per_group, int) or isinstance(per_group, bool)
                                      or per_group < 1):
            raise ValueError("per_group must be a positive integer")
        if not isinstance(fair, bool):
            raise TypeError("fair must be a bool")
        if (per_group is not None or fair) and group_by is None:
            raise ValueError(("fair" if fair else "per_group") + " needs group_by")
        self.group_by = group_by
        self.per_group = per_group
        self.fair = fair
        self.retry_after = (None if retry_after is None
                            else _core.seconds(retry_after, "retry_after", positive=False))

    def named(self, wait: float) -> List[Tuple[str, str, Any]]:
        """(name, SQL type, value) of each argument to pass (wait: this call's)."""
        out: List[Tuple[str, str, Any]] = []
        if wait > 0:
            out.append(("wait", "interval", timedelta(seconds=wait)))
        if self.backoff is not None:
            out.append(("backoff", "interval", timedelta(seconds=self.backoff)))
        if self.backoff_max is not None:
            out.append(("backoff_max", "interval", timedelta(seconds=self.backoff_max)))
        if self.group_by is not None:
            out.append(("group_by", "text", self.group_by))
        if self.per_group is not None:
            out.append(("per_group", "integer", self.per_group))
        if self.fair:
            out.append(("fair", "boolean", True))
        return out


def claim_sql(t: ClaimTable, named: List[Tuple[str, str, Any]]) -> sql.Composed:
    """dlock_claim's call with the named arguments of `ClaimArgs.named`."""
    parts: List[sql.Composable] = [t.claim_head]
    for name, typ, _ in named:
        parts.append(sql.SQL(", {} => %s::{}").format(sql.Identifier(name), sql.SQL(typ)))
    parts.append(sql.SQL(")"))
    return sql.Composed(parts)


class ClaimsCore:
    """What the blocking and the asyncio claim loops share (runs in a loop)."""

    def __init__(self, conninfo: str, table: str, holder: str, n: int, ttl: Seconds,
                 filter: Optional[str], order_by: Optional[str], max_attempts: Optional[int],
                 args: ClaimArgs, connect_kwargs: Dict[str, Any]):
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
        self.args = args
        self.calls = 0  # dlock_claim calls made (the tests count them)
        self.conn = _core.Conn(conninfo, connect_kwargs)       # claims, completions
        self.renew_conn = _core.Conn(conninfo, connect_kwargs)  # the keeper's
        self.table: Optional[ClaimTable] = None

    async def claim(self, wait: float = 0.0,
                    stopped: Optional[Callable[[], Awaitable[Any]]] = None
                    ) -> Optional["BatchState"]:
        """The next batch, or None when no row is to be had now (or, when
        wait > 0, within wait seconds, waiting in the server; given up as
        soon as stopped() returns)."""
        budget = max(self.ttl, 30.0)
        if self.table is None:
            self.table = await describe(self.conn, self.table_arg, _core.now() + budget)
        if wait > 0 and stopped is not None:
            task = asyncio.ensure_future(self._claim(wait, budget))
            stop = asyncio.ensure_future(stopped())
            try:
                await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                if not task.done():
                    task.cancel()
                await asyncio.gather(stop, task, return_exceptions=True)
            if task.cancelled():
                return None
            return task.result()
        return await self._claim(wait, budget)

    async def _claim(self, wait: float, budget: float) -> Optional["BatchState"]:
        t = self.table
        assert t is not None
        named = self.args.named(wait)
        sent = _core.now()
        self.calls += 1
        try:
            rows = await call_retrying(
                self.conn, f"dlock_claim({t.name})", claim_sql(t, named),
                claim_params(self.holder, self.n, self.ttl, self.filter, self.order_by,
                             self.max_attempts) + [v for _, _, v in named],
                wait + budget, rows=True, cancel=True)
        except BaseException as exc:
            if not isinstance(exc, Error):
                # cancelled: what the call may have claimed before its
                # cancel arrived is given back (the holder is this loop's)
                await asyncio.shield(self._forget())
            raise
        if not rows:
            return None
        return BatchState(self, rows, sent)

    async def _forget(self) -> None:
        t = self.table
        assert t is not None
        try:
            await self.conn.call(t.unclaim_all_sql, (t.name, self.holder), _core.now() + 5.0)
        except Exception as exc:
            _core.log.warning("dlock: could not give back what a cancelled claim got (it lapses by itself): %s",
                              exc)

    async def complete(self, state: "BatchState", keys: Sequence[Any]) -> List[Any]:
        """dlock_complete on the loop's own connection (as `BatchState.completed`)."""
        done = await call_retrying(self.conn, f"dlock_complete({state.table.name})",
                                   *state.complete_sql(keys), self.ttl, rows=True)
        return state.completed(keys, [tuple(r.values()) for r in done])

    async def unclaim(self, state: "BatchState", keys: Sequence[Any]) -> int:
        """dlock_unclaim on the loop's own connection (as `BatchState.unclaimed`)."""
        done = await call_retrying(self.conn, f"dlock_unclaim({state.table.name})",
                                   *state.unclaim_sql(keys), self.ttl, rows=True)
        return state.unclaimed(keys, [tuple(r.values()) for r in done])

    async def fail(self, state: "BatchState", keys: Sequence[Any],
                   retry_after: Optional[float]) -> int:
        """dlock_unclaim with retry_after on the loop's own connection (as
        `BatchState.unclaimed`)."""
        done = await call_retrying(self.conn, f"dlock_unclaim({state.table.name})",
                                   *state.fail_sql(keys, retry_after), self.ttl, rows=True)
        return state.unclaimed(keys, [tuple(r.values()) for r in done])

    async def finish(self, state: "BatchState", failed: bool = False) -> None:
        """Stop renewing the batch; give back the claims it still holds."""
        await state.keeper.stop()
        left = list(state.outstanding)
        if left:
            try:
                if failed:
                    await self.fail(state, left, self.args.retry_after)
                else:
                    await self.unclaim(state, left)
            except Error as exc:
                _core.log.warning("dlock: could not give back %d claim(s) (they lapse by themselves): %s",
                                  len(left), exc)

    async def close(self) -> None:
        await self.conn.close()
        await self.renew_conn.close()


class BatchState:
    """A batch's rows, the keys it still holds, and its keeper; the SQL of
    its completions and give-backs, and the reading of their answers."""

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

    def complete_sql(self, keys: Sequence[Any]) -> Sql:
        """The dlock_complete of keys for this batch's holder."""
        t = self.table
        return t.complete_sql, (t.name, self.core.holder, list(keys))

    def completed(self, keys: Sequence[Any], rows: Sequence[Sequence[Any]]) -> List[Any]:
        """From dlock_complete's rows: the keys whose claims it still held
        (keys are held no more, whatever the answer)."""
        self.forget(keys)
        return [r[0] for r in rows]

    def unclaim_sql(self, keys: Sequence[Any]) -> Sql:
        """The dlock_unclaim of keys for this batch's holder."""
        t = self.table
        return t.unclaim_sql, (t.name, self.core.holder, list(keys))

    def fail_sql(self, keys: Sequence[Any], retry_after: Optional[float]) -> Sql:
        """The dlock_unclaim of keys as failed, not claimable again before
        retry_after seconds (None: the backoff the claim asked for)."""
        t = self.table
        after = None if retry_after is None else timedelta(seconds=retry_after)
        return t.fail_sql, (t.name, self.core.holder, list(keys), after)

    def unclaimed(self, keys: Sequence[Any], rows: Sequence[Sequence[Any]]) -> int:
        """From dlock_unclaim's row: how many claims it gave back (keys are
        held no more, whatever the answer)."""
        self.forget(keys)
        return int(rows[0][0] or 0) if rows else 0


class BatchBase(LossSignal):
    """What `dlock.Batch` and `dlock.aio.Batch` share: the rows and keys,
    the loss signal (``lost``, a `threading.Event` or an `asyncio.Event`)
    and its check; they add completing and giving back."""

    def __init__(self, state: BatchState, on_lost: Optional[Callable[[Any], Any]], lost: Flag):
        self._state = state
        self.rows = state.rows
        self.keys = list(state.keys)
        self.lost = lost
        self.lost_reason: Optional[str] = None
        self._on_lost = on_lost
        state.on_lost = self._lose

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

    def _retry_after(self, retry_after: Optional[Seconds]) -> Optional[float]:
        """A fail's retry_after in seconds: as given, else the loop's."""
        if retry_after is None:
            return self._state.core.args.retry_after
        return _core.seconds(retry_after, "retry_after", positive=False)

    def _keys(self, keys: Optional[Sequence[Any]]) -> List[Any]:
        """keys, or by default every key the batch still holds."""
        return list(self._state.outstanding if keys is None else keys)

    def __len__(self) -> int:
        return len(self.rows)


class ClaimsBase(Generic[BatchT, StopT]):
    """What `dlock.Claims` and `dlock.aio.Claims` share: the loop's
    arguments, checked, and its `ClaimsCore`.  ``stop`` is the event that
    ends the loop, StopT: a `threading.Event` or an `asyncio.Event` (the
    API's `_new_flag` by default); ``on_lost`` is called with the API's
    batch, BatchT."""

    stop: StopT

    def __init__(self, conninfo: str, table: str, holder: str, n: int = 10, ttl: Seconds = 30, *,
                 filter: Optional[str] = None, order_by: Optional[str] = None,
                 max_attempts: Optional[int] = None, wait: Optional[Seconds] = None,
                 poll: Seconds = 1.0, group_by: Optional[str] = None,
                 per_group: Optional[int] = None, fair: bool = False,
                 backoff: Optional[Seconds] = None, backoff_max: Optional[Seconds] = None,
                 retry_after: Optional[Seconds] = None,
                 until_empty: bool = False, stop: Optional[StopT] = None,
                 on_lost: Optional[Callable[[BatchT], Any]] = None, **connect_kwargs: Any):
        args = ClaimArgs(wait, backoff, backoff_max, group_by, per_group, fair, retry_after)
        self._core = ClaimsCore(conninfo, table, holder, n, ttl, filter, order_by,
                                max_attempts, args, connect_kwargs)
        self.holder = holder
        self.wait = args.wait or 0.0
        self.retry_after = args.retry_after
        self.poll = _core.seconds(poll, "poll")
        self.until_empty = until_empty
        self.stop = stop if stop is not None else self._new_flag()
        self._on_lost = on_lost
        self._failed = False  # the with block raised: the batch is given back as failed

    def _new_flag(self) -> StopT:
        """The API's default ``stop``: a `threading.Event` or an `asyncio.Event`."""
        raise NotImplementedError

    @property
    def claim_calls(self) -> int:
        """How many dlock_claim calls the loop has made."""
        return self._core.calls

    def _turn_end(self) -> float:
        """When a turn that starts now stops waiting for a row (wait)."""
        return _core.now() + self.wait

    def _call_wait(self, turn_end: float) -> float:
        """The wait of the next dlock_claim call of a turn ending at turn_end."""
        if not self.wait:
            return 0.0
        return max(0.0, min(turn_end - _core.now(), WAIT_CAP))

    def _keep_waiting(self, turn_end: float) -> bool:
        """After an empty claim: True when the turn's wait is not over."""
        return bool(self.wait) and _core.now() < turn_end
