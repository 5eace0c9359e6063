#!/usr/bin/env python3
"""bench/peers/claims_py.py - the Python side of contender "dlock-py" of
bench/peers/claims.js (queues/dlock_py.js runs it; owned by the claims
runner's author): dlock's row claims through the Python client's blocking
claim loop (clients/python, psycopg 3 from Debian), its own workers
(threads), inserts and clock (time.monotonic_ns, CLOCK_MONOTONIC), one JSON
object on stdout at the end; progress on stderr.

    python3 claims_py.py '{"cmd": "run", "dsn": ..., "table": ..., "workers": 4, "batch": 1, "seconds": 3}'
        -> {"done": jobs completed within the window, "cpu_us": this process's CPU in the window}
    ... '{"cmd": "latency", ..., "workers": 4, "trials": 100, "payload": "{...}"}'  -> {"ms": [...]}
    ... '{"cmd": "stale", ...}'   -> {"ok": bool, "detail": "..."}

Each worker is a thread with `dlock.claims(dsn, table, holder, n=batch,
ttl=30, filter="status = 0", wait=10, stop=stop)` (an idle loop waits in
dlock_claim, woken by dlock_claim_wakeup's trigger: no polling, no LISTEN)
and a connection of its own (autocommit, opened before the window) for the
completion, as clients/python/README.md shows it:

    with conn.transaction():
        done = batch.complete(batch.keys, cursor=conn.cursor())
        conn.execute("UPDATE t SET status = 1 WHERE id = ANY(%s)", (done,))

Round trips per batch: 1 (dlock_claim, on the loop's own connection, made at
its first call: inside the window) + 4 (BEGIN, dlock_complete, UPDATE,
COMMIT) = 5, 2 commits; each client call hops to the loop's event-loop thread.
"""
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time

import psycopg

import dlock

FILTER = "status = 0"


def log(msg):
    print(f"claims_py: {msg}", file=sys.stderr, flush=True)


def cpu_us():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return int((r.ru_utime + r.ru_stime) * 1e6)


def complete(conn, table, batch):
    with conn.transaction():
        done = batch.complete(batch.keys, cursor=conn.cursor())
        conn.execute(f"UPDATE {table} SET status = 1 WHERE id = ANY(%s)", (done,))
    return done


class Workers:
    """`workers` claim loops in threads; on_rows(rows) at a batch's start,
    on_done(n) after its completion."""

    def __init__(self, a, workers, batch, on_rows=None, on_done=None):
        self.stop = threading.Event()
        self.errors = []
        tag = "%06x" % random.getrandbits(24)
        conns = [psycopg.connect(a["dsn"], autocommit=True) for _ in range(workers)]

        def work(i, conn):
            try:
                with dlock.claims(a["dsn"], a["table"], f"py-{tag}-{i}", n=batch, ttl=30,
                                  filter=FILTER, wait=10, stop=self.stop) as loop:
                    for b in loop:
                        if on_rows:
                            on_rows(b.rows)
                        done = complete(conn, a["table"], b)
                        if on_done:
                            on_done(len(done))
            except Exception as exc:  # reported by finish()
                self.errors.append(repr(exc))
            finally:
                conn.close()

        self.threads = [threading.Thread(target=work, args=(i, c), daemon=True) for i, c in enumerate(conns)]
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(60)
        if any(t.is_alive() for t in self.threads):
            raise RuntimeError("a worker did not stop within 60 s")
        if self.errors:
            raise RuntimeError("; ".join(self.errors[:3]))


def run(a):
    lock = threading.Lock()
    box = {"done": 0, "end": None}

    def on_done(n):
        if time.monotonic_ns() <= box["end"]:
            with lock:
                box["done"] += n

    box["end"] = time.monotonic_ns() + 10**12  # set for real just below
    w = Workers(a, a["workers"], a["batch"], on_done=on_done)
    c0 = cpu_us()
    # the window runs from the workers' start (their completion connections
    # open) for `seconds`
    box["end"] = time.monotonic_ns() + int(a["seconds"] * 1e9)
    time.sleep(a["seconds"])
    c1 = cpu_us()
    w.finish()
    return {"done": box["done"], "cpu_us": c1 - c0}


