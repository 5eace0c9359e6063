'use strict'
// lib/claims.js - the claim loop: `for await (const batch of claims(...))`,
// each batch's claims renewed in the background while the loop body works,
// on a connection of the loop's own (made with the pool's settings, never
// taken from it: the application's queries cannot hold a renewal up).

const core = require('./core')
const { now, Caller, Keeper, LeaseLostError } = core

const DESCRIBE = `
SELECT c.oid::pg_catalog.regclass::text AS name, a.attname::text AS pk,
       pg_catalog.format_type(a.atttypid, a.atttypmod) AS pktype
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
  JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
 WHERE i.indrelid = $1::pg_catalog.regclass AND i.indisprimary AND i.indnatts = 1`

// The statements for one table; its name and key type come from the
// server (regclass::text and format_type are quoted as SQL needs).
function tableSql(t) {
  return {
    claim: `SELECT * FROM dlock_claim(NULL::${t.name}, $1, $2, $3::interval, $4, $5, $6`,
    complete: `SELECT k FROM dlock_complete($1::regclass, $2, $3::${t.pktype}[]) AS c(k)`,
    unclaim: `SELECT dlock_unclaim($1::regclass, $2, $3::${t.pktype}[]) AS n`,
    fail: `SELECT dlock_unclaim($1::regclass, $2, $3::${t.pktype}[], $4::interval) AS n`,
    unclaimAll: 'SELECT dlock_unclaim($1::regclass, $2) AS n',
    renew: 'SELECT dlock_renew_claims($1::regclass, $2, $3::interval) AS n',
  }
}

class Batch {
  constructor(loop, rows, sent) {
    this._loop = loop
    this.rows = rows
    this.keys = rows.map((r) => r[loop.table.pk])
    this.lostReason = null
    this._outstanding = this.keys.slice()
    this._ctl = new AbortController()
    this.signal = this._ctl.signal // aborted when the claims are lost
    this._keeper = new Keeper(loop.ttl * 1000, sent, (deadline, signal) => this._renew(deadline, signal),
      (err) => this._lose(err))
  }

  get lost() {
    return this.lostReason !== null
  }

  // the keys this batch still holds claims on (as far as it knows)
  get outstanding() {
    return this._outstanding.slice()
  }

  async _renew(deadline, signal) {
    if (this._outstanding.length === 0) return true
    const l = this._loop
    const n = await l.renewCaller.value(l.sql.renew, [l.table.name, l.holder, core.interval(l.ttl)], deadline, { signal })
    return Number(n) >= this._outstanding.length
  }

  _lose(err) {
    this.lostReason = err.message
    this._ctl.abort(err)
    if (this._loop.onLost) this._loop.onLost(this, err)
  }

  check() {
    if (this.lost) throw new LeaseLostError(`claims lost: ${this.lostReason}`)
    if (now() >= this._keeper.deadline) throw new LeaseLostError('claims lost: no renewal confirmed within the ttl')
  }

  _forget(keys) {
    const gone = new Set(keys.map(String))
    this._outstanding = this._outstanding.filter((k) => !gone.has(String(k)))
  }

  // dlock_complete on keys (default: all the batch still holds): the keys
  // whose claims it still held, which alone count as done.  With client
  // (yours), in its transaction: mark the rows done in the same one.
  async complete(keys, client) {
    const ks = keys === undefined || keys === null ? this.outstanding : Array.from(keys)
    const l = this._loop
    const args = [l.table.name, l.holder, ks]
    const res = client ? await client.query(l.sql.complete, args) : await l.caller.retrying(l.sql.complete, args, l.ttl * 1000)
    this._forget(ks)
    return res.rows.map((r) => r.k)
  }

  // dlock_unclaim on keys (default: all the batch still holds), keeping
  // their attempts: how many were given back.
  async unclaim(keys, client) {
    const ks = keys === undefined || keys === null ? this.outstanding : Array.from(keys)
    const l = this._loop
    const args = [l.table.name, l.holder, ks]
    const res = client ? await client.query(l.sql.unclaim, args) : await l.caller.retrying(l.sql.unclaim, args, l.ttl * 1000)
    this._forget(ks)
    return Number(res.rows[0].n)
  }

