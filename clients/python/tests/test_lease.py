"""dlock.lease against a real server: renewal, loss, fencing, release."""
from __future__ import annotations

import threading
import time

import psycopg
import pytest

import dlock
from conftest import holder_of, wait_until

SLACK = 2.0  # scheduling slack for "signalled by the deadline" on a loaded machine


def test_happy_path_renews_fences_and_releases(dsn, db, key):
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")
    with dlock.lease(dsn, key, ttl=3) as lease:
        assert isinstance(lease.token, int) and lease.token > 0
        assert holder_of(db, key) == (lease.holder, lease.token)
        first_deadline = lease.deadline
        time.sleep(4.0)  # longer than the ttl: only renewals keep it
        assert not lease.lost.is_set()
        assert lease.deadline > first_deadline
        assert holder_of(db, key) == (lease.holder, lease.token)
        lease.check()
        with psycopg.connect(dsn) as conn:
            cur = conn.cursor()
            lease.execute(cur, "INSERT INTO guarded VALUES (%s, %s, 'fenced') RETURNING token",
                          (key, lease.token))
            assert cur.fetchone() == (lease.token,)
    assert lease.released is True
    assert holder_of(db, key) is None
    assert db.execute("SELECT count(*) FROM guarded WHERE key = %s", (key,)).fetchone() == (1,)
    with pytest.raises(dlock.LeaseLost):
        lease.check()


def test_not_acquired_and_wait(dsn, db, key):
    token = db.execute("SELECT dlock_acquire(%s, 'other', '1 min')", (key,)).fetchone()[0]
    with pytest.raises(dlock.NotAcquired):
        with dlock.lease(dsn, key, ttl=5):
            pytest.fail("acquired a key someone else holds")
    threading.Timer(0.5, lambda: psycopg.connect(dsn, autocommit=True).execute(
        "SELECT dlock_release(%s, 'other', %s)", (key, token))).start()
    with dlock.lease(dsn, key, ttl=5, wait=30) as lease:
        assert lease.token > token
    assert holder_of(db, key) is None


def test_errors_carry_the_sqlstate(dsn, db, key):
    with pytest.raises(dlock.DatabaseError) as e:
        dlock.lease(dsn, key, ttl=31 * 86400).acquire()
    assert e.value.sqlstate == "22023"
    with pytest.raises(dlock.DatabaseError) as e:
        dlock.lease(dsn, "k" * 2000, ttl=5).acquire()
    assert e.value.sqlstate == "22023"
    db.execute("DROP DATABASE IF EXISTS no_dlock")
    db.execute("CREATE DATABASE no_dlock")
    try:
        with pytest.raises(dlock.DatabaseError) as e:
            dlock.lease(dsn + " dbname=no_dlock", key, ttl=5).acquire()
        assert e.value.sqlstate == "42883"  # the function does not exist there
    finally:
        db.execute("DROP DATABASE no_dlock")
    with pytest.raises(ValueError):
        dlock.lease(dsn, key, ttl=0)


