'use strict';
// bench/peers/queues/pgboss.js: pg-boss 12.38.0 as a contender in bench/peers/claims.js (issue 39),
// behind the queue adapter interface (setup, enqueue, abandon, clear, backlog, run, latency,
// staleComplete, close). This file owns the pg-boss side only; the runner owns rounds and output.
//
// Settings (pg-boss defaults unless listed; why beside each):
//   - One PgBoss instance per adapter, its own schema `pgboss` installed by start() (migrate: true).
//     supervise: true, schedule: true, superviseIntervalSeconds 60, maintenanceIntervalSeconds 86400,
//     monitorIntervalSeconds 60, queueCacheIntervalSeconds 60: all defaults, so its maintenance
//     runs (or not) during a timed window as it would in production.
//   - max: 24 pool connections (default 10): 16 workers each need a connection for their
//     statements, plus the LISTEN connection and maintenance; with 10, 16 workers would queue on
//     the pool, not on PostgreSQL.
//   - useListenNotify: true and the queue's notify: true: pg-boss's documented low-latency
//     dispatch (docs/api/workers.md, "Low-latency dispatch with LISTEN/NOTIFY"); without it an idle
//     work() worker polls every pollingIntervalSeconds (default 2 s), which is what latency() would
//     then measure. Polling stays on as the backstop (notifyPollingIntervalSeconds default 30).
//   - The queue: policy standard, expireInSeconds 86400 (default 900): a job fetched by a dead
//     worker must stay active through the whole benchmark (abandon()); 24 h is pg-boss's maximum.
//     retryLimit 2, deleteAfterSeconds 7 days (completed rows stay in the table, as shipped).
//
// Per call, in round trips (statements; each is autocommit through pg-boss's pg pool):
//   - run(): `workers` loops of boss.fetch(name, {batchSize}) then boss.complete(name, jobs):
//     2 round trips per batch (fetch: one UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED);
//     complete: one UPDATE ... WHERE id = ANY AND the attempt fence). Not work(): a work() worker
//     sleeps pollingIntervalSeconds (default 2 s) after every fetch that is not a full batch, so at
//     batch 1 it does 1 job per worker per 2 s ("The default options for work() is 1 job every 2
//     seconds", docs/api/workers.md); its burst triggers are burstWhenBatchFull (ignored at batch 1)
//     and burstWhenReadyExceeds (reads a queue-stats cache refreshed every 60 s). fetch/complete is
//     the same two statements work() issues per batch, without the sleep. complete() is passed the
//     fetched jobs ({id, retryCount}), as work() settles, so it is fenced to the fetched attempt.
//   - latency(): one work() registration with localConcurrency = workers (v12's documented
//     concurrency option: N workers each polling and fetching on their own), batchSize 1; the
//     insert is boss.send() (one INSERT ... with pg_notify, autocommit); a worker woken by NOTIFY
//     issues one fetch (1 round trip) before its handler starts.
//   - abandon(): boss.fetch in batches of 5000 by a worker that never completes; then VACUUM
//     (ANALYZE) of the job table (untimed), as autovacuum leaves it a minute later: right after the
//     claims, each fetch's index scan and its planning walk the n dead index entries the claims left
//     (measured: 3-4 ms a fetch, 12-41 jobs/s at batch 1 with 100,000 fresh claims).
//   - staleComplete(): boss.fetch with the job's expireInSeconds 1 (the smallest allowed); the
//     rescue is pg-boss's own supervision pass, triggered with boss.supervise(name) (public API)
//     instead of waiting for the 60 s timer; then boss.fetch by B; then A's complete() both ways.

const { PgBoss } = require('pg-boss');
const pg = require('pg');

const NAME = 'bench_peers';
const PROBE = 'bench_peers_probe';
const SCHEMA = 'pgboss';
const { sleep, nowNs, payload, withTimeout, trialTimer } = require('./util');