  // dlock_unclaim on keys (default: all the batch still holds) as failed:
  // not claimable again before retryAfter seconds (default: the loop's
  // retryAfter; null there too: the backoff the claim asked for).
  // Attempts kept; how many were given back.
  async fail(keys, client, retryAfter) {
    const ks = keys === undefined || keys === null ? this.outstanding : Array.from(keys)
    const l = this._loop
    const after = retryAfter === undefined || retryAfter === null ? l.args.retryAfter
      : core.seconds(retryAfter, 'retryAfter', false)
    const args = [l.table.name, l.holder, ks, after === null ? null : core.interval(after)]
    const res = client ? await client.query(l.sql.fail, args) : await l.caller.retrying(l.sql.fail, args, l.ttl * 1000)
    this._forget(ks)
    return Number(res.rows[0].n)
  }
}

// The longest one waiting dlock_claim call waits in the server (seconds):
// a loop's longer wait is made of calls of at most this much.
const WAIT_CAP = 10

// dlock_claim's arguments after maxAttempts (0.5), checked: only those set
// are passed, by name, so that a loop that sets none calls an older dlock.
function claimArgs(o) {
  const opt = (v, name, positive) => (v === undefined || v === null ? null : core.seconds(v, name, positive))
  const a = {
    wait: opt(o.wait, 'wait', false) || 0,
    backoff: opt(o.backoff, 'backoff', true),
    backoffMax: opt(o.backoffMax, 'backoffMax', true),
    groupBy: o.groupBy ?? null,
    perGroup: o.perGroup ?? null,
    fair: o.fair ?? false,
    retryAfter: opt(o.retryAfter, 'retryAfter', false),
  }
  if (a.groupBy !== null && (typeof a.groupBy !== 'string' || a.groupBy === '')) {
    throw new TypeError('groupBy must be a non-empty string (an SQL expression)')
  }
  if (a.perGroup !== null && (!Number.isInteger(a.perGroup) || a.perGroup < 1)) {
    throw new RangeError('perGroup must be a positive integer')
  }
  if (typeof a.fair !== 'boolean') throw new TypeError('fair must be a boolean')
  if ((a.perGroup !== null || a.fair) && a.groupBy === null) {
    throw new TypeError(`${a.fair ? 'fair' : 'perGroup'} needs groupBy`)
  }
  return a
}

// dlock_claim's statement and values for one call (wait: this call's)
function claimCall(loop, n, o, wait) {
  const a = loop.args
  const values = [loop.holder, n, core.interval(loop.ttl), o.filter ?? null, o.orderBy ?? null, o.maxAttempts ?? null]
  let text = loop.sql.claim
  const add = (name, type, v) => {
    values.push(v)
    text += `, ${name} => $${values.length}::${type}`
  }
  if (wait > 0) add('wait', 'interval', core.interval(wait))
  if (a.backoff !== null) add('backoff', 'interval', core.interval(a.backoff))
  if (a.backoffMax !== null) add('backoff_max', 'interval', core.interval(a.backoffMax))
  if (a.groupBy !== null) add('group_by', 'text', a.groupBy)
  if (a.perGroup !== null) add('per_group', 'integer', a.perGroup)
  if (a.fair) add('fair', 'boolean', true)
  return [text + ')', values]
}

// claims(pool, table, holder, {n, ttl, filter, orderBy, maxAttempts, wait,
// poll, groupBy, perGroup, fair, backoff, backoffMax, retryAfter,
// untilEmpty, signal, onLost}): an async iterable of Batches.  When no row
// is to be had: with wait, the claim waits in the server up to wait
// seconds for one (woken when an insert commits); else it waits poll
// seconds and tries again; or ends (untilEmpty), or ends when signal is
// aborted (a waiting claim is then cancelled on the server).  Claims neither completed
// nor given back by the end of the loop body are given back.
async function* claims(pool, table, holder, opts) {
  const o = opts || {}
  if (typeof holder !== 'string' || holder === '') throw new TypeError('holder must be a non-empty string')
  const n = o.n === undefined ? 10 : o.n
  if (!Number.isInteger(n) || n < 1) throw new RangeError('n must be a positive integer')
  const loop = {
    holder,
    ttl: core.seconds(o.ttl === undefined ? 30 : o.ttl, 'ttl'),
    caller: new Caller(pool),
    renewCaller: Caller.own(pool), // the keepers' (see lib/core.js OwnConnection)
    onLost: o.onLost,
    args: claimArgs(o),
    table: null,
    sql: null,
  }
  const poll = core.seconds(o.poll === undefined ? 1 : o.poll, 'poll')
  try {
    yield* claimLoop(loop, table, holder, n, poll, o)
  } finally {
    loop.renewCaller.close(true)
  }
}

