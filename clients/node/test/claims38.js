'use strict'
// The claim loop's 0.5 options (issue 38) against a real server: a loop
// waiting in the server is woken by an insert (one dlock_claim call in the
// server's log, no polling), work()'s handler rejecting gives the rows
// back with a backoff (retryAfter, or the claim's backoff), groupBy /
// perGroup / fair reach dlock_claim, and an abort during a wait ends the
// loop with no claim and no waiting call left.  Registered by
// dlock.test.js.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const dlock = require('..')
const { waitUntil, server, logRecords, claimsOf } = require('./helpers')

module.exports = function claims38Tests(db, app) {
  const table = async (name, wakeup = true) => {
    await db.query(`DROP TABLE IF EXISTS ${name}`)
    await db.query(`CREATE TABLE ${name} (id int PRIMARY KEY, tenant text NOT NULL DEFAULT 'a')`)
    if (wakeup) await db.query(`SELECT dlock_claim_wakeup('${name}'::regclass)`)
  }
  // dlock_claim calls on name running now (waiting in the server)
  const waiting = async (name) => (await db.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1 AND pid <> pg_backend_pid()",
    [`%dlock_claim(NULL::${name}%`])).rows[0].n
  // what another holder can claim of name now (given back at once)
  const claimable = async (name) => {
    const r = await db.query(`SELECT id FROM dlock_claim(NULL::${name}, 'peeker', 100)`)
    await db.query(`SELECT dlock_unclaim('${name}'::regclass, 'peeker')`)
    return r.rows.map((x) => x.id).sort((a, b) => a - b)
  }
  const claimCalls = (mark, name) =>
    logRecords(server.logSince(mark)).filter((r) => r.text.includes(`dlock_claim(NULL::${name},`)).length

  test('claims38 wait: a waiting loop is woken by an insert, in the one call that waited', async () => {
    await table('node_wjobs')
    const mark = server.logMark()
    const ctl = new AbortController()
    const got = []
    const run = (async () => {
      for await (const batch of dlock.claims(app, 'node_wjobs', 'nwaiter', { n: 5, wait: 60, signal: ctl.signal })) {
        got.push(...(await batch.complete()))
        ctl.abort()
      }
    })()
    assert.ok(await waitUntil(async () => (await waiting('node_wjobs')) === 1, 20000))
    await db.query('INSERT INTO node_wjobs (id) VALUES (7)')
    await run
    assert.deepEqual(got, [7])
    assert.equal(claimCalls(mark, 'node_wjobs'), 1) // woken: nothing polled
  })

  test('claims38 wait: untilEmpty ends once the wait ran out', async () => {
    await table('node_wempty')
    await db.query('INSERT INTO node_wempty (id) VALUES (1)')
    const seen = []
    for await (const batch of dlock.claims(app, 'node_wempty', 'nw2', { wait: 0.5, untilEmpty: true })) {
      seen.push(...(await batch.complete()))
      await db.query('DELETE FROM node_wempty WHERE id = ANY($1)', [batch.keys]) // done
    }
    assert.deepEqual(seen, [1])
  })

  test('claims38 retry: a rejecting handler gives the batch back with retryAfter', async () => {
    await table('node_rjobs', false)
    await db.query('INSERT INTO node_rjobs (id) VALUES (1), (2)')
    const calls = []
    const errors = []
    await dlock.work(app, 'node_rjobs', 'nretrier', {
      orderBy: 'id', retryAfter: 3600, maxAttempts: 3, untilEmpty: true, onError: (err) => errors.push(err.message),
    }, async (batch) => {
      calls.push(batch.keys.slice())
      assert.deepEqual(await batch.complete([2]), [2])
      await db.query('DELETE FROM node_rjobs WHERE id = 2') // done
      throw new Error('send failed')
    })
    assert.deepEqual(calls, [[1, 2]]) // not delivered again: it backs off
    assert.deepEqual(errors, ['send failed'])
    assert.deepEqual(await claimable('node_rjobs'), [])
    assert.deepEqual(await claimsOf(db, 'node_rjobs'), { 1: 'backoff' }) // shown in its backoff, no holder
  })

  test('claims38 retry: retryAfter null is the claim\'s backoff; Batch.fail', async () => {
    await table('node_bjobs', false)
    await db.query('INSERT INTO node_bjobs (id) VALUES (1)')
    let calls = 0
    await dlock.work(app, 'node_bjobs', 'nbacker', { backoff: 3600, backoffMax: 7200, maxAttempts: 3, untilEmpty: true, onError: () => {} },
      async () => { calls++; throw new Error('boom') })
    assert.equal(calls, 1)
    assert.deepEqual(await claimable('node_bjobs'), [])
    await table('node_fjobs', false)
    await db.query('INSERT INTO node_fjobs (id) VALUES (1), (2)')
    for await (const batch of dlock.claims(app, 'node_fjobs', 'nfailer', { n: 2, orderBy: 'id' })) {
      assert.equal(await batch.fail([1], null, 3600), 1)
      assert.deepEqual(batch.outstanding, [2])
      break // 2 given back as before
    }
    assert.deepEqual(await claimsOf(db, 'node_fjobs'), { 1: 'backoff' }) // 2 plainly: no backoff
    assert.deepEqual(await claimable('node_fjobs'), [2])
  })

  test('claims38 group: groupBy, perGroup and fair reach dlock_claim', async () => {
    await table('node_gjobs', false)
    await db.query("INSERT INTO node_gjobs SELECT i, CASE WHEN i <= 5 THEN 'a' ELSE 'b' END FROM generate_series(1, 7) i")
    for await (const batch of dlock.claims(app, 'node_gjobs', 'ngrouper', { n: 10, orderBy: 'id', groupBy: 'tenant', perGroup: 1 })) {
      assert.deepEqual(batch.keys.slice().sort((a, b) => a - b), [1, 6]) // one per tenant, in order
      break
    }
    for await (const batch of dlock.claims(app, 'node_gjobs', 'nfairer', { n: 4, orderBy: 'id', groupBy: 'tenant', fair: true })) {
      assert.deepEqual(batch.keys.slice().sort((a, b) => a - b), [1, 2, 6, 7]) // round-robin, not 1..4
      break
    }
    await assert.rejects(dlock.claims(app, 'node_gjobs', 'x', { perGroup: 2 }).next(), /needs groupBy/)
    await assert.rejects(dlock.claims(app, 'node_gjobs', 'x', { fair: true }).next(), /needs groupBy/)
  })

  test('claims38 abort: an abort during a wait cancels it on the server and ends the loop', async () => {
    await table('node_sjobs')
    const ctl = new AbortController()
    const out = []
    const run = (async () => {
      for await (const batch of dlock.claims(app, 'node_sjobs', 'nstopper', { wait: 3600, signal: ctl.signal })) out.push(batch)
    })()
    assert.ok(await waitUntil(async () => (await waiting('node_sjobs')) === 1, 20000))
    ctl.abort()
    let timer
    const hang = new Promise((resolve) => { timer = setTimeout(() => resolve('hung'), 5000) }) // a hang limit, below one call's 10 s
    assert.equal(await Promise.race([run.then(() => 'ended'), hang]), 'ended')
    clearTimeout(timer)
    assert.deepEqual(out, [])
    assert.ok(await waitUntil(async () => (await waiting('node_sjobs')) === 0, 10000)) // no waiter left
    await db.query('INSERT INTO node_sjobs (id) VALUES (1)')
    assert.deepEqual(await claimsOf(db, 'node_sjobs'), {})
    assert.deepEqual(await claimable('node_sjobs'), [1])
  })
}
