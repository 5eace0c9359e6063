'use strict'
// bench/peers/report.js - the tables and the chart of bench/peers.sh, from
// the JSON lines its drivers printed (bench/peers/locks.js, claims.js).
//
//   node report.js RESULTS.jsonl [--chart FILE.svg]
//
// Every line is one measurement of one contender in one round:
//   rates      {section, contender, round, ...params, value}
//   latencies  {section, contender, round, ...params, p50, p99, n}
//   probes     {section, contender, ok, detail}
//   settings   {section: "meta", contender, detail}
// A table per section: a row per contender, a column per set of params;
// a figure is the median over rounds.  Under each rate or latency table,
// dlock's ratios to each peer: per round (the contenders of a round ran
// next to each other in time), then the median of those, so a slow minute
// of the machine moves both sides of a ratio alike.  Rates: dlock / peer
// (above 1: dlock is faster); latencies: peer / dlock at p50 (above 1:
// dlock answers sooner).  The chart (gnuplot, SVG) shows the lock pairs,
// the claim rates and the latencies, each contender a colour.
// Prints Markdown on stdout; exits non-zero if gnuplot failed.

const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFileSync } = require('child_process')

const TITLES = {
  pairs: 'Locks: uncontended acquire+release pairs/s, random keys, by clients',
  hot: 'Locks: one hot key, acquire+release pairs/s, by contenders',
  handoff: 'Locks: hand-off, release returned to the next waiter granted (ms)',
  claims: 'Claims: jobs fetched and completed per second, by workers and batch',
  claims_abandoned: 'Claims with 100,000 abandoned claims at the head of the queue: jobs/s',
  claim_latency: 'Claims: insert commit to a waiting worker starting the job (ms)',
  lock_safety: 'Safety: a lock holder paused past its ttl, taken over, then writes',
  claim_safety: 'Safety: a worker stalled past its claim, the job rescued and claimed again, then completes it',
}
const ORDER = Object.keys(TITLES)
const KNOWN = new Set(['section', 'contender', 'round', 'value', 'p50', 'p99', 'n', 'ok', 'detail'])

