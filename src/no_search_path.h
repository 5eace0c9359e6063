/*-------------------------------------------------------------------------
 *
 * no_search_path.h
 *		The dlock functions that run without a pinned search_path, and why
 *		each is safe: the one list of them.
 *
 * A SET search_path clause protects a function that runs SQL or looks a
 * name up through search_path: nothing a role creates in a schema early in
 * its search_path can then stand in for the objects the function means.
 * It also costs every call a save and restore of the settings
 * (fmgr_security_definer: ProcessGUCArray, then AtEOXact_GUC, which on
 * PostgreSQL 15 walks every setting).  The functions below run no SQL
 * (no SPI, no parser, planner or executor of their own) and resolve no
 * name through search_path, so the pin protects nothing in them and they
 * go without it (dlock--0.3--0.4.sql, "search_path on functions that run
 * no SQL").  What they do instead:
 *
 *  - dlock's own table, index and sequence are found by schema and name,
 *    get_namespace_oid("dlock") then get_relname_relid(name, that schema)
 *    (base_store.c, base_token.c): the schema is named, search_path is not read;
 *  - rows are read and written through the primary key index and the heap
 *    directly (lease_store.c, claim_store.c), by OID;
 *  - a claim table arrives as an OID (a regclass argument is resolved by
 *    the caller's own query, in the caller's search_path, before the call);
 *    its key's type, operators and support functions are found by OID in
 *    the catalogs (claim_target.c);
 *  - key conversions of types whose text depends on settings, among them
 *    the reg* types that name objects relative to search_path, run under
 *    fixed settings with search_path = pg_catalog (dlock_claim_io_begin);
 *    a key type's functions written by the caller run as the caller, as
 *    they would in the caller's own query;
 *  - transaction-end work (lease_xact.c: wake-ups, the release's flush) runs in
 *    callbacks after the function has returned, where a SET clause would
 *    not apply anyway.
 *
 * Each entry is DLOCK_NO_SEARCH_PATH("name(argument types)", C symbol),
 * with the argument types as oidvectortypes() writes them.  Checked by:
 *  - sql/security_pins.sql: every dlock function without a search_path in
 *    pg_proc.proconfig is on this list (or is dlock_claim, below), every
 *    function on it has no pin, and its C symbol is the one named here;
 *  - t/092_no_search_path.pl: in the installed dlock.so, no function
 *    reachable by direct call from a listed symbol calls SPI, the parser
 *    or the executor, or a function that resolves names through
 *    search_path (regclassin, to_regclass, RangeVarGetRelid,
 *    LookupFuncName, OpernameGetOprid, typenameTypeId, format_type...).
 *
 * Not on this list, and also without the pin on purpose: dlock_claim,
 * whose filter and order_by are the caller's SQL and resolve names as the
 * caller's own queries do; its internal queries pin search_path for
 * themselves (base_spi.c), and the parts of its query dlock writes name
 * their schemas.
 *
 * This file is read by the tests, not compiled into dlock.
 *
 *-------------------------------------------------------------------------
 */

/*
 * dlock_acquire (since 0.5 one function, slots DEFAULT 1: a lease, or a
 * counting semaphore's slot; 0.4's four-argument one, dlock_acquire_sql,
 * was the same with slots 1): reads and writes the key's rows of
 * dlock.lease directly
 * (lease_decide.c, lease_store.c), draws the token with nextval_internal on the
 * sequence found by OID (base_token.c), waits in shared memory (lease_acquire.c,
 * wait_queue.c).  One grant in 1024 also asks for a sweep of idle rows
 * (maint_sweep.c), which runs as SQL at the pre-commit of the transaction, after
 * the function has returned (when a pinned search_path would be gone
 * anyway), through base_spi.c, which pins its own settings.
 */
DLOCK_NO_SEARCH_PATH("dlock_acquire(text, text, interval, interval, integer)", dlock_acquire_slots_sql)

/* dlock_acquire_shared (shared leases, issue 26): as dlock_acquire. */
DLOCK_NO_SEARCH_PATH("dlock_acquire_shared(text, text, interval, interval)", dlock_acquire_shared_sql)

/*
 * dlock_release: reads and writes the key's row directly; a hand-over to
 * the head waiter draws a token as above and grants in the same write
 * (lease_handover.c, wait_queue.c).
 */
DLOCK_NO_SEARCH_PATH("dlock_release(text, text, bigint)", dlock_release_sql)

/* dlock_renew: reads and updates the key's row directly. */
DLOCK_NO_SEARCH_PATH("dlock_renew(text, text, interval, bigint)", dlock_renew_sql)

/* dlock_validate: reads the key's row directly and takes the key lock. */
DLOCK_NO_SEARCH_PATH("dlock_validate(text, text, bigint)", dlock_validate_sql)

/*
 * dlock_claim_unheld with a ticket: the per-row check of a claim query,
 * which runs it in the caller's search_path anyway (dlock_claim has no pin);
 * the table comes as an OID, the key's text form as described above, and the
 * look-up is a probe of dlock.claim's primary key (claim_unheld.c,
 * claim_store_probe.c); a ticket not the claim's is an error.
 * dlock_claim_unheld(tbl, key), without a ticket, reads the row as the
 * caller (SQL) and keeps its pin.
 */
DLOCK_NO_SEARCH_PATH("dlock_claim_unheld(regclass, anyelement, bigint)", dlock_claim_unheld_ticket_sql)

/*
 * dlock_claim_unheld with a ticket and a group: the same check for a claim
 * with group_by; the group comes as text, and a group's count is one scan
 * of dlock.claim's claim_group index, found by schema and name
 * (claim_group.c, claim_store_probe.c).
 */
DLOCK_NO_SEARCH_PATH("dlock_claim_unheld(regclass, anyelement, bigint, text)", dlock_claim_unheld_group_sql)

/*
 * dlock_claimed: the claim fence; the table as an OID, the key as above,
 * one probe of dlock.claim's primary key and the row's key lock
 * (claim_manage.c, claim_store.c).
 */
DLOCK_NO_SEARCH_PATH("dlock_claimed(regclass, anyelement, text)", dlock_claimed_sql)

/*
 * dlock_acquire_all: sorts its keys in memory (memcmp, no collation) and
 * calls what dlock_acquire calls, key by key (lease_acquire.c, lease_grant.c), then
 * dlock_lease_renew's direct row update; the internal subtransaction
 * around them runs no SQL (lease_multi.c).
 */
DLOCK_NO_SEARCH_PATH("dlock_acquire_all(text[], text, interval, interval)", dlock_acquire_all_sql)
