'use strict'
// pg-dlock against a real server (scripts/test-clients.sh starts it).  One
// file, so that the tests that stop and restart the server run alone.

const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('path')
const { fork } = require('child_process')
const dlock = require('..')
const { env, pool, sleep, waitUntil, key, server, holderOf, claimsOf } = require('./helpers')

const SLACK = 2000 // scheduling slack (ms) for "signalled by the deadline" on a loaded machine
const DSN = env('DLOCK_TEST_DSN')
const db = pool(DSN)
const app = pool(DSN)

const once = (signal) => new Promise((resolve) => {
  if (signal.aborted) resolve(signal.reason)
  else signal.addEventListener('abort', () => resolve(signal.reason), { once: true })
})

after(async () => {
  await app.end()
  await db.end()
})

test('setup', async () => {
  await db.query('CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)')
})

test('withLease: renews, fences, releases, returns the result', async () => {
  const k = key()
  let seen
  const result = await dlock.withLease(app, k, { ttl: 3 }, async (lease, signal) => {
    seen = lease
    assert.match(lease.token, /^\d+$/)
    assert.deepEqual(await holderOf(db, k), [lease.holder, lease.token])
    const first = lease.deadline
    await sleep(4000) // longer than the ttl: only renewals keep it
    assert.equal(signal.aborted, false)
    assert.equal(lease.lost, false)
    assert.ok(lease.deadline > first)
    lease.check()
    const r = await lease.query(app, 'INSERT INTO guarded VALUES ($1, $2, $3) RETURNING token', [k, lease.token, 'fenced'])
    assert.equal(r.rows[0].token, lease.token)
    return 42
  })
  assert.equal(result, 42)
  assert.equal(seen.released, true)
  assert.equal(await holderOf(db, k), null)
  assert.throws(() => seen.check(), dlock.LeaseLostError)
  const n = await db.query('SELECT count(*)::int AS n FROM guarded WHERE key = $1', [k])
  assert.equal(n.rows[0].n, 1)
})

test('acquire: NotAcquiredError, then a wait that ends with the key', async () => {
  const k = key()
  const tok = (await db.query("SELECT dlock_acquire($1, 'other', '1 min') AS t", [k])).rows[0].t
  await assert.rejects(dlock.acquire(app, k, { ttl: 5 }), dlock.NotAcquiredError)
  setTimeout(() => db.query("SELECT dlock_release($1, 'other', $2)", [k, tok]), 500)
  const lease = await dlock.acquire(app, k, { ttl: 5, wait: 30 })
  assert.ok(BigInt(lease.token) > BigInt(tok))
  assert.equal(await lease.release(), true)
  assert.equal(await holderOf(db, k), null)
  const mark = server.logMark()
  assert.equal(await lease.release(), true) // idempotent: answered without a call
  await sleep(5000 / 3 + 500) // a renewal period and more
  assert.ok(!server.logSince(mark).includes(k), 'a call was made after the release')
})

test('one connection serves leases one after another; a kept one that died is not used', async () => {
  const name = `reuse-${key()}`
  const mine = pool(DSN, { application_name: name, max: 2 })
  const backends = async () => (await db.query(
    'SELECT array_agg(pid ORDER BY pid) AS p FROM pg_stat_activity WHERE application_name = $1', [name])).rows[0].p || []
  try {
    for (let i = 0; i < 5; i++) {
      const k = key()
      await dlock.withLease(mine, k, { ttl: 5 }, async (lease) => {
        assert.deepEqual(await holderOf(db, k), [lease.holder, lease.token])
      })
      assert.equal(await holderOf(db, k), null)
    }
    const kept = await backends()
    assert.equal(kept.length, 1, 'the leases did not share one connection')
    // two at once: two connections, both kept (max 2)
    await Promise.all([key(), key()].map((k) => dlock.withLease(mine, k, { ttl: 5 }, () => sleep(200))))
    assert.equal((await backends()).length, 2)
    // the kept ones killed: the next lease (no wait) still gets its key
    await db.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [name])
    const k = key()
    const lease = await dlock.acquire(mine, k, { ttl: 5 })
    assert.deepEqual(await holderOf(db, k), [lease.holder, lease.token])
    assert.equal(await lease.release(), true)
    const now = await backends()
    assert.equal(now.length, 1)
    assert.ok(!kept.includes(now[0]), 'a terminated backend was reused')
  } finally {
    await mine.end()
  }
})