async function* claimLoop(loop, table, holder, n, poll, o) {
  const budget = Math.max(loop.ttl, 30) * 1000
  const signal = o.signal
  const res = await loop.caller.retrying(DESCRIBE, [table], budget)
  if (res.rows.length === 0) {
    throw new core.DlockError(`${JSON.stringify(table)} has no single-column primary key: dlock_claim needs one`)
  }
  loop.table = res.rows[0]
  loop.sql = tableSql(loop.table)
  const turnEnd = () => now() + loop.args.wait * 1000
  let end = turnEnd()
  while (!(signal && signal.aborted)) {
    const wait = loop.args.wait ? Math.max(0, Math.min((end - now()) / 1000, WAIT_CAP)) : 0
    const got = await claimOnce(loop, n, o, wait, budget, signal)
    if (got === null) return // aborted while it waited
    if (got.rows.length === 0) {
      if (loop.args.wait && now() < end) continue
      if (o.untilEmpty) return
      if (!loop.args.wait) await core.sleep(poll * 1000, signal)
      end = turnEnd()
      continue
    }
    const sent = got.sent
    const batch = new Batch(loop, got.rows, sent)
    batch._keeper.start()
    try {
      yield batch
    } finally {
      await batch._keeper.stop()
      if (batch._outstanding.length) {
        await batch.unclaim().catch((e) =>
          process.emitWarning(`dlock: could not give back ${batch._outstanding.length} claim(s) (they lapse by themselves): ${e.message}`))
      }
      if (!batch.signal.aborted) batch._ctl.abort(new LeaseLostError('the batch is over'))
    }
    end = turnEnd()
  }
}

// One dlock_claim call: its result (and when it was sent), or null when
// signal was aborted while it waited in the server.  A waiting call is
// cancelled on the server at the abort, and what it may have claimed
// before the cancel arrived is given back (the holder is the loop's).  A
// call that does not wait is not cut short by signal: rows it claims are
// handed out (or given back).
async function claimOnce(loop, n, o, wait, budget, signal) {
  const [text, values] = claimCall(loop, n, o, wait)
  const sent = now()
  if (!(wait > 0 && signal)) {
    const res = await loop.caller.retrying(text, values, budget)
    res.sent = sent
    return res
  }
  try {
    const res = await loop.caller.retrying(text, values, wait * 1000 + budget, { signal, cancel: true })
    res.sent = sent
    return res
  } catch (err) {
    if (!signal.aborted) throw err
    await loop.caller.retrying(loop.sql.unclaimAll, [loop.table.name, loop.holder], 5000).catch((e) =>
      process.emitWarning(`dlock: could not give back what a cancelled claim got (it lapses by itself): ${e.message}`))
    return null
  }
}

// work(pool, table, holder, options, handler): the claim loop with a
// handler, awaited for each batch (with the batch's signal).  Claims it
// neither completed nor gave back are given back when it settles; when it
// rejects, as failed (Batch.fail, with options.retryAfter), reported to
// options.onError(err, batch) (default: a warning), and the loop goes on.
// Resolves when the loop ends (untilEmpty, signal).
async function work(pool, table, holder, opts, handler) {
  if (typeof opts === 'function') [opts, handler] = [{}, opts]
  if (typeof handler !== 'function') throw new TypeError('handler must be a function')
  const o = opts || {}
  for await (const batch of claims(pool, table, holder, o)) {
    try {
      await handler(batch, batch.signal)
    } catch (err) {
      if (o.onError) o.onError(err, batch)
      else process.emitWarning(`dlock: the handler failed on ${batch._outstanding.length} claimed row(s), given back to be retried: ${err && err.message}`)
      await batch.fail().catch((e) =>
        process.emitWarning(`dlock: could not give back ${batch._outstanding.length} claim(s) (they lapse by themselves): ${e.message}`))
    }
  }
}

module.exports = { claims, work, Batch }
