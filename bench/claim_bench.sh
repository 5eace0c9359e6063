#!/usr/bin/env bash
# bench/claim_bench.sh - batch claiming: rows claimed AND completed per
# second, dlock against the side-table claim an engineer writes by hand and
# the in-table UPDATE ... SKIP LOCKED ceiling, measured in the same run.
#
#   sudo bash bench/claim_bench.sh                     # about 25 minutes
#   sudo ROUNDS=1 DURATION=4 CLIENTS=4 bash bench/claim_bench.sh
#
# Starts its own throwaway cluster under /tmp (fsync on, synchronous_commit
# on, dlock preloaded, shared_buffers 1GB) and measures with pgbench
# (-M simple: the claimed ids travel to the completion through \gset).
# A pgbench "transaction" is one worker step: claim a batch of 100 rows
# (one statement, one transaction), then complete them (one statement, one
# transaction).  Every contender uses the same number of round trips.
#
# Tables of ROWS rows, one per contender and key type, with the same data:
#   jobs_<c>_int (id bigint PRIMARY KEY), jobs_<c>_text (id text PRIMARY KEY,
#   'job-00000001' ...), status int, payload text, and the usual queue index
#   ON (id) WHERE status = 0.
#
# Patterns (the ways a README reader completes work):
#   complete  give the claims back as the rows are done:
#               dlock  UPDATE ... FROM dlock_complete(tbl, me, ids)
#               hand   WITH u AS (UPDATE jobs ... WHERE own live claim
#                      RETURNING id) DELETE FROM side ... IN u (job rows
#                      first: the other order deadlocks with a claimer
#                      whose re-check locked a row it did not get)
#   fence     order_by => 'id', the dlock_claimed fence, claims left to expire:
#               dlock  UPDATE ... WHERE id = ANY(ids) AND dlock_claimed(...)
#               hand   UPDATE ... WHERE id = ANY(ids) AND EXISTS (own live claim)
#                      (a weaker fence: a takeover between the check and the
#                      commit goes through; with FOR SHARE on the side claim,
#                      which would hold it off, the completion deadlocks with
#                      a claim whose snapshot missed that claim: at 4 and 16
#                      workers pgbench counted failed transactions)
#   plain     default order, a plain UPDATE, claims left to expire
#   ceiling   (plain only) the in-table claim, no side table, no expiry:
#             UPDATE jobs SET status = 2 WHERE id IN (SELECT ... FOR UPDATE
#             SKIP LOCKED), then UPDATE ... SET status = 1
# The hand-written claim: candidates with NOT EXISTS (a live side claim) +
# FOR UPDATE SKIP LOCKED, INSERT ... ON CONFLICT DO UPDATE ... WHERE expired,
# in one statement.
#
# Then "held": 200,000 live claims (ttl 1 hour) on the rows at the head of
# the order, as a dead worker leaves them, against the same table without
# them; plain pattern, 4 workers, integer keys, dlock and hand.
#
# Rate = rows with status = 1 after the run / DURATION; CPU per row = the
# backends' user+system time (read on the postmaster once they have exited)
# over those rows, steadier than the rate on a shared machine; ratios are
# medians of the per-round ratios.  Before every run the
# table is reset, the claims are forgotten, everything is vacuumed and a
# CHECKPOINT is taken; autovacuum is off for the benchmark's tables and
# dlock.claim, so that a vacuum landing in one contender's run does not
# decide the ratio (each run starts vacuumed).  A short unrecorded warm-up of every contender and
# key type comes first.  Runs are interleaved (every round runs every
# contender of every cell back to back) and the tables show the median.
# It never fails on a missed target: it is a benchmark, not a test.
#
# Environment:
#   ROWS=600000  ROUNDS=2  DURATION=5  CLIENTS="1 4 16"
#   PATTERNS="complete fence plain"  KEYS="int text"  HELD=1 (0: skip "held")
#   BUILD=1 (0: measure the installed dlock)  KEEP=0  RESULTS=FILE (raw TSV)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