test('a kept connection is closed after the pool\'s idleTimeoutMillis and never holds the process', async () => {
  const name = `idle-${key()}`
  const mine = pool(DSN, { application_name: name, idleTimeoutMillis: 500 })
  const count = async () => (await db.query(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [name])).rows[0].n
  try {
    await dlock.withLease(mine, key(), { ttl: 5 }, async () => {})
    assert.equal(await count(), 1)
    assert.ok(await waitUntil(async () => (await count()) === 0, 10000), 'the kept connection was not closed')
  } finally {
    await mine.end()
  }
  // a process whose last lease ended exits, its connection kept for good
  // (idleTimeoutMillis 0): else it runs into execFileSync's time limit
  const code = `const { Pool } = require('pg'); const d = require(${JSON.stringify(path.join(__dirname, '..'))});
    const p = new Pool({ ...${JSON.stringify(require('./helpers').config(DSN))}, idleTimeoutMillis: 0 });
    d.withLease(p, ${JSON.stringify(key())}, { ttl: 5 }, async () => {}).then(() => p.end()).then(() => console.log('done'))`
  const out = require('child_process').execFileSync(process.execPath, ['-e', code],
    { cwd: path.join(__dirname, '..'), timeout: 60000 })
  assert.equal(out.toString().trim(), 'done')
})

// a server error is a DatabaseError with its SQLSTATE (sqlstate, and code
// as pg has it) and pg's error as its cause
const dbError = (state) => (e) =>
  e instanceof dlock.DatabaseError && e instanceof dlock.DlockError && !(e instanceof dlock.TimeoutError) &&
  e.sqlstate === state && e.code === state && e.cause instanceof Error && e.cause.code === state

test('errors carry the SQLSTATE (err.sqlstate, err.code)', async () => {
  await assert.rejects(dlock.acquire(app, key(), { ttl: 31 * 86400 }), dbError('22023'))
  await assert.rejects(dlock.acquire(app, 'k'.repeat(2000), { ttl: 5 }), dbError('22023'))
  await db.query('DROP DATABASE IF EXISTS no_dlock_node')
  await db.query('CREATE DATABASE no_dlock_node')
  const other = pool(DSN, { database: 'no_dlock_node' })
  try {
    await assert.rejects(dlock.acquire(other, key(), { ttl: 5 }), dbError('42883'))
  } finally {
    await other.end()
    await db.query('DROP DATABASE no_dlock_node')
  }
  await assert.rejects(dlock.acquire(app, key(), { ttl: 0 }), RangeError)
})

test('no server: a DatabaseError without SQLSTATE; no answer in time: a TimeoutError', async () => {
  const nobody = pool(DSN, { host: '127.0.0.1', port: 1 })
  try {
    await assert.rejects(dlock.acquire(nobody, key(), { ttl: 1 }),
      (e) => e instanceof dlock.DatabaseError && !(e instanceof dlock.TimeoutError) && e.sqlstate === null &&
        e.code === 'ECONNREFUSED')
  } finally {
    await nobody.end()
  }
  // dlock's lease table locked by an open transaction: the acquire gets no
  // answer within its deadline (max(ttl, 5 s) after the wait)
  const locker = await db.connect()
  try {
    await locker.query('BEGIN; LOCK TABLE dlock.lease IN ACCESS EXCLUSIVE MODE')
    await assert.rejects(dlock.acquire(app, key(), { ttl: 1 }),
      (e) => e instanceof dlock.TimeoutError && e instanceof dlock.DatabaseError && e.sqlstate === null &&
        e.code === 'DLOCK_TIMEOUT')
  } finally {
    await locker.query('ROLLBACK')
    locker.release()
  }
})

