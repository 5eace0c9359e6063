"""The asyncio core shared by `dlock.lease`, `dlock.claims` and `dlock.aio`.

Everything here runs in an event loop: the asyncio API's own, or for the
blocking API a loop in a thread of each lease (or claim loop).  It is a
thin layer over dlock's SQL functions; the rules it adds are the client's:

* Calls run on connections of the client's own (`Conn`): autocommit, no
  server-side prepared statements (so that they work behind pgbouncer in
  transaction mode), made again after any error, so that a multi-host
  conninfo reaches whichever server answers now.
* One lease object per (key, holder) pair in the process, from the start of
  its acquire to the end of its release (`reserve`): the server gives a
  second acquire by the same holder the same token, so a second lease
  object of the pair is refused with `HolderInUse`, whatever its shape or
  API (blocking or asyncio) and from whichever thread.
* `Keeper` renews every ttl/3 and declares the lease (or claims) lost when
  the server says no, or when ttl has passed on the monotonic clock since
  the sending of the last renewal the server confirmed (the server set the
  expiry later than that): the rule of ``dlock run``.  No call outlasts
  that moment: a hung server is like a stopped one.

`LeaseState` (with `OneKeyState` and `AllKeysState`) is everything of a
lease object but its API's calls: `dlock._lease` and `dlock.aio` add only
those, plain (in the lease's own thread) or awaited.  The claim loops'
share is `dlock._claim_core`.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import secrets
import threading
import time
from datetime import timedelta
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional, Protocol,
                    Sequence, Tuple, Union)

import psycopg
from psycopg.rows import dict_row, tuple_row

from ._target import Target
from .errors import DatabaseError, Error, HolderInUse, LeaseLost, NotAcquired, Timeout

if TYPE_CHECKING:
    from typing_extensions import Self
else:
    Self = Any  # at run time (typing.get_type_hints); for mypy, each class's own type

log = logging.getLogger("dlock")

Seconds = Union[int, float, timedelta]


class Flag(Protocol):
    """A loss or stop signal: a `threading.Event` (the blocking API) or an
    `asyncio.Event` (the asyncio API)."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


# SQLSTATEs after which a call is worth repeating on a new connection: the
# server is going away or not ready, or this one is a standby (25006) that a
# multi-host conninfo will skip next time.
_RETRY_SQLSTATES = {"25006", "40001", "40P01"}
_RETRY_CLASSES = {"08", "57", "53"}

now = time.monotonic


def seconds(value: Seconds, name: str, positive: bool = True) -> float:
    """A duration in seconds from a number or a timedelta."""
    if isinstance(value, timedelta):
        s = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        s = float(value)
    else:
        raise TypeError(f"{name} must be a number of seconds or a timedelta")
    if s < 0 or (positive and s == 0):
        raise ValueError(f"{name} must be {'more than' if positive else 'at least'} 0")
    return s


# The (key, holder) pairs of this process's leases, acquiring or held until
# their release ends: one lease object per pair.
_holding: Dict[Tuple[str, str], object] = {}
_holding_lock = threading.Lock()


def reserve(keys: Sequence[str], holder: str, label: str) -> Callable[[], None]:
    """Take every (key, holder) pair of keys for one lease object, or raise
    `HolderInUse` (taking none) if a lease of this process has one of them;
    returns the function that gives them back."""
    pairs = [(k, holder) for k in keys]
    mine = object()
    with _holding_lock:
        for k, h in pairs:
            if (k, h) in _holding:
                raise HolderInUse(
                    f"{label}: holder {h!r} already has key {k!r} in a lease of this process "
                    "(acquiring, held or not yet released); the server would give both the same "
                    "token: use another holder, or wait for that release")
        for p in pairs:
            _holding[p] = mine

    def unreserve() -> None:
        with _holding_lock:
            for p in pairs:
                if _holding.get(p) is mine:
                    del _holding[p]
    return unreserve


def default_holder() -> str:
    """HOST:PID:RANDOM: unique to one lease or claim loop of this process."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def retryable(exc: BaseException) -> bool:
    """True for a failure of the connection or of the server, not of the call."""
    if isinstance(exc, (asyncio.TimeoutError, OSError, psycopg.OperationalError,
                        psycopg.InterfaceError)):
        return True
    state = getattr(exc, "sqlstate", None)
    if not isinstance(state, str) or not state:
        return False
    return state in _RETRY_SQLSTATES or state[:2] in _RETRY_CLASSES


def wrap(exc: BaseException, what: str) -> DatabaseError:
    """A DatabaseError carrying the server's SQLSTATE (if any) for exc."""
    if isinstance(exc, DatabaseError):
        return exc
    err: DatabaseError
    if isinstance(exc, asyncio.TimeoutError):
        err = Timeout(f"{what}: no answer in time")
    else:
        text = str(exc).strip() or type(exc).__name__
        err = DatabaseError(f"{what}: {text}", getattr(exc, "sqlstate", None))
    err.__cause__ = exc
    return err