ROWS=${ROWS:-600000}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-5}
CLIENTS=${CLIENTS:-"1 4 16"}
PATTERNS=${PATTERNS:-"complete fence plain"}
KEYS=${KEYS:-"int text"}
HELD=${HELD:-1}
HELD_ROWS=200000
RESULTS=${RESULTS:-}

bench_require_root bench/claim_bench.sh
bench_on_exit

REV=$(bench_revision "$REPO" "$BUILD")
bench_install

bench_work dlock-claimbench
bench_cluster "$WORK/cluster" \
    "shared_buffers = 1GB" "max_connections = 100" "max_wal_size = 8GB" \
    "checkpoint_timeout = 30min" "log_min_messages = warning" \
    "log_min_error_statement = panic"

PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" -U postgres -d postgres)
q() { "${PSQL[@]}" -Atc "$1"; }
RAW=$WORK/raw.tsv
printf 'cell\tcontender\tclients\tround\trows_per_s\tfailed\n' >"$RAW"
SCRIPTS=$WORK/scripts
mkdir -p "$SCRIPTS"

echo "==> dlock $REV; $(q 'SELECT version()' | cut -d' ' -f1-2); $(nproc) CPUs"
echo "==> loading $ROWS rows per table"
for k in $KEYS; do
    if [ "$k" = int ]; then typ=bigint; expr=g; else typ=text; expr="'job-' || lpad(g::text, 8, '0')"; fi
    for c in dl hw it; do
        "${PSQL[@]}" <<SQL
CREATE TABLE jobs_${c}_$k (id $typ PRIMARY KEY, status int NOT NULL DEFAULT 0, payload text)
  WITH (autovacuum_enabled = off);
INSERT INTO jobs_${c}_$k SELECT $expr, 0, md5(g::text) FROM generate_series(1, $ROWS) g;
CREATE INDEX ON jobs_${c}_$k (id) WHERE status = 0;
SQL
    done
    "${PSQL[@]}" -c "CREATE TABLE side_$k (job_id $typ PRIMARY KEY, holder text NOT NULL,
                      expires_at timestamptz NOT NULL, attempts int NOT NULL)
                      WITH (autovacuum_enabled = off)"
done
# Every run starts from VACUUM (reset_table): an autovacuum landing inside one
# contender's 5 seconds would decide the ratio, not the contenders.
q "ALTER TABLE dlock.claim SET (autovacuum_enabled = off)"
q "VACUUM ANALYZE"

# ---------------------------------------------------------------- scripts
# claim_sql CONTENDER KEY ORDER: the claim statement, ids into :ids
claim_sql() {
    local c=$1 k=$2 order=$3 t=jobs_$1_$2
    case $c in
    dl) local ob=; [ "$order" = id ] && ob=", 'id'"
        echo "SELECT coalesce(string_agg(quote_literal(id), ','), 'NULL') AS ids
  FROM dlock_claim(NULL::$t, 'w:client_id', 100, '30 s', 'status = 0'$ob) \\gset" ;;
    hw) echo "WITH cand AS (
  SELECT j.id FROM $t j
   WHERE j.status = 0
     AND NOT EXISTS (SELECT 1 FROM side_$k s
                      WHERE s.job_id = j.id AND s.expires_at > clock_timestamp())
   ORDER BY j.id LIMIT 100 FOR UPDATE OF j SKIP LOCKED),
ins AS (
  INSERT INTO side_$k (job_id, holder, expires_at, attempts)
  SELECT id, 'w:client_id', clock_timestamp() + interval '30 s', 1 FROM cand
  ON CONFLICT (job_id) DO UPDATE
     SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
         attempts = side_$k.attempts + 1
   WHERE side_$k.expires_at <= clock_timestamp()
  RETURNING job_id)
SELECT coalesce(string_agg(quote_literal(job_id), ','), 'NULL') AS ids FROM ins \\gset" ;;
    esac
}

