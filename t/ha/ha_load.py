#!/usr/bin/python3
# Copyright: dlock contributors
#
# t/ha/ha_load.py: the clients and the checks of scripts/test-ha.sh (dlock
# on a Patroni cluster whose leader is killed under load).
#
#   ha_load.py setup DSN                 tables for the run
#   ha_load.py work DSN OUT ID SECONDS   one client: acquire, fenced write,
#                                        renew, release, claim, complete
#   ha_load.py wait DSN OUT SECONDS      a holder and a waiter blocked in
#                                        dlock_acquire on the leader
#   ha_load.py check DSN OUT MODE KILLED the checks, once the new leader is up
#
# DSN is a multi-host conninfo with target_session_attrs=read-write, so a
# client reconnects to whichever node is the leader.  Every call whose
# answer reached the client is appended to OUT/<client>.jsonl; a call that
# failed (the leader died under it) is not: its outcome is unknown, as it is
# for any client.  The checks then compare what was acknowledged with what
# the new leader has:
#   - acquires: every acknowledged lease that was not released is there,
#     with its holder and token (a release in autocommit mode may be lost in
#     a crash, README "Guarantees": then the lease is there with its holder
#     and token, never anyone else's);
#   - renewals: the lease runs at least until the acknowledged renewal said;
#   - fenced writes, claims and completions: every acknowledged one is there;
#   - tokens: a new acquire on the new leader returns a token greater than
#     every token acknowledged before, and no token was handed out twice;
#   - the waiter blocked on the old leader got a connection error, and its
#     retry on the new leader answered.
# MODE sync: all of these must hold.  MODE async: what may be lost is what
# the README says asynchronous replication loses (the last acknowledged
# transactions before the crash); the losses are counted and printed, and
# only the token checks and the waiter must hold.  Prints "ok - ..." and
# "not ok - ..." lines and the failover time.

import glob
import json
import os
import sys
import time

import psycopg2

LEASE_TTL = "10 min"
RENEW_TTL_S = 1200
JOBS = 100000


def connect(dsn, deadline):
    """Connect to the leader, retrying until deadline (unix time)."""
    while True:
        try:
            conn = psycopg2.connect(dsn, connect_timeout=2)
            conn.autocommit = True
            return conn
        except psycopg2.OperationalError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def setup(dsn):
    conn = connect(dsn, time.time() + 30)
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS dlock")
    cur.execute("CREATE TABLE ha_writes (id text PRIMARY KEY, key text NOT NULL,"
                " token bigint NOT NULL)")
    cur.execute("CREATE TABLE ha_jobs (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false)")
    cur.execute("INSERT INTO ha_jobs (id) SELECT g FROM generate_series(1, %s) g", (JOBS,))
    conn.close()


class Log:
    def __init__(self, out, name):
        self.f = open(os.path.join(out, name + ".jsonl"), "a", buffering=1)

    def __call__(self, **rec):
        rec["t"] = time.time()
        self.f.write(json.dumps(rec) + "\n")


def one(cur, sql, args=()):
    cur.execute(sql, args)
    return cur.fetchone()