module.exports = {
  name: 'pg-boss',
  meta: 'pg-boss 12.38.0, its own schema and indexes; run(): fetch({batchSize}) + complete(name, jobs) loops ' +
    '(2 round trips per batch; work() sleeps its 2 s poll after a batch that is not full); latency(): work() with ' +
    'localConcurrency = workers, useListenNotify and the queue\'s notify (its low-latency mode; else a 2 s poll); ' +
    'pool max 24; expireInSeconds 86400; maintenance and supervision as shipped',
  async open(ctx) {
    const conn = { host: ctx.pg.host, port: Number(ctx.pg.port), user: ctx.pg.user, database: ctx.pg.database };
    const bytes = ctx.payloadBytes || 200;
    const log = ctx.log || ((m) => process.stderr.write(m + '\n'));
    const boss = new PgBoss({
      ...conn,
      schema: SCHEMA,
      max: 24,
      useListenNotify: true,
      application_name: 'bench-peers-pgboss',
    });
    boss.on('error', (e) => log(`pg-boss error: ${e && e.message}`));
    boss.on('warning', (w) => log(`pg-boss warning: ${w && w.message}`));
    const admin = new pg.Client({ ...conn, application_name: 'bench-peers-pgboss-admin' });
    await admin.connect();
    let started = false;
    let table = null;

    async function ensureQueue(name, options) {
      const q = await boss.getQueue(name);
      if (!q) await boss.createQueue(name, options);
      return (await boss.getQueue(name)).table;
    }

    const q = {
      async setup() {
        if (!started) { await boss.start(); started = true; }
        table = await ensureQueue(NAME, { policy: 'standard', expireInSeconds: 86400, notify: true });
        await ensureQueue(PROBE, { policy: 'standard', notify: true });
        await q.clear();
      },

      async enqueue(n) {
        const chunk = 5000;
        for (let done = 0; done < n; done += chunk) {
          const k = Math.min(chunk, n - done);
          const jobs = new Array(k);
          for (let i = 0; i < k; i++) jobs[i] = { data: payload(bytes) };
          await boss.insert(NAME, jobs);
        }
      },

      async abandon(n) {
        // a "dead" worker: fetches (state active, started_on now, expiry 24 h) and never completes
        let got = 0;
        while (got < n) {
          const jobs = await boss.fetch(NAME, { batchSize: Math.min(5000, n - got) });
          if (!jobs.length) throw new Error(`pg-boss abandon: only ${got} of ${n} jobs to claim`);
          got += jobs.length;
        }
        // as autovacuum would have left them by the time anyone measures: without it every fetch
        // walks the index entries the n claims just left dead (and the planner too), until
        // autovacuum passes; see the header
        await admin.query(`VACUUM (ANALYZE) ${SCHEMA}.${table}`);
      },

      async clear() {
        await boss.deleteAllJobs(NAME);
        await boss.deleteAllJobs(PROBE);
      },

      async backlog() {
        const r = await admin.query(
          `SELECT count(*)::int AS n FROM ${SCHEMA}.${table} WHERE name = $1 AND state IN ('created', 'retry')`,
          [NAME]);
        return r.rows[0].n;
      },

      async run({ workers, batch, seconds }) {
        let stop = false;
        let done = 0;
        let empty = 0;
        const t0 = nowNs();
        const tEnd = t0 + BigInt(Math.round(seconds * 1e9));
        async function loop() {
          while (!stop) {
            const jobs = await boss.fetch(NAME, { batchSize: batch });
            if (!jobs.length) { empty++; continue; }
            // the handler does nothing; completion as work() settles a batch: fenced to the attempt
            await boss.complete(NAME, jobs);
            if (nowNs() <= tEnd) done += jobs.length;
            else stop = true;
          }
        }
        const timer = setTimeout(() => { stop = true; }, seconds * 1000);
        try {
          await Promise.all(Array.from({ length: workers }, loop));
        } finally {
          stop = true;
          clearTimeout(timer);
        }
        if (empty) log(`pg-boss run: ${empty} empty fetches (backlog ran out)`);
        return { done };
      },

      async latency({ workers, trials }) {
        const timer = trialTimer();
        const workId = await boss.work(NAME, { batchSize: 1, localConcurrency: workers }, async (jobs) => {
          for (const job of jobs) if (job.data) timer.started(job.data.trial);
        });
        try {
          return await timer.run(trials, (i) => boss.send(NAME, payload(bytes, { trial: i })), 'pg-boss');
        } finally {
          await boss.offWork(NAME, { id: workId, wait: true });
        }
      },

      async staleComplete() {
        await boss.deleteAllJobs(PROBE);
        const id = await boss.send(PROBE, payload(bytes), { expireInSeconds: 1 });
        // the supervisor: a second instance whose monitor claim lapses after 1 s (monitorIntervalSeconds,
        // minimum 1; default 60), so its supervise() pass may expire the probe queue's jobs at once
        const supervisor = new PgBoss({ ...conn, schema: SCHEMA, max: 2, monitorIntervalSeconds: 1,
          superviseIntervalSeconds: 1, schedule: false, application_name: 'bench-peers-pgboss-supervisor' });
        supervisor.on('error', (e) => log(`pg-boss supervisor error: ${e && e.message}`));
        await supervisor.start();
        try {
          return await probe(supervisor, id);
        } finally {
          await supervisor.stop({ graceful: false, close: true, timeout: 5000 });
        }
      },

      async close() {
        if (started) await boss.stop({ graceful: false, close: true, timeout: 5000 });
        started = false;
        await admin.end();
      },
    };

    async function probe(supervisor, id) {
      const [jobA] = await boss.fetch(PROBE);
      if (!jobA || jobA.id !== id) throw new Error('pg-boss probe: A fetched nothing');
      await sleep(1500); // A stalls past its 1 s expiry
      // rescue: pg-boss's own supervision pass (expires active jobs past expire_seconds -> retry)
      let jobB = null;
      let passes = 0;
      for (const until = Date.now() + 30000; !jobB && Date.now() < until;) {
        await supervisor.supervise(PROBE);
        passes++;
        [jobB] = await boss.fetch(PROBE);
        if (!jobB) await sleep(250);
      }
      if (!jobB || jobB.id !== id) throw new Error('pg-boss probe: the job was not rescued for B');
      // A completes with the job it fetched ({id, retryCount}), as work() does: fenced
      const byJob = await boss.complete(PROBE, { id: jobA.id, retryCount: jobA.retryCount });
      const afterJob = (await boss.getJobById(PROBE, id)).state;
      // A completes with the plain id, as complete(name, id) lets it
      const byId = await boss.complete(PROBE, jobA.id);
      const afterId = (await boss.getJobById(PROBE, id)).state;
      await boss.deleteAllJobs(PROBE);
      const ok = byJob.affected === 0 && byId.affected === 0 && afterId === 'active';
      const detail =
        `A fetched the job (retryCount ${jobA.retryCount}, expireInSeconds 1), stalled 1.5 s; ` +
        `supervise() on an instance with monitorIntervalSeconds 1 (${passes} pass${passes > 1 ? 'es' : ''}) expired it to retry and B fetched it ` +
        `(retryCount ${jobB.retryCount}); A's complete(name, {id, retryCount}) affected ${byJob.affected} ` +
        `(job ${afterJob}), then A's complete(name, id) affected ${byId.affected} and left B's job ${afterId}` +
        (byId.affected ? ': the plain-id completion is not fenced, the job-object form (what work() uses) is' : '');
      return { ok, detail };
    }

    return q;
  },
};