def latency(a):
    cond = threading.Condition()
    starts = {}

    def on_rows(rows):
        t = time.monotonic_ns()
        with cond:
            for r in rows:
                starts[r["id"]] = t
            cond.notify_all()

    w = Workers(a, a["workers"], 1, on_rows=on_rows)
    out = []
    try:
        time.sleep(1.0)  # the loops are waiting in dlock_claim
        with psycopg.connect(a["dsn"], autocommit=True) as ins:
            for _ in range(a["trials"]):
                jid = ins.execute(f"INSERT INTO {a['table']} (payload) VALUES (%s::jsonb) RETURNING id",
                                  (a["payload"],)).fetchone()[0]
                at = time.monotonic_ns()
                with cond:
                    if not cond.wait_for(lambda: jid in starts, 10):
                        raise RuntimeError(f"job {jid} not started within 10 s")
                out.append((starts[jid] - at) / 1e6)
                time.sleep(0.020 + random.random() * 0.030)
    finally:
        w.finish()
    return {"ms": out}


def stale(a):
    t = a["table"]
    with psycopg.connect(a["dsn"], autocommit=True) as conn:
        with dlock.claims(a["dsn"], t, "A", n=1, ttl=1, filter=FILTER) as loop:
            for b in loop:
                jid = b.keys[0]
                # B, another process: 1.5 s later (A's ttl of 1 s is over) it
                # claims what is to be had, then wakes A (SIGCONT) at 2.5 s
                pb = subprocess.Popen([sys.executable, __file__, json.dumps({**a, "cmd": "b", "parent": os.getpid()})],
                                      stdout=subprocess.PIPE, text=True)
                os.kill(os.getpid(), signal.SIGSTOP)  # A's whole process paused: nothing renewed
                got = json.loads(pb.communicate(timeout=30)[0])
                done = complete(conn, t, b)
                lost = b.lost.is_set()
                st = conn.execute(f"SELECT status FROM {t} WHERE id = %s", (jid,)).fetchone()[0]
                h = conn.execute("SELECT holder FROM dlock_claims WHERE table_name = %s::regclass AND key = %s",
                                 (t, str(jid))).fetchall()
                holder = h[0][0] if h else None
                ok = jid in got and done == [] and st == 0 and holder == "B"
                return {"ok": ok, "detail": (
                    f"A claimed job {jid} with ttl 1 s and its process was stopped 2.5 s (SIGSTOP: no renewal); "
                    f"B claimed it after the expiry (got {got}); A's batch.complete in its transaction returned "
                    f"{done} (batch lost: {lost}); status {st}, claim held by {holder}")}
    return {"ok": False, "detail": "A claimed nothing"}


def claim_b(a):
    try:
        time.sleep(1.5)
        with psycopg.connect(a["dsn"], autocommit=True) as c:
            got = [r[0] for r in c.execute(
                f"SELECT id FROM dlock_claim(NULL::{a['table']}, 'B', 1, '30 s', %s)", (FILTER,)).fetchall()]
        time.sleep(1.0)
        return got
    finally:
        os.kill(a["parent"], signal.SIGCONT)


def main():
    a = json.loads(sys.argv[1])
    cmd = a["cmd"]
    if cmd == "version":
        print(json.dumps({"dlock": getattr(dlock, "__version__", "?"), "psycopg": psycopg.__version__,
                          "python": sys.version.split()[0]}))
        return
    if cmd == "b":
        print(json.dumps(claim_b(a)), flush=True)
        return
    res = {"run": run, "latency": latency, "stale": stale}[cmd](a)
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
