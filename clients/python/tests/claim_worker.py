"""A claim worker for test_claims.py, run as a process of its own.

    python claim_worker.py DSN HOLDER TTL [DIE_IN_BATCH]

Claims batches of 5 rows of `jobs` (status = 0), completes each row in a
transaction of its own that also marks it done and logs it in done_log,
until no row is left undone.  With DIE_IN_BATCH = k, in its k-th batch it
completes the first two rows, prints "DYING" and waits to be killed.
"""
import sys
import threading
import time

import psycopg

import dlock

dsn, holder, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
die_in = int(sys.argv[4]) if len(sys.argv) > 4 else 0

stop = threading.Event()
conn = psycopg.connect(dsn)
check = psycopg.connect(dsn, autocommit=True)


def watch() -> None:
    while not stop.is_set():
        if check.execute("SELECT count(*) FROM jobs WHERE status = 0").fetchone()[0] == 0:
            stop.set()
        time.sleep(0.2)


threading.Thread(target=watch, daemon=True).start()
n = 0
for batch in dlock.claims(dsn, "jobs", holder, n=5, ttl=ttl, filter="status = 0",
                          order_by="id", poll=0.2, stop=stop):
    n += 1
    for i, k in enumerate(batch.keys):
        if n == die_in and i == 2:
            print("DYING", " ".join(map(str, batch.outstanding)), flush=True)
            time.sleep(3600)
        time.sleep(0.05)  # the work
        with conn.transaction():
            done = batch.complete([k], cursor=conn.cursor())
            conn.execute("UPDATE jobs SET status = 1 WHERE id = ANY(%s)", (done,))
            conn.execute("INSERT INTO done_log SELECT unnest(%s::int[]), %s", (done, holder))
print("FINISHED", n, flush=True)
