'use strict'
// lib/target.js - what one lease object holds, and the SQL that acquires,
// renews, releases and fences it:
//   - one key (Target.one): a lease (dlock_acquire), one of `slots` places
//     of a counting semaphore (dlock_acquire(..., slots)), or a shared lease
//     (dlock_acquire_shared); renewed, released and fenced as a lease, with
//     its token;
//   - several keys, all or none (Target.all, dlock_acquire_all): one token
//     per key, each an ordinary lease, renewed, released and fenced
//     together in one statement (over unnest of the keys and their tokens).
// Each statement is one call without session state (pgbouncer in
// transaction mode).  The arguments are checked here, before any call.

const core = require('./core')

const ACQUIRE = 'SELECT dlock_acquire($1, $2, $3::interval, $4::interval) AS r'
const ACQUIRE_SLOTS = 'SELECT dlock_acquire($1, $2, $3::interval, $4::interval, $5::integer) AS r'
const ACQUIRE_SHARED = 'SELECT dlock_acquire_shared($1, $2, $3::interval, $4::interval) AS r'
const RENEW = 'SELECT dlock_renew($1, $2, $3::interval, $4::bigint) AS r'
const RELEASE = 'SELECT dlock_release($1, $2, $3::bigint) AS r'
const RELEASE_HOLDER = 'SELECT dlock_release($1, $2) AS r'
const VALIDATE = 'SELECT dlock_validate($1, $2, $3::bigint) AS r'

const ACQUIRE_ALL = 'SELECT dlock_acquire_all($1::text[], $2, $3::interval, $4::interval)::text[] AS r'
// bool_and reads every row: each key is renewed (released, fenced); true
// only when every one was
const RENEW_ALL = 'SELECT bool_and(dlock_renew(k, $1, $2::interval, t)) AS r FROM unnest($3::text[], $4::bigint[]) AS u(k, t)'
const RELEASE_ALL = 'SELECT bool_and(dlock_release(k, $1, t)) AS r FROM unnest($2::text[], $3::bigint[]) AS u(k, t)'
const RELEASE_ALL_HOLDER = 'SELECT bool_and(dlock_release(k, $1)) AS r FROM unnest($2::text[]) AS u(k)'
const VALIDATE_ALL = 'SELECT bool_and(dlock_validate(k, $1, t)) AS r FROM unnest($2::text[], $3::bigint[]) AS u(k, t)'

function checkKey(key, name = 'key') {
  if (typeof key !== 'string' || key === '') throw new TypeError(`${name} must be a non-empty string`)
  return key
}

class Target {
  constructor(keys, slots, shared, multi) {
    this.keys = keys // as given (the acquire)
    this.unique = [...new Set(keys)] // each once, in order (renew, release, fence)
    this.slots = slots
    this.shared = shared
    this.multi = multi
    this.label = multi ? `leases ${JSON.stringify(this.unique)}` : `lease ${JSON.stringify(keys[0])}`
    this.fn = multi ? 'dlock_acquire_all' : shared ? 'dlock_acquire_shared' : 'dlock_acquire'
  }

  // a lease on key; with slots, one of slots places of a counting
  // semaphore; with shared, a shared lease
  static one(key, slots, shared) {
    checkKey(key)
    if (slots !== undefined && slots !== null) {
      if (!Number.isInteger(slots)) throw new TypeError('slots must be an integer (or undefined for a lease)')
      if (slots < 1) throw new RangeError('slots must be at least 1')
      if (shared) throw new TypeError('slots and shared do not go together: a shared lease has any number of holders')
    } else {
      slots = null
    }
    return new Target([key], slots, Boolean(shared), false)
  }

  // every key of keys, or none
  static all(keys) {
    if (!Array.isArray(keys)) throw new TypeError('keys must be an array of key strings')
    if (keys.length === 0) throw new RangeError('keys must not be empty')
    return new Target(keys.map((k) => checkKey(k, 'every key')), null, false, true)
  }

  acquire(holder, ttl, wait) {
    const t = core.interval(ttl)
    const w = core.interval(wait)
    if (this.multi) return [ACQUIRE_ALL, [this.keys, holder, t, w]]
    if (this.shared) return [ACQUIRE_SHARED, [this.keys[0], holder, t, w]]
    if (this.slots !== null) return [ACQUIRE_SLOTS, [this.keys[0], holder, t, w, this.slots]]
    return [ACQUIRE, [this.keys[0], holder, t, w]]
  }

  // the tokens (strings, in the order of unique) from the acquire's
  // answer, or null when not acquired
  tokens(answer) {
    if (answer === null || answer === undefined) return null
    if (!this.multi) return [String(answer)]
    const byKey = new Map()
    this.keys.forEach((k, i) => byKey.set(k, String(answer[i])))
    return this.unique.map((k) => byKey.get(k))
  }

  renew(holder, ttl, tokens) {
    const t = core.interval(ttl)
    if (this.multi) return [RENEW_ALL, [holder, t, this.unique, tokens]]
    return [RENEW, [this.keys[0], holder, t, tokens[0]]]
  }

  release(holder, tokens) {
    if (this.multi) return [RELEASE_ALL, [holder, this.unique, tokens]]
    return [RELEASE, [this.keys[0], holder, tokens[0]]]
  }

  // gives back what holder may hold (tokens unknown: by holder)
  forget(holder, tokens) {
    if (tokens) return this.release(holder, tokens)
    if (this.multi) return [RELEASE_ALL_HOLDER, [holder, this.unique]]
    return [RELEASE_HOLDER, [this.keys[0], holder]]
  }

  validate(holder, tokens) {
    if (this.multi) return [VALIDATE_ALL, [holder, this.unique, tokens]]
    return [VALIDATE, [this.keys[0], holder, tokens[0]]]
  }
}

module.exports = { Target }
