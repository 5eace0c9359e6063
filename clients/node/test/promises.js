'use strict'
// The client's own promises, each with tests that fail when it breaks (the
// `clients` mutants of scripts/mutate.sh):
//   - renewals run on a connection of their own: a pool whose every client
//     is busy with the application's queries holds none up (leases of every
//     shape, claim loops); that connection not opening fails the acquire;
//   - one lease object per (key, holder) in the process (HolderInUseError);
//   - lease.query runs the write in its fence's transaction: one transaction
//     on the server, and no change of hands between the fence and the write;
//   - the loss is counted from the sending of the last confirmed renewal.
// Every wait is on a state (a statement in the server's log, a backend
// waiting on a lock); WAIT only bounds a wait a broken client never ends.
// Registered by dlock.test.js (one file of tests: those that stop the server
// run alone).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('crypto')
const { performance } = require('perf_hooks')
const dlock = require('..')
const { env, pool, sleep, waitUntil, key, server, holderOf, logRecords, claimsOf } = require('./helpers')

const WAIT = 120000
const DSN = env('DLOCK_TEST_DSN')

// a dlock_renew (dlock_acquire, dlock_release) that first waits for an advisory lock the
// test holds, then renews (releases): in front of the real one for a
// connection whose search_path starts with dlock_delay_node (an answer that
// comes late)
const DELAY_LOCK = 770201
const DELAY_RELEASE_LOCK = 770203
const DELAY_ACQUIRE_LOCK = 770204
const DELAY_OPTIONS = '-c search_path=dlock_delay_node,public'
const DELAY_SQL = `
CREATE SCHEMA IF NOT EXISTS dlock_delay_node;
CREATE OR REPLACE FUNCTION dlock_delay_node.dlock_renew(key text, holder text, ttl interval, token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(${DELAY_LOCK});
    RETURN public.dlock_renew(key, holder, ttl, token);
END $$;
CREATE OR REPLACE FUNCTION dlock_delay_node.dlock_acquire(key text, holder text, ttl interval, wait interval)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(${DELAY_ACQUIRE_LOCK});
    RETURN public.dlock_acquire(key, holder, ttl, wait);
END $$;
CREATE OR REPLACE FUNCTION dlock_delay_node.dlock_release(key text, holder text, token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(${DELAY_RELEASE_LOCK});
    RETURN public.dlock_release(key, holder, token);
END $$;`

const holderName = () => `app-${crypto.randomBytes(4).toString('hex')}`

