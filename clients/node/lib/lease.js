'use strict'
// lib/lease.js - acquire(), withLease() and the Lease they give (a lease,
// a semaphore's slot or a shared lease), acquireAll(), withLeases() and the
// Leases they give (several keys, all or none): acquired, renewed every
// ttl/3 in the background and released with their tokens on a connection of
// their own (made with the pool's settings, never taken from the pool), their
// `signal` aborted when lost.  One lease object per key and holder in the
// process (HolderInUseError).

const core = require('./core')
const { now, Caller, Keeper, NotAcquiredError, LeaseLostError, DlockError, retryable, reserve } = core
const { Target } = require('./target')

function isPool(x) {
  return x && typeof x.connect === 'function' && typeof x.release !== 'function' &&
    typeof x.getTransactionStatus !== 'function'
}

// What Lease and Leases share: renewal, loss, fenced queries, release.
class Held {
  // caller: the lease's own connection (Caller.own), closed for good after
  // the release; unreserve: gives its (key, holder) pairs back
  constructor(caller, target, holder, ttl, tokens, sent, onLost, unreserve) {
    this.holder = holder
    this.ttl = ttl
    this.released = null
    this.lostReason = null
    this._target = target
    this._tokens = tokens // strings (bigint as pg returns it)
    this._caller = caller
    this._ctl = new AbortController()
    this.signal = this._ctl.signal
    this._onLost = onLost
    this._done = false
    this._releasing = null
    this._unreserve = unreserve
    this._keeper = new Keeper(ttl * 1000, sent, (deadline, signal) => this._renew(deadline, signal),
      (err) => this._lose(err))
    this._keeper.start()
  }

  async _renew(deadline, signal) {
    const [text, values] = this._target.renew(this.holder, this.ttl, this._tokens)
    const ok = await this._caller.value(text, values, deadline, { signal })
    return ok === true
  }

  _lose(err) {
    this.lostReason = err.message
    this._ctl.abort(err)
    this._caller.close() // nothing is renewed after; the release makes another
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
    const label = this._target.label
    if (this.lost) throw new LeaseLostError(`${label} lost: ${this.lostReason}`)
    if (this._done) throw new LeaseLostError(`${label} is not held`)
    if (now() >= this._keeper.deadline) {
      throw new LeaseLostError(`${label} lost: no renewal confirmed within the ttl`)
    }
  }

  // Runs text fenced by the token(s), in one transaction: dlock_validate
  // (of every key) first, then text.  target: a pg.Pool (a client is checked out, BEGIN
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
      const [ftext, fvalues] = this._target.validate(this.holder, this._tokens)
      const fence = await client.query(ftext, fvalues)
      if (fence.rows[0].r !== true) {
        this._keeper.declareLost('the fence (dlock_validate) refused the token')
        const shown = this._target.multi ? `tokens ${this._tokens.join(', ')}` : `token ${this._tokens[0]}`
        throw new LeaseLostError(`${this._target.label} lost: the fence (dlock_validate) refused ${shown}`)
      }
      const res = await client.query(text, values)
      if (own) await client.query('COMMIT')
      return res
    } catch (e) {
      if (own) await client.query('ROLLBACK').catch(() => {})
      throw e
    }
  }

  // Stops renewing and releases with the token(s): the server's answer
  // (false: lost already; of several keys, one at least), or null when no
  // server answered before the lease lapsed.  Idempotent.
  release() {
    if (!this._releasing) this._releasing = this._release()
    return this._releasing
  }

  async _release() {
    this._done = true
    try {
      await this._releaseCall()
    } finally {
      this._caller.close(true)
      this._unreserve() // only now: another lease of this holder would get this token
    }
    if (!this.signal.aborted) this._ctl.abort(new LeaseLostError(`${this._target.label} released`))
    return this.released
  }

  async _releaseCall() {
    await this._keeper.stop()
    const deadline = Math.max(this._keeper.deadline, now() + 2000)
    for (;;) {
      try {
        const [text, values] = this._target.release(this.holder, this._tokens)
        this.released = (await this._caller.value(text, values, deadline)) === true
        break
      } catch (err) {
        if (!retryable(err)) throw err
        if (now() + 200 >= deadline) {
          process.emitWarning(`dlock: could not release ${this._target.label} (it lapses by itself): ${err.message}`)
          break
        }
        await core.sleep(200)
      }
    }
  }
}

// A lease on one key: a lease, one of `slots` places of a counting
// semaphore, or a shared lease.
class Lease extends Held {
  constructor(caller, target, holder, ttl, tokens, sent, onLost, unreserve) {
    super(caller, target, holder, ttl, tokens, sent, onLost, unreserve)
    this.key = target.keys[0]
    this.slots = target.slots
    this.shared = target.shared
    this.token = tokens[0] // a string (bigint as pg returns it): BigInt(lease.token) to compare
  }
}