def work(dsn, out, wid, seconds):
    log = Log(out, "w%s" % wid)
    end = time.time() + seconds
    holder = "w%s" % wid
    conn = connect(dsn, end + 60)
    n = 0
    failed = False
    while time.time() < end:
        n += 1
        key = "ha:%s:%d" % (wid, n)
        try:
            cur = conn.cursor()
            token = one(cur, "SELECT dlock_acquire(%s, %s, %s)", (key, holder, LEASE_TTL))[0]
            if failed:
                log(op="first_ok")
                failed = False
            log(op="acquire", key=key, holder=holder, token=token)
            cur.execute("INSERT INTO ha_writes SELECT %s, %s, %s WHERE dlock_validate(%s, %s, %s)",
                        (key, key, token, key, holder, token))
            if cur.rowcount == 1:
                log(op="write", id=key, token=token)
            if n % 3 == 0:
                ok, at = one(cur, "SELECT dlock_renew(%s, %s, make_interval(secs => %s)),"
                                  " extract(epoch FROM clock_timestamp())::float8",
                             (key, holder, RENEW_TTL_S))
                if ok:
                    log(op="renew", key=key, at=at)
            if n % 2 == 1:
                if one(cur, "SELECT dlock_release(%s, %s, %s)", (key, holder, token))[0]:
                    log(op="release", key=key)
            cur.execute("SELECT id FROM dlock_claim(NULL::ha_jobs, %s, 4, %s, 'NOT done')",
                        (holder, LEASE_TTL))
            ids = [r[0] for r in cur.fetchall()]
            log(op="claim", holder=holder, ids=ids)
            if ids:
                cur.execute("UPDATE ha_jobs SET done = true"
                            "  FROM dlock_complete('ha_jobs', %s, %s::int[]) AS d(id)"
                            " WHERE ha_jobs.id = d.id RETURNING ha_jobs.id",
                            (holder, ids[: len(ids) // 2]))
                log(op="complete", holder=holder, ids=[r[0] for r in cur.fetchall()])
        except psycopg2.Error as e:
            # the leader went away under this call: its outcome is unknown
            log(op="error", msg=str(e).strip().splitlines()[0] if str(e).strip() else repr(e))
            failed = True
            try:
                conn.close()
            except psycopg2.Error:
                pass
            conn = connect(dsn, end + 60)
    conn.close()


def wait(dsn, out, seconds):
    log = Log(out, "waiter")
    end = time.time() + seconds
    holder = connect(dsn, end)
    token = one(holder.cursor(), "SELECT dlock_acquire('ha:wait', 'holder', %s)", (LEASE_TTL,))[0]
    log(op="acquire", key="ha:wait", holder="holder", token=token)
    waiter = connect(dsn, end)
    try:
        r = one(waiter.cursor(), "SELECT dlock_acquire('ha:wait', 'waiter', '1 min', '10 min')")[0]
        log(op="waiter_returned", result=r)
    except psycopg2.Error as e:
        log(op="waiter_error", msg=str(e).strip().splitlines()[0] if str(e).strip() else repr(e))
    # retry on whichever node leads now
    retry = connect(dsn, end + 60)
    r = one(retry.cursor(), "SELECT dlock_acquire('ha:wait', 'waiter', '1 min', '1 s')")[0]
    log(op="waiter_retry", result=r)


def records(out):
    recs = []
    for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
        name = os.path.basename(path)[: -len(".jsonl")]
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                rec["client"] = name
                recs.append(rec)
    return recs


def check(dsn, out, mode, killed):
    killed = float(killed)
    passed = failed = 0

    def result(ok, what):
        nonlocal passed, failed
        print(("ok - " if ok else "not ok - ") + what)
        if ok:
            passed += 1
        else:
            failed += 1

    def must(ok, what):
        """a promise of this mode: must hold"""
        result(ok, what)

    def loss(lost, total, what):
        """sync: nothing may be lost; async: losses are counted, not failed"""
        if mode == "sync":
            result(lost == 0, "%s: %d of %d acknowledged lost" % (what, lost, total))
        else:
            print("# async: %s: %d of %d acknowledged lost (allowed)" % (what, lost, total))

    recs = records(out)
    conn = connect(dsn, time.time() + 60)
    cur = conn.cursor()

    acquires = {r["key"]: r for r in recs if r["op"] == "acquire" and r["key"] != "ha:wait"}
    released = {r["key"] for r in recs if r["op"] == "release"}
    cur.execute("SELECT key, holder, token, extract(epoch FROM expires_at)::float8 FROM dlock_locks")
    locks = {k: (h, t, e) for k, h, t, e in cur.fetchall()}

    must(len(acquires) > 50, "the run acquired %d leases" % len(acquires))
    must(any(r["op"] == "error" for r in recs), "clients saw the leader go away")

    held = [k for k in acquires if k not in released]
    lost = sum(1 for k in held if k not in locks)
    loss(lost, len(held), "leases held")
    wrong = [k for k in acquires if k in locks and
             (locks[k][0] != acquires[k]["holder"] or locks[k][1] != acquires[k]["token"])]
    must(not wrong, "no lease changed holder or token (%d did)" % len(wrong))

    renews = [r for r in recs if r["op"] == "renew" and r["key"] not in released]
    short = sum(1 for r in renews if r["key"] in locks and
                locks[r["key"]][2] < r["at"] + RENEW_TTL_S - 5)
    gone = sum(1 for r in renews if r["key"] not in locks)
    loss(short + gone, len(renews), "renewals")

    writes = [r for r in recs if r["op"] == "write"]
    cur.execute("SELECT id, token FROM ha_writes")
    present = dict(cur.fetchall())
    loss(sum(1 for w in writes if present.get(w["id"]) != w["token"]), len(writes), "fenced writes")

    completed = {i for r in recs if r["op"] == "complete" for i in r["ids"]}
    claimed = {}
    for r in recs:
        if r["op"] == "claim":
            for i in r["ids"]:
                claimed[i] = r["holder"]
    cur.execute("SELECT id FROM ha_jobs WHERE done")
    done = {r[0] for r in cur.fetchall()}
    loss(len(completed - done), len(completed), "completions")
    cur.execute("SELECT key::int, holder FROM dlock_claims WHERE table_name = 'ha_jobs'::regclass")
    claims = dict(cur.fetchall())
    open_claims = {i: h for i, h in claimed.items() if i not in completed}
    loss(sum(1 for i, h in open_claims.items() if claims.get(i) != h and i not in done),
         len(open_claims), "claims")

    tokens = [r["token"] for r in recs if r["op"] == "acquire"]
    must(len(tokens) == len(set(tokens)), "no token was handed out twice")
    new = one(cur, "SELECT dlock_acquire('ha:after', 'checker', '1 min')")[0]
    must(new is not None and new > max(tokens),
         "a token after the failover (%s) is greater than every acknowledged one (%s)"
         % (new, max(tokens)))

    werr = [r for r in recs if r["op"] == "waiter_error"]
    must(len(werr) == 1 and ("terminat" in werr[0]["msg"] or "connection" in werr[0]["msg"]
                             or "server closed" in werr[0]["msg"]),
         "the waiter blocked on the old leader got a connection error (%s)"
         % (werr[0]["msg"] if werr else "none"))
    must(any(r["op"] == "waiter_retry" for r in recs),
         "the waiter's retry on the new leader answered")

    firsts = [r["t"] for r in recs if r["op"] == "first_ok"]
    if firsts:
        print("# failover: the first client was served again %.1f s after the leader was killed,"
              " the last %.1f s after" % (min(firsts) - killed, max(firsts) - killed))
    must(bool(firsts), "clients were served again after the failover")
    print("%d passed, %d failed" % (passed, failed))
    return failed == 0


def main(argv):
    cmd = argv[1]
    if cmd == "setup":
        setup(argv[2])
    elif cmd == "work":
        work(argv[2], argv[3], argv[4], float(argv[5]))
    elif cmd == "wait":
        wait(argv[2], argv[3], float(argv[4]))
    elif cmd == "check":
        return 0 if check(argv[2], argv[3], argv[4], argv[5]) else 1
    else:
        sys.exit("usage: ha_load.py setup|work|wait|check ...")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