def test_errors_without_an_answer(dsn, db, key):
    """No server: a DatabaseError without SQLSTATE; no answer in time (dlock's
    lease table locked by an open transaction): a Timeout, a DatabaseError
    too, after the acquire's deadline (max(ttl, 5 s) past its wait)."""
    with pytest.raises(dlock.DatabaseError) as e:
        dlock.lease(dsn + " host=127.0.0.1 port=1", key, ttl=1).acquire()
    assert not isinstance(e.value, dlock.Timeout)
    assert e.value.sqlstate is None and e.value.__cause__ is not None
    with psycopg.connect(dsn) as locker:
        locker.execute("LOCK TABLE dlock.lease IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(dlock.Timeout) as t:
            dlock.lease(dsn, key, ttl=1).acquire()
        assert isinstance(t.value, dlock.DatabaseError) and t.value.sqlstate is None
        locker.rollback()


def test_lost_by_force_release(dsn, db, key, server):
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")
    calls = []
    ttl = 3.0
    with dlock.lease(dsn, key, ttl=ttl, on_lost=lambda l: calls.append(l.lost_reason)) as lease:
        assert db.execute("SELECT dlock_force_release(%s)", (key,)).fetchone() == (True,)
        forced = time.monotonic()
        assert lease.lost.wait(ttl + SLACK), "the loss was not signalled"
        assert time.monotonic() - forced <= ttl + SLACK  # at the next renewal, within the ttl
        assert len(calls) == 1 and "refused" in calls[0]
        with pytest.raises(dlock.LeaseLost):
            lease.check()
        with psycopg.connect(dsn) as conn:
            with pytest.raises(dlock.LeaseLost):
                lease.execute(conn.cursor(), "INSERT INTO guarded VALUES (%s, 0, 'late')", (key,))
        assert db.execute("SELECT count(*) FROM guarded WHERE key = %s", (key,)).fetchone() == (0,)
        # nothing renewed after the loss: no statement naming the key reaches the server
        mark = server.log_mark()
        time.sleep(2 * ttl / 3 + 0.5)
        assert key not in server.log_since(mark)
    assert lease.released is False  # not ours any more: nothing released


def test_fence_refused_declares_the_loss(dsn, db, key):
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")
    with dlock.lease(dsn, key, ttl=30) as lease:
        db.execute("SELECT dlock_force_release(%s)", (key,))
        other = db.execute("SELECT dlock_acquire(%s, 'thief', '1 min')", (key,)).fetchone()[0]
        with psycopg.connect(dsn, autocommit=True) as conn:
            with pytest.raises(dlock.LeaseLost):
                lease.execute(conn.cursor(), "INSERT INTO guarded VALUES (%s, %s, 'stale')",
                              (key, lease.token))
        assert lease.lost.is_set()
        assert db.execute("SELECT count(*) FROM guarded WHERE key = %s", (key,)).fetchone() == (0,)
    assert holder_of(db, key) == ("thief", other)  # never released another holder's lease
    db.execute("SELECT dlock_release(%s, 'thief')", (key,))


def test_server_stopped_past_the_ttl(dsn, db, key, server):
    ttl = 4.0
    db.close()
    with dlock.lease(dsn, key, ttl=ttl) as lease:
        time.sleep(ttl / 3 + 0.3)  # a renewal or so
        server.stop()
        stopped = time.monotonic()
        deadline = lease.deadline  # no renewal can be confirmed from now on
        assert lease.lost.wait(ttl + 2 * SLACK), "the loss was not signalled"
        lost_at = time.monotonic()
        assert lost_at >= deadline - 0.01, "loss declared before the ttl had passed"
        assert lost_at - stopped <= ttl + SLACK, "loss signalled later than the ttl"
        assert "within the ttl" in (lease.lost_reason or "")
        server.start()
        mark = server.log_mark()
        time.sleep(2 * ttl / 3 + 0.5)
        assert key not in server.log_since(mark), "a call was made after the loss"
    assert lease.released is False


def test_restart_shorter_than_the_ttl_is_no_loss(dsn, key, server, dead_port):
    ttl = 20.0
    # a multi-host conninfo: the first host is down, the second is the server
    port = psycopg.conninfo.conninfo_to_dict(dsn)["port"]
    multi = dsn + f" host=127.0.0.1,127.0.0.1 port={dead_port},{port}"
    with dlock.lease(multi, key, ttl=ttl) as lease:
        server.stop()
        time.sleep(1.0)
        server.start()
        restarted = time.monotonic()
        # the next renewal, after the restart, is confirmed
        assert wait_until(lambda: lease.deadline - ttl > restarted, ttl), "no renewal after the restart"
        assert not lease.lost.is_set()
        with psycopg.connect(dsn) as conn:
            lease.execute(conn.cursor(), "SELECT 1")
    assert lease.released is True


def test_exception_in_the_body_releases(dsn, db, key):
    with pytest.raises(RuntimeError):
        with dlock.lease(dsn, key, ttl=30) as lease:
            assert holder_of(db, key) is not None
            raise RuntimeError("boom")
    assert lease.released is True
    assert holder_of(db, key) is None


def test_acquire_and_release_without_with(dsn, db, key, server):
    lease = dlock.lease(dsn, key, ttl=3).acquire()
    assert holder_of(db, key) == (lease.holder, lease.token)
    assert lease.release() is True
    assert holder_of(db, key) is None
    mark = server.log_mark()
    assert lease.release() is True  # idempotent: answered without a call
    time.sleep(2.5)  # more than two renewal periods
    assert key not in server.log_since(mark), "a call was made after the release"