test('lost by dlock_force_release: signal aborted within the ttl, nothing renewed after', async () => {
  const k = key()
  const ttl = 3
  const lost = []
  const lease = await dlock.acquire(app, k, { ttl, onLost: (l, err) => lost.push(err) })
  try {
    assert.equal((await db.query('SELECT dlock_force_release($1) AS ok', [k])).rows[0].ok, true)
    const forced = Date.now()
    const reason = await Promise.race([once(lease.signal), sleep(ttl * 1000 + SLACK).then(() => null)])
    assert.ok(reason instanceof dlock.LeaseLostError, 'the loss was not signalled')
    assert.ok(Date.now() - forced <= ttl * 1000 + SLACK)
    assert.equal(lease.lost, true)
    assert.equal(lost.length, 1)
    assert.match(lease.lostReason, /refused/) // at the refusal, not at the deadline
    assert.throws(() => lease.check(), dlock.LeaseLostError)
    await assert.rejects(lease.query(app, "INSERT INTO guarded VALUES ($1, 0, 'late')", [k]), dlock.LeaseLostError)
    const n = await db.query('SELECT count(*)::int AS n FROM guarded WHERE key = $1', [k])
    assert.equal(n.rows[0].n, 0)
    const mark = server.logMark()
    await sleep((2 * ttl * 1000) / 3 + 500)
    assert.ok(!server.logSince(mark).includes(k), 'a call naming the key reached the server after the loss')
  } finally {
    assert.equal(await lease.release(), false)
  }
})

test('a refused fence declares the loss; another holder\'s lease is never released', async () => {
  const k = key()
  const lease = await dlock.acquire(app, k, { ttl: 30 })
  await db.query('SELECT dlock_force_release($1)', [k])
  const other = (await db.query("SELECT dlock_acquire($1, 'thief', '1 min') AS t", [k])).rows[0].t
  const client = await app.connect()
  try {
    await assert.rejects(lease.query(client, "INSERT INTO guarded VALUES ($1, $2, 'stale')", [k, lease.token]),
      dlock.LeaseLostError)
    assert.equal(client.getTransactionStatus(), 'I')
  } finally {
    client.release()
  }
  assert.equal(lease.lost, true)
  assert.equal(lease.signal.aborted, true)
  assert.equal(await lease.release(), false)
  assert.deepEqual(await holderOf(db, k), ['thief', other])
  await db.query("SELECT dlock_release($1, 'thief')", [k])
})

test('server stopped past the ttl: loss at the ttl, not before, nothing renewed after', async () => {
  const k = key()
  const ttl = 4
  const lease = await dlock.acquire(app, k, { ttl })
  try {
    await sleep((ttl * 1000) / 3 + 300)
    server.stop()
    const stopped = Date.now()
    const deadline = lease.deadline // no renewal can be confirmed from now on
    const reason = await Promise.race([once(lease.signal), sleep(ttl * 1000 + 2 * SLACK).then(() => null)])
    const lostAt = require('perf_hooks').performance.now()
    assert.ok(reason instanceof dlock.LeaseLostError, 'the loss was not signalled')
    assert.ok(lostAt >= deadline - 10, 'loss declared before the ttl had passed')
    assert.ok(Date.now() - stopped <= ttl * 1000 + SLACK, 'loss signalled later than the ttl')
    assert.match(lease.lostReason, /within the ttl/)
    await server.start()
    const mark = server.logMark()
    await sleep((2 * ttl * 1000) / 3 + 500)
    assert.ok(!server.logSince(mark).includes(k), 'a call was made after the loss')
  } finally {
    await server.start().catch(() => {})
    assert.equal(await lease.release(), false)
  }
})

test('a restart shorter than the ttl is no loss (pools of several hosts, the first down)', async () => {
  const k = key()
  const ttl = 20
  const dead = pool(DSN, { port: Number(env('DLOCK_TEST_DEAD_PORT')) })
  try {
    const lease = await dlock.acquire([dead, app], k, { ttl })
    server.stop()
    await sleep(1000)
    await server.start()
    const { performance } = require('perf_hooks')
    const restarted = performance.now()
    assert.ok(await waitUntil(() => lease.deadline - ttl * 1000 > restarted, ttl * 1000), 'no renewal after the restart')
    assert.equal(lease.lost, false)
    await lease.query(app, 'SELECT 1')
    assert.equal(await lease.release(), true)
  } finally {
    await dead.end()
  }
})

