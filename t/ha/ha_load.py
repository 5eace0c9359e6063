#!/usr/bin/python3
# Copyright: dlock contributors
#
# t/ha/ha_load.py: the clients and the checks of scripts/test-ha.sh (dlock
# on a Patroni cluster whose leader is killed under load).
#
#   ha_load.py setup DSN                    tables for the run
#   ha_load.py work DSN OUT ID SECONDS      one client (below)
#   ha_load.py straddle DSN OUT WHICH SECS  a holder across the failover
#   ha_load.py wait DSN OUT SECONDS         a holder and a waiter blocked in
#                                           dlock_acquire on the leader
#   ha_load.py check DSN OUT MODE KILLED LAG_START OLD_PORT
#                                           snapshot of the new leader, then
#                                           verify
#   ha_load.py verify OUT                   the checks again, offline, on the
#                                           history and snapshot kept in OUT
#   ha_load.py doctor OUT                   the checks on doctored copies of
#                                           them: each must fail (a stale
#                                           write committed, a token going
#                                           down, an early loss, two holders
#                                           (on one server, and across the
#                                           failover), a live holder
#                                           refused), and pass
#                                           when answers are lost
#
# DSN is a multi-host conninfo with target_session_attrs=read-write, so a
# client reconnects to whichever node is the leader.  Every call is appended
# to OUT/<client>.jsonl: its send time ts and reply time tr (this machine's
# clock, which is also both servers' clock), the port of the server it went
# to, and either its result (ack true) or, when the connection died under it,
# ack false: its outcome is unknown, neither lost nor kept, and the checks
# allow both.
#
# A worker ("work") loops over:
#   - its own keys: acquire (ttl 10 min), a fenced write (insert into
#     ha_writes WHERE dlock_validate), sometimes a renewal (20 min) and a
#     release, then a claim of 4 rows of ha_jobs and the completion of half
#     of them;
#   - a contended key: one of SHARED, shared by all workers: acquire with a
#     short ttl (0.3-2 s) and a short wait (0-200 ms), fenced write, renew,
#     fenced write, release.  Sometimes (on ha:s2) it pauses past its ttl
#     before its write, which the fence must then refuse.  When
#     the connection dies while it holds the key, it carries on as a real
#     holder would that does not know whether its lease survived: on the new
#     leader it makes its fenced write with its old token, renews, writes
#     and releases.
# A fenced write is one statement: it bumps the key's row in ha_res (writes
# of a key serialise on it, so seq is their commit order) WHERE
# dlock_validate(key, holder, token), and logs (key, seq, token, writer, op,
# server clock, server port) in ha_fenced.
#
# The straddlers hold a contended key across the failover (ttl 30 s, longer
# than the failover): "prelag" takes ha:s1 three seconds before the test cuts
# the standby off (the leader's walsender is stopped LAG seconds before the
# kill, so the standby misses the leader's last moments), "lag" takes ha:s0
# right after.  Both write every 100 ms until the leader dies, then, on the
# new leader, write with their old token, renew, write and release.  With
# synchronous replication "prelag" keeps its lease (its write commits) and
# "lag" is never told it got one; asynchronously "lag" was told it got
# ha:s0 but the new leader never heard of it: its write must be refused.
#
# The checks (verify) take the history and what the new leader has, and
# require, in both modes:
#   - the history was a real one (leases, contended grants, fenced writes,
#     refused stale writes, connection errors), and no call failed with an
#     SQL error;
#   - tokens: no token was handed out twice; a token granted after another
#     was acknowledged is greater (any key); a token taken after the
#     failover is greater than all;
#   - at most one holder: no grant of a key was acknowledged while an earlier
#     grant of it was surely still held (not expired, nor released, as far as
#     the acknowledged calls say);
#   - fenced writes: per key, seq runs 1..n and the tokens of the committed
#     writes never go down; each was made with a token granted to its writer
#     for that key, that was not surely expired, released or superseded by
#     an acknowledged newer grant of the key when the write was made; the
#     fence, renew and release never refused a holder that surely held its
#     lease;
#   - a row of ha_jobs was never claimed while another claim on it was live;
#   - what was lost is a suffix of the old leader's history: no call that
#     survived on the new leader began after a lost call was acknowledged
#     (replication ships WAL in order), and nothing the new leader
#     acknowledged is missing;
#   - the waiter blocked on the old leader got a connection error and its
#     retry answered; clients were served again (failover time printed).
# and what each mode promises about losses (README "Guarantees", docs/ha.md):
#   - sync: no acknowledged acquire, renewal, fenced write, claim or
#     completion is lost (an autocommit release may be, in any mode); none
#     was acknowledged while the standby was cut off (they waited for it);
#     "prelag" kept its lease: its fenced write on the new leader committed;
#   - async: losses happened (the standby was cut off), and only calls
#     acknowledged in the last moments before the kill were lost (from
#     LOSS_MARGIN s before the standby was cut off); a lost grant or
#     renewal may let another holder in (with a greater token) only on the
#     new leader; "lag" was refused on the new leader (write and renewal).
# Calls whose outcome is unknown are allowed either way.  "Surely" uses the
# send and reply times (a grant is surely held from its reply to its
# expiry computed from the send times of its acquire and renewals, or to
# the first release sent), so that a reported violation is never an
# artefact of timing, as in t/history.
#
# Whether a call of the old leader survived is read on the new leader: an
# own key's row in dlock.lease keeps its token, its holder (NULL once
# released) and the expiry of its renewal; fenced writes are in ha_writes /
# ha_fenced or not; a claim survived if dlock.claim has the row for its
# holder claimed within the call, or the completion that followed it
# survived; a completion if ha_jobs.done_by/done_at match the call; a
# contended grant if a fenced write with its token survived.  Where the new
# leader cannot tell (a released lease's renewal, a contended key's
# renewal or release), nothing is required of the call.
#
# t/history's checker is not used: it reads its write log from its own
# tables on one server and requires every acknowledged write to be there,
# with no notion of a second server or of what asynchronous replication
# may lose; these checks follow its "surely" rules instead.
#
# Prints "ok - ..." / "not ok - ..." lines, "# ..." details and the failover
# time.  HA_NO_FENCE=1 makes the contended writes skip dlock_validate (a
# control run: the checks must then fail).