def _cancel_in_thread(conn: psycopg.AsyncConnection[Any]) -> None:
    """Send a cancel request for conn's statement without blocking the loop
    (a daemon thread: an unreachable server never holds up the exit).  The
    request is made now, so that conn may be closed at once."""
    try:
        req = conn.pgconn.get_cancel()
    except Exception:  # best effort: the connection is dropped anyway
        return

    def send() -> None:
        try:
            req.cancel()
        except Exception:
            pass

    threading.Thread(target=send, name="dlock cancel", daemon=True).start()


class Conn:
    """An autocommit connection of the client's own, made when needed and
    dropped after any error or timeout; every call is bounded by a deadline
    on the monotonic clock."""

    def __init__(self, conninfo: str, connect_kwargs: Dict[str, Any]):
        self._conninfo = conninfo
        self._kwargs = connect_kwargs
        self._conn: Optional[psycopg.AsyncConnection[Any]] = None

    async def _run(self, query: Any, params: Sequence[Any], rows: bool) -> Any:
        conn = self._conn
        if conn is None or conn.closed:
            conn = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, prepare_threshold=None, **self._kwargs)
            self._conn = conn
        assert conn is not None
        if rows:
            dcur = conn.cursor(row_factory=dict_row)
            await dcur.execute(query, params)
            return await dcur.fetchall()
        tcur = conn.cursor(row_factory=tuple_row)
        await tcur.execute(query, params)
        row = await tcur.fetchone()
        return None if row is None else row[0]

    async def call(self, query: Any, params: Sequence[Any], deadline: float,
                   rows: bool = False, cancel: bool = False) -> Any:
        """The first column of the first row (or all rows as dicts), given
        up at deadline.  After any failure the connection is dropped; with
        cancel, a statement left running is also cancelled on the server."""
        left = deadline - now()
        if left <= 0:
            raise asyncio.TimeoutError()
        try:
            return await asyncio.wait_for(self._run(query, params, rows), left)
        except BaseException:
            if cancel and self._conn is not None and not self._conn.closed:
                _cancel_in_thread(self._conn)
            await self.close()
            raise

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:
                pass


class Keeper:
    """Renews every ttl/3 with renew(deadline) -> bool until stopped; calls
    on_lost(LeaseLost) once when the server says no, or when ttl has passed
    since the sending of the last confirmed renewal (sent: the acquire's)."""

    def __init__(self, ttl: float, sent: float,
                 renew: Callable[[float], Awaitable[bool]],
                 on_lost: Callable[[LeaseLost], None]):
        self.ttl = ttl
        self.period = ttl / 3
        self.confirmed = sent
        self.deadline = sent + ttl
        self.lost: Optional[LeaseLost] = None
        self.lost_at: Optional[float] = None
        self.last_error: Optional[BaseException] = None
        self.renewals = 0
        self._renew = renew
        self._on_lost = on_lost
        self._stopping = False
        self._wake: Optional[asyncio.Event] = None
        self._task: Optional[asyncio.Task[None]] = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        assert self._wake is not None
        next_at = self.confirmed + self.period
        while not self._stopping and self.lost is None:
            t = now()
            if t >= self.deadline:
                why = f"no renewal confirmed within the ttl ({self.ttl:g} s)"
                if self.last_error is not None:
                    why += f"; last error: {str(self.last_error).strip() or type(self.last_error).__name__}"
                self._lose(why)
                return
            until = min(next_at, self.deadline)
            if until > t:
                try:
                    await asyncio.wait_for(self._wake.wait(), until - t)
                except asyncio.TimeoutError:
                    pass
                continue
            sent = now()
            try:
                ok = await self._renew(self.deadline)
            except Exception as exc:  # unreachable, or an error: try again soon
                self.last_error = exc
                log.debug("dlock: renewal failed, retrying: %s", exc)
                next_at = min(sent + max(self.period / 5, 0.2), self.deadline)
                continue
            if self._stopping or self.lost is not None:
                return
            if ok:
                self.confirmed = sent
                self.deadline = sent + self.ttl
                self.renewals += 1
                self.last_error = None
                next_at = sent + self.period
            else:
                self._lose("the server refused the renewal (expired, released or taken over)")
                return

    def declare_lost(self, why: str) -> None:
        """Declare the loss now (a fence said no): no renewal after this."""
        self._lose(why)
        if self._wake is not None:
            self._wake.set()

    def _lose(self, why: str) -> None:
        if self.lost is not None or self._stopping:
            return
        self.lost = LeaseLost(why)
        self.lost_at = now()
        try:
            self._on_lost(self.lost)
        except Exception:
            log.exception("dlock: the on_lost callback raised")

    async def stop(self) -> None:
        """Stop renewing (for good): a renewal under way is abandoned."""
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


