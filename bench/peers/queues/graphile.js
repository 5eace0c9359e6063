'use strict';
// bench/peers/queues/graphile.js: graphile-worker 0.18.0 as a contender in bench/peers/claims.js
// (issue 39), behind the queue adapter interface (setup, enqueue, abandon, clear, backlog, run,
// latency, staleComplete, close). This file owns the graphile-worker side only.
//
// Settings (graphile-worker defaults unless listed; why beside each):
//   - Schema `graphile_worker`, installed by its own migrations (runMigrations) in setup().
//   - One runner (run()) per timed run; workers = its `concurrency` (concurrentJobs).
//     pollInterval 2000 ms (default; idle workers are woken by LISTEN "jobs:insert", which the
//     runner always holds, the poll only catches future-dated jobs and missed notifications),
//     preparedStatements true, useNodeTime false, minResetLockedInterval 480000 /
//     maxResetLockedInterval 600000 (stale locks, older than 4 hours, are reset every 8-10 min).
//   - maxPoolSize max(10, workers + 2) (default 10): its docs' advice, "10 or concurrentJobs + 2,
//     whichever is larger"; at 16 workers the default 10 would make workers queue on the pool.
//   - batch 1: the defaults, localQueue.size -1 (each worker fetches its own job, one get_job
//     statement per job) and completeJobBatchDelay -1 (one DELETE per job).
//     batch 20: its documented batching (worker.graphile.org/docs/performance#batching):
//     localQueue.size 20 (the pool fetches and locks up to 20 jobs in one statement and hands them
//     to its workers) and completeJobBatchDelay 0 (completions issued in the same tick go out as one
//     DELETE ... USING unnest($1)); failJobBatchDelay left at -1 (no job fails here).
//   - The logger: its Logger with a sink that drops info/debug (the default logs every completed
//     job to the console, i.e. stdout, which the drivers keep for JSON); warnings and errors go to
//     ctx.log (stderr).
//
// Per call, in round trips:
//   - enqueue(): graphile_worker.add_jobs(job_spec[]) (its bulk SQL API), 5000 jobs a statement.
//   - run(): batch 1, per job: one get_job UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1)
//     and one DELETE (which the worker does not wait for before fetching its next job): 2 round
//     trips a job. batch 20: one fetch per up to 20 jobs and one DELETE per batch of completions.
//     `done` counts its 'job:complete' events (emitted when the handler has returned and the
//     completion has been issued) inside the window.
//   - latency(): the insert is `SELECT graphile_worker.add_job(...)` on this process's pg client
//     (autocommit; the add_job trigger NOTIFYs jobs:insert); an idle worker woken by the NOTIFY
//     issues one get_job (1 round trip) before its task starts.
//   - abandon(): the UPDATE its get_job makes (attempts + 1, locked_by, locked_at = now()) over the
//     first n jobs in its order (priority, run_at), by a locked_by no live runner has: a crashed
//     runner's jobs, rescued by resetLockedAt only after 4 hours. Then VACUUM (ANALYZE) of the
//     jobs table (untimed), as autovacuum leaves it shortly after, so the runs do not measure the
//     dead index entries of the abandon step itself.
//   - staleComplete(): runner A's task takes the job and stalls; the job's locked_at is moved
//     4 hours and 1 minute back by an UPDATE (its expiry is 4 hours, hard-coded); runner B, started
//     with minResetLockedInterval 100 / maxResetLockedInterval 500 (so its resetLockedAt sweep runs
//     within 0.5 s instead of 0-60 s after start), resets the lock and picks the job up; then A's
//     task returns and A's runner completes it the way it completes every job: `DELETE FROM
//     _private_jobs WHERE id = $1` (dist/sql/completeJobs.js), with no check of locked_by.

const { run, runMigrations, Logger } = require('graphile-worker');
const pg = require('pg');

const TASK = 'bench_job';
const PROBE_TASK = 'bench_probe';
const SCHEMA = 'graphile_worker';
const { sleep, payload, withTimeout, trialTimer } = require('./util');


