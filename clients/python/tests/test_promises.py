"""The client's own promises, each with tests that fail when it breaks (the
`clients` mutants of scripts/mutate.sh):

* one lease object per (key, holder) in the process: a second is refused
  with `dlock.HolderInUse` (blocking and asyncio, across threads, every
  shape), since the server would give it the same token;
* `Lease.execute` runs the write in its fence's transaction: both are seen
  in one transaction of the server, and the lease cannot change hands
  between the fence and the write;
* the loss is counted from the sending of the last confirmed renewal, not
  from its answer.

Every wait is on a state (a waiter in dlock_waiters, a backend waiting on a
lock); WAIT only bounds a wait that a broken client would never end.
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any, Callable, Dict, List

import psycopg
import pytest

import dlock
import dlock.aio
from conftest import holder_of, log_records, wait_until

WAIT = 120.0

# a dlock_renew (dlock_acquire, dlock_release) that first waits for an advisory lock the
# test holds, then renews (releases): in front of the real one for a
# connection whose search_path starts with dlock_delay_py (an answer that
# comes late)
DELAY_LOCK = 770101
DELAY_RELEASE_LOCK = 770103
DELAY_ACQUIRE_LOCK = 770104
DELAY_OPTIONS = "-c search_path=dlock_delay_py,public"
DELAY_SQL = f"""
CREATE SCHEMA IF NOT EXISTS dlock_delay_py;
CREATE OR REPLACE FUNCTION dlock_delay_py.dlock_renew(key text, holder text, ttl interval, token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared({DELAY_LOCK});
    RETURN public.dlock_renew(key, holder, ttl, token);
END $$;
CREATE OR REPLACE FUNCTION dlock_delay_py.dlock_acquire(key text, holder text, ttl interval, wait interval)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared({DELAY_ACQUIRE_LOCK});
    RETURN public.dlock_acquire(key, holder, ttl, wait);
END $$;
CREATE OR REPLACE FUNCTION dlock_delay_py.dlock_release(key text, holder text, token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared({DELAY_RELEASE_LOCK});
    RETURN public.dlock_release(key, holder, token);
END $$;
"""


def _holder() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


def _acquires_of(server: Any, mark: int, holder: str) -> List[Dict[str, str]]:
    return [r for r in log_records(server.log_since(mark))
            if "dlock_acquire" in r["text"] and holder in r["detail"] + r["text"]]


# ---------------------------------------------------------------------------
# one lease object per key and holder
# ---------------------------------------------------------------------------

def test_same_holder_refused_while_the_first_is_held(dsn, db, key, server):
    holder = _holder()
    other = key + "/other"
    with dlock.lease(dsn, key, ttl=30, holder=holder) as first:
        mark = server.log_mark()
        seconds: List[Callable[[], Any]] = [
            lambda: dlock.lease(dsn, key, ttl=30, holder=holder),
            lambda: dlock.lease(dsn, key, ttl=30, wait=WAIT, holder=holder),
            lambda: dlock.lease(dsn, key, ttl=30, holder=holder, shared=True),
            lambda: dlock.lease(dsn, key, ttl=30, holder=holder, slots=2),
            lambda: dlock.leases(dsn, [other, key], ttl=30, holder=holder),
        ]
        for make in seconds:
            with pytest.raises(dlock.HolderInUse) as e:
                with make():
                    pytest.fail("two lease objects of one holder on one key at once")
            assert holder in str(e.value) and key in str(e.value)
            assert isinstance(e.value, dlock.Error) and not isinstance(e.value, dlock.NotAcquired)
        # refused before any call: the first holds on, alone, with its token
        assert _acquires_of(server, mark, holder) == []
        assert holder_of(db, key) == (holder, first.token)
        assert holder_of(db, other) is None  # leases(): none taken
        first.check()
        # another key with the holder, or the key with another holder: as usual
        with dlock.lease(dsn, other, ttl=30, holder=holder) as second:
            assert second.token != first.token
        with pytest.raises(dlock.NotAcquired):
            dlock.lease(dsn, key, ttl=30, holder=holder + "-b").acquire()
        assert not first.lost.is_set()
    assert first.released is True
    # released: the holder may take the key again, with a new token
    with dlock.lease(dsn, key, ttl=30, holder=holder) as again:
        assert again.token > first.token


def test_same_holder_shared_leases_refused(dsn, db, key):
    """Two shared leases of one holder would be one holding on the server:
    the first release would end the second's.  Refused too."""
    holder = _holder()
    with dlock.lease(dsn, key, ttl=30, holder=holder, shared=True) as reader:
        with pytest.raises(dlock.HolderInUse):
            dlock.lease(dsn, key, ttl=30, holder=holder, shared=True).acquire()
        with pytest.raises(dlock.HolderInUse):
            dlock.lease(dsn, key, ttl=30, holder=holder).acquire()
        with dlock.lease(dsn, key, ttl=30, shared=True) as another:  # another holder: shared
            assert another.token != reader.token
        assert holder_of(db, key) == (holder, reader.token)


def test_same_holder_refused_while_the_first_waits_and_across_threads(dsn, db, key):
    holder = _holder()
    token = db.execute("SELECT dlock_acquire(%s, 'other', '5 min')", (key,)).fetchone()[0]
    got: Dict[str, Any] = {}
    go = threading.Event()

    def first() -> None:
        try:
            with dlock.lease(dsn, key, ttl=30, wait=WAIT, holder=holder) as lease:
                got["token"] = lease.token
                go.wait(WAIT)
        except BaseException as exc:  # shown by the assertion below
            got["error"] = exc

    t = threading.Thread(target=first)
    t.start()
    try:
        assert wait_until(lambda: db.execute(
            "SELECT count(*) FROM dlock_waiters WHERE key = %s", (key,)).fetchone()[0] == 1, WAIT), \
            "the first lease did not wait"
        # waiting is not held yet, but the pair is taken: from this thread
        with pytest.raises(dlock.HolderInUse):
            dlock.lease(dsn, key, ttl=30, wait=WAIT, holder=holder).acquire()
        # from another thread, by the asyncio API
        box: Dict[str, BaseException] = {}

        def other_thread() -> None:
            async def main() -> None:
                async with dlock.aio.lease(dsn, key, ttl=30, wait=WAIT, holder=holder):
                    pass
            try:
                asyncio.run(main())
            except BaseException as exc:
                box["e"] = exc
        o = threading.Thread(target=other_thread)
        o.start()
        o.join(WAIT)
        assert isinstance(box.get("e"), dlock.HolderInUse), box
        assert db.execute("SELECT count(*) FROM dlock_waiters WHERE key = %s", (key,)).fetchone()[0] == 1
        db.execute("SELECT dlock_release(%s, 'other', %s)", (key, token))
        assert wait_until(lambda: "token" in got or "error" in got, WAIT)
        assert "error" not in got, got
        assert holder_of(db, key) == (holder, got["token"])
    finally:
        go.set()
        t.join(WAIT)
        db.execute("SELECT dlock_release(%s, 'other')", (key,))
    assert holder_of(db, key) is None


def test_same_holder_refused_asyncio(dsn, db, key):
    holder = _holder()
    k2 = key + "/race"

    async def main() -> None:
        async with dlock.aio.lease(dsn, key, ttl=30, holder=holder) as first:
            with pytest.raises(dlock.HolderInUse):
                async with dlock.aio.lease(dsn, key, ttl=30, holder=holder):
                    pytest.fail("two lease objects of one holder on one key at once")
            with pytest.raises(dlock.HolderInUse):
                async with dlock.aio.leases(dsn, [key], ttl=30, holder=holder):
                    pass
            # the blocking API, from another thread, sees the same pairs
            with pytest.raises(dlock.HolderInUse):
                await asyncio.to_thread(lambda: dlock.lease(dsn, key, ttl=30, holder=holder).acquire())
            assert holder_of(db, key) == (holder, first.token)

        # two tasks at once: one holds, the other is refused
        release = asyncio.Event()

        async def one() -> int:
            async with dlock.aio.lease(dsn, k2, ttl=30, wait=WAIT, holder=holder) as lease:
                await release.wait()
                assert lease.token is not None
                return lease.token

        tasks = [asyncio.ensure_future(one()) for _ in range(2)]
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        assert isinstance(done.pop().exception(), dlock.HolderInUse)
        release.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert sum(isinstance(r, int) for r in results) == 1, results

    asyncio.run(main())
    assert holder_of(db, key) is None and holder_of(db, k2) is None


def test_same_holder_refused_while_the_first_is_lost_but_not_released(dsn, db, key):
    holder = _holder()
    with dlock.lease(dsn, key, ttl=3, holder=holder) as first:
        assert db.execute("SELECT dlock_force_release(%s)", (key,)).fetchone() == (True,)
        assert first.lost.wait(WAIT)
        with pytest.raises(dlock.HolderInUse):  # its block still runs
            dlock.lease(dsn, key, ttl=3, holder=holder).acquire()
    with dlock.lease(dsn, key, ttl=3, holder=holder) as again:
        assert again.token > first.token


def test_same_holder_refused_until_the_first_release_is_answered(dsn, db, key):
    """While the first lease's release is under way (its answer held back
    on the server), the key is still the first's: a second is refused."""
    db.execute(DELAY_SQL)
    holder = _holder()
    blocker = psycopg.connect(dsn, autocommit=True)
    blocker.execute("SELECT pg_advisory_lock(%s)", (DELAY_RELEASE_LOCK,))
    first = dlock.lease(dsn, key, ttl=30, holder=holder, options=DELAY_OPTIONS).acquire()
    t = threading.Thread(target=first.release)
    t.start()
    try:
        assert wait_until(lambda: db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            "   AND query LIKE '%%dlock_release(%%' AND pid <> pg_backend_pid()").fetchone()[0] > 0, WAIT), \
            "the release was not held back"
        with pytest.raises(dlock.HolderInUse):
            dlock.lease(dsn, key, ttl=30, holder=holder).acquire()
    finally:
        blocker.close()
        t.join(WAIT)
    assert first.released is True
    assert holder_of(db, key) is None


# ---------------------------------------------------------------------------
# a fenced write runs in its fence's transaction
# ---------------------------------------------------------------------------

def _same_transaction(server: Any, mark: int, marker: str, keys: List[str]) -> None:
    """The statement with marker and a dlock_validate of each key before
    it, by the same backend, in one transaction (one vxid)."""
    recs = log_records(server.log_since(mark))
    writes = [i for i, r in enumerate(recs) if marker in r["text"]]
    assert len(writes) == 1, f"the write was not logged once: {recs}"
    w = recs[writes[0]]
    assert w["vxid"], w
    for k in keys:
        fences = [r for r in recs[:writes[0]] if r["pid"] == w["pid"] and "dlock_validate" in r["text"]
                  and k in r["detail"] + r["text"]]
        assert fences, f"no fence of {k} before the write: {recs}"
        assert fences[-1]["vxid"] == w["vxid"], \
            f"the fence ({fences[-1]['vxid']}) and the write ({w['vxid']}) ran in different transactions"


def test_execute_runs_in_the_fence_transaction(dsn, db, key, server):
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")
    other = key + "/b"
    with dlock.lease(dsn, key, ttl=30) as lease, dlock.leases(dsn, [other + "/1", other + "/2"], ttl=30) as held:
        for autocommit in (True, False):
            with psycopg.connect(dsn, autocommit=autocommit) as conn:
                for what, keys in ((lease, [key]), (held, held.keys)):
                    marker = f"w{uuid.uuid4().hex}"
                    mark = server.log_mark()
                    cur = what.execute(conn.cursor(), f"INSERT INTO guarded VALUES (%s, txid_current(), %s)"
                                       f" RETURNING note /* {marker} */", (keys[0], marker))
                    assert cur.fetchone() == (marker,)
                    if not autocommit:
                        conn.commit()
                    _same_transaction(server, mark, marker, keys)
                # inside your own transaction: the fence holds until you end it
                if not autocommit:
                    conn.execute("SELECT 1")
                    marker = f"w{uuid.uuid4().hex}"
                    mark = server.log_mark()
                    lease.execute(conn.cursor(), f"SELECT 1 /* {marker} */")
                    _same_transaction(server, mark, marker, [key])
                    conn.commit()


def test_execute_asyncio_runs_in_the_fence_transaction(dsn, key, server):
    async def main() -> None:
        async with dlock.aio.lease(dsn, key, ttl=30) as lease:
            for autocommit in (True, False):
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=autocommit) as conn:
                    marker = f"w{uuid.uuid4().hex}"
                    mark = server.log_mark()
                    cur = await lease.execute(conn.cursor(), f"SELECT txid_current() /* {marker} */")
                    assert (await cur.fetchone()) is not None
                    if not autocommit:
                        await conn.commit()
                    _same_transaction(server, mark, marker, [key])
    asyncio.run(main())