module.exports = function promisesTests(db, app) {
  // renewal statements (dlock_renew, dlock_renew_claims) naming holder
  const renewalsOf = (mark, holder) => logRecords(server.logSince(mark))
    .filter((r) => r.text.includes('dlock_renew') && r.detail.includes(holder)).length
  const waitingOnLock = async (pid) => (await db.query(
    'SELECT wait_event_type AS w FROM pg_stat_activity WHERE pid = $1', [pid])).rows.some((r) => r.w === 'Lock')

  // ---------------------------------------------------------------------
  // renewals on a connection of their own
  // ---------------------------------------------------------------------

  test('a pool busy with the application\'s queries holds no renewal up (every shape, claims)', async () => {
    const busy = pool(DSN, { max: 2 })
    const marker = `busy-${crypto.randomBytes(4).toString('hex')}`
    const held = []
    let it
    const sleepers = []
    try {
      await db.query('DROP TABLE IF EXISTS node_busy_jobs')
      await db.query('CREATE TABLE node_busy_jobs (id int PRIMARY KEY)')
      await db.query('INSERT INTO node_busy_jobs SELECT generate_series(1, 3)')
      const claimer = holderName()
      it = dlock.claims(busy, 'node_busy_jobs', claimer, { n: 3, ttl: 6 })[Symbol.asyncIterator]()
      const batch = (await it.next()).value
      assert.equal(batch.keys.length, 3)
      // the application's queries take both clients of the pool, for longer than any ttl here
      for (let i = 0; i < 2; i++) sleepers.push(busy.query(`SELECT pg_sleep(3600) /* ${marker} */`).catch((e) => e))
      const running = async () => (await db.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1", [`%${marker}%`])).rows[0].n
      assert.ok(await waitUntil(async () => (await running()) === 2, WAIT), 'the pool\'s two clients are not busy')
      assert.equal(busy.idleCount, 0)
      const mark = server.logMark()
      held.push(await dlock.acquire(busy, key(), { ttl: 6 }))
      held.push(await dlock.acquire(busy, key(), { ttl: 6, shared: true }))
      held.push(await dlock.acquire(busy, key(), { ttl: 6, slots: 2 }))
      held.push(await dlock.acquireAll(busy, [key(), key()], { ttl: 6 }))
      const holders = held.map((l) => l.holder).concat([claimer])
      const settled = () => held.some((l) => l.lost) || batch.lost ||
        holders.every((h) => renewalsOf(mark, h) >= 2)
      assert.ok(await waitUntil(settled, WAIT), 'no renewals')
      for (const l of held) assert.equal(l.lost, false, `${l.shared ? 'shared ' : ''}lease lost: ${l.lostReason}`)
      assert.equal(batch.lost, false, `claims lost: ${batch.lostReason}`)
      assert.equal(await running(), 2, 'the pool was not busy all along')
      for (const l of held) {
        const n = (await db.query('SELECT count(*)::int AS n FROM dlock_locks WHERE holder = $1', [l.holder])).rows[0].n
        assert.equal(n, l.keys ? 2 : 1)
      }
    } finally {
      await db.query("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()",
        [`%${marker}%`])
      await Promise.all(sleepers)
      for (const l of held) assert.equal(await l.release(), true)
      if (it) await it.return()
      await busy.end()
    }
    assert.deepEqual(await claimsOf(db, 'node_busy_jobs'), {}) // given back by it.return(), plainly
  })

  test('the lease\'s own connection cannot be opened: the acquire rejects, nothing held', async () => {
    const role = 'dlock_node_one'
    await db.query(`DROP ROLE IF EXISTS ${role}`)
    await db.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`)
    const one = pool(DSN, { user: role, max: 1 })
    const k = key()
    try {
      const client = await one.connect() // the role's one connection, the application's
      try {
        await assert.rejects(dlock.acquire(one, k, { ttl: 5 }), (e) => e.code === '53300')
        assert.equal(await holderOf(db, k), null)
        assert.equal((await client.query('SELECT 1 AS one')).rows[0].one, 1) // the pool's client untouched
      } finally {
        client.release()
      }
    } finally {
      await one.end()
      await db.query(`DROP ROLE ${role}`)
    }
  })

  // ---------------------------------------------------------------------
  // one lease object per key and holder
  // ---------------------------------------------------------------------

  test('the same holder: a second lease of the key is refused while the first lives', async () => {
    const holder = holderName()
    const k = key()
    const other = `${k}/other`
    const first = await dlock.acquire(app, k, { ttl: 30, holder })
    try {
      const mark = server.logMark()
      const seconds = [
        () => dlock.acquire(app, k, { ttl: 30, holder }),
        () => dlock.acquire(app, k, { ttl: 30, wait: 60, holder }),
        () => dlock.acquire(app, k, { ttl: 30, holder, shared: true }),
        () => dlock.acquire(app, k, { ttl: 30, holder, slots: 2 }),
        () => dlock.acquireAll(app, [other, k], { ttl: 30, holder }),
        () => dlock.withLease(app, k, { ttl: 30, holder }, () => assert.fail('two lease objects of one holder')),
        () => dlock.withLeases(app, [k], { ttl: 30, holder }, () => assert.fail('two lease objects of one holder')),
      ]
      for (const second of seconds) {
        await assert.rejects(second(), (e) => e instanceof dlock.HolderInUseError && e.code === 'DLOCK_HOLDER_IN_USE' &&
          e instanceof dlock.DlockError && !(e instanceof dlock.NotAcquiredError) && e.message.includes(holder))
      }
      // refused before any call: the first holds on, alone, with its token
      assert.equal(logRecords(server.logSince(mark)).filter((r) => r.text.includes('dlock_acquire') &&
        r.detail.includes(holder)).length, 0)
      assert.deepEqual(await holderOf(db, k), [holder, first.token])
      assert.equal(await holderOf(db, other), null)
      first.check()
      // another key with the holder, or the key with another holder: as usual
      const second = await dlock.acquire(app, other, { ttl: 30, holder })
      assert.notEqual(second.token, first.token)
      assert.equal(await second.release(), true)
      await assert.rejects(dlock.acquire(app, k, { ttl: 30, holder: `${holder}-b` }), dlock.NotAcquiredError)
      // at once: one acquires, the other is refused
      const k2 = `${k}/race`
      const both = await Promise.allSettled([dlock.acquire(app, k2, { ttl: 30, holder }), dlock.acquire(app, k2, { ttl: 30, holder })])
      assert.equal(both.filter((r) => r.status === 'fulfilled').length, 1)
      assert.ok(both.find((r) => r.status === 'rejected').reason instanceof dlock.HolderInUseError)
      assert.equal(await both.find((r) => r.status === 'fulfilled').value.release(), true)
      assert.equal(first.lost, false)
    } finally {
      assert.equal(await first.release(), true)
    }
    // released: the holder may take the key again, with a new token
    const again = await dlock.acquire(app, k, { ttl: 30, holder })
    assert.ok(BigInt(again.token) > BigInt(first.token))
    assert.equal(await again.release(), true)
  })

  test('the same holder: shared leases too, a waiting acquire too, a lost lease until released', async () => {
    const holder = holderName()
    const k = key()
    // two shared leases of one holder would be one holding on the server
    const reader = await dlock.acquire(app, k, { ttl: 30, holder, shared: true })
    try {
      await assert.rejects(dlock.acquire(app, k, { ttl: 30, holder, shared: true }), dlock.HolderInUseError)
      const another = await dlock.acquire(app, k, { ttl: 30, shared: true }) // another holder
      assert.equal(await another.release(), true)
    } finally {
      assert.equal(await reader.release(), true)
    }
    // waiting is not held yet, but the pair is taken
    const tok = (await db.query("SELECT dlock_acquire($1, 'other', '5 min') AS t", [k])).rows[0].t
    const waiting = dlock.acquire(app, k, { ttl: 3, wait: WAIT / 1000, holder })
    try {
      assert.ok(await waitUntil(async () =>
        (await db.query('SELECT count(*)::int AS n FROM dlock_waiters WHERE key = $1', [k])).rows[0].n === 1, WAIT))
      await assert.rejects(dlock.acquire(app, k, { ttl: 3, wait: WAIT / 1000, holder }), dlock.HolderInUseError)
    } finally {
      await db.query("SELECT dlock_release($1, 'other', $2)", [k, tok])
    }
    const first = await waiting
    // lost (forced) but not released: its code may still run
    assert.equal((await db.query('SELECT dlock_force_release($1) AS ok', [k])).rows[0].ok, true)
    assert.ok(await waitUntil(() => first.lost, WAIT))
    await assert.rejects(dlock.acquire(app, k, { ttl: 3, holder }), dlock.HolderInUseError)
    assert.equal(await first.release(), false)
    const again = await dlock.acquire(app, k, { ttl: 3, holder })
    assert.equal(await again.release(), true)
  })

  test('the same holder: refused until the first lease\'s release is answered', async () => {
    await db.query(DELAY_SQL)
    const holder = holderName()
    const k = key()
    const delayed = pool(DSN, { options: DELAY_OPTIONS })
    const blocker = await app.connect()
    let releasing
    try {
      await blocker.query('SELECT pg_advisory_lock($1)', [DELAY_RELEASE_LOCK])
      const first = await dlock.acquire(delayed, k, { ttl: 30, holder })
      releasing = first.release()
      assert.ok(await waitUntil(async () => (await db.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_release(%'")).rows[0].n > 0,
      WAIT), 'the release was not held back')
      await assert.rejects(dlock.acquire(app, k, { ttl: 30, holder }), dlock.HolderInUseError)
      await blocker.query('SELECT pg_advisory_unlock($1)', [DELAY_RELEASE_LOCK])
      assert.equal(await releasing, true)
      assert.equal(await holderOf(db, k), null)
    } finally {
      await blocker.query('SELECT pg_advisory_unlock_all()')
      await releasing
      blocker.release()
      await delayed.end()
    }
  })

  // ---------------------------------------------------------------------
  // lease.query: the write in its fence's transaction
  // ---------------------------------------------------------------------

  // the statement with marker and a dlock_validate of each key before it,
  // by the same backend, in one transaction (one vxid)
  function sameTransaction(mark, marker, keys) {
    const recs = logRecords(server.logSince(mark))
    const at = recs.findIndex((r) => r.text.includes(marker))
    assert.ok(at >= 0, `the write was not logged: ${JSON.stringify(recs)}`)
    const w = recs[at]
    assert.ok(w.vxid, JSON.stringify(w))
    for (const k of keys) {
      const fences = recs.slice(0, at).filter((r) => r.pid === w.pid && r.text.includes('dlock_validate') &&
        (r.detail + r.text).includes(k))
      assert.ok(fences.length > 0, `no fence of ${k} before the write: ${JSON.stringify(recs)}`)
      assert.equal(fences[fences.length - 1].vxid, w.vxid, 'the fence and the write ran in different transactions')
    }
  }

  test('lease.query runs the write in its fence\'s transaction (pool, client, your transaction, several keys)', async () => {
    const k = key()
    const lease = await dlock.acquire(app, k, { ttl: 30 })
    const held = await dlock.acquireAll(app, [key(), key()], { ttl: 30 })
    const client = await app.connect()
    try {
      for (const [what, keys] of [[lease, [k]], [held, held.keys]]) {
        for (const target of [app, client]) {
          const marker = `w${crypto.randomBytes(8).toString('hex')}`
          const mark = server.logMark()
          const r = await what.query(target, `INSERT INTO guarded VALUES ($1, txid_current(), $2) RETURNING note /* ${marker} */`,
            [keys[0], marker])
          assert.equal(r.rows[0].note, marker)
          sameTransaction(mark, marker, keys)
        }
      }
      // inside your own transaction: fenced until you end it
      await client.query('BEGIN')
      const marker = `w${crypto.randomBytes(8).toString('hex')}`
      const mark = server.logMark()
      await lease.query(client, `SELECT 1 /* ${marker} */`)
      assert.equal(client.getTransactionStatus(), 'T')
      sameTransaction(mark, marker, [k])
      await client.query('COMMIT')
    } finally {
      client.release()
      assert.equal(await lease.release(), true)
      assert.equal(await held.release(), true)
    }
  })

  // dlock_guard (issue 40): lease.query's write passes the table's guard
  test('lease.query passes a guarded table; a plain write is refused with LK001', async () => {
    const k = key()
    const table = `guarded_node_${crypto.randomBytes(6).toString('hex')}`
    await db.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text); INSERT INTO ${table} VALUES (1, 'before')`)
    try {
      await db.query('SELECT dlock_guard($1::regclass, $2)', [table, `$k$${k}$k$`])
      await assert.rejects(db.query(`UPDATE ${table} SET v = 'unfenced' WHERE id = 1`), (e) => e.code === 'LK001')
      const lease = await dlock.acquire(app, k, { ttl: 30 })
      try {
        const r = await lease.query(app, `UPDATE ${table} SET v = 'fenced' WHERE id = 1`)
        assert.equal(r.rowCount, 1)
      } finally {
        await lease.release()
      }
      assert.equal((await db.query(`SELECT v FROM ${table}`)).rows[0].v, 'fenced')
    } finally {
      await db.query(`DROP TABLE ${table}`)
    }
  })

  test('no change of hands between lease.query\'s fence and its write', async () => {
    const lock = 770202
    const blocker = await app.connect()
    const writer = await app.connect()
    const thief = await app.connect()
    const k = key()
    const out = {}
    let write
    let force
    try {
      await blocker.query('SELECT pg_advisory_lock($1)', [lock])
      const lease = await dlock.acquire(app, k, { ttl: 30 })
      try {
        const writerPid = (await writer.query('SELECT pg_backend_pid() AS p')).rows[0].p
        const thiefPid = (await thief.query('SELECT pg_backend_pid() AS p')).rows[0].p
        write = lease.query(writer, "INSERT INTO guarded SELECT $1, $2, 'after the fence' FROM (SELECT pg_advisory_xact_lock_shared($3)) AS s",
          [k, lease.token, lock]).then(() => { out.written = true }, (e) => { out.writeError = e })
        assert.ok(await waitUntil(() => waitingOnLock(writerPid), WAIT), 'the write did not reach the advisory lock')
        force = thief.query('SELECT dlock_force_release($1) AS ok', [k]).then((r) => { out.forced = r.rows[0].ok })
        assert.ok(await waitUntil(async () => 'forced' in out || await waitingOnLock(thiefPid), WAIT))
        assert.ok(!('forced' in out), 'the lease changed hands between its fence and its write')
        await blocker.query('SELECT pg_advisory_unlock($1)', [lock])
        await write
        await force
        assert.equal(out.written, true, String(out.writeError))
        assert.equal(out.forced, true)
      } finally {
        await lease.release()
      }
      const n = await db.query("SELECT count(*)::int AS n FROM guarded WHERE key = $1 AND note = 'after the fence'", [k])
      assert.equal(n.rows[0].n, 1)
    } finally {
      await blocker.query('SELECT pg_advisory_unlock_all()').catch(() => {})
      await Promise.all([write, force])
      for (const c of [blocker, writer, thief]) c.release()
    }
  })

  // ---------------------------------------------------------------------
  // the loss counted from the sending of the last confirmed renewal
  // ---------------------------------------------------------------------

  test('the deadline is counted from the sending of a renewal whose answer comes late', async () => {
    await db.query(DELAY_SQL)
    const ttl = 12
    const delayed = pool(DSN, { options: DELAY_OPTIONS })
    const blocker = await app.connect()
    const k = key()
    try {
      await blocker.query('SELECT pg_advisory_lock($1)', [DELAY_LOCK])
      const lease = await dlock.acquire(delayed, k, { ttl })
      try {
        const first = lease.deadline
        assert.ok(await waitUntil(async () => (await db.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_renew(%'")).rows[0].n > 0,
        WAIT), 'no renewal was held back')
        const sentBefore = performance.now() // the renewal was sent before this
        await sleep(500) // its answer comes later than that (whatever the delay)
        await blocker.query('SELECT pg_advisory_unlock($1)', [DELAY_LOCK])
        assert.ok(await waitUntil(() => lease.deadline !== first || lease.lost, WAIT))
        assert.equal(lease.lost, false, lease.lostReason)
        assert.ok(lease.deadline <= sentBefore + ttl * 1000,
          'the deadline was counted from the renewal\'s answer, not from its sending')
      } finally {
        await blocker.query('SELECT pg_advisory_unlock_all()')
        assert.equal(await lease.release(), true)
      }
    } finally {
      blocker.release()
      await delayed.end()
    }
  })

  test('the first deadline is counted from the sending of an acquire whose answer comes late', async () => {
    await db.query(DELAY_SQL)
    const ttl = 600 // an answer later than ttl/6 is followed by a renewal, whose sending counts
    const delayed = pool(DSN, { options: DELAY_OPTIONS })
    const blocker = await app.connect()
    const k = key()
    let taking
    try {
      await blocker.query('SELECT pg_advisory_lock($1)', [DELAY_ACQUIRE_LOCK])
      taking = dlock.acquire(delayed, k, { ttl })
      taking.catch(() => {})
      assert.ok(await waitUntil(async () => (await db.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dlock_acquire(%'")).rows[0].n > 0,
      WAIT), 'the acquire was not held back')
      const sentBefore = performance.now() // the acquire was sent before this
      await sleep(500) // its answer comes later than that (whatever the delay)
      await blocker.query('SELECT pg_advisory_unlock($1)', [DELAY_ACQUIRE_LOCK])
      const lease = await taking
      try {
        assert.ok(lease.deadline <= sentBefore + ttl * 1000,
          'the first deadline was counted from the acquire\'s answer, not from its sending')
      } finally {
        assert.equal(await lease.release(), true)
      }
    } finally {
      await blocker.query('SELECT pg_advisory_unlock_all()')
      await (taking || Promise.resolve()).catch(() => {})
      blocker.release()
      await delayed.end()
    }
  })
}