// Several keys, all or none: each an ordinary lease with its own token;
// lost as soon as any of them is.
class Leases extends Held {
  constructor(caller, target, holder, ttl, tokens, sent, onLost, unreserve) {
    super(caller, target, holder, ttl, tokens, sent, onLost, unreserve)
    this.keys = target.unique.slice()
    this.tokens = Object.fromEntries(target.unique.map((k, i) => [k, tokens[i]]))
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

// Gives back whatever this holder (unique to this lease) may hold, after an
// acquire whose outcome is unknown.
async function forget(caller, target, holder) {
  try {
    const [text, values] = target.forget(holder, null)
    await caller.value(text, values, now() + 5000)
  } catch (e) {
    process.emitWarning(`dlock: could not give ${target.label} back (it lapses by itself): ${e.message}`)
  }
}

// acquires target and gives a Kind (Lease or Leases) holding it, on a
// connection of its own (Caller.own): if that cannot be opened, the acquire
// fails as on any connection failure (tried again while wait lasts, once at
// least) and nothing is held; the application's pool is never used instead.
async function take(pool, target, opts, Kind) {
  const o = leaseOptions(opts)
  const caller = Caller.own(pool)
  const unreserve = reserve(target.unique, o.holder, target.label)
  try {
    return await takeOn(caller, target, o, Kind, unreserve)
  } catch (err) {
    caller.close(true)
    unreserve()
    throw err
  }
}

async function takeOn(caller, target, o, Kind, unreserve) {
  const start = now()
  const waitEnd = start + o.wait * 1000
  let tries = 0
  let tokens
  let sent
  for (;;) {
    tries++
    sent = now()
    const left = Math.max(0, waitEnd - sent)
    const [text, values] = target.acquire(o.holder, o.ttl, left / 1000)
    try {
      tokens = target.tokens(await caller.value(text, values,
        sent + left + Math.max(o.ttl * 1000, 5000), { signal: o.signal, cancel: true }))
      break
    } catch (err) {
      const aborted = o.signal && o.signal.aborted
      if (aborted || !retryable(err) || (tries > 1 && now() >= waitEnd)) {
        if (aborted || retryable(err)) await forget(caller, target, o.holder)
        throw err
      }
      await core.sleep(200)
    }
  }
  if (tokens === null) {
    throw new NotAcquiredError(`${target.label}: held by someone else` +
      (o.wait > 0 ? ` (waited ${o.wait} s)` : ''))
  }
  const answered = now()
  if (answered - sent > (o.ttl * 1000) / 6) {
    // it waited: when it was granted is not known; a renewal tells
    sent = now()
    const [text, values] = target.renew(o.holder, o.ttl, tokens)
    const ok = await caller.value(text, values, sent + o.ttl * 1000)
    if (ok !== true) throw new LeaseLostError(`${target.label} was lost before it could be used`)
  }
  const lease = new Kind(caller, target, o.holder, o.ttl, tokens, sent, o.onLost, unreserve)
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

// acquire(pool, key, {ttl, wait, holder, signal, onLost, slots, shared}) -> Lease
async function acquire(pool, key, opts) {
  const o = opts || {}
  return take(pool, Target.one(key, o.slots, o.shared), o, Lease)
}

// acquireAll(pool, keys, {ttl, wait, holder, signal, onLost}) -> Leases:
// every key or none
async function acquireAll(pool, keys, opts) {
  return take(pool, Target.all(keys), opts, Leases)
}

// runs fn while held (acquired by get()): released when fn settles
async function withHeld(get, label, fn) {
  if (typeof fn !== 'function') throw new TypeError(`${label} needs a function to run`)
  const held = await get()
  let result
  try {
    result = await fn(held, held.signal)
  } catch (err) {
    await held.release().catch((e) => process.emitWarning(`dlock: releasing ${held._target.label} failed: ${e.message}`))
    throw err
  }
  await held.release()
  return result
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
  return withHeld(() => acquire(pool, key, opts), 'withLease', fn)
}

// withLeases(pool, keys, {ttl, wait, holder, signal, onLost}, async (leases, signal) => ...)
// The same for every key of keys or none (acquireAll).
async function withLeases(pool, keys, opts, fn) {
  if (typeof opts === 'function') {
    fn = opts
    opts = {}
  }
  return withHeld(() => acquireAll(pool, keys, opts), 'withLeases', fn)
}

module.exports = { Lease, Leases, acquire, acquireAll, withLease, withLeases }
