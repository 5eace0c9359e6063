'use strict'
// The lock shapes against a real server: a counting semaphore (acquire
// with { slots }), a shared lease ({ shared: true }) and several keys, all
// or none (acquireAll, withLeases).  Registered by dlock.test.js (one file
// of tests, so that those that stop the server run alone).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const dlock = require('..')
const { sleep, key, server } = require('./helpers')

const SLACK = 2000 // scheduling slack (ms) for "signalled by the deadline" on a loaded machine

const once = (signal) => new Promise((resolve) => {
  if (signal.aborted) resolve(signal.reason)
  else signal.addEventListener('abort', () => resolve(signal.reason), { once: true })
})

module.exports = function shapesTests(db, app) {
  // [holder, token] of every live holder of k, sorted
  const rowsOf = async (k) => (await db.query(
    'SELECT holder, token FROM dlock_locks WHERE key = $1 ORDER BY holder', [k])).rows.map((r) => [r.holder, r.token])
  // the keys holder holds, sorted
  const heldBy = async (holder) => (await db.query(
    'SELECT key FROM dlock_locks WHERE holder = $1 ORDER BY key COLLATE "C"', [holder])).rows.map((r) => r.key)
  const byHolder = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)

  test('semaphore: two holders of 2 slots at once, a third refused, a mismatch is 22023', async () => {
    const k = key()
    const a = await dlock.acquire(app, k, { ttl: 30, slots: 2 })
    const b = await dlock.acquire(app, k, { ttl: 30, slots: 2 })
    try {
      assert.equal(a.slots, 2)
      assert.notEqual(a.token, b.token)
      assert.deepEqual(await rowsOf(k), [[a.holder, a.token], [b.holder, b.token]].sort(byHolder))
      await assert.rejects(dlock.acquire(app, k, { ttl: 30, slots: 2, wait: 0.2 }), dlock.NotAcquiredError)
      await assert.rejects(dlock.acquire(app, k, { ttl: 30, slots: 3 }), (e) => e.code === '22023')
      await assert.rejects(dlock.acquire(app, k, { ttl: 30 }), (e) => e.code === '22023') // a lease is 1 slot
      assert.equal((await rowsOf(k)).length, 2)
      assert.equal((await a.query(app, 'SELECT 1 AS one')).rows[0].one, 1) // fenced by a's own token
    } finally {
      assert.equal(await a.release(), true)
      assert.equal(await b.release(), true)
    }
    assert.deepEqual(await rowsOf(k), [])
  })

  test('semaphore: the loss of a slot is signalled', async () => {
    const k = key()
    const ttl = 3
    await dlock.withLease(app, k, { ttl, slots: 2 }, async (lease, signal) => {
      await db.query('SELECT dlock_force_release($1)', [k])
      const reason = await Promise.race([once(signal), sleep(ttl * 1000 + SLACK).then(() => null)])
      assert.ok(reason instanceof dlock.LeaseLostError, 'the loss was not signalled')
      assert.throws(() => lease.check(), dlock.LeaseLostError)
    })
  })

  test('options are checked before any call', async () => {
    await assert.rejects(dlock.acquire(app, key(), { slots: 0 }), RangeError)
    await assert.rejects(dlock.acquire(app, key(), { slots: 1.5 }), TypeError)
    await assert.rejects(dlock.acquire(app, key(), { slots: 2, shared: true }), TypeError)
    await assert.rejects(dlock.acquireAll(app, 'a,b'), TypeError)
    await assert.rejects(dlock.acquireAll(app, []), RangeError)
    await assert.rejects(dlock.acquireAll(app, ['a', '']), TypeError)
    await assert.rejects(dlock.withLeases(app, ['a'], { ttl: 0 }, () => {}), RangeError)
  })

  test('shared: holders together, a lease refused meanwhile', async () => {
    const k = key()
    await dlock.withLease(app, k, { ttl: 3, shared: true }, async (r1) => {
      await dlock.withLease(app, k, { ttl: 3, shared: true }, async (r2, signal) => {
        assert.equal(r1.shared, true)
        assert.deepEqual(await rowsOf(k), [[r1.holder, r1.token], [r2.holder, r2.token]].sort(byHolder))
        await assert.rejects(dlock.acquire(app, k, { ttl: 30, wait: 0.2 }), dlock.NotAcquiredError)
        await sleep(1500) // a renewal of each
        assert.equal(signal.aborted, false)
        r1.check()
        r2.check()
      })
    })
    assert.deepEqual(await rowsOf(k), [])
    const w = await dlock.acquire(app, k, { ttl: 30 })
    await assert.rejects(dlock.acquire(app, k, { ttl: 30, shared: true }), dlock.NotAcquiredError)
    assert.equal(await w.release(), true)
  })

  test('acquireAll: all or none, tokens per key, released together', async () => {
    const k = key()
    const keys = [`${k}/b`, `${k}/a`, `${k}/c`]
    const other = (await db.query("SELECT dlock_acquire($1, 'other', '1 min') AS t", [keys[2]])).rows[0].t
    const holder = `all-${k}`
    await assert.rejects(dlock.acquireAll(app, keys, { ttl: 30, wait: 0.3, holder }), dlock.NotAcquiredError)
    assert.deepEqual(await heldBy(holder), []) // none of the free keys kept
    const waiting = await db.query('SELECT count(*)::int AS n FROM dlock_waiters WHERE key LIKE $1', [`${k}/%`])
    assert.equal(waiting.rows[0].n, 0)
    await db.query("SELECT dlock_release($1, 'other', $2)", [keys[2], other])
    let seen
    const result = await dlock.withLeases(app, [...keys, keys[0]], { ttl: 30, holder }, async (held) => {
      seen = held
      assert.deepEqual(held.keys, keys)
      assert.deepEqual(Object.keys(held.tokens).sort(), [...keys].sort())
      for (const key of keys) assert.deepEqual(await rowsOf(key), [[holder, held.tokens[key]]])
      assert.equal((await held.query(app, 'SELECT 2 AS two')).rows[0].two, 2)
      return 'done'
    })
    assert.equal(result, 'done')
    assert.equal(seen.released, true)
    assert.deepEqual(await heldBy(holder), [])
  })

  test('acquireAll: the fence checks every key; another holder\'s lease is never released', async () => {
    const k = key()
    const keys = [`${k}/f1`, `${k}/f2`]
    await db.query('CREATE TABLE IF NOT EXISTS guarded (key text, token bigint, note text)')
    const held = await dlock.acquireAll(app, keys, { ttl: 30 })
    await db.query('SELECT dlock_force_release($1)', [keys[1]])
    await db.query("SELECT dlock_acquire($1, 'thief', '1 min')", [keys[1]])
    await assert.rejects(held.query(app, "INSERT INTO guarded VALUES ($1, 0, 'stale')", [k]), dlock.LeaseLostError)
    assert.equal(held.lost, true)
    assert.equal(await held.release(), false)
    const n = await db.query('SELECT count(*)::int AS n FROM guarded WHERE key = $1', [k])
    assert.equal(n.rows[0].n, 0)
    assert.equal((await rowsOf(keys[1]))[0][0], 'thief')
    assert.deepEqual(await heldBy(held.holder), [])
    await db.query("SELECT dlock_release($1, 'thief')", [keys[1]])
  })

  test('acquireAll: renewed, and lost when any key is; nothing renewed after', async () => {
    const k = key()
    const keys = [`${k}/1`, `${k}/2`]
    const ttl = 3
    const lost = []
    const held = await dlock.acquireAll(app, keys, { ttl, onLost: (h, err) => lost.push(err) })
    try {
      const first = held.deadline
      await sleep(ttl * 1000 / 3 + 1000) // a renewal
      assert.ok(held.deadline > first)
      held.check()
      await db.query('SELECT dlock_force_release($1)', [keys[1]])
      const reason = await Promise.race([once(held.signal), sleep(ttl * 1000 + SLACK).then(() => null)])
      assert.ok(reason instanceof dlock.LeaseLostError, 'the loss of one key was not signalled')
      assert.equal(lost.length, 1)
      assert.equal(held.lost, true)
      assert.throws(() => held.check(), dlock.LeaseLostError)
      await assert.rejects(held.query(app, 'SELECT 1'), dlock.LeaseLostError)
      const mark = server.logMark()
      await sleep((2 * ttl * 1000) / 3 + 500)
      assert.ok(!server.logSince(mark).includes(keys[0]), 'renewed after the loss')
    } finally {
      assert.equal(await held.release(), false) // one was not held any more
    }
    assert.deepEqual(await heldBy(held.holder), []) // the other was released
  })

  test('withLeases: an exception in the body releases every key', async () => {
    const k = key()
    const keys = [`${k}/x`, `${k}/y`]
    let seen
    await assert.rejects(dlock.withLeases(app, keys, async (held) => {
      seen = held
      assert.deepEqual(await heldBy(held.holder), keys)
      throw new Error('boom')
    }), /boom/)
    assert.equal(seen.released, true)
    assert.deepEqual(await heldBy(seen.holder), [])
  })
}