# ---------------------------------------------------------------------------
# leases (one key, a semaphore's slot, a shared lease, or several keys)
# ---------------------------------------------------------------------------

async def acquire(conn: Conn, target: Target, holder: str, ttl: float, wait: float
                  ) -> Tuple[List[int], float]:
    """(tokens, when the acquire that got them was sent).  Raises
    NotAcquired, DatabaseError, LeaseLost; a call whose outcome is unknown
    is repeated (the same holder gets the same tokens) while wait lasts,
    once at least."""
    start = now()
    wait_end = start + wait
    tries = 0
    tokens: Optional[List[int]] = None
    try:
        while True:
            tries += 1
            sent = now()
            left = max(0.0, wait_end - sent)
            query, params = target.acquire(holder, ttl, left)
            try:
                tokens = target.tokens(await conn.call(query, params, sent + left + max(ttl, 5.0),
                                                       cancel=True))
                break
            except Exception as exc:
                if not retryable(exc) or (tries > 1 and now() >= wait_end):
                    raise wrap(exc, f"{target.function}({target.label})")
                await asyncio.sleep(0.2)
        if tokens is None:
            raise NotAcquired(f"{target.label}: held by someone else" +
                              (f" (waited {wait:g} s)" if wait > 0 else ""))
        answered = now()
        if answered - sent > ttl / 6:
            # it waited: when it was granted is not known; a renewal tells
            sent = now()
            ok = await conn.call(*target.renew(holder, ttl, tokens), sent + ttl)
            if not ok:
                raise LeaseLost(f"{target.label} was lost before it could be used")
        return tokens, sent
    except (NotAcquired, LeaseLost):
        raise
    except BaseException as exc:
        # cancelled or failed with the outcome unknown: give back whatever
        # this holder (unique to this lease) may have been granted
        if not (isinstance(exc, DatabaseError) and not retryable(exc.__cause__ or exc)):
            await asyncio.shield(_forget(conn, target, holder, tokens))
        raise


async def _forget(conn: Conn, target: Target, holder: str, tokens: Optional[List[int]]) -> None:
    try:
        await conn.call(*target.forget(holder, tokens), now() + 5.0)
    except Exception as exc:
        log.warning("dlock: could not give %s back (it lapses by itself): %s", target.label, exc)


async def release(conn: Conn, target: Target, holder: str, tokens: List[int],
                  lapses_at: float) -> Optional[bool]:
    """The server's answer to dlock_release with the tokens (False: not
    held any more; of several keys, one at least), or None when no server
    answered before the lease lapsed (one try at least).  Raises
    DatabaseError for a server error."""
    deadline = max(lapses_at, now() + 2.0)
    while True:
        try:
            return bool(await conn.call(*target.release(holder, tokens), deadline))
        except Exception as exc:
            if not retryable(exc):
                raise wrap(exc, f"dlock_release({target.label})")
            if now() + 0.2 >= deadline:
                log.warning("dlock: could not release %s (it lapses by itself): %s", target.label, exc)
                return None
            await asyncio.sleep(0.2)


def lease_renewer(conn: Conn, target: Target, holder: str, ttl: float, tokens: List[int]
                  ) -> Callable[[float], Awaitable[bool]]:
    async def renew(deadline: float) -> bool:
        return bool(await conn.call(*target.renew(holder, ttl, tokens), deadline))
    return renew


class LossSignal:
    """The loss signal of a lease or of a batch of claims: ``lost`` (a
    `threading.Event` or an `asyncio.Event`), ``lost_reason``, and the
    caller's ``on_lost(obj)``, called when the object's `Keeper` declares
    the loss (once)."""

    lost: Flag
    lost_reason: Optional[str]
    _on_lost: Optional[Callable[[Any], Any]]

    def _lose(self, exc: LeaseLost) -> None:
        self.lost_reason = str(exc)
        self.lost.set()
        if self._on_lost is not None:
            self._on_lost(self)


