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
    claim: `SELECT * FROM dlock_claim(NULL::${t.name}, $1, $2, $3::interval, $4, $5, $6)`,
    complete: `SELECT k FROM dlock_complete($1::regclass, $2, $3::${t.pktype}[]) AS c(k)`,
    unclaim: `SELECT dlock_unclaim($1::regclass, $2, $3::${t.pktype}[]) AS n`,
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
}

// claims(pool, table, holder, {n, ttl, filter, orderBy, maxAttempts, poll,
// untilEmpty, signal, onLost}): an async iterable of Batches.  When no row
// is to be had, it waits poll seconds and tries again, or ends
// (untilEmpty), or ends when signal is aborted.  Claims neither completed
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
  while (!(signal && signal.aborted)) {
    const sent = now()
    const got = await loop.caller.retrying(loop.sql.claim,
      [holder, n, core.interval(loop.ttl), o.filter ?? null, o.orderBy ?? null, o.maxAttempts ?? null],
      budget) // not cut short by signal: rows it claims are handed out (or given back)
    if (got.rows.length === 0) {
      if (o.untilEmpty) return
      await core.sleep(poll * 1000, signal)
      continue
    }
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
  }
}

module.exports = { claims, Batch }