def _waiting_on_lock(db: psycopg.Connection, pid: int) -> bool:
    row = db.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def test_no_takeover_between_the_fence_and_the_write(dsn, db, key):
    """The write waits (on an advisory lock the test holds) after its fence
    said yes: a dlock_force_release then waits for the write's transaction,
    so the write is never made by a lease already lost."""
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")
    lock = 770102
    blocker = psycopg.connect(dsn, autocommit=True)
    writer = psycopg.connect(dsn, autocommit=True)
    thief = psycopg.connect(dsn, autocommit=True)
    out: Dict[str, Any] = {}
    threads: List[threading.Thread] = []
    try:
        blocker.execute("SELECT pg_advisory_lock(%s)", (lock,))
        with dlock.lease(dsn, key, ttl=30) as lease:
            def write() -> None:
                try:
                    lease.execute(writer.cursor(),
                                  "INSERT INTO guarded SELECT %s, %s, 'after the fence'"
                                  "  FROM (SELECT pg_advisory_xact_lock_shared(%s)) AS s",
                                  (key, lease.token, lock))
                    out["written"] = True
                except BaseException as exc:
                    out["write_error"] = exc

            def take_over() -> None:
                out["forced"] = thief.execute("SELECT dlock_force_release(%s)", (key,)).fetchone()[0]

            threads.append(threading.Thread(target=write))
            threads[-1].start()
            assert wait_until(lambda: _waiting_on_lock(db, writer.info.backend_pid), WAIT), \
                "the write did not reach the advisory lock"
            threads.append(threading.Thread(target=take_over))
            threads[-1].start()
            assert wait_until(lambda: "forced" in out or _waiting_on_lock(db, thief.info.backend_pid), WAIT)
            assert "forced" not in out, "the lease changed hands between its fence and its write"
            blocker.execute("SELECT pg_advisory_unlock(%s)", (lock,))
            for t in threads:
                t.join(WAIT)
            assert out.get("written") is True, out
            assert out.get("forced") is True
        assert db.execute("SELECT count(*) FROM guarded WHERE key = %s AND note = 'after the fence'",
                          (key,)).fetchone() == (1,)
    finally:
        blocker.close()  # its advisory lock with it
        for t in threads:
            t.join(WAIT)
        writer.close()
        thief.close()