class LeaseState(LossSignal):
    """What `dlock.Lease`, `dlock.Leases` and their asyncio twins share:
    their arguments, checked (the target's keys, ``ttl`` above 0, ``wait``
    at least 0, ``holder`` by default `default_holder`), their state,
    losing, acquiring and releasing (in the running loop), and the checks
    of a held lease.  ``lost`` is the event each API waits on (a
    `threading.Event` or an `asyncio.Event`: the API's `_new_flag`)."""

    def __init__(self, conninfo: str, target: Target, ttl: Seconds, wait: Seconds,
                 holder: Optional[str], on_lost: Optional[Callable[[Any], Any]],
                 connect_kwargs: Dict[str, Any]):
        self._target = target
        self.holder = holder if holder is not None else default_holder()
        self.ttl = seconds(ttl, "ttl")
        self.wait = seconds(wait, "wait", positive=False)
        self._tokens: Optional[List[int]] = None
        self.lost = self._new_flag()
        self.lost_reason: Optional[str] = None
        self.released: Optional[bool] = None
        self._on_lost = on_lost
        self._conn = Conn(conninfo, connect_kwargs)
        self._keeper: Optional[Keeper] = None
        self._done = False
        self._unreserve: Callable[[], None] = lambda: None

    def _new_flag(self) -> Flag:
        """The API's ``lost`` event: a `threading.Event` or an `asyncio.Event`."""
        raise NotImplementedError

    def _reserve(self) -> None:
        """Take the lease's (key, holder) pairs in the process, or raise
        `HolderInUse`; given back by `_unreserved` once released."""
        self._unreserve = reserve(self._target.unique, self.holder, self._target.label)

    def _unreserved(self) -> None:
        unreserve, self._unreserve = self._unreserve, lambda: None
        unreserve()

    async def _start(self) -> None:
        """Acquire (as `acquire`), keep the tokens, start renewing."""
        tokens, sent = await acquire(self._conn, self._target, self.holder, self.ttl, self.wait)
        self._tokens = tokens
        self._keeper = Keeper(
            self.ttl, sent, lease_renewer(self._conn, self._target, self.holder, self.ttl, tokens),
            self._lose)
        self._keeper.start()

    async def _finish(self, keeper: Keeper, tokens: List[int]) -> Optional[bool]:
        """Stop renewing and release with tokens (as `release`); then close
        the connection and give back the (key, holder) pairs."""
        await keeper.stop()
        try:
            return await release(self._conn, self._target, self.holder, tokens, keeper.deadline)
        finally:
            await self._conn.close()
            self._unreserved()  # only now: another lease of this holder would get this token

    @property
    def deadline(self) -> float:
        """When the lease lapses unless renewed, on `time.monotonic`'s clock
        (counted from the sending of the last confirmed renewal)."""
        if self._keeper is None:
            raise Error(f"the {self._target.label} is not acquired")
        return self._keeper.deadline

    def remaining(self) -> float:
        """Seconds left until the lease lapses unless renewed (0 when lost)."""
        if self.lost.is_set():
            return 0.0
        return max(0.0, self.deadline - now())

    def check(self) -> None:
        """Raise `LeaseLost` if the lease is lost (or released, or its ttl
        has run out since the last confirmed renewal)."""
        label = self._target.label
        if self.lost.is_set():
            raise LeaseLost(f"{label} lost: {self.lost_reason}")
        if self._keeper is None or self._done:
            raise LeaseLost(f"{label} is not held")
        if now() >= self._keeper.deadline:
            raise LeaseLost(f"{label} lost: no renewal confirmed within the ttl")

    def _fence(self) -> Tuple[str, Tuple[Any, ...]]:
        assert self._tokens is not None
        return self._target.validate(self.holder, self._tokens)

    def _fence_refused(self) -> LeaseLost:
        tokens = self._tokens or []
        shown = f"tokens {tokens}" if self._target.multi else f"token {tokens[0] if tokens else None}"
        return LeaseLost(f"{self._target.label} lost: the fence (dlock_validate) refused {shown}")

    def _state(self) -> str:
        if self.lost.is_set():
            return "lost"
        return "held" if self._keeper is not None and not self._done else "not held"


class OneKeyState(LeaseState):
    """What `dlock.Lease` and `dlock.aio.Lease` share: their arguments
    (one key: a lease, one of ``slots`` places of a counting semaphore, or
    a shared lease) and the token.  Comes before the API's own base in the
    class's bases, so that its ``__init__`` is the class's."""

    def __init__(self, conninfo: str, key: str, ttl: Seconds = 30, wait: Seconds = 0, *,
                 holder: Optional[str] = None,
                 on_lost: Optional[Callable[[Self], Any]] = None,
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


class AllKeysState(LeaseState):
    """What `dlock.Leases` and `dlock.aio.Leases` share: their arguments
    (several keys, all or none) and the tokens.  Comes before the API's
    own base in the class's bases, as `OneKeyState`."""

    def __init__(self, conninfo: str, keys: Sequence[str], ttl: Seconds = 30, wait: Seconds = 0, *,
                 holder: Optional[str] = None,
                 on_lost: Optional[Callable[[Self], Any]] = None,
                 **connect_kwargs: Any):
        target = Target.all(keys)
        super().__init__(conninfo, target, ttl, wait, holder, on_lost, connect_kwargs)
        self.keys: List[str] = list(target.unique)

    @property
    def tokens(self) -> Dict[str, int]:
        """key -> fencing token (empty before the acquire)."""
        return {} if self._tokens is None else dict(zip(self.keys, self._tokens))