import bisect
import glob
import json
import os
import random
import sys
import time

import psycopg2

OWN_TTL_S = 600
RENEW_TTL_S = 1200
CLAIM_TTL = "10 min"
JOBS = 100000
SHARED = ["ha:s0", "ha:s1", "ha:s2"]
SHORT_TTLS_S = (0.3, 1.0, 2.0)
WAITS_S = (0, 0.05, 0.2)
PAUSE_PERCENT = 20
STRADDLE = {"prelag": "ha:s1", "lag": "ha:s0"}
STRADDLE_TTL_S = 30
EPS = 0.002             # s: margin for comparing this machine's clock readings
LOSS_MARGIN = 1.0       # s before the standby was cut off: older calls must survive
LAG_QUIET = 0.5       # s after the cut: later calls were made without the standby
NO_FENCE = os.environ.get("HA_NO_FENCE") == "1"
INF = float("inf")

FWRITE = ("WITH r AS (UPDATE ha_res SET seq = seq + 1, token = %(t)s, writer = %(h)s"
          "            WHERE key = %(k)s AND " +
          ("true" if NO_FENCE else "dlock_validate(%(k)s, %(h)s, %(t)s)") +
          "          RETURNING seq)"
          " INSERT INTO ha_fenced (key, seq, token, writer, op, at, port)"
          " SELECT %(k)s, seq, %(t)s, %(h)s, %(op)s,"
          "        extract(epoch FROM clock_timestamp())::float8, inet_server_port() FROM r"
          " RETURNING seq")


def first_line(e):
    s = str(e).strip()
    return s.splitlines()[0] if s else repr(e)


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
    cur.execute("CREATE TABLE ha_jobs (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false,"
                " done_by text, done_at float8)")
    cur.execute("INSERT INTO ha_jobs (id) SELECT g FROM generate_series(1, %s) g", (JOBS,))
    cur.execute("CREATE TABLE ha_res (key text PRIMARY KEY, seq bigint NOT NULL DEFAULT 0,"
                " token bigint, writer text)")
    cur.execute("INSERT INTO ha_res (key) SELECT unnest(%s::text[])", (SHARED,))
    cur.execute("CREATE TABLE ha_fenced (key text NOT NULL, seq bigint NOT NULL,"
                " token bigint NOT NULL, writer text NOT NULL, op text NOT NULL UNIQUE,"
                " at float8 NOT NULL, port int NOT NULL, PRIMARY KEY (key, seq))")
    conn.close()


# ------------------------------------------------------------------ clients

class Lost(Exception):
    """the connection died under a call: its outcome is unknown"""


class Refused(Exception):
    """the call failed with an SQL error (rolled back)"""


class Client:
    def __init__(self, dsn, out, name, end):
        self.dsn, self.name, self.end = dsn, name, end
        self.f = open(os.path.join(out, name + ".jsonl"), "a", buffering=1)
        self.n = 0
        self.failed = False
        self.connect()

    def rec(self, **r):
        r["c"] = self.name
        self.f.write(json.dumps(r) + "\n")

    def connect(self):
        self.conn = connect(self.dsn, self.end + 60)
        self.port = self.conn.info.port
        if self.failed:
            self.rec(op="first_ok", t=time.time(), port=self.port)
            self.failed = False

    def next_id(self):
        self.n += 1
        return "%s:%d" % (self.name, self.n)

    def call(self, op, sql, args, how="one", opid=None, **meta):
        """Runs one statement (autocommit) and records it.  how: one (the
        first column of the only row), opt (or None without a row), all (the
        first column of every row)."""
        base = dict(op=op, id=opid or self.next_id(), port=self.port, **meta)
        ts = time.time()
        try:
            cur = self.conn.cursor()
            cur.execute(sql, args)
            if how == "one":
                res = cur.fetchone()[0]
            elif how == "opt":
                row = cur.fetchone()
                res = None if row is None else row[0]
            else:
                res = [r[0] for r in cur.fetchall()]
        except psycopg2.Error as e:
            code = e.pgcode or ""
            if (self.conn.closed or code.startswith(("08", "57P"))
                    or (not code and isinstance(e, psycopg2.OperationalError))):
                self.rec(ts=ts, tr=None, ack=False, err=first_line(e), **base)
                self.failed = True
                try:
                    self.conn.close()
                except psycopg2.Error:
                    pass
                self.connect()
                raise Lost(first_line(e))
            self.rec(ts=ts, tr=time.time(), ack=True, res=None, err=first_line(e), **base)
            raise Refused(first_line(e))
        self.rec(ts=ts, tr=time.time(), ack=True, res=res, **base)
        return res

    # the calls of dlock, recorded with what the checks need
    def acquire(self, key, holder, ttl, wait):
        return self.call("acquire", "SELECT dlock_acquire(%s, %s, make_interval(secs => %s),"
                         " make_interval(secs => %s))", (key, holder, ttl, wait),
                         key=key, holder=holder, ttl=ttl, wait=wait)

    def renew(self, key, holder, tok, ttl):
        return self.call("renew", "SELECT dlock_renew(%s, %s, make_interval(secs => %s), %s)",
                         (key, holder, ttl, tok), key=key, holder=holder, tok=tok, ttl=ttl)

    def release(self, key, holder, tok):
        return self.call("release", "SELECT dlock_release(%s, %s, %s)", (key, holder, tok),
                         key=key, holder=holder, tok=tok)

    def fwrite(self, key, holder, tok, resumed):
        opid = self.next_id()
        return self.call("fwrite", FWRITE, dict(k=key, h=holder, t=tok, op=opid), how="opt",
                         opid=opid, key=key, holder=holder, tok=tok, resumed=resumed)


