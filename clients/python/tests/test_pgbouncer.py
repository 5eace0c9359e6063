"""Through pgbouncer in transaction mode (default_pool_size = 2)."""
from __future__ import annotations

import time

import psycopg

import dlock
from conftest import holder_of


def test_lease_through_pgbouncer(bouncer_dsn, db, key):
    db.execute("CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)")
    # another client keeps one of the two server connections in a transaction
    busy = psycopg.connect(bouncer_dsn)
    busy.execute("SELECT 1")
    try:
        with dlock.lease(bouncer_dsn, key, ttl=3) as lease:
            time.sleep(4.0)  # renewals through the pooler
            assert not lease.lost.is_set()
            assert holder_of(db, key) == (lease.holder, lease.token)
            with psycopg.connect(bouncer_dsn, prepare_threshold=None) as conn:
                lease.execute(conn.cursor(), "INSERT INTO guarded VALUES (%s, %s, 'pooled')",
                              (key, lease.token))
        assert lease.released is True
    finally:
        busy.rollback()
        busy.close()
    assert holder_of(db, key) is None
    assert db.execute("SELECT count(*) FROM guarded WHERE key = %s", (key,)).fetchone() == (1,)


def test_claims_through_pgbouncer(bouncer_dsn, db):
    db.execute("DROP TABLE IF EXISTS pooled_jobs")
    db.execute("CREATE TABLE pooled_jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO pooled_jobs (id) SELECT generate_series(1, 9)")
    seen = []
    with psycopg.connect(bouncer_dsn, prepare_threshold=None) as conn:
        for batch in dlock.claims(bouncer_dsn, "pooled_jobs", "pooled-worker", n=4, ttl=5,
                                  filter="status = 0", until_empty=True):
            with conn.transaction():
                done = batch.complete(batch.keys, cursor=conn.cursor())
                conn.execute("UPDATE pooled_jobs SET status = 1 WHERE id = ANY(%s)", (done,))
            seen += done
    assert sorted(seen) == list(range(1, 10))
    assert db.execute("SELECT count(*) FROM dlock_claims WHERE table_name = 'pooled_jobs'::regclass").fetchone() == (0,)
