"""The claim loop's 0.5 arguments (issue 38): a loop waiting in the server
is woken by an insert (one dlock_claim call, no polling), a handler's or a
with block's failure gives the rows back with a backoff, group_by /
per_group / fair reach dlock_claim, and a cancelled or stopped wait ends
with no claim and no waiting call left."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, List

import psycopg
import pytest

import dlock
import dlock.aio

from conftest import claims_of, wait_until


def _table(db: psycopg.Connection, name: str, wakeup: bool = True) -> None:
    db.execute(f"DROP TABLE IF EXISTS {name}")
    db.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, tenant text NOT NULL DEFAULT 'a')")
    if wakeup:
        db.execute(f"SELECT dlock_claim_wakeup('{name}'::regclass)")


def _waiting(db: psycopg.Connection, table: str) -> int:
    """dlock_claim calls on table running now (waiting in the server)."""
    return db.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
        " AND query LIKE %s AND pid <> pg_backend_pid()",
        (f"%dlock_claim(NULL::{table}%",)).fetchone()[0]


def _claimable(db: psycopg.Connection, table: str) -> List[Any]:
    """What another holder can claim of table now (given back at once)."""
    keys = [r[0] for r in db.execute(
        f"SELECT id FROM dlock_claim(NULL::{table}, 'peeker', 100)").fetchall()]
    db.execute(f"SELECT dlock_unclaim('{table}'::regclass, 'peeker')")
    return keys


def test_claims_wait_woken_by_insert(dsn, db):
    _table(db, "wjobs")
    got: List[Any] = []
    loop = dlock.claims(dsn, "wjobs", "waiter", n=5, wait=60)

    def work() -> None:
        for batch in loop:
            got.extend(batch.keys)
            batch.complete()
            loop.stop.set()

    t = threading.Thread(target=work)
    t.start()
    try:
        assert wait_until(lambda: _waiting(db, "wjobs") == 1, 20)
        db.execute("INSERT INTO wjobs (id) VALUES (7)")
        t.join(60)
        assert not t.is_alive()
    finally:
        loop.stop.set()
        t.join(60)
    assert got == [7]
    # the waiting call itself got the row: it was woken, nothing polled
    assert loop.claim_calls == 1


def test_claims_wait_until_empty_ends(dsn, db):
    _table(db, "wempty")
    db.execute("INSERT INTO wempty (id) VALUES (1)")
    loop = dlock.claims(dsn, "wempty", "w2", n=5, wait=0.5, until_empty=True)
    seen = []
    for batch in loop:
        seen.extend(batch.complete())
        db.execute("DELETE FROM wempty WHERE id = ANY(%s)", (batch.keys,))   # done
    assert seen == [1]
    # one call with the row, then waiting calls until the wait ran out
    assert loop.claim_calls >= 2


def test_claims_retry_handler_failure_backs_off(dsn, db):
    _table(db, "rjobs", wakeup=False)
    db.execute("INSERT INTO rjobs (id) VALUES (1), (2)")
    calls: List[Any] = []

    def handler(batch: dlock.Batch) -> None:
        calls.append(list(batch.keys))
        if 1 in batch.keys:
            assert batch.complete([2]) == [2]
            db.execute("DELETE FROM rjobs WHERE id = 2")   # done
            raise RuntimeError("send failed")

    dlock.work(dsn, "rjobs", "retrier", handler, n=5, order_by="id", retry_after=3600,
               max_attempts=3, until_empty=True)
    assert calls == [[1, 2]]  # not delivered again: it backs off
    assert _claimable(db, "rjobs") == []
    assert claims_of(db, "rjobs") == {"1": "backoff"}   # shown in its backoff, no holder


def test_claims_retry_after_null_uses_the_claims_backoff(dsn, db):
    _table(db, "bjobs", wakeup=False)
    db.execute("INSERT INTO bjobs (id) VALUES (1)")
    calls = []

    def handler(batch: dlock.Batch) -> None:
        calls.append(list(batch.keys))
        raise RuntimeError("boom")

    dlock.work(dsn, "bjobs", "backer", handler, backoff=3600, backoff_max=7200, max_attempts=3,
               until_empty=True)
    assert calls == [[1]]
    assert _claimable(db, "bjobs") == []


def test_claims_retry_with_block_raising_fails_the_batch(dsn, db):
    _table(db, "xjobs", wakeup=False)
    db.execute("INSERT INTO xjobs (id) VALUES (1), (2)")
    # a break gives the batch back at once, plainly, as before 0.5: inside
    # the with block already, and not in a backoff
    with dlock.claims(dsn, "xjobs", "xer", n=1, order_by="id", retry_after=3600) as loop:
        for batch in loop:
            break
        assert claims_of(db, "xjobs") == {}
        assert _claimable(db, "xjobs") == [1, 2]
    # an exception that leaves the for loop: the for loop's end gives the
    # batch back, plainly (Python cannot tell it from a break)
    with pytest.raises(ValueError):
        with dlock.claims(dsn, "xjobs", "xer", n=1, order_by="id", retry_after=3600) as loop:
            for batch in loop:
                raise ValueError(batch.keys)
    assert claims_of(db, "xjobs") == {}
    # the block raises while the batch is still held: given back as failed
    # (not left to lapse), and 1 backs off
    with pytest.raises(ValueError):
        with dlock.claims(dsn, "xjobs", "xer", n=1, order_by="id", retry_after=3600) as loop:
            it = iter(loop)
            raise ValueError(next(it).keys)
    assert claims_of(db, "xjobs") == {"1": "backoff"}
    assert _claimable(db, "xjobs") == [2]


def test_claims_retry_batch_fail_explicit(dsn, db):
    _table(db, "fjobs", wakeup=False)
    db.execute("INSERT INTO fjobs (id) VALUES (1), (2)")
    for batch in dlock.claims(dsn, "fjobs", "failer", n=2, order_by="id"):
        assert batch.fail([1], retry_after=3600) == 1
        assert batch.outstanding == [2]
        break
    assert _claimable(db, "fjobs") == [2]


def test_claims_group_arguments_reach_the_server(dsn, db):
    _table(db, "gjobs", wakeup=False)
    db.execute("INSERT INTO gjobs SELECT i, CASE WHEN i <= 5 THEN 'a' ELSE 'b' END"
               " FROM generate_series(1, 7) i")
    for batch in dlock.claims(dsn, "gjobs", "grouper", n=10, order_by="id",
                              group_by="tenant", per_group=1):
        assert sorted(batch.keys) == [1, 6]     # one per tenant, in order
        break
    for batch in dlock.claims(dsn, "gjobs", "fairer", n=4, order_by="id",
                              group_by="tenant", fair=True):
        assert sorted(batch.keys) == [1, 2, 6, 7]   # round-robin, not 1..4
        break
    with pytest.raises(ValueError):
        dlock.claims(dsn, "gjobs", "x", per_group=2)   # needs group_by
    with pytest.raises(ValueError):
        dlock.claims(dsn, "gjobs", "x", fair=True)


def test_claims_cancel_stop_during_wait(dsn, db):
    _table(db, "sjobs")
    loop = dlock.claims(dsn, "sjobs", "stopper", n=5, wait=3600)
    out: List[Any] = []
    t = threading.Thread(target=lambda: out.extend(b.keys for b in loop))
    t.start()
    assert wait_until(lambda: _waiting(db, "sjobs") == 1, 20)
    loop.stop.set()
    t.join(5)  # a hang limit, well below the 10 s of one waiting call
    assert not t.is_alive()
    assert out == [] and loop.claim_calls == 1
    assert wait_until(lambda: _waiting(db, "sjobs") == 0, 10)
    db.execute("INSERT INTO sjobs (id) VALUES (1)")
    assert claims_of(db, "sjobs") == {}
    assert _claimable(db, "sjobs") == [1]


def test_claims_cancel_aio_task_during_wait(dsn, db):
    _table(db, "ajobs")

    async def main() -> dlock.aio.Claims:
        loop = dlock.aio.claims(dsn, "ajobs", "canceller", n=5, wait=3600)

        async def run() -> None:
            async for _ in loop:
                pass

        task = asyncio.ensure_future(run())
        for _ in range(400):
            if _waiting(db, "ajobs") == 1:
                break
            await asyncio.sleep(0.05)
        assert _waiting(db, "ajobs") == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)   # a hang limit
        return loop

    loop = asyncio.run(main())
    assert loop.claim_calls == 1
    assert wait_until(lambda: _waiting(db, "ajobs") == 0, 10)
    assert claims_of(db, "ajobs") == {}


def test_claims_wait_aio_woken_and_handler(dsn, db):
    _table(db, "awjobs")
    done: List[Any] = []

    async def main() -> None:
        stop = asyncio.Event()

        async def handler(batch: dlock.aio.Batch) -> None:
            done.extend(await batch.complete())
            stop.set()

        task = asyncio.ensure_future(
            dlock.aio.work(dsn, "awjobs", "aw", handler, n=5, wait=60, stop=stop))
        for _ in range(400):
            if _waiting(db, "awjobs") == 1:
                break
            await asyncio.sleep(0.05)
        db.execute("INSERT INTO awjobs (id) VALUES (3)")
        await asyncio.wait_for(task, 60)

    asyncio.run(main())
    assert done == [3]
