'use strict'
// lib/lease.js - acquire(), withLease() and the Lease they give: renewed
// every ttl/3 in the background, its `signal` aborted when it is lost,
// released with its token.

const core = require('./core')
const { now, Caller, Keeper, NotAcquiredError, LeaseLostError, DlockError, retryable } = core

const ACQUIRE = 'SELECT dlock_acquire($1, $2, $3::interval, $4::interval) AS token'
const RENEW = 'SELECT dlock_renew($1, $2, $3::interval, $4::bigint) AS ok'
const RELEASE = 'SELECT dlock_release($1, $2, $3::bigint) AS ok'
const RELEASE_HOLDER = 'SELECT dlock_release($1, $2) AS ok'
const VALIDATE = 'SELECT dlock_validate($1, $2, $3::bigint) AS ok'

function isPool(x) {
  return x && typeof x.connect === 'function' && typeof x.release !== 'function' &&
    typeof x.getTransactionStatus !== 'function'
}

class Lease {
  constructor(caller, key, holder, ttl, token, sent, onLost) {
    this.key = key
    this.holder = holder
    this.ttl = ttl
    this.token = token // a string (bigint as pg returns it): BigInt(lease.token) to compare
    this.released = null
    this.lostReason = null
    this._caller = caller
    this._ctl = new AbortController()
    this.signal = this._ctl.signal
    this._onLost = onLost
    this._done = false
    this._releasing = null
    this._keeper = new Keeper(ttl * 1000, sent, (deadline, signal) => this._renew(deadline, signal),
      (err) => this._lose(err))
    this._keeper.start()
  }

  async _renew(deadline, signal) {
    const ok = await this._caller.value(RENEW, [this.key, this.holder, core.interval(this.ttl), this.token],
      deadline, { signal })
    return ok === true
  }

  _lose(err) {
    this.lostReason = err.message
    this._ctl.abort(err)
    if (this._onLost) this._onLost(this, err)
  }

  // true once the lease is lost
  get lost() {
    return this.signal.aborted && this.lostReason !== null
  }

  // when the lease lapses unless renewed (performance.now()'s clock, ms)
  get deadline() {
    return this._keeper.deadline
  }

  // seconds left until the lease lapses unless renewed (0 when lost)
  remaining() {
    return this.lost ? 0 : Math.max(0, (this._keeper.deadline - now()) / 1000)
  }

  // throws LeaseLostError if the lease is lost, released, or its ttl ran
  // out since the last confirmed renewal
  check() {
    if (this.lost) throw new LeaseLostError(`lease ${JSON.stringify(this.key)} lost: ${this.lostReason}`)
    if (this._done) throw new LeaseLostError(`lease ${JSON.stringify(this.key)} is not held`)
    if (now() >= this._keeper.deadline) {
      throw new LeaseLostError(`lease ${JSON.stringify(this.key)} lost: no renewal confirmed within the ttl`)
    }
  }

  // Runs text fenced by the token, in one transaction: dlock_validate
  // first, then text.  target: a pg.Pool (a client is checked out, BEGIN
  // ... COMMIT), or a client of yours (inside your open transaction the
  // fence holds until you end it; outside one, BEGIN ... COMMIT).  If the
  // fence fails, text is not run, the lease is declared lost and
  // LeaseLostError is thrown.  Returns text's pg Result.
  async query(target, text, values) {
    this.check()
    if (isPool(target)) {
      const client = await target.connect()
      let err
      try {
        return await this._fenced(client, text, values, 'I')
      } catch (e) {
        err = e
        throw e
      } finally {
        client.release(err && !err.code ? err : undefined)
      }
    }
    if (typeof target.getTransactionStatus !== 'function') {
      throw new TypeError('lease.query needs a pg.Pool, or a client of pg 8.23 or later (getTransactionStatus)')
    }
    return this._fenced(target, text, values, target.getTransactionStatus())
  }

  async _fenced(client, text, values, status) {
    if (status === 'E') throw new DlockError('the client is in a failed transaction: roll it back first')
    const own = status !== 'T'
    if (own) await client.query('BEGIN')
    try {
      const fence = await client.query(VALIDATE, [this.key, this.holder, this.token])
      if (fence.rows[0].ok !== true) {
        this._keeper.declareLost('the fence (dlock_validate) refused the token')
        throw new LeaseLostError(`lease ${JSON.stringify(this.key)} lost: the fence (dlock_validate) refused token ${this.token}`)
      }
      const res = await client.query(text, values)
      if (own) await client.query('COMMIT')
      return res
    } catch (e) {
      if (own) await client.query('ROLLBACK').catch(() => {})
      throw e
    }
  }

  // Stops renewing and releases with the token: the server's answer
  // (false: it was lost already), or null when no server answered before
  // the lease lapsed.  Idempotent.
  release() {
    if (!this._releasing) this._releasing = this._release()
    return this._releasing
  }