# complete_sql CONTENDER KEY PATTERN
complete_sql() {
    local c=$1 k=$2 p=$3 t=jobs_$1_$2 typ=bigint
    [ "$k" = text ] && typ=text
    local ids="ARRAY[:ids]::$typ[]"
    case "$c/$p" in
    dl/complete) echo "UPDATE $t j SET status = 1 FROM dlock_complete('$t', 'w:client_id', $ids) AS d(id) WHERE j.id = d.id;" ;;
    hw/complete) echo "WITH u AS (UPDATE $t j SET status = 1 WHERE j.id = ANY ($ids) AND EXISTS (SELECT 1 FROM side_$k s
   WHERE s.job_id = j.id AND s.holder = 'w:client_id' AND s.expires_at > clock_timestamp()) RETURNING j.id)
DELETE FROM side_$k WHERE job_id IN (SELECT id FROM u) AND holder = 'w:client_id';" ;;
    dl/fence) echo "UPDATE $t SET status = 1 WHERE id = ANY ($ids) AND dlock_claimed('$t', id, 'w:client_id');" ;;
    hw/fence) echo "UPDATE $t j SET status = 1 WHERE j.id = ANY ($ids) AND EXISTS (SELECT 1 FROM side_$k s
   WHERE s.job_id = j.id AND s.holder = 'w:client_id' AND s.expires_at > clock_timestamp());" ;;
    */plain) echo "UPDATE $t SET status = 1 WHERE id = ANY ($ids);" ;;
    esac
}

write_script() {   # write_script FILE CONTENDER KEY PATTERN
    local f=$1 c=$2 k=$3 p=$4 order=
    [ "$p" = fence ] && order=id
    if [ "$c" = it ]; then
        # the in-table claim marks its rows taken (status 2) and returns them
        cat >"$f" <<EOF
WITH c AS (SELECT id FROM jobs_it_$k WHERE status = 0 ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED),
u AS (UPDATE jobs_it_$k j SET status = 2 FROM c WHERE j.id = c.id RETURNING j.id)
SELECT coalesce(string_agg(quote_literal(id), ','), 'NULL') AS ids FROM u \\gset
UPDATE jobs_it_$k SET status = 1 WHERE id = ANY (ARRAY[:ids]::$( [ "$k" = text ] && echo text || echo bigint )[]);
EOF
    else
        { claim_sql "$c" "$k" "$order"; complete_sql "$c" "$k" "$p"; } >"$f"
    fi
}

reset_table() {   # reset_table CONTENDER KEY
    local t=jobs_$1_$2
    q "UPDATE $t SET status = 0 WHERE status <> 0"
    q "TRUNCATE side_$2"
    q "DELETE FROM dlock.claim WHERE relid = '$t'::regclass"
    q "VACUUM $t, side_$2, dlock.claim"
    q "CHECKPOINT"
}

# hold N: a dead worker's claims on the first N rows of contender C, key K
hold() {
    local c=$1 k=$2 n=$3 t=jobs_$1_$2
    if [ "$c" = dl ]; then
        local i
        for ((i = 0; i < n / 1000; i++)); do
            echo "SELECT count(*) FROM dlock_claim(NULL::$t, 'dead', 1000, '1 hour', 'status = 0');"
        done | "${PSQL[@]}" >/dev/null
    else
        q "INSERT INTO side_$k SELECT id, 'dead', clock_timestamp() + interval '1 hour', 1
             FROM $t ORDER BY id LIMIT $n"
    fi
    q "VACUUM ANALYZE $t, side_$k, dlock.claim"
}

# CPU used by the backends of a run, read on the postmaster: when a backend
# exits, the kernel adds its user+system time to the postmaster's
# cutime+cstime (/proc/PID/stat fields 16 and 17).  Much steadier than the
# rate on a machine shared with other work.
TICKS=$(getconf CLK_TCK)
children_cpu_ticks() {
    local st
    st=$(cat "/proc/$(head -n 1 "$WORK/cluster/data/postmaster.pid")/stat")
    st=${st##*) }
    awk '{print $14 + $15}' <<<"$st"
}
children() {   # how many processes the postmaster has now (processes may
    local pm        # end while their stat is read: cat goes on, awk counts)
    pm=$(head -n 1 "$WORK/cluster/data/postmaster.pid")
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } |
        awk -v pm="$pm" '{ sub(/^.*\) /, ""); if ($2 == pm) n++ } END { print n + 0 }'
}
settle_children() {   # wait (up to 5 s) until the run's backends are gone
    local i
    for ((i = 0; i < 50; i++)); do
        [ "$(children)" -le "$IDLE_CHILDREN" ] && return 0
        sleep 0.1
    done
}

