'use strict'
// pg-dlock: dlock (PostgreSQL lease locks with fencing tokens, and row
// claims) from Node.js, over node-postgres pools.  A thin layer over the
// extension's SQL functions; see README.md.

const core = require('./lib/core')
const { Lease, Leases, acquire, acquireAll, withLease, withLeases } = require('./lib/lease')
const { claims, work, Batch } = require('./lib/claims')

module.exports = {
  withLease,
  acquire,
  withLeases,
  acquireAll,
  claims,
  work,
  Lease,
  Leases,
  Batch,
  DlockError: core.DlockError,
  NotAcquiredError: core.NotAcquiredError,
  LeaseLostError: core.LeaseLostError,
  DatabaseError: core.DatabaseError,
  TimeoutError: core.TimeoutError,
  HolderInUseError: core.HolderInUseError,
  version: require('./package.json').version,
}
