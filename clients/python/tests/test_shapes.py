"""The lock shapes against a real server: a counting semaphore
(lease(..., slots=n)), a shared lease (lease(..., shared=True)) and several
keys, all or none (leases(...)), blocking and asyncio."""
from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

import dlock
import dlock.aio

SLACK = 2.0  # scheduling slack for "signalled by the deadline" on a loaded machine


def rows_of(db, key):
    """(holder, token) of every live holder of key, by holder."""
    return sorted(db.execute("SELECT holder, token FROM dlock_locks WHERE key = %s",
                             (key,)).fetchall())


def held_by(db, holder):
    """The keys holder holds, sorted."""
    return [r[0] for r in db.execute(
        "SELECT key FROM dlock_locks WHERE holder = %s ORDER BY key", (holder,)).fetchall()]


# -- counting semaphores -------------------------------------------------------

def test_semaphore_two_holders_and_a_third_refused(dsn, db, key):
    with dlock.lease(dsn, key, ttl=30, slots=2) as a, dlock.lease(dsn, key, ttl=30, slots=2) as b:
        assert a.token != b.token
        assert rows_of(db, key) == sorted([(a.holder, a.token), (b.holder, b.token)])
        with pytest.raises(dlock.NotAcquired):
            with dlock.lease(dsn, key, ttl=30, slots=2, wait=0.2):
                pytest.fail("a third holder of a 2-slot semaphore")
        assert len(rows_of(db, key)) == 2
        with psycopg.connect(dsn) as conn:  # fenced by this holder's own token
            assert a.execute(conn.cursor(), "SELECT 1").fetchone() == (1,)
    assert a.released is True and b.released is True
    assert rows_of(db, key) == []


def test_semaphore_mismatched_slots_is_22023_and_holds_nothing(dsn, db, key):
    with dlock.lease(dsn, key, ttl=30, slots=2) as a:
        odd = dlock.lease(dsn, key, ttl=30, slots=3)
        with pytest.raises(dlock.DatabaseError) as e:
            odd.acquire()
        assert e.value.sqlstate == "22023"
        assert isinstance(e.value.__cause__, psycopg.Error)
        assert e.value.__cause__.sqlstate == "22023"
        assert rows_of(db, key) == [(a.holder, a.token)]
        # a lease is a semaphore of one slot: it does not mix either
        with pytest.raises(dlock.DatabaseError) as e:
            dlock.lease(dsn, key, ttl=30).acquire()
        assert e.value.sqlstate == "22023"
    assert rows_of(db, key) == []


def test_semaphore_loss_is_detected(dsn, db, key):
    ttl = 3.0
    with dlock.lease(dsn, key, ttl=ttl, slots=2) as a:
        db.execute("SELECT dlock_force_release(%s)", (key,))
        assert a.lost.wait(ttl + SLACK), "the loss was not signalled"
        with pytest.raises(dlock.LeaseLost):
            a.check()
    assert a.released is False