run() {   # run CELL CONTENDER KEY PATTERN CLIENTS ROUND
    local cell=$1 c=$2 k=$3 p=$4 n=$5 round=$6 f out failed rows rate j cpu0 cpu1 cpu_us
    f=$SCRIPTS/$c-$k-$p.pgb
    write_script "$f" "$c" "$k" "$p"
    j=$(( n < 2 ? n : 2 ))
    # enable_seqscan = off for every contender: the side table starts each run
    # empty, and a plan made for an empty table probes it with a sequential
    # scan per candidate row (a hand-written claim with 16 workers then takes
    # minutes per batch); dlock's own internal lookups never scan
    settle_children
    cpu0=$(children_cpu_ticks)
    out=$(cd "$WORK" && PGOPTIONS="-c enable_seqscan=off" dlock_as_postgres \
            pgbench -n -M simple -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" \
            -U postgres -c "$n" -j "$j" -T "$DURATION" -f "$f" postgres 2>&1) || true
    settle_children
    cpu1=$(children_cpu_ticks)
    failed=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' <<<"$out")
    if grep -q 'aborted' <<<"$out"; then
        failed="${failed:-0}+aborted"
        grep -m3 -E 'error|aborted' <<<"$out" >&2 || true
    fi
    rows=$(q "SELECT count(*) FROM jobs_${c}_$k WHERE status = 1")
    rate=$(( rows / DURATION ))
    cpu_us=$(awk -v t=$((cpu1 - cpu0)) -v hz="$TICKS" -v r="$rows" \
        'BEGIN { if (r > 0) printf "%.1f", t * 1e6 / hz / r; else print "-" }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cell" "$c" "$n" "$round" "$rate" "${failed:-?}" \
        "$cpu_us" >>"$RAW"
    printf '    %-22s %-4s %2s workers  round %s: %8s rows/s  %6s us CPU/row  failed tx: %s\n' \
        "$cell" "$c" "$n" "$round" "$rate" "$cpu_us" "${failed:-?}"
    reset_table "$c" "$k"
}

median() {   # median CELL CONTENDER CLIENTS
    awk -F'\t' -v cell="$1" -v c="$2" -v n="$3" \
        '$1 == cell && $2 == c && $3 == n { print $5 }' "$RAW" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
                                  else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

warm() {   # warm CONTENDER KEY: a short unrecorded run (4 workers, plain)
    local c=$1 k=$2 f=$SCRIPTS/warm-$1-$2.pgb
    write_script "$f" "$c" "$k" plain
    (cd "$WORK" && PGOPTIONS="-c enable_seqscan=off" dlock_as_postgres pgbench -n -M simple -h "$DLOCK_PGHOST" -p "$DLOCK_PORT" \
        -U postgres -c 4 -j 2 -T 2 -f "$f" postgres >/dev/null 2>&1) || true
    reset_table "$c" "$k"
}

# ---------------------------------------------------------------- runs
# first a warm-up of every contender and key type, so that no recorded run
# pays for a cold cache or a first plan
IDLE_CHILDREN=$(children)   # the postmaster's own processes, no client
echo "==> warm-up"
for k in $KEYS; do
    for c in dl hw it; do warm "$c" "$k"; done
done
for ((r = 1; r <= ROUNDS; r++)); do
    echo "==> round $r of $ROUNDS"
    for p in $PATTERNS; do
        for k in $KEYS; do
            for n in $CLIENTS; do
                run "$p/$k" dl "$k" "$p" "$n" "$r"
                run "$p/$k" hw "$k" "$p" "$n" "$r"
                [ "$p" = plain ] && run "$p/$k" it "$k" "$p" "$n" "$r"
            done
        done
    done
    if [ "$HELD" = 1 ] && [[ " $KEYS " == *" int "* ]]; then
        for c in dl hw; do
            run "held/none" "$c" int plain 4 "$r"
            hold "$c" int "$HELD_ROWS"
            run "held/200k" "$c" int plain 4 "$r"
        done
    fi
done
[ -n "$RESULTS" ] && cp "$RAW" "$RESULTS"

# ---------------------------------------------------------------- report
echo
# paired CELL A B CLIENTS COL: the median over the rounds of A's value over
# B's in the same round (runs of one round are neighbours in time); COL 5 is
# the rate, 7 the backend CPU per row
paired() {
    awk -F'\t' -v cell="$1" -v a="$2" -v b="$3" -v n="$4" -v col="$5" '
        $1 == cell && $3 == n && $col != "-" && $col > 0 { v[$2, $4] = $col; r[$4] = 1 }
        END {
            for (i in r) if (((a, i) in v) && ((b, i) in v)) q[++m] = v[a, i] / v[b, i]
            if (m == 0) { print "-"; exit }
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
            printf "%.2fx", (m % 2) ? q[(m + 1) / 2] : (q[m / 2] + q[m / 2 + 1]) / 2
        }' "$RAW"
}
cpu_median() {   # cpu_median CELL CONTENDER CLIENTS: backend CPU us per row
    awk -F'\t' -v cell="$1" -v c="$2" -v n="$3" \
        '$1 == cell && $2 == c && $3 == n && $7 != "-" { print $7 }' "$RAW" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
                                  else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo
echo "dlock $REV; PostgreSQL $(q "SHOW server_version"); $(bench_machine)"
echo "$ROWS rows per table, batch 100, ttl 30 s; median of $ROUNDS interleaved rounds of ${DURATION} s"
echo "rows completed per second; dlock's ratio to each alternative (paired: median of the"
echo "per-round ratios); backend CPU per completed row (us) and hand's over dlock's (above 1:"
echo "dlock spends less CPU per row)"
echo
printf '| %-14s | %7s | %9s | %9s | %9s | %9s | %9s | %9s | %9s | %9s |\n' pattern workers dlock hand ceiling \
    "vs hand" "vs ceil." "CPU dlock" "CPU hand" "hand/dlock"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' ---------------- --------: ----------: ----------: ----------: \
    ----------: ----------: ----------: ----------: ----------:
for p in $PATTERNS; do
    for k in $KEYS; do
        for n in $CLIENTS; do
            d=$(median "$p/$k" dl "$n"); h=$(median "$p/$k" hw "$n"); i=-; ri=-
            if [ "$p" = plain ]; then i=$(median "$p/$k" it "$n"); ri=$(paired "$p/$k" dl it "$n" 5); fi
            printf '| %-14s | %7s | %9s | %9s | %9s | %9s | %9s | %9s | %9s | %9s |\n' "$p, $k" "$n" "$d" "$h" "$i" \
                "$(paired "$p/$k" dl hw "$n" 5)" "$ri" "$(cpu_median "$p/$k" dl "$n")" \
                "$(cpu_median "$p/$k" hw "$n")" "$(paired "$p/$k" hw dl "$n" 7)"
        done
    done
done
if [ "$HELD" = 1 ] && [[ " $KEYS " == *" int "* ]]; then
    echo
    echo "200,000 live claims held on the head of the order (plain, int, 4 workers; paired):"
    for c in dl hw; do
        a=$(median held/none "$c" 4); b=$(median held/200k "$c" 4)
        printf '  %-5s without %8s rows/s, with %8s rows/s: %s (CPU per row: %s us without, %s us with)\n' \
            "$([ $c = dl ] && echo dlock || echo hand)" "$a" "$b" \
            "$(awk -F'\t' -v c="$c" '$2 == c && $3 == 4 { v[$1, $4] = $5; r[$4] = 1 }
                END { for (i in r) if (v["held/none", i] > 0) q[++m] = v["held/200k", i] / v["held/none", i]
                      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
                      if (m == 0) print "-"; else printf "%.2fx", (m % 2) ? q[(m + 1) / 2] : (q[m / 2] + q[m / 2 + 1]) / 2 }' "$RAW")" \
            "$(cpu_median held/none "$c" 4)" "$(cpu_median held/200k "$c" 4)"
    done
fi