def hold(cl, key, holder, tok, ttl, resumed, steps=("fwrite", "renew", "fwrite", "release")):
    """The rest of a holder's cycle.  If the connection dies, the holder
    does not know whether its lease survived: on the new leader it starts
    over with a fenced write with its old token (the fence decides), renews,
    writes and releases."""
    i = 0
    while i < len(steps):
        try:
            s = steps[i]
            if s == "fwrite":
                cl.fwrite(key, holder, tok, resumed)
            elif s == "renew":
                cl.renew(key, holder, tok, ttl)
            else:
                cl.release(key, holder, tok)
            i += 1
        except Lost:
            if resumed:
                return
            resumed = True
            steps = ("fwrite", "renew", "fwrite", "release")
            i = 0
        except Refused:
            return


def acquire_again(cl, key, holder, ttl, wait):
    """acquire; after a connection error, once more on the new leader
    (re-acquiring is idempotent)"""
    try:
        return cl.acquire(key, holder, ttl, wait)
    except Lost:
        pass
    try:
        return cl.acquire(key, holder, ttl, wait)
    except (Lost, Refused):
        return None


def own_step(cl, holder, n):
    key = "ha:own:%s:%d" % (holder, n)
    tok = cl.acquire(key, holder, OWN_TTL_S, 0)
    if tok is None:
        return
    cl.call("write", "INSERT INTO ha_writes SELECT %s, %s, %s WHERE dlock_validate(%s, %s, %s)"
            " RETURNING id", (key, key, tok, key, holder, tok), how="opt",
            key=key, holder=holder, tok=tok)
    if n % 3 == 0:
        cl.renew(key, holder, tok, RENEW_TTL_S)
    if n % 2 == 1:
        cl.release(key, holder, tok)
    ids = cl.call("claim", "SELECT id FROM dlock_claim(NULL::ha_jobs, %s, 4, %s, 'NOT done')",
                  (holder, CLAIM_TTL), how="all", holder=holder)
    if ids:
        half = ids[: max(1, len(ids) // 2)]
        cl.call("complete", "UPDATE ha_jobs SET done = true, done_by = %s,"
                "       done_at = extract(epoch FROM clock_timestamp())"
                "  FROM dlock_complete('ha_jobs', %s, %s::int[]) AS d(id)"
                " WHERE ha_jobs.id = d.id RETURNING ha_jobs.id",
                (holder, holder, half), how="all", holder=holder, ids=half)


def shared_cycle(cl, holder, rng):
    key = rng.choice(SHARED)
    ttl = rng.choice(SHORT_TTLS_S)
    try:
        tok = acquire_again(cl, key, holder, ttl, rng.choice(WAITS_S))
    except Refused:
        return
    if tok is None:
        return
    if key not in STRADDLE.values() and rng.randrange(100) < PAUSE_PERCENT:
        # past the ttl: the next write may be stale (not on the keys the
        # straddlers must get at once)
        time.sleep(ttl + 0.1)
    hold(cl, key, holder, tok, ttl, False)


def work(dsn, out, wid, seconds):
    end = time.time() + seconds
    holder = "w%s" % wid
    cl = Client(dsn, out, holder, end)
    rng = random.Random("%s:%s" % (wid, os.getpid()))
    n = 0
    while time.time() < end:
        n += 1
        try:
            own_step(cl, holder, n)
        except (Lost, Refused):
            pass
        shared_cycle(cl, holder, rng)
    cl.conn.close()


def straddle(dsn, out, which, seconds):
    end = time.time() + seconds
    key, holder = STRADDLE[which], "straddler-" + which
    flag = os.path.join(out, which)
    cl = Client(dsn, out, "s" + which, end)
    while not os.path.exists(flag):
        if time.time() > end:
            return
        time.sleep(0.02)
    try:
        tok = cl.acquire(key, holder, STRADDLE_TTL_S, 5)
    except Lost:
        # never told: take it on the new leader and let it go
        try:
            tok = cl.acquire(key, holder, STRADDLE_TTL_S, 5)
        except (Lost, Refused):
            return
        if tok is not None:
            hold(cl, key, holder, tok, STRADDLE_TTL_S, True)
        return
    except Refused:
        return
    if tok is None:
        return
    try:
        while time.time() < end:
            cl.fwrite(key, holder, tok, False)
            time.sleep(0.1)
    except Lost:
        hold(cl, key, holder, tok, STRADDLE_TTL_S, True)
    except Refused:
        pass


def wait(dsn, out, seconds):
    end = time.time() + seconds
    holder = Client(dsn, out, "wholder", end)
    holder.acquire("ha:wait", "holder", OWN_TTL_S, 0)
    waiter = Client(dsn, out, "waiter", end)
    try:
        r = waiter.acquire("ha:wait", "waiter", 60, 600)
        waiter.rec(op="waiter_returned", result=r)
    except Lost as e:
        waiter.rec(op="waiter_error", msg=str(e))
    # retry on whichever node leads now
    r = waiter.acquire("ha:wait", "waiter", 60, 1)
    waiter.rec(op="waiter_retry", result=r)


# ------------------------------------------------------------------- checks

def records(out):
    recs = []
    for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
        with open(path) as f:
            for line in f:
                recs.append(json.loads(line))
    return recs


def snapshot(dsn):
    """What the new leader has, as a JSON-able dict."""
    conn = connect(dsn, time.time() + 60)
    cur = conn.cursor()
    s = {"port": conn.info.port}
    cur.execute("SELECT key, holder, token, extract(epoch FROM expires_at)::float8"
                "  FROM dlock.lease")
    s["lease"] = {k: [h, t, e] for k, h, t, e in cur.fetchall()}
    cur.execute("SELECT id, token FROM ha_writes")
    s["writes"] = dict(cur.fetchall())
    cur.execute("SELECT key, seq, token, writer, op, at, port FROM ha_fenced ORDER BY key, seq")
    s["fenced"] = [list(r) for r in cur.fetchall()]
    cur.execute("SELECT key, seq FROM ha_res")
    s["res"] = dict(cur.fetchall())
    cur.execute("SELECT id, done_by, done_at FROM ha_jobs WHERE done")
    s["done"] = {str(i): [b, a] for i, b, a in cur.fetchall()}
    cur.execute("SELECT key, holder, extract(epoch FROM claimed_at)::float8 FROM dlock.claim"
                " WHERE relid = 'ha_jobs'::regclass")
    s["claims"] = {k: [h, a] for k, h, a in cur.fetchall()}
    cur.execute("SELECT dlock_acquire('ha:after', 'checker', '1 min')")
    s["after"] = cur.fetchone()[0]
    conn.close()
    return s


def check(dsn, out, mode, killed, lag_start, old_port):
    run = {"mode": mode, "killed": float(killed), "lag_start": float(lag_start),
           "old_port": int(old_port)}
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(run, f)
    with open(os.path.join(out, "snapshot.json"), "w") as f:
        json.dump(snapshot(dsn), f)
    return verify_dir(out)


def verify_dir(out):
    with open(os.path.join(out, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(out, "snapshot.json")) as f:
        snap = json.load(f)
    return verify(records(out), snap, **run)


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, ok, what, details=()):
        print(("ok - " if ok else "not ok - ") + what)
        if not ok:
            for d in list(details)[:10]:
                print("#   " + d)
            if len(details) > 10:
                print("#   ... and %d more" % (len(details) - 10))
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def desc(c):
    """a call, for messages"""
    s = "%s %s" % (c["id"], c["op"])
    for f in ("key", "holder", "tok", "ttl"):
        if f in c:
            s += " %s=%s" % (f, c[f])
    s += " res=%s" % (c.get("res") if c["ack"] else "unknown")
    s += " on %s, sent %.3f" % (c["port"], c["ts"])
    if c["tr"] is not None:
        s += ", answered %.3f" % c["tr"]
    return s


def writes(c):
    """did this acknowledged call commit a change (a grant, an extension, a
    renewal, a fenced write, a claim, a completion)?"""
    if not c["ack"] or c.get("err"):
        return False
    if c["op"] in ("acquire", "write", "fwrite"):
        return c["res"] is not None
    if c["op"] == "renew":
        return c["res"] is True
    if c["op"] in ("claim", "complete"):
        return bool(c["res"])
    return False


def verify(recs, snap, mode, killed, lag_start, old_port):
    rep = Report()
    calls = [r for r in recs if "ts" in r]
    for c in calls:
        c.setdefault("res", None)   # unknown outcome
    byid = {c["id"]: c for c in calls}
    on_old = lambda c: c["port"] == old_port
    async_ = mode == "async"
    lease = snap["lease"]

    # ------------------------------------------------ the run was a real one
    own_acq = [c for c in calls if c["op"] == "acquire" and c["key"].startswith("ha:own:")
               and c["ack"] and c["res"] is not None]
    sh_acq = [c for c in calls if c["op"] == "acquire" and c["key"] in SHARED
              and c["ack"] and c["res"] is not None]
    fw = [c for c in calls if c["op"] == "fwrite" and c["ack"] and not c.get("err")]
    fw_ok = [c for c in fw if c["res"] is not None]
    fw_refused = [c for c in fw if c["res"] is None]
    unknown = [c for c in calls if not c["ack"]]
    rep(len(own_acq) > 50, "the run acquired %d leases of their own keys" % len(own_acq))
    rep(len(sh_acq) > 50 and len(fw_ok) > 50,
        "contended keys: %d grants, %d fenced writes committed, %d refused"
        % (len(sh_acq), len(fw_ok), len(fw_refused)))
    rep(len(fw_refused) > 0, "the fence refused stale writes (%d, %d of them on the new leader)"
        % (len(fw_refused), sum(1 for c in fw_refused if not on_old(c))))
    rep(len(unknown) > 0, "clients saw the leader go away (%d calls with an unknown outcome)"
        % len(unknown))
    sqlerr = [c for c in calls if c["ack"] and c.get("err")]
    rep(not sqlerr, "no call failed with an SQL error",
        ["%s: %s" % (desc(c), c["err"]) for c in sqlerr])

    # ------------------------------------------------------------- grants
    # (key, token) -> grant; built per client, in the client's order
    grants = {}
    by_token = {}
    dup = []
    per_client = {}
    for c in calls:
        per_client.setdefault(c["c"], []).append(c)
    for cname, cs in per_client.items():
        current = {}            # key -> this client's latest grant
        for c in cs:
            op = c["op"]
            if op == "acquire":
                if c["ack"] and c["res"] is not None:
                    k = (c["key"], c["res"])
                    g = grants.get(k)
                    if g is None:
                        g = grants[k] = {"key": c["key"], "tok": c["res"], "holder": c["holder"],
                                         "acq": [], "ext": [], "rel": [], "unknown_ext": False}
                    if g["holder"] != c["holder"]:
                        dup.append("token %s of %s granted to %s and %s"
                                   % (c["res"], c["key"], g["holder"], c["holder"]))
                    o = by_token.setdefault(c["res"], c["key"])
                    if o != c["key"]:
                        dup.append("token %s granted for %s and %s" % (c["res"], o, c["key"]))
                    g["acq"].append(c)
                    g["ext"].append(c)
                    current[c["key"]] = g
                elif not c["ack"] and c["key"] in current:
                    current[c["key"]]["unknown_ext"] = True
            elif op == "renew":
                g = grants.get((c["key"], c["tok"]))
                if g is None:
                    continue
                if c["ack"] and c["res"] is True:
                    g["ext"].append(c)
                elif not c["ack"]:
                    g["unknown_ext"] = True
            elif op == "release":
                g = grants.get((c["key"], c["tok"]))
                if g is not None and (not c["ack"] or c["res"] is True):
                    g["rel"].append(c)
    for g in grants.values():
        g["first"] = min(g["acq"], key=lambda c: c["tr"])
        g["recv"] = g["first"]["tr"]
        g["rel_send"] = min((c["ts"] for c in g["rel"]), default=INF)
        g["exp_hi"] = INF if g["unknown_ext"] else max(c["tr"] + c["ttl"] for c in g["ext"])
        g["old"] = on_old(g["first"])

    # ------------------------------------------- what survived on the new leader
    obs = []                    # (call, survived)
    wrong = []
    fenced_by_op = {r[4]: r for r in snap["fenced"]}
    fenced_tokens = {(r[0], r[2], r[3]) for r in snap["fenced"]}
    completes_after = {}        # claim id -> the same client's next call if it is a complete
    for cname, cs in per_client.items():
        for a, b in zip(cs, cs[1:]):
            if a["op"] == "claim" and b["op"] == "complete":
                completes_after[a["id"]] = b
    for c in calls:
        op, ack = c["op"], c["ack"]
        if c.get("err") and ack:
            continue
        key = c.get("key", "")
        if key.startswith("ha:own:"):
            row = lease.get(key)
            h = c["holder"]
            if op == "acquire":
                if ack and c["res"] is not None:
                    if row is not None and row[1] == c["res"] and row[0] not in (h, None):
                        wrong.append("%s: the new leader has holder %s" % (desc(c), row[0]))
                    elif row is not None and row[1] != c["res"]:
                        wrong.append("%s: the new leader has token %s" % (desc(c), row[1]))
                    obs.append((c, row is not None and row[1] == c["res"]))
                elif not ack and row is not None:
                    obs.append((c, True))
            elif op == "write":
                there = snap["writes"].get(key) == c["tok"]
                if ack and c["res"] is not None:
                    obs.append((c, there))
                elif not ack and there:
                    obs.append((c, True))
            elif op == "renew" and (c["res"] is True or not ack):
                promised = row is not None and row[0] == h and row[2] >= c["ts"] + c["ttl"] - 1
                if row is None or row[1] != c["tok"]:
                    if ack:
                        obs.append((c, False))
                elif row[0] == h:
                    if ack or promised:
                        obs.append((c, promised))
            elif op == "release" and (c["res"] is True or not ack):
                if row is None or row[1] != c["tok"]:
                    if ack:
                        obs.append((c, False))
                elif ack or row[0] is None:
                    obs.append((c, row[0] is None))
        elif op == "fwrite":
            r = fenced_by_op.get(c["id"])
            if ack and c["res"] is not None:
                if r is not None and r[1] != c["res"]:
                    wrong.append("%s: the new leader has it as seq %s" % (desc(c), r[1]))
                obs.append((c, r is not None))
            elif not ack and r is not None:
                obs.append((c, True))
        elif op == "acquire" and key in SHARED and ack and c["res"] is not None:
            # a surviving fenced write with its token proves the grant survived
            if (key, c["res"], c["holder"]) in fenced_tokens or \
                    (lease.get(key) or [None, None])[1] == c["res"]:
                if c is grants[(key, c["res"])]["first"]:
                    obs.append((c, True))
        elif op == "claim" and ack and c["res"]:
            nxt = completes_after.get(c["id"])
            kept = []
            for i in c["res"]:
                cl_row = snap["claims"].get(str(i))
                d = snap["done"].get(str(i))
                k1 = (cl_row is not None and cl_row[0] == c["holder"]
                      and c["ts"] - EPS <= cl_row[1] <= c["tr"] + EPS)
                k2 = (nxt is not None and i in nxt.get("ids", []) and d is not None
                      and d[0] == c["holder"] and nxt["ts"] - EPS <= d[1]
                      and (nxt["tr"] is None or d[1] <= nxt["tr"] + EPS))
                kept.append(k1 or k2)
            if all(kept) or not any(kept):
                obs.append((c, all(kept)))
            else:
                wrong.append("%s: only part of the claim is on the new leader" % desc(c))
        elif op == "complete" and ack and c["res"]:
            kept = []
            for i in c["res"]:
                d = snap["done"].get(str(i))
                kept.append(d is not None and d[0] == c["holder"]
                            and c["ts"] - EPS <= d[1] <= c["tr"] + EPS)
            if all(kept) or not any(kept):
                obs.append((c, all(kept)))
            else:
                wrong.append("%s: only part of the completion is on the new leader" % desc(c))
    rep(not wrong, "what the new leader has matches the acknowledged calls"
        " (no lease with another holder or token, no partial claim or completion)", wrong)

    kept = [c for c, s in obs if s]
    lost = [c for c, s in obs if not s]
    kept_old = [c for c in kept if on_old(c)]
    lost_acked = [c for c in lost if c["ack"]]
    cut_lo = max((c["ts"] for c in kept_old), default=-INF)     # acknowledged before: kept
    cut_hi = min((c["tr"] for c in lost_acked), default=INF)    # sent after: lost
    print("# %d calls whose fate the new leader shows: %d kept (%d made on the old leader),"
          " %d lost" % (len(obs), len(kept), len(kept_old), len(lost)))

    def maybe_lost(c):
        """could this call of the old leader be missing on the new one?"""
        return on_old(c) and (not c["ack"] or c["tr"] >= cut_lo - EPS)

    def exempt(c):
        """async: the new leader may not know this call (a lost grant,
        renewal or claim lets another in, on the new leader only)"""
        return async_ and maybe_lost(c)

    lost_new = [c for c in lost if not on_old(c)]
    rep(not lost_new, "nothing the new leader acknowledged is missing",
        [desc(c) for c in lost_new])
    late_kept = [c for c in kept_old if c["ts"] > cut_hi + EPS]
    first_lost = min(lost_acked, key=lambda c: c["tr"]) if lost_acked else None
    rep(not late_kept, "what was lost is a suffix of the old leader's history (no call that"
        " survived was sent after a lost call was acknowledged)",
        ["%s survived, sent after %s was lost" % (desc(c), desc(first_lost)) for c in late_kept])

    def kinds(cs):
        n = {}
        for c in cs:
            n[c["op"]] = n.get(c["op"], 0) + 1
        return ", ".join("%s %d" % kv for kv in sorted(n.items())) or "none"

    lost_rel = [c for c in lost_acked if c["op"] == "release"]
    lost_other = [c for c in lost_acked if c["op"] != "release"]
    quiet = lag_start + LAG_QUIET
    if not async_:
        rep(not lost_other, "no acknowledged acquire, renewal, fenced write, claim or"
            " completion was lost (%d of them seen kept; lost autocommit releases: %d, allowed)"
            % (sum(1 for c in kept if c["ack"] and c["op"] != "release"), len(lost_rel)),
            [desc(c) for c in lost_other])
        during = [c for c in calls if on_old(c) and writes(c) and c["tr"] > quiet]
        rep(not during, "nothing that commits a change was acknowledged while the"
            " standby was cut off (it waited for the standby)", [desc(c) for c in during])
        old_window = [c for c in lost_rel if c["tr"] < lag_start - LOSS_MARGIN]
        rep(not old_window, "lost releases were the last ones before the failover",
            [desc(c) for c in old_window])
    else:
        rep(len(lost_acked) > 0, "acknowledged calls were lost with the old leader"
            " (%s)" % kinds(lost_acked))
        early = [c for c in lost_acked if c["tr"] < lag_start - LOSS_MARGIN]
        rep(not early, "only calls acknowledged in the last moments before the"
            " failover were lost (the earliest %.2f s before the kill; the standby was cut off"
            " %.2f s before)" % (killed - (first_lost["tr"] if first_lost else killed),
                                 killed - lag_start), [desc(c) for c in early])
        leaked = [c for c in kept_old if c["ts"] > quiet]
        rep(not leaked, "nothing sent after the standby was cut off reached it",
            [desc(c) for c in leaked])

    # ------------------------------------------------------------- tokens
    rep(not dup, "no token was handed out twice", dup)
    new_grants = sorted((g["first"] for g in grants.values()), key=lambda c: c["ts"])
    acked_sorted = sorted((c for g in grants.values() for c in g["acq"]), key=lambda c: c["tr"])
    bad = []
    j = 0
    best = None                 # the greatest token acknowledged so far
    for y in new_grants:
        while j < len(acked_sorted) and acked_sorted[j]["tr"] < y["ts"] - EPS:
            if best is None or acked_sorted[j]["res"] > best["res"]:
                best = acked_sorted[j]
            j += 1
        if best is not None and y["res"] <= best["res"]:
            bad.append("%s: token not above %s" % (desc(y), desc(best)))
    rep(not bad, "tokens grow: every grant got a token greater than every token acknowledged"
        " before it was asked for (%d grants)" % len(new_grants), bad)
    top = max((g["tok"] for g in grants.values()), default=0)
    rep(snap["after"] is not None and snap["after"] > top,
        "a token after the failover (%s) is greater than every acknowledged one (%s)"
        % (snap["after"], top))

    # ------------------------------------------------- at most one holder
    def sure_end(g, new_async):
        """until when g was surely held: its acknowledged expiry (less the
        extensions a failover may have lost, for a grant on the new
        leader) or its first release attempt"""
        exp = max((c["ts"] + c["ttl"] for c in g["ext"]
                   if not (new_async and exempt(c))), default=-INF)
        return min(exp, g["rel_send"])

    overlap = []
    by_key = {}
    for g in grants.values():
        by_key.setdefault(g["key"], []).append(g)
    for key, gs in by_key.items():
        gs.sort(key=lambda g: g["tok"])
        m_all = m_new = (-INF, None)
        for g in gs:
            na = async_ and not g["old"]
            end, g1 = m_new if na else m_all
            if g["recv"] < end - EPS:
                overlap.append("%s granted at %.3f while %s (token %s) was held until at"
                               " least %.3f"
                               % (desc(g["first"]), g["recv"], g1["holder"], g1["tok"], end))
            e = sure_end(g, False)
            if e > m_all[0]:
                m_all = (e, g)
            e = sure_end(g, True)
            if e > m_new[0]:
                m_new = (e, g)
    rep(not overlap, "at most one holder: no grant was acknowledged while an earlier grant"
        " of its key was surely held (%d keys)" % len(by_key), overlap)

    # ------------------------------------------------------ fenced writes
    stale = []
    order = []
    rows_by_key = {}
    for r in snap["fenced"]:
        rows_by_key.setdefault(r[0], []).append(r)
    for key in SHARED:
        rows = rows_by_key.get(key, [])
        seqs = [r[1] for r in rows]
        if seqs != list(range(1, len(rows) + 1)) or snap["res"].get(key) != len(rows):
            order.append("%s: seq %s.. (%d rows), ha_res.seq %s"
                         % (key, seqs[:5], len(rows), snap["res"].get(key)))
        for a, b in zip(rows, rows[1:]):
            if b[2] < a[2]:
                order.append("%s: seq %d has token %d after token %d (seq %d)"
                             % (key, b[1], b[2], a[2], a[1]))
        # grants of the key by token, with the earliest acknowledgement of
        # a greater token: of any grant, and of those the new leader knows
        gs = by_key.get(key, [])
        toks = [g["tok"] for g in gs]
        suf_all = [(INF, None)] * (len(gs) + 1)
        suf_new = [(INF, None)] * (len(gs) + 1)
        for i in range(len(gs) - 1, -1, -1):
            g2 = gs[i]
            suf_all[i] = min(suf_all[i + 1], (g2["recv"], i))
            suf_new[i] = suf_new[i + 1] if exempt(g2["first"]) else \
                min(suf_new[i + 1], (g2["recv"], i))
        for r in rows:
            _, seq, tok, writer, op, at, port = r
            c = byid.get(op)
            g = grants.get((key, tok))
            what = "%s seq %d token %d by %s (%s)" % (key, seq, tok, writer, op)
            if c is None or c["tok"] != tok or c["holder"] != writer:
                stale.append("%s: no such write was made" % what)
                continue
            if g is None or g["holder"] != writer:
                stale.append("%s: token never granted to its writer" % what)
                continue
            na = async_ and port != old_port
            first, i = (suf_new if na else suf_all)[bisect.bisect_right(toks, tok)]
            if first < at - EPS:
                stale.append("%s at %.3f: %s was granted token %d at %.3f"
                             % (what, at, gs[i]["holder"], gs[i]["tok"], first))
            if g["exp_hi"] < c["ts"] - EPS:
                stale.append("%s: sent at %.3f, its lease expired by %.3f"
                             % (what, c["ts"], g["exp_hi"]))
            for rc in g["rel"]:
                if rc["ack"] and rc["tr"] < at - EPS and not (port != old_port and maybe_lost(rc)):
                    stale.append("%s at %.3f: released at %.3f" % (what, at, rc["tr"]))
                    break
    rep(not order, "fenced writes: per key, commit order has no gap and tokens never go down"
        " (%d writes)" % len(snap["fenced"]), order)
    rep(not stale, "fenced writes: every committed write was made with the token of the"
        " key's holder at that time", stale)
    refused_live = []
    for c in calls:
        if (c["op"] in ("fwrite", "write") and c["ack"] and not c.get("err") and c["res"] is None
                or c["op"] in ("renew", "release") and c["ack"] and c["res"] is False):
            g = grants.get((c["key"], c["tok"]))
            if g is None:
                continue
            na = async_ and not on_old(c)
            if g["recv"] <= c["ts"] and c["tr"] < sure_end(g, na) - EPS:
                refused_live.append(desc(c))
    rep(not refused_live, "the fence, renew and release never refused a holder that surely"
        " held its lease",
        refused_live)

    # ------------------------------------------------------------- claims
    claimed = {}
    twice = []
    completed_by = {}           # (holder, id) -> send times of completions
    for c in calls:
        if c["op"] == "complete":
            for i in (c["res"] if c["ack"] and c["res"] else [] if c["ack"] else c["ids"]):
                completed_by.setdefault((c["holder"], i), []).append(c["ts"])
    for c in sorted((c for c in calls if c["op"] == "claim" and c["ack"] and c["res"]),
                    key=lambda c: c["tr"]):
        for i in c["res"]:
            p = claimed.get(i)
            if p is not None:
                done = any(t < c["tr"] for t in completed_by.get((p["holder"], i), []))
                if not done and not (async_ and not on_old(c) and maybe_lost(p)):
                    twice.append("row %d: %s while %s held it" % (i, desc(c), desc(p)))
            claimed[i] = c
    rep(not twice, "no row was claimed while another claim on it was live (%d rows claimed)"
        % len(claimed), twice)

    # --------------------------------------------------------- straddlers
    pre = per_client.get("sprelag", [])
    pre_acq = [c for c in pre if c["op"] == "acquire" and c["ack"] and c["res"] is not None]
    pre_w = [c for c in pre if c["op"] == "fwrite" and c.get("resumed") and c["ack"]
             and c["tok"] == (pre_acq[0]["res"] if pre_acq else None)]
    pre_ok = bool(pre_acq) and on_old(pre_acq[0]) and bool(pre_w) and pre_w[0]["res"] is not None
    if not async_:
        rep(pre_ok, "a holder (ttl %d s) granted before the failover kept its lease: its"
            " fenced write on the new leader committed" % STRADDLE_TTL_S,
            [desc(c) for c in pre_acq[:1] + pre_w[:1]])
    else:
        print("# the holder granted %s before the cut-off %s its lease across the"
              " failover" % ("%.2f s" % (lag_start - pre_acq[0]["tr"]) if pre_acq else "?",
                             "kept" if pre_ok else "lost"))
        lag = per_client.get("slag", [])
        lag_acq = [c for c in lag if c["op"] == "acquire" and c["ack"] and c["res"] is not None
                   and on_old(c)]
        tok = lag_acq[0]["res"] if lag_acq else None
        lag_w = [c for c in lag if c["op"] == "fwrite" and c.get("resumed") and c["ack"]
                 and c["tok"] == tok]
        lag_r = [c for c in lag if c["op"] == "renew" and c["ack"] and c["tok"] == tok
                 and not on_old(c)]
        rep(bool(lag_acq) and lag_acq[0]["ts"] > lag_start and bool(lag_w)
            and lag_w[0]["res"] is None and bool(lag_r) and lag_r[0]["res"] is False,
            "a holder told it got %s on the old leader after the standby was cut off"
            " (a lost lease) was refused on the new leader: its fenced write and its renewal"
            % STRADDLE["lag"], [desc(c) for c in lag_acq[:1] + lag_w[:1] + lag_r[:1]])

    # -------------------------------------------------------------- waiter
    werr = [r for r in recs if r["op"] == "waiter_error"]
    rep(len(werr) == 1 and ("terminat" in werr[0]["msg"] or "connection" in werr[0]["msg"]
                            or "server closed" in werr[0]["msg"]),
        "the waiter blocked on the old leader got a connection error (%s)"
        % (werr[0]["msg"] if werr else "none"))
    rep(any(r["op"] == "waiter_retry" for r in recs),
        "the waiter's retry on the new leader answered")

    firsts = [r["t"] for r in recs if r["op"] == "first_ok"]
    if firsts:
        print("# failover: the first client was served again %.1f s after the leader was killed,"
              " the last %.1f s after" % (min(firsts) - killed, max(firsts) - killed))
    rep(bool(firsts), "clients were served again after the failover")
    print("%d passed, %d failed" % (rep.passed, rep.failed))
    return rep.failed == 0


def doctor(out):
    """The checks on doctored copies of the history and snapshot kept in
    OUT: each copy breaks one promise and must fail, except the last, where
    answers are lost (acknowledged calls turned into unknown outcomes),
    which must pass."""
    import contextlib
    import copy
    import io

    with open(os.path.join(out, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(out, "snapshot.json")) as f:
        snap = json.load(f)
    recs = records(out)
    calls = [r for r in recs if "ts" in r]
    early = run["lag_start"] - 3
    rep = Report()

    def verify_quietly(recs2, snap2):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ok = verify(recs2, snap2, **run)
        return ok, [line[len("not ok - "):].split(" (")[0]
                    for line in buf.getvalue().splitlines() if line.startswith("not ok - ")]

    def doctored(ids, change_calls, change_snap):
        recs2 = copy.deepcopy(recs)
        snap2 = copy.deepcopy(snap)
        for r in recs2:
            if r.get("id") in ids:
                change_calls(r)
        change_snap(snap2)
        return recs2, snap2

    def case(what, made, must_pass=False):
        if made is None:
            rep(False, "the checks catch %s: no call to doctor in this history" % what)
            return
        ok, failed = verify_quietly(*made)
        if must_pass:
            rep(ok, "the checks accept %s%s" % (what, "" if ok else " (failed: %s)"
                                                % "; ".join(failed)))
        else:
            rep(not ok, "the checks catch %s (failed: %s)" % (what, "; ".join(failed) or "none"))

    acq = [c for c in calls if c["op"] == "acquire" and c["ack"] and c["res"] is not None]

    # a stale write committed: a write the fence refused after a newer grant
    # of its key had been acknowledged, turned into a committed one
    stale = None
    for c in calls:
        if c["op"] == "fwrite" and c["ack"] and c["res"] is None and not c.get("err") \
                and c["c"].startswith("w") and any(
                a["key"] == c["key"] and a["res"] > c["tok"] and a["tr"] < c["ts"] - 0.01
                and a["port"] == c["port"] for a in acq):
            stale = c
            break
    made = None
    if stale is not None:
        n = snap["res"][stale["key"]] + 1

        def add_row(s2, c=stale, n=n):
            s2["fenced"].append([c["key"], n, c["tok"], c["holder"], c["id"],
                                 (c["ts"] + c["tr"]) / 2, c["port"]])
            s2["res"][c["key"]] = n
        made = doctored({stale["id"]}, lambda r, n=n: r.update(res=n), add_row)
    case("a stale fenced write that committed", made)

    # a token lower than one acknowledged before it was asked for
    made = None
    sh = [c for c in acq if c["key"] in SHARED and c["port"] == run["old_port"]]
    if len(sh) > 20:
        y = sh[len(sh) // 2]
        x = max((a for a in acq if a["tr"] < y["ts"] - 0.01), key=lambda a: a["res"])
        made = doctored({y["id"]}, lambda r, t=x["res"] - 1: r.update(res=t), lambda s2: None)
    case("a token that went down", made)

    # an acknowledged lease, granted long before the failover, missing
    released = {c["key"] for c in calls if c["op"] == "release"}
    old = [c for c in acq if c["key"].startswith("ha:own:") and c["tr"] < early
           and c["key"] not in released and c["port"] == run["old_port"]]
    made = None
    if old:
        made = doctored(set(), lambda r: None,
                        lambda s2, k=old[len(old) // 2]["key"]: s2["lease"].pop(k, None))
    case("a lease lost that was acknowledged long before the failover", made)

    # two holders: another client acknowledged the key of a holder who
    # kept it across the failover
    made = None
    pre = [c for c in acq if c["c"] == "sprelag"]
    if pre:
        g = pre[0]
        fake = dict(g, id="intruder:1", c="intruder", holder="intruder", res=g["res"] + 1,
                    ts=g["tr"] + 0.001, tr=g["tr"] + 0.002, ttl=1, wait=0)
        made = doctored(set(), lambda r: None, lambda s2: None)
        made[0].append(fake)
    case("two holders of a key at once", made)

    # the same across the failover: the new leader grants the key of the
    # holder who took it three seconds before the cut-off, before its ttl
    made = None
    if pre:
        g = pre[0]
        w = [c for c in calls if c["c"] == "sprelag" and c["op"] == "fwrite"
             and c["port"] != run["old_port"]]
        if w:
            t = w[0]["ts"] - 0.05
            fake = dict(g, id="intruder:2", c="intruder", holder="intruder",
                        res=max(a["res"] for a in acq) + 1000, ts=t, tr=t + 0.001, ttl=1,
                        wait=0, port=w[0]["port"])
            made = doctored(set(), lambda r: None, lambda s2: None)
            made[0].append(fake)
    case("two holders of a key across the failover", made)

    # the fence refused a holder of a live lease (one it did not release)
    made = None
    w = [c for c in calls if c["op"] == "write" and c["ack"] and c["res"] is not None
         and c["tr"] < early and c["port"] == run["old_port"] and c["key"] not in released]
    if w:
        c = w[len(w) // 2]
        made = doctored({c["id"]}, lambda r: r.update(res=None),
                        lambda s2, k=c["key"]: s2["writes"].pop(k, None))
    case("a live holder's write refused", made)

    # answers lost: every 3rd acknowledged release, renewal and fenced write
    # of the old leader becomes a call with an unknown outcome
    ids = set()
    for op in ("release", "renew", "fwrite"):
        ids |= {c["id"] for c in calls if c["op"] == op and c["ack"] and not c.get("err")
                and c["port"] == run["old_port"]}
    ids = set(sorted(ids)[::3])
    made = doctored(ids, lambda r: r.update(ack=False, tr=None, res=None), lambda s2: None)
    case("%d releases, renewals and fenced writes whose answers were lost" % len(ids), made,
         must_pass=True)
    print("%d passed, %d failed" % (rep.passed, rep.failed))
    return rep.failed == 0


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "setup":
        setup(argv[2])
    elif cmd == "work":
        work(argv[2], argv[3], argv[4], float(argv[5]))
    elif cmd == "straddle":
        straddle(argv[2], argv[3], argv[4], float(argv[5]))
    elif cmd == "wait":
        wait(argv[2], argv[3], float(argv[4]))
    elif cmd == "check":
        return 0 if check(*argv[2:8]) else 1
    elif cmd == "verify":
        return 0 if verify_dir(argv[2]) else 1
    elif cmd == "doctor":
        return 0 if doctor(argv[2]) else 1
    else:
        sys.exit("usage: ha_load.py setup|work|straddle|wait|check|verify|doctor ...")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