  async _release() {
    this._done = true
    await this._keeper.stop()
    const deadline = Math.max(this._keeper.deadline, now() + 2000)
    for (;;) {
      try {
        this.released = (await this._caller.value(RELEASE, [this.key, this.holder, this.token], deadline)) === true
        break
      } catch (err) {
        if (!retryable(err)) throw err
        if (now() + 200 >= deadline) {
          process.emitWarning(`dlock: could not release ${JSON.stringify(this.key)} (it lapses by itself): ${err.message}`)
          break
        }
        await core.sleep(200)
      }
    }
    if (!this.signal.aborted) this._ctl.abort(new LeaseLostError(`lease ${JSON.stringify(this.key)} released`))
    return this.released
  }
}

function leaseOptions(opts) {
  const o = opts || {}
  return {
    ttl: core.seconds(o.ttl === undefined ? 30 : o.ttl, 'ttl'),
    wait: core.seconds(o.wait === undefined ? 0 : o.wait, 'wait', false),
    holder: o.holder === undefined ? core.defaultHolder() : String(o.holder),
    signal: o.signal,
    onLost: o.onLost,
  }
}

// Gives back whatever this holder (unique to this lease) may hold on key,
// after an acquire whose outcome is unknown.
async function forget(caller, key, holder) {
  try {
    await caller.value(RELEASE_HOLDER, [key, holder], now() + 5000)
  } catch (e) {
    process.emitWarning(`dlock: could not give ${JSON.stringify(key)} back (it lapses by itself): ${e.message}`)
  }
}

// acquire(pool, key, {ttl, wait, holder, signal, onLost}) -> Lease
async function acquire(pool, key, opts) {
  if (typeof key !== 'string' || key === '') throw new TypeError('key must be a non-empty string')
  const o = leaseOptions(opts)
  const caller = new Caller(pool)
  const start = now()
  const waitEnd = start + o.wait * 1000
  let tries = 0
  let token
  let sent
  for (;;) {
    tries++
    sent = now()
    const left = Math.max(0, waitEnd - sent)
    try {
      token = await caller.value(ACQUIRE, [key, o.holder, core.interval(o.ttl), core.interval(left / 1000)],
        sent + left + Math.max(o.ttl * 1000, 5000), { signal: o.signal, cancel: true })
      break
    } catch (err) {
      const aborted = o.signal && o.signal.aborted
      if (aborted || !retryable(err) || (tries > 1 && now() >= waitEnd)) {
        if (aborted || retryable(err)) await forget(caller, key, o.holder)
        throw err
      }
      await core.sleep(200)
    }
  }
  if (token === null) {
    throw new NotAcquiredError(`${JSON.stringify(key)} is held by someone else` +
      (o.wait > 0 ? ` (waited ${o.wait} s)` : ''))
  }
  const answered = now()
  if (answered - sent > (o.ttl * 1000) / 6) {
    // it waited: when it was granted is not known; a renewal tells
    sent = now()
    const ok = await caller.value(RENEW, [key, o.holder, core.interval(o.ttl), token], sent + o.ttl * 1000)
    if (ok !== true) throw new LeaseLostError(`${JSON.stringify(key)} was lost before it could be used`)
  }
  const lease = new Lease(caller, key, o.holder, o.ttl, String(token), sent, o.onLost)
  if (o.signal) {
    // the caller's signal ends the work too: abort the lease's signal
    const onAbort = () => {
      if (!lease.signal.aborted) lease._ctl.abort(o.signal.reason)
    }
    if (o.signal.aborted) onAbort()
    else {
      o.signal.addEventListener('abort', onAbort, { once: true })
      lease.release = ((release) => () => {
        o.signal.removeEventListener('abort', onAbort)
        return release()
      })(lease.release.bind(lease))
    }
  }
  return lease
}

// withLease(pool, key, {ttl, wait, holder, signal, onLost}, async (lease, signal) => ...)
// Runs fn while holding key; the lease is released when fn settles, and
// fn's result (or error) is withLease's.  signal is aborted when the
// lease is lost (reason: a LeaseLostError) or opts.signal is aborted.
async function withLease(pool, key, opts, fn) {
  if (typeof opts === 'function') {
    fn = opts
    opts = {}
  }
  if (typeof fn !== 'function') throw new TypeError('withLease needs a function to run')
  const lease = await acquire(pool, key, opts)
  let result
  try {
    result = await fn(lease, lease.signal)
  } catch (err) {
    await lease.release().catch((e) => process.emitWarning(`dlock: releasing ${JSON.stringify(key)} failed: ${e.message}`))
    throw err
  }
  await lease.release()
  return result
}

module.exports = { Lease, acquire, withLease }