test('an exception in the body releases the lease', async () => {
  const k = key()
  let seen
  await assert.rejects(dlock.withLease(app, k, { ttl: 30 }, async (lease) => {
    seen = lease
    assert.notEqual(await holderOf(db, k), null)
    throw new Error('boom')
  }), /boom/)
  assert.equal(seen.released, true)
  assert.equal(await holderOf(db, k), null)
})

test('AbortSignal: aborting in the body ends the work and releases', async () => {
  const k = key()
  const ctl = new AbortController()
  let seen
  const run = dlock.withLease(app, k, { ttl: 30, signal: ctl.signal }, async (lease, signal) => {
    seen = lease
    const reason = await once(signal)
    throw reason
  })
  await waitUntil(async () => (await holderOf(db, k)) !== null, 10000)
  ctl.abort(new Error('cancelled by the caller'))
  await assert.rejects(run, /cancelled by the caller/)
  assert.equal(seen.released, true)
  assert.equal(await holderOf(db, k), null)
})

test('AbortSignal: aborting a wait leaves nothing held or queued', async () => {
  const k = key()
  const tok = (await db.query("SELECT dlock_acquire($1, 'other', '1 min') AS t", [k])).rows[0].t
  const ctl = new AbortController()
  const holder = `waiter-${k}`
  const waiting = dlock.acquire(app, k, { ttl: 30, wait: 60, holder, signal: ctl.signal })
  const queued = await waitUntil(async () =>
    (await db.query('SELECT count(*)::int AS n FROM dlock_waiters WHERE key = $1', [k])).rows[0].n === 1, 30000)
  assert.ok(queued, 'the acquire did not wait')
  ctl.abort(new Error('stop waiting'))
  await assert.rejects(waiting, /stop waiting/)
  assert.ok(await waitUntil(async () =>
    (await db.query('SELECT count(*)::int AS n FROM dlock_waiters WHERE key = $1', [k])).rows[0].n === 0, 30000))
  assert.equal((await db.query("SELECT dlock_release($1, 'other', $2) AS ok", [k, tok])).rows[0].ok, true)
  await sleep(500)
  assert.equal(await holderOf(db, k), null)
})

test('through pgbouncer in transaction mode', async () => {
  const bouncer = pool(env('DLOCK_TEST_BOUNCER_DSN'))
  const busy = await bouncer.connect() // keeps one of the two server connections in a transaction
  await busy.query('BEGIN')
  try {
    const k = key()
    await dlock.withLease(bouncer, k, { ttl: 3 }, async (lease, signal) => {
      await sleep(4000) // longer than the ttl: renewals through the pooler
      assert.equal(signal.aborted, false)
      assert.deepEqual(await holderOf(db, k), [lease.holder, lease.token])
      await lease.query(bouncer, "INSERT INTO guarded VALUES ($1, $2, 'pooled')", [k, lease.token])
    })
    assert.equal(await holderOf(db, k), null)
    await db.query('DROP TABLE IF EXISTS node_pooled_jobs')
    await db.query('CREATE TABLE node_pooled_jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)')
    await db.query('INSERT INTO node_pooled_jobs (id) SELECT generate_series(1, 9)')
    const seen = []
    for await (const batch of dlock.claims(bouncer, 'node_pooled_jobs', 'pooled', { n: 4, ttl: 5, filter: 'status = 0', untilEmpty: true })) {
      const c = await bouncer.connect()
      try {
        await c.query('BEGIN')
        const done = await batch.complete(batch.keys, c)
        await c.query('UPDATE node_pooled_jobs SET status = 1 WHERE id = ANY($1)', [done])
        await c.query('COMMIT')
        seen.push(...done)
      } finally {
        c.release()
      }
    }
    assert.deepEqual(seen.sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8, 9])
  } finally {
    await busy.query('ROLLBACK')
    busy.release()
    await bouncer.end()
  }
})

