"""dlock: PostgreSQL lease locks with fencing tokens, and row claims, from Python.

A thin layer over the dlock extension's SQL functions (psycopg 3)::

    import dlock

    with dlock.lease("dbname=app", "nightly-report", ttl=30, wait=10) as lease:
        lease.execute(cur, "UPDATE report_state SET last_run = now() WHERE id = 1")

    with dlock.leases("dbname=app", ["account/4", "account/17"], ttl=30, wait=10) as held:
        held.tokens["account/4"]      # all keys or none; lease(..., slots=3), lease(..., shared=True)

    for batch in dlock.claims("dbname=app", "sms", "sender-3", n=10, filter="status = 0"):
        ...
        batch.complete(batch.keys)

``dlock.aio`` has the same for asyncio.  See the README of clients/python.
"""
from ._claims import Batch, Claims, claims, work
from ._lease import Lease, Leases, lease, leases
from .errors import DatabaseError, Error, HolderInUse, LeaseLost, NotAcquired, Timeout

__version__ = "0.4.0"

__all__ = [
    "lease", "Lease", "leases", "Leases", "claims", "Claims", "Batch", "work",
    "Error", "NotAcquired", "LeaseLost", "HolderInUse", "DatabaseError", "Timeout",
    "__version__",
]