def test_client_side_checks():
    with pytest.raises(ValueError):
        dlock.lease("", "k", slots=0)
    with pytest.raises(TypeError):
        dlock.lease("", "k", slots="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        dlock.lease("", "k", slots=2, shared=True)
    with pytest.raises(TypeError):
        dlock.leases("", "a,b")
    with pytest.raises(ValueError):
        dlock.leases("", [])
    with pytest.raises(ValueError):
        dlock.leases("", ["a", ""])
    with pytest.raises(ValueError):
        dlock.aio.leases("", ["a"], ttl=0)


# -- shared leases -----------------------------------------------------------

def test_shared_holders_together_and_a_lease_refused(dsn, db, key):
    with dlock.lease(dsn, key, ttl=30, shared=True) as r1, \
            dlock.lease(dsn, key, ttl=30, shared=True) as r2:
        assert r1.shared and r1.token != r2.token
        assert rows_of(db, key) == sorted([(r1.holder, r1.token), (r2.holder, r2.token)])
        with pytest.raises(dlock.NotAcquired):
            with dlock.lease(dsn, key, ttl=30, wait=0.2):
                pytest.fail("a lease over shared holders")
        time.sleep(r1.ttl / 3 + 0.5)  # a renewal of each
        r1.check()
        r2.check()
    assert rows_of(db, key) == []
    with dlock.lease(dsn, key, ttl=30) as w:  # free again: the lease is had
        with pytest.raises(dlock.NotAcquired):
            dlock.lease(dsn, key, ttl=30, shared=True).acquire()
    assert w.released is True


# -- several keys, all or none -------------------------------------------------

def test_leases_all_or_none(dsn, db, key):
    keys = [f"{key}/b", f"{key}/a", f"{key}/c"]
    other = db.execute("SELECT dlock_acquire(%s, 'other', '1 min')", (keys[2],)).fetchone()[0]
    held = dlock.leases(dsn, keys, ttl=30, wait=0.3)
    with pytest.raises(dlock.NotAcquired):
        held.acquire()
    assert held_by(db, held.holder) == []  # none of the free keys kept
    assert db.execute("SELECT count(*) FROM dlock_waiters WHERE key LIKE %s",
                      (key + "/%",)).fetchone() == (0,)
    db.execute("SELECT dlock_release(%s, 'other', %s)", (keys[2], other))
    with dlock.leases(dsn, keys + [keys[0]], ttl=30) as held:
        assert held.keys == keys
        assert sorted(held.tokens) == sorted(keys)
        for k in keys:
            assert rows_of(db, k) == [(held.holder, held.tokens[k])]
        with psycopg.connect(dsn) as conn:
            assert held.execute(conn.cursor(), "SELECT 1").fetchone() == (1,)
    assert held.released is True
    for k in keys:
        assert rows_of(db, k) == []


def test_leases_fence_checks_every_key(dsn, db, key):
    keys = [f"{key}/f1", f"{key}/f2"]
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")
    with dlock.leases(dsn, keys, ttl=30) as held:
        db.execute("SELECT dlock_force_release(%s)", (keys[1],))
        db.execute("SELECT dlock_acquire(%s, 'thief', '1 min')", (keys[1],))
        with psycopg.connect(dsn) as conn:
            with pytest.raises(dlock.LeaseLost):
                held.execute(conn.cursor(), "INSERT INTO guarded VALUES (%s, 0, 'stale')", (key,))
        assert held.lost.is_set()
    assert db.execute("SELECT count(*) FROM guarded WHERE key = %s", (key,)).fetchone() == (0,)
    assert rows_of(db, keys[1])[0][0] == "thief"  # never released another holder's lease
    assert held_by(db, held.holder) == []
    db.execute("SELECT dlock_release(%s, 'thief')", (keys[1],))


def test_leases_renewed_and_lost_when_any_is(dsn, db, key, server):
    ttl = 3.0
    keys = [f"{key}/1", f"{key}/2"]
    reasons = []
    with dlock.leases(dsn, keys, ttl=ttl, on_lost=lambda h: reasons.append(h.lost_reason)) as held:
        first = held.deadline
        time.sleep(ttl / 3 + 1.0)  # a renewal
        assert held.deadline > first and not held.lost.is_set()
        held.check()
        db.execute("SELECT dlock_force_release(%s)", (keys[1],))
        assert held.lost.wait(ttl + SLACK), "the loss of one key was not signalled"
        assert len(reasons) == 1 and "refused" in reasons[0]
        with pytest.raises(dlock.LeaseLost):
            held.check()
        with psycopg.connect(dsn) as conn:
            with pytest.raises(dlock.LeaseLost):
                held.execute(conn.cursor(), "SELECT 1")
        mark = server.log_mark()
        time.sleep(2 * ttl / 3 + 0.5)
        assert keys[0] not in server.log_since(mark), "renewed after the loss"
        assert rows_of(db, keys[0]) == [(held.holder, held.tokens[keys[0]])]
    assert held.released is False  # one was not held any more
    assert held_by(db, held.holder) == []  # the other was released


def test_leases_exception_in_the_body_releases_all(dsn, db, key):
    keys = [f"{key}/x", f"{key}/y"]
    with pytest.raises(RuntimeError):
        with dlock.leases(dsn, keys, ttl=30) as held:
            assert held_by(db, held.holder) == sorted(keys)
            raise RuntimeError("boom")
    assert held.released is True
    assert held_by(db, held.holder) == []


# -- asyncio -------------------------------------------------------------------

def test_aio_shapes(dsn, db, key):
    async def main():
        async with dlock.aio.lease(dsn, key, ttl=30, slots=2) as a, \
                dlock.aio.lease(dsn, key, ttl=30, slots=2) as b:
            assert len(rows_of(db, key)) == 2 and a.token != b.token
            with pytest.raises(dlock.NotAcquired):
                await dlock.aio.lease(dsn, key, ttl=30, slots=2).acquire()
            with pytest.raises(dlock.DatabaseError) as e:
                await dlock.aio.lease(dsn, key, ttl=30, slots=5).acquire()
            assert e.value.sqlstate == "22023"
        assert rows_of(db, key) == []
        skey = key + "/shared"
        async with dlock.aio.lease(dsn, skey, ttl=30, shared=True), \
                dlock.aio.lease(dsn, skey, ttl=30, shared=True):
            assert len(rows_of(db, skey)) == 2
            with pytest.raises(dlock.NotAcquired):
                await dlock.aio.lease(dsn, skey, ttl=30).acquire()
        keys = [f"{key}/m1", f"{key}/m2"]
        db.execute("SELECT dlock_acquire(%s, 'other', '1 min')", (keys[1],))
        held = dlock.aio.leases(dsn, keys, ttl=3, wait=0.2)
        with pytest.raises(dlock.NotAcquired):
            await held.acquire()
        assert held_by(db, held.holder) == []
        db.execute("SELECT dlock_release(%s, 'other')", (keys[1],))
        async with dlock.aio.leases(dsn, keys, ttl=3) as held:
            assert held_by(db, held.holder) == keys
            async with await psycopg.AsyncConnection.connect(dsn) as conn:
                await held.execute(conn.cursor(), "SELECT 1")
            db.execute("SELECT dlock_force_release(%s)", (keys[0],))
            await asyncio.wait_for(held.lost.wait(), 3 + SLACK)
            with pytest.raises(dlock.LeaseLost):
                held.check()
        assert held.released is False
        assert held_by(db, held.holder) == []

    asyncio.run(main())
