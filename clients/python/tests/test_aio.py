"""dlock.aio against a real server: the asyncio twin, and cancellation."""
from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

import dlock
import dlock.aio
from conftest import claims_of, holder_of, wait_until


def run(coro):
    return asyncio.run(coro)


def test_aio_happy_path_and_fence(dsn, db, key):
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")

    async def main():
        async with dlock.aio.lease(dsn, key, ttl=3) as lease:
            assert holder_of(db, key) == (lease.holder, lease.token)
            await asyncio.sleep(4.0)  # longer than the ttl
            assert not lease.lost.is_set()
            lease.check()
            async with await psycopg.AsyncConnection.connect(dsn) as conn:
                cur = conn.cursor()
                await lease.execute(cur, "INSERT INTO guarded VALUES (%s, %s, 'aio')", (key, lease.token))
        return lease

    lease = run(main())
    assert lease.released is True
    assert holder_of(db, key) is None
    assert db.execute("SELECT count(*) FROM guarded WHERE key = %s", (key,)).fetchone() == (1,)


def test_aio_lost_by_force_release(dsn, db, key):
    async def main():
        async with dlock.aio.lease(dsn, key, ttl=3) as lease:
            db.execute("SELECT dlock_force_release(%s)", (key,))
            await asyncio.wait_for(lease.lost.wait(), 3 + 2.0)
            with pytest.raises(dlock.LeaseLost):
                lease.check()
        return lease

    assert run(main()).released is False


def test_aio_not_acquired(dsn, db, key):
    db.execute("SELECT dlock_acquire(%s, 'other', '1 min')", (key,))

    async def main():
        with pytest.raises(dlock.NotAcquired):
            async with dlock.aio.lease(dsn, key, ttl=5, wait=0.3):
                pytest.fail("acquired")

    run(main())
    db.execute("SELECT dlock_release(%s, 'other')", (key,))


def test_aio_cancel_in_the_body_releases(dsn, db, key):
    async def main():
        inside = asyncio.Event()
        box = {}

        async def work():
            async with dlock.aio.lease(dsn, key, ttl=30) as lease:
                box["lease"] = lease
                inside.set()
                await asyncio.sleep(3600)

        task = asyncio.create_task(work())
        await asyncio.wait_for(inside.wait(), 30)
        assert holder_of(db, key) is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return box["lease"]

    lease = run(main())
    assert lease.released is True
    assert holder_of(db, key) is None


def test_aio_cancel_while_waiting_leaves_nothing(dsn, db, key):
    token = db.execute("SELECT dlock_acquire(%s, 'other', '1 min')", (key,)).fetchone()[0]

    async def main():
        lease = dlock.aio.lease(dsn, key, ttl=30, wait=60)
        task = asyncio.create_task(lease.acquire())
        assert await asyncio.to_thread(wait_until, lambda: db.execute(
            "SELECT count(*) FROM dlock_waiters WHERE key = %s", (key,)).fetchone()[0] == 1, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return lease

    lease = run(main())
    # the waiter is gone; the key, freed, goes to nobody
    assert wait_until(lambda: db.execute(
        "SELECT count(*) FROM dlock_waiters WHERE key = %s", (key,)).fetchone()[0] == 0, 30)
    assert db.execute("SELECT dlock_release(%s, 'other', %s)", (key, token)).fetchone() == (True,)
    time.sleep(0.5)
    assert holder_of(db, key) is None
    assert db.execute("SELECT count(*) FROM dlock_locks WHERE holder = %s", (lease.holder,)).fetchone() == (0,)


def test_aio_claim_loop(dsn, db):
    db.execute("DROP TABLE IF EXISTS aio_jobs")
    db.execute("CREATE TABLE aio_jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO aio_jobs (id) SELECT generate_series(1, 4)")

    async def main():
        batches = []
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async for batch in dlock.aio.claims(dsn, "aio_jobs", "aio", n=4, ttl=30,
                                                filter="status = 0", order_by="id",
                                                until_empty=True):
                batches.append(list(batch.keys))
                assert len(batch) == len(batch.keys)
                batch.check()
                if batch.keys == [1, 2, 3, 4]:
                    async with conn.transaction():
                        done = await batch.complete([1, 2], cursor=conn.cursor())
                        assert done == [1, 2]
                        assert await batch.unclaim([3], cursor=conn.cursor()) == 1
                        await conn.execute("UPDATE aio_jobs SET status = 1 WHERE id = ANY(%s)", (done,))
                    assert batch.outstanding == [4]
                    continue  # 4 is given back
                if batch.keys == [3, 4]:
                    assert await batch.unclaim([4]) == 1
                done = await batch.complete()
                await conn.execute("UPDATE aio_jobs SET status = 1 WHERE id = ANY(%s)", (done,))
                await conn.commit()
                assert batch.outstanding == []
        return batches

    assert run(main()) == [[1, 2, 3, 4], [3, 4], [4]]
    assert db.execute("SELECT count(*) FROM aio_jobs WHERE status = 0").fetchone() == (0,)
    assert claims_of(db, "aio_jobs") == {}