test('claims: renewed while working, given back when the body ends', async () => {
  await db.query('DROP TABLE IF EXISTS node_small_jobs')
  await db.query('CREATE TABLE node_small_jobs (id bigint PRIMARY KEY, status int NOT NULL DEFAULT 0)')
  await db.query('INSERT INTO node_small_jobs (id) SELECT generate_series(1, 7)')
  const batches = []
  for await (const batch of dlock.claims(app, 'node_small_jobs', 'basic', { n: 3, ttl: 3, filter: 'status = 0', orderBy: 'id', untilEmpty: true })) {
    batches.push(batch.keys.map(String))
    if (String(batch.keys[0]) === '1') {
      await sleep(4000) // longer than the ttl
      assert.equal(batch.signal.aborted, false)
      assert.deepEqual((await batch.complete(['1', '2'])).map(String), ['1', '2'])
      assert.equal(await batch.unclaim(['3']), 1)
      await db.query('UPDATE node_small_jobs SET status = 1 WHERE id IN (1, 2)')
      continue
    }
    const done = await batch.complete()
    await db.query('UPDATE node_small_jobs SET status = 1 WHERE id = ANY($1)', [done])
  }
  assert.deepEqual(batches, [['1', '2', '3'], ['3', '4', '5'], ['6', '7']])
  assert.deepEqual(await claimsOf(db, 'node_small_jobs'), {})
  let left
  for await (const batch of dlock.claims(app, 'node_small_jobs', 'leaver', { n: 4, ttl: 30, orderBy: 'id' })) {
    assert.equal(batch.keys.length, 4)
    left = batch.keys.map(String)
    break // given back
  }
  // at once and plainly (not as failed: no backoff), claimable by another
  assert.deepEqual(await claimsOf(db, 'node_small_jobs'), {})
  const peek = await db.query("SELECT id::text FROM dlock_claim(NULL::node_small_jobs, 'peeker', 4, order_by => 'id')")
  await db.query("SELECT dlock_unclaim('node_small_jobs'::regclass, 'peeker')")
  assert.deepEqual(peek.rows.map((r) => r.id), left)
})

test('claims: every row completed once across two workers, one killed mid-batch', async () => {
  await db.query('DROP TABLE IF EXISTS jobs, done_log')
  await db.query('CREATE TABLE jobs (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)')
  await db.query('CREATE TABLE done_log (id int, worker text)')
  await db.query('INSERT INTO jobs (id) SELECT generate_series(1, 60)')
  const worker = path.join(__dirname, 'claim_worker.js')
  const start = (name, die) => fork(worker, [name, '3', String(die || 0)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
  const victim = start('victim', 2)
  let survivor
  try {
    const held = await new Promise((resolve, reject) => {
      victim.on('message', (m) => m.dying && resolve(m.dying))
      victim.on('exit', (code) => reject(new Error(`the victim exited (${code}) before dying`)))
    })
    assert.ok(held.length > 0, 'the victim held claims when it died')
    survivor = start('survivor', 0)
    victim.kill('SIGKILL')
    const code = await new Promise((resolve) => survivor.on('exit', resolve))
    assert.equal(code, 0)
    const counts = (await db.query('SELECT id, count(*)::int AS n FROM done_log GROUP BY id ORDER BY id')).rows
    assert.deepEqual(counts.map((r) => r.id), Array.from({ length: 60 }, (_, i) => i + 1), 'a row was never completed')
    assert.ok(counts.every((r) => r.n === 1), 'a row was completed twice')
    const bySurvivor = new Set((await db.query("SELECT id FROM done_log WHERE worker = 'survivor'")).rows.map((r) => r.id))
    assert.ok(held.every((k) => bySurvivor.has(Number(k))), 'the killed worker\'s claims went to the other worker')
  } finally {
    for (const p of [victim, survivor]) if (p && p.exitCode === null && p.signalCode === null) p.kill('SIGKILL')
  }
})

// semaphores, shared leases, several keys at once (test/shapes.js); the
// client's own promises (test/promises.js)
require('./shapes')(db, app)
require('./promises')(db, app)
// the claim loop's 0.5 options (test/claims38.js)
require('./claims38')(db, app)
