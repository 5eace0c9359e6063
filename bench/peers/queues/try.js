'use strict';
// bench/peers/queues/try.js: exercises one queue adapter by hand, every method once, outside the
// runner (claims.js). Usage: $NODE queues/try.js pgboss|graphile [seconds] [abandoned]
// Environment: PGHOST PGPORT PGUSER PGDATABASE as for the drivers. Prints to stderr only.

const path = require('path');

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

async function main() {
  const which = process.argv[2] || 'pgboss';
  const seconds = Number(process.argv[3] || 3);
  const abandoned = Number(process.argv[4] || 0);
  const adapter = require(path.join(__dirname, which + '.js'));
  const log = (m) => process.stderr.write(m + '\n');
  const q = await adapter.open({
    pg: {
      host: process.env.PGHOST || '127.0.0.1',
      port: Number(process.env.PGPORT || 5432),
      user: process.env.PGUSER || 'postgres',
      database: process.env.PGDATABASE || 'postgres',
    },
    payloadBytes: 200,
    log,
  });
  try {
    await q.setup();
    log(`${adapter.name}: setup done, backlog ${await q.backlog()}`);
    if (abandoned) {
      await q.enqueue(abandoned);
      const t = Date.now();
      await q.abandon(abandoned);
      log(`${adapter.name}: ${abandoned} abandoned in ${Date.now() - t} ms, backlog ${await q.backlog()}`);
    }
    for (const batch of [1, 20]) {
      for (const workers of [1, 4, 16]) {
        const need = 15000 * seconds;
        const have = await q.backlog();
        if (have < need) await q.enqueue(need - have);
        const before = await q.backlog();
        const { done } = await q.run({ workers, batch, seconds });
        const after = await q.backlog();
        log(`${adapter.name}: workers ${workers} batch ${batch}: ${done} done in ${seconds}s = ${(done / seconds).toFixed(0)} jobs/s (backlog ${before} -> ${after})`);
      }
    }
    await q.clear();
    if (abandoned) {
      await q.enqueue(abandoned);
      await q.abandon(abandoned);
    }
    for (const workers of [1, 4, 16]) {
      const ms = await q.latency({ workers, trials: 50 });
      log(`${adapter.name}: latency workers ${workers}: p50 ${pct(ms, 50).toFixed(2)} ms p99 ${pct(ms, 99).toFixed(2)} ms n ${ms.length}`);
    }
    await q.clear();
    log(`${adapter.name}: cleared, backlog ${await q.backlog()}`);
    const r = await q.staleComplete();
    log(`${adapter.name}: staleComplete ok=${r.ok}: ${r.detail}`);
  } finally {
    await q.close();
  }
}

main().catch((e) => { process.stderr.write(`${e.stack || e}\n`); process.exit(1); });