function median (xs) {
  const v = xs.filter(x => Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return NaN
  const m = v.length >> 1
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2
}

function fmt (x) {
  if (!Number.isFinite(x)) return '-'
  if (x >= 100) return Math.round(x).toLocaleString('en-US')
  if (x >= 10) return x.toFixed(1)
  return x.toFixed(2)
}

const ratio = x => (Number.isFinite(x) ? x.toFixed(2) + 'x' : '-')
const isDlock = c => c.startsWith('dlock')

// the section a record is tabled under: abandoned claims get their own
function sectionOf (r) {
  return r.section === 'claims' && r.abandoned ? 'claims_abandoned' : r.section
}

// "workers=4 batch=20" from a record's params, in a fixed order
function paramsOf (r) {
  return Object.keys(r).filter(k => !KNOWN.has(k) && k !== 'abandoned').sort()
    .map(k => `${k}=${r[k]}`).join(' ')
}

function columnsOf (recs) {
  const cols = [...new Set(recs.map(paramsOf))]
  const num = s => s.split(' ').map(p => Number(p.split('=')[1]) || 0)
  return cols.sort((a, b) => {
    const x = num(a); const y = num(b)
    for (let i = 0; i < Math.max(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] || 0) - (y[i] || 0)
    return 0
  })
}

function contendersOf (recs) {
  const cs = [...new Set(recs.map(r => r.contender))]
  return cs.filter(isDlock).concat(cs.filter(c => !isDlock(c)))
}

function row (cells) { return '| ' + cells.join(' | ') + ' |' }

// a table of medians; key picks the figure of a record
function medianTable (recs, key) {
  const cols = columnsOf(recs)
  const out = [row(['contender', ...cols.map(c => c || key)]), row(['---', ...cols.map(() => '---:')])]
  for (const c of contendersOf(recs)) {
    out.push(row([c, ...cols.map(col => fmt(median(recs.filter(r => r.contender === c &&
      paramsOf(r) === col).map(r => r[key]))))]))
  }
  return out
}

// dlock's per-round ratios to each peer, medians; better = dlock / peer for
// rates, peer / dlock for latencies
function ratioTable (recs, key, latency) {
  const cols = columnsOf(recs)
  const cs = contendersOf(recs)
  const out = []
  for (const d of cs.filter(isDlock)) {
    for (const p of cs.filter(c => !isDlock(c))) {
      const cells = cols.map(col => {
        const per = []
        for (const r of new Set(recs.map(x => x.round))) {
          const a = recs.find(x => x.contender === d && x.round === r && paramsOf(x) === col)
          const b = recs.find(x => x.contender === p && x.round === r && paramsOf(x) === col)
          if (a && b && a[key] > 0 && b[key] > 0) per.push(latency ? b[key] / a[key] : a[key] / b[key])
        }
        return ratio(median(per))
      })
      out.push(row([`${d} vs ${p}`, ...cells]))
    }
  }
  if (out.length === 0) return []
  const head = latency ? 'p50: peer / dlock (above 1: dlock sooner)' : 'dlock / peer (above 1: dlock faster)'
  return ['', row([head, ...cols.map(c => c || key)]), row(['---', ...cols.map(() => '---:')]), ...out]
}

// medians of p50 and p99, two columns per set of params
function latencyTable (recs) {
  const cols = columnsOf(recs)
  const heads = cols.flatMap(c => [`${c} p50`.trim(), `${c} p99`.trim()])
  const out = [row(['contender', ...heads]), row(['---', ...heads.map(() => '---:')])]
  for (const c of contendersOf(recs)) {
    out.push(row([c, ...cols.flatMap(col => {
      const rs = recs.filter(r => r.contender === c && paramsOf(r) === col)
      return [fmt(median(rs.map(r => r.p50))), fmt(median(rs.map(r => r.p99)))]
    })]))
  }
  return out
}

function probeTable (recs) {
  const out = [row(['contender', 'stale write refused', 'what happened']), row(['---', '---', '---'])]
  for (const c of contendersOf(recs)) {
    for (const r of recs.filter(x => x.contender === c)) {
      out.push(row([c, r.ok ? 'yes' : '**no**', String(r.detail || '').replace(/\|/g, '\\|')]))
    }
  }
  return out
}

function report (recs) {
  const lines = []
  const meta = recs.filter(r => r.section === 'meta')
  if (meta.length) {
    lines.push('Contenders and settings:', '')
    for (const m of meta) lines.push(`- **${m.contender}**: ${m.detail}`)
    lines.push('')
  }
  const bySection = new Map()
  for (const r of recs.filter(x => x.section !== 'meta')) {
    const s = sectionOf(r)
    if (!bySection.has(s)) bySection.set(s, [])
    bySection.get(s).push(r)
  }
  const sections = [...bySection.keys()].sort((a, b) => (ORDER.indexOf(a) + 99) % 99 - (ORDER.indexOf(b) + 99) % 99)
  for (const s of sections) {
    const rs = bySection.get(s)
    lines.push(`#### ${TITLES[s] || s}`, '')
    if (rs.some(r => 'ok' in r)) {
      lines.push(...probeTable(rs))
    } else if (rs.some(r => 'p50' in r)) {
      lines.push(...latencyTable(rs))
      lines.push(...ratioTable(rs, 'p50', true))
    } else {
      lines.push(...medianTable(rs, 'value'))
      lines.push(...ratioTable(rs, 'value', false))
    }
    lines.push('')
  }
  return lines.join('\n')
}

// the chart: three panels of clustered bars, drawn by gnuplot as SVG
function chart (recs, file) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'peers-chart-'))
  const panels = [
    { title: 'Locks: pairs/s (uncontended)', recs: recs.filter(r => r.section === 'pairs'), key: 'value', log: true },
    { title: 'Claims: jobs/s', recs: recs.filter(r => r.section === 'claims' && !r.abandoned && r.workers !== 1), key: 'value', log: true },
    { title: 'Claims with 100,000 abandoned: jobs/s', recs: recs.filter(r => r.section === 'claims' && r.abandoned && r.workers !== 1), key: 'value', log: true },
    { title: 'Latency p50, ms (lower is better)', recs: recs.filter(r => r.section === 'handoff' || r.section === 'claim_latency'), key: 'p50', log: true, bySection: true },
  ].filter(p => p.recs.length)
  if (panels.length === 0) return
  const gp = [
    `set terminal svg size 1000,${330 * panels.length} dynamic font "sans,11" background "white"`,
    `set output '${file.replace(/'/g, "''")}'`,
    `set multiplot layout ${panels.length},1`,
    'set style data histogram', 'set style histogram cluster gap 1', 'set style fill solid 0.9 border -1',
    'set boxwidth 0.9', 'set key outside right top vertical', 'set grid ytics', 'set xtics nomirror',
    'set yrange [1:*]',
  ]
  // one colour per contender across the panels
  const all = contendersOf(recs.filter(r => r.section !== 'meta' && !('ok' in r)))
  // dlock's in greens, the peers' in other hues
  const GREENS = ['#1b5e20', '#43a047', '#81c784', '#c8e6c9']
  const OTHERS = ['#1565c0', '#ef6c00', '#ffb74d', '#8e24aa', '#6d4c41', '#757575', '#c62828']
  const mine = all.filter(isDlock)
  const theirs = all.filter(c => !isDlock(c))
  const colour = c => isDlock(c) ? GREENS[mine.indexOf(c) % GREENS.length] : OTHERS[theirs.indexOf(c) % OTHERS.length]
  panels.forEach((p, i) => {
    const cols = p.bySection
      ? [...new Set(p.recs.map(r => r.section))]
      : columnsOf(p.recs)
    const cs = contendersOf(p.recs)
    const data = path.join(dir, `p${i}.dat`)
    const lines = ['col ' + cs.map(c => `"${c}"`).join(' ')]
    for (const col of cols) {
      const label = p.bySection ? (col === 'handoff' ? 'lock hand-off' : 'claim insert to start') : col.replace(/=/g, ' ')
      lines.push(`"${label}" ` + cs.map(c => {
        const m = median(p.recs.filter(r => r.contender === c && (p.bySection ? r.section === col : paramsOf(r) === col)).map(r => r[p.key]))
        return Number.isFinite(m) && m > 0 ? m.toPrecision(4) : '-'
      }).join(' '))
    }
    fs.writeFileSync(data, lines.join('\n') + '\n')
    gp.push(`set title "${p.title}"`, p.log ? 'set logscale y' : 'unset logscale y',
      p.key === 'p50' ? 'set yrange [0.1:*]' : 'set yrange [1:*]',
      `colours = "${cs.map(colour).join(' ')}"`,
      `plot for [i=2:${cs.length + 1}] '${data}' using i:xtic(1) title columnheader(i) lc rgb word(colours, i - 1)`)
  })
  gp.push('unset multiplot')
  fs.writeFileSync(path.join(dir, 'chart.gp'), gp.join('\n') + '\n')
  execFileSync('gnuplot', [path.join(dir, 'chart.gp')], { stdio: 'inherit' })
  fs.rmSync(dir, { recursive: true, force: true })
}

function main () {
  const args = process.argv.slice(2)
  const file = args[0]
  const at = args.indexOf('--chart')
  const recs = fs.readFileSync(file, 'utf8').split('\n').filter(l => l.trim().startsWith('{'))
    .map(l => JSON.parse(l))
  process.stdout.write(report(recs) + '\n')
  if (at >= 0 && args[at + 1]) {
    chart(recs, args[at + 1])
    process.stdout.write(`chart: ${args[at + 1]}\n`)
  }
}

main()
