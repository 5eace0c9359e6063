"""The claim loop: every row completed once across two workers, one of
them killed (SIGKILL) in the middle of a batch."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg

import dlock

from conftest import claims_of

HERE = os.path.dirname(os.path.abspath(__file__))


def test_claim_loop_basics(dsn, db):
    db.execute("DROP TABLE IF EXISTS small_jobs")
    db.execute("CREATE TABLE small_jobs (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO small_jobs (id) SELECT generate_series(1, 7)")
    batches = []
    for batch in dlock.claims(dsn, "small_jobs", "basic", n=3, ttl=3, filter="status = 0",
                              order_by="id", until_empty=True):
        batches.append(list(batch.keys))
        if batch.keys[0] == 1:
            time.sleep(4.0)  # longer than the ttl: renewals keep the claims
            assert not batch.lost.is_set()
            assert batch.complete([1, 2]) == [1, 2]
            assert batch.unclaim([3]) == 1
            db.execute("UPDATE small_jobs SET status = 1 WHERE id IN (1, 2)")
            continue
        done = batch.complete()
        db.execute("UPDATE small_jobs SET status = 1 WHERE id = ANY(%s)", (done,))
    assert batches == [[1, 2, 3], [3, 4, 5], [6, 7]]
    assert claims_of(db, "small_jobs") == {}


def test_claim_loop_gives_back_what_is_left(dsn, db):
    db.execute("DROP TABLE IF EXISTS left_jobs")
    db.execute("CREATE TABLE left_jobs (id int PRIMARY KEY)")
    db.execute("INSERT INTO left_jobs SELECT generate_series(1, 4)")
    for batch in dlock.claims(dsn, "left_jobs", "leaver", n=4, ttl=30):
        assert db.execute("SELECT count(*) FROM dlock_claims WHERE holder = 'leaver'").fetchone() == (4,)
        batch.complete([1])
        break  # the other three are given back, attempts kept
    # at once and plainly (not as failed: no backoff), claimable by another
    assert claims_of(db, "left_jobs") == {}
    ids = [r[0] for r in db.execute(
        "SELECT id FROM dlock_claim(NULL::left_jobs, 'peeker', 10) ORDER BY id").fetchall()]
    db.execute("SELECT dlock_unclaim('left_jobs'::regclass, 'peeker')")
    assert ids == [1, 2, 3, 4]   # 1 completed, but the test did not mark it done


def test_complete_and_unclaim_in_the_callers_transaction(dsn, db):
    db.execute("DROP TABLE IF EXISTS tx_jobs")
    db.execute("CREATE TABLE tx_jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO tx_jobs (id) SELECT generate_series(1, 4)")
    batches = []
    with psycopg.connect(dsn) as conn:
        for batch in dlock.claims(dsn, "tx_jobs", "tx", n=4, ttl=30, filter="status = 0",
                                  order_by="id", until_empty=True):
            batches.append(list(batch.keys))
            with conn.transaction():
                if batch.keys[0] == 1:
                    done = batch.complete([1, 2], cursor=conn.cursor())
                    assert done == [1, 2]
                    assert batch.unclaim([3], cursor=conn.cursor()) == 1
                else:
                    done = batch.complete(cursor=conn.cursor())
                conn.execute("UPDATE tx_jobs SET status = 1 WHERE id = ANY(%s)", (done,))
            assert batch.outstanding == ([4] if batch.keys[0] == 1 else [])
            assert len(batch) == len(batch.keys) and list(batch) == batch.rows
            batch.check()
    assert batches == [[1, 2, 3, 4], [3, 4]]
    assert db.execute("SELECT count(*) FROM tx_jobs WHERE status = 0").fetchone() == (0,)
    assert claims_of(db, "tx_jobs") == {}


def test_two_workers_one_killed_mid_batch(dsn, db):
    db.execute("DROP TABLE IF EXISTS jobs, done_log")
    db.execute("CREATE TABLE jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)")
    db.execute("CREATE TABLE done_log (id int, worker text)")
    db.execute("INSERT INTO jobs (id) SELECT generate_series(1, 60)")
    worker = [sys.executable, os.path.join(HERE, "claim_worker.py"), dsn]
    victim = subprocess.Popen(worker + ["victim", "3", "2"], stdout=subprocess.PIPE, text=True)
    other = None
    try:
        line = victim.stdout.readline()
        assert line.startswith("DYING"), line
        held = [int(k) for k in line.split()[1:]]
        assert held, "the victim held claims when it died"
        other = subprocess.Popen(worker + ["survivor", "3"], stdout=subprocess.PIPE, text=True)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(30)
        out, _ = other.communicate(timeout=300)
        assert other.returncode == 0 and "FINISHED" in out
    finally:
        for p in (victim, other):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    counts = db.execute("SELECT id, count(*) FROM done_log GROUP BY id ORDER BY id").fetchall()
    assert [c[0] for c in counts] == list(range(1, 61)), "a row was never completed"
    assert all(c[1] == 1 for c in counts), "a row was completed twice"
    survivors = {r[0] for r in db.execute("SELECT id FROM done_log WHERE worker = 'survivor'")}
    assert set(held) <= survivors, "the killed worker's claims went to the other worker"
    assert db.execute("SELECT count(*) FROM jobs WHERE status = 0").fetchone() == (0,)