# ---------------------------------------------------------------------------
# the loss is counted from the sending of the last confirmed renewal
# ---------------------------------------------------------------------------

def _renewal_waiting(db: psycopg.Connection) -> bool:
    return db.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        "   AND query LIKE '%%dlock_renew(%%' AND pid <> pg_backend_pid()").fetchone()[0] > 0


@pytest.mark.parametrize("api", ["blocking", "asyncio"])
def test_loss_counted_from_the_sending_of_a_late_renewal(dsn, db, key, api):
    """A renewal whose answer is held back (by a lock on the server) after
    it was sent: the lease's deadline is the sending + ttl, never the
    answer + ttl (the server set its expiry some time after the sending)."""
    db.execute(DELAY_SQL)
    ttl = 12.0
    blocker = psycopg.connect(dsn, autocommit=True)
    blocker.execute("SELECT pg_advisory_lock(%s)", (DELAY_LOCK,))
    seen: Dict[str, float] = {}

    def held_back(lease: Any) -> None:
        first = lease.deadline
        assert wait_until(lambda: _renewal_waiting(db), WAIT), "no renewal was held back"
        seen["sent_before"] = time.monotonic()  # the renewal was sent before this
        time.sleep(0.5)  # its answer comes later than that (whatever the delay)
        blocker.execute("SELECT pg_advisory_unlock(%s)", (DELAY_LOCK,))
        assert wait_until(lambda: lease.deadline != first or lease.lost.is_set(), WAIT)
        seen["answered_by"] = time.monotonic()

    try:
        if api == "blocking":
            with dlock.lease(dsn, key, ttl=ttl, options=DELAY_OPTIONS) as lease:
                held_back(lease)
                deadline, lost = lease.deadline, lease.lost.is_set()
        else:
            async def main() -> Any:
                async with dlock.aio.lease(dsn, key, ttl=ttl, options=DELAY_OPTIONS) as lease:
                    await asyncio.to_thread(held_back, lease)
                    return lease.deadline, lease.lost.is_set()
            deadline, lost = asyncio.run(main())
    finally:
        blocker.close()
    assert not lost
    assert deadline <= seen["sent_before"] + ttl, \
        "the deadline was counted from the renewal's answer, not from its sending"
    assert holder_of(db, key) is None