function deferred() {
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  return { promise, resolve };
}

module.exports = {
  name: 'graphile-worker',
  meta: 'graphile-worker 0.18.0, its own schema (migrations); one runner per run, concurrency = workers, ' +
    'LISTEN jobs:insert with pollInterval 2000 ms (defaults); batch 1: defaults (get_job and a DELETE per job); ' +
    'batch 20: localQueue.size 20 and completeJobBatchDelay 0 (its documented batching); jobs locked 4 h',
  async open(ctx) {
    const conn = { host: ctx.pg.host, port: Number(ctx.pg.port), user: ctx.pg.user, database: ctx.pg.database };
    const connectionString =
      `postgres://${encodeURIComponent(conn.user)}@${conn.host}:${conn.port}/${encodeURIComponent(conn.database)}`;
    const bytes = ctx.payloadBytes || 200;
    const log = ctx.log || ((m) => process.stderr.write(m + '\n'));
    const logger = new Logger((scope) => (level, message) => {
      if (level === 'error' || level === 'warning') log(`graphile-worker ${level}: ${message}`);
    });
    const admin = new pg.Client({ ...conn, application_name: 'bench-peers-graphile-admin' });
    await admin.connect();

    function start(options) {
      return run({
        connectionString,
        noHandleSignals: true,
        logger,
        ...options,
      });
    }

    const q = {
      async setup() {
        await runMigrations({ connectionString, logger });
        await q.clear();
      },

      async enqueue(n) {
        const chunk = 5000;
        for (let done = 0; done < n; done += chunk) {
          const k = Math.min(chunk, n - done);
          await admin.query(
            `SELECT count(*) FROM ${SCHEMA}.add_jobs(array(
               SELECT row($1::text, $2::json, null, null, null, null, null, null)::${SCHEMA}.job_spec
               FROM generate_series(1, $3::int)))`,
            [TASK, JSON.stringify(payload(bytes)), k]);
        }
      },

      async abandon(n) {
        const r = await admin.query(
          `WITH j AS (
             SELECT jobs.id FROM ${SCHEMA}._private_jobs AS jobs
             WHERE jobs.is_available = true AND run_at <= now()
             ORDER BY priority ASC, run_at ASC
             LIMIT $1 FOR UPDATE SKIP LOCKED)
           UPDATE ${SCHEMA}._private_jobs AS jobs
             SET attempts = jobs.attempts + 1, locked_by = $2::text, locked_at = now()
             FROM j WHERE jobs.id = j.id`,
          [n, `dead-worker-${process.pid}`]);
        if (r.rowCount !== n) throw new Error(`graphile-worker abandon: only ${r.rowCount} of ${n} jobs to lock`);
        // as autovacuum would have left them by the time anyone measures (same as the pg-boss adapter)
        await admin.query(`VACUUM (ANALYZE) ${SCHEMA}._private_jobs`);
      },

      async clear() {
        await admin.query(`DELETE FROM ${SCHEMA}._private_jobs`);
        await admin.query(`UPDATE ${SCHEMA}._private_job_queues SET locked_at = null, locked_by = null`);
        await admin.query(`VACUUM ${SCHEMA}._private_jobs`);
      },

      async backlog() {
        const r = await admin.query(
          `SELECT count(*)::int AS n FROM ${SCHEMA}._private_jobs WHERE is_available = true`);
        return r.rows[0].n;
      },

      async run({ workers, batch, seconds }) {
        let counting = false;
        let done = 0;
        const batching = batch > 1 ? { preset: { worker: { localQueue: { size: batch }, completeJobBatchDelay: 0 } } } : {};
        const runner = await start({
          concurrency: workers,
          maxPoolSize: Math.max(10, workers + 2),
          taskList: { [TASK]: async () => {} },
          ...batching,
        });
        runner.events.on('job:complete', ({ error }) => { if (counting && !error) done++; });
        counting = true;
        await sleep(seconds * 1000);
        counting = false;
        await runner.stop();
        return { done };
      },

      async latency({ workers, trials }) {
        const timer = trialTimer();
        const runner = await start({
          concurrency: workers,
          maxPoolSize: Math.max(10, workers + 2),
          taskList: { [TASK]: async (p) => { if (p) timer.started(p.trial); } },
        });
        try {
          return await timer.run(trials, (i) => admin.query(`SELECT ${SCHEMA}.add_job($1::text, $2::json)`,
            [TASK, JSON.stringify(payload(bytes, { trial: i }))]), 'graphile-worker');
        } finally {
          await runner.stop();
        }
      },

      async staleComplete() {
        await admin.query(`DELETE FROM ${SCHEMA}._private_jobs WHERE task_id IN
          (SELECT id FROM ${SCHEMA}._private_tasks WHERE identifier = $1)`, [PROBE_TASK]);
        const startedA = deferred();
        const gateA = deferred();
        const completedA = deferred();
        const startedB = deferred();
        const gateB = deferred();
        const runnerA = await start({
          concurrency: 1,
          taskList: { [PROBE_TASK]: async (p, helpers) => { startedA.resolve(helpers.job); await gateA.promise; } },
        });
        runnerA.events.on('job:complete', ({ job }) => completedA.resolve(job));
        let runnerB = null;
        try {
          const r = await admin.query(`SELECT (${SCHEMA}.add_job($1::text, $2::json)).id`, [PROBE_TASK, JSON.stringify(payload(bytes))]);
          const id = String(r.rows[0].id);
          const jobA = await withTimeout(startedA.promise, 30000, 'graphile-worker probe: A');
          if (String(jobA.id) !== id) throw new Error('graphile-worker probe: A took another job');
          // A stalls; its expiry (4 hours since locked_at) is reached by moving locked_at back
          await admin.query(
            `UPDATE ${SCHEMA}._private_jobs SET locked_at = locked_at - interval '4 hours 1 minute' WHERE id = $1`, [id]);
          runnerB = await start({
            concurrency: 1,
            minResetLockedInterval: 100,
            maxResetLockedInterval: 500,
            taskList: { [PROBE_TASK]: async (p, helpers) => { startedB.resolve(helpers.job); await gateB.promise; } },
          });
          const jobB = await withTimeout(startedB.promise, 30000, 'graphile-worker probe: B');
          if (String(jobB.id) !== id) throw new Error('graphile-worker probe: B took another job');
          const before = (await admin.query(
            `SELECT locked_by, attempts FROM ${SCHEMA}._private_jobs WHERE id = $1`, [id])).rows[0];
          // A's task returns: A's runner completes the job its usual way
          gateA.resolve();
          await withTimeout(completedA.promise, 30000, 'graphile-worker probe: A completing');
          let after = null;
          for (let i = 0; i < 20; i++) { // the DELETE is issued after job:complete; let it land
            await sleep(50);
            after = (await admin.query(`SELECT locked_by, attempts FROM ${SCHEMA}._private_jobs WHERE id = $1`, [id])).rows[0];
            if (!after) break;
          }
          const ok = !!after && after.locked_by === before.locked_by;
          const detail =
            `A's runner took job ${id} and its task stalled; locked_at was moved 4 h 1 min back by an UPDATE; ` +
            `runner B's resetLockedAt (minResetLockedInterval 100 ms) unlocked it and B took it ` +
            `(attempts ${jobB.attempts}, locked_by B's pool); A's task then returned and A's completion ` +
            (after ? `left B's job in place (locked_by ${after.locked_by === before.locked_by ? 'B' : after.locked_by})`
              : `(DELETE ... WHERE id = $1, no lock check) deleted B's job while B was still running it`);
          return { ok, detail };
        } finally {
          gateA.resolve();
          gateB.resolve();
          await runnerA.stop();
          if (runnerB) await runnerB.stop();
          await admin.query(`DELETE FROM ${SCHEMA}._private_jobs WHERE task_id IN
            (SELECT id FROM ${SCHEMA}._private_tasks WHERE identifier = $1)`, [PROBE_TASK]);
        }
      },

      async close() {
        await admin.end();
      },
    };
    return q;
  },
};