@pytest.mark.parametrize("api", ["blocking", "asyncio"])
def test_loss_counted_from_the_sending_of_a_late_acquire(dsn, db, key, api):
    """An acquire whose answer is held back (less than ttl/6, so no renewal
    follows it): the first deadline is the acquire's sending + ttl."""
    db.execute(DELAY_SQL)
    ttl = 600.0  # an answer later than ttl/6 is followed by a renewal, whose sending counts
    blocker = psycopg.connect(dsn, autocommit=True)
    blocker.execute("SELECT pg_advisory_lock(%s)", (DELAY_ACQUIRE_LOCK,))
    out: Dict[str, Any] = {}

    def take() -> None:
        try:
            if api == "blocking":
                with dlock.lease(dsn, key, ttl=ttl, options=DELAY_OPTIONS) as lease:
                    out["deadline"] = lease.deadline
            else:
                async def main() -> None:
                    async with dlock.aio.lease(dsn, key, ttl=ttl, options=DELAY_OPTIONS) as lease:
                        out["deadline"] = lease.deadline
                asyncio.run(main())
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=take)
    t.start()
    try:
        assert wait_until(lambda: db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            "   AND query LIKE '%%dlock_acquire(%%' AND pid <> pg_backend_pid()").fetchone()[0] > 0, WAIT), \
            "the acquire was not held back"
        sent_before = time.monotonic()  # the acquire was sent before this
        time.sleep(0.5)  # its answer comes later than that (whatever the delay)
    finally:
        blocker.close()
        t.join(WAIT)
    assert "error" not in out, out
    assert out["deadline"] <= sent_before + ttl, \
        "the first deadline was counted from the acquire's answer, not from its sending"
    assert holder_of(db, key) is None


def test_execute_passes_a_guard(dsn, db, key):
    """dlock_guard (issue 40): a write through lease.execute passes the
    table's guard (its fence is the transaction's), a plain write is refused
    with LK001 and writes nothing."""
    table = f"guarded_{uuid.uuid4().hex[:12]}"
    db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    try:
        db.execute(f"INSERT INTO {table} VALUES (1, 'before')")
        db.execute("SELECT dlock_guard(%s::regclass, %s)", (table, "$k$" + key + "$k$"))
        with pytest.raises(psycopg.Error) as e:
            db.execute(f"UPDATE {table} SET v = 'unfenced' WHERE id = 1")
        assert e.value.sqlstate == "LK001"
        with dlock.lease(dsn, key, ttl=30) as lease:
            with psycopg.connect(dsn, autocommit=True) as conn:
                cur = lease.execute(conn.cursor(), f"UPDATE {table} SET v = 'fenced' WHERE id = 1")
                assert cur.rowcount == 1
        assert db.execute(f"SELECT v FROM {table}").fetchone() == ("fenced",)
    finally:
        db.execute(f"DROP TABLE {table}")
