#!/usr/bin/env bash
# bench/proxy_bench.sh - acquire+release pairs through dlock_proxy (PL/Proxy)
# over 1, 2 and 3 dlock servers, against the same pairs on one server
# directly.
#
#   sudo bash bench/proxy_bench.sh            # about 3 minutes
#   sudo ROUNDS=3 CLIENTS=16 bash bench/proxy_bench.sh
#
# Starts three dlock servers and a proxy (plproxy + dlock_proxy), all on
# this machine (fsync on, synchronous_commit on), and measures with pgbench
# (-M prepared, autocommit) the script
#     SELECT dlock_acquire('k' || :id || '-' || :n, 'c', '30 s');
#     SELECT dlock_release('k' || :id || '-' || :n, 'c');
# with contenders, interleaved round by round:
#   direct   on server 0 itself (no proxy)
#   proxy1   through the proxy, the PL/Proxy server listing server 0 only
#   proxy2   servers 0 and 1
#   proxy3   servers 0, 1 and 2
# The PL/Proxy server "dlock" is re-created before each proxied run.  On one
# machine the servers share its cores and disk: more servers cannot be
# faster here, and the figures show what the proxy's extra hop costs.
# Environment: ROUNDS (3), DURATION (5), CLIENTS (8), KEEP=1, BUILD=0.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=common.sh
. "$REPO/bench/common.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CLIENTS=${CLIENTS:-8}

bench_require_root bench/proxy_bench.sh
bench_on_exit
bench_install
REV=$(bench_revision "$REPO" "$BUILD")

bench_work dlock-proxybench
HOSTS=()
PORTS=()
for i in 0 1 2; do
    bench_cluster "$WORK/server$i" "max_connections = 100"
    HOSTS+=("$DLOCK_PGHOST")
    PORTS+=("$DLOCK_PORT")
done
dlock_cluster_start "$WORK/proxy" auto "max_connections = 100" >/dev/null
PROXY_HOST=$DLOCK_PGHOST
PROXY_PORT=$DLOCK_PORT
dlock_psql -qc 'CREATE EXTENSION plproxy; CREATE EXTENSION dlock_proxy'

use_servers() {   # use_servers N: the PL/Proxy server lists servers 0..N-1
    local parts="" i
    for ((i = 0; i < $1; i++)); do
        parts+=", p$i 'host=${HOSTS[$i]} port=${PORTS[$i]} dbname=postgres'"
    done
    psql -X -q -v ON_ERROR_STOP=1 -h "$PROXY_HOST" -p "$PROXY_PORT" -U postgres -d postgres <<EOF
SET client_min_messages = warning;
DROP SERVER IF EXISTS dlock CASCADE;
CREATE SERVER dlock FOREIGN DATA WRAPPER plproxy OPTIONS (modular_mapping '1'$parts);
CREATE USER MAPPING FOR PUBLIC SERVER dlock;
EOF
}

SCRIPT=$WORK/pairs.pgb
cat >"$SCRIPT" <<'EOF'
\set n random(1, 1000000000)
SELECT dlock_acquire('k' || :client_id || '-' || :n, 'c', '30 s');
SELECT dlock_release('k' || :client_id || '-' || :n, 'c');
EOF
chown -R postgres "$WORK"

RAW=$WORK/raw.tsv
: >"$RAW"
run() {   # run CONTENDER ROUND [SECONDS]
    local c=$1 r=$2 d=${3:-$DURATION} host=$PROXY_HOST port=$PROXY_PORT out tps
    case $c in
        direct) host=${HOSTS[0]} port=${PORTS[0]} ;;
        proxy*) use_servers "${c#proxy}" ;;
    esac
    out=$(cd "$WORK" && dlock_as_postgres pgbench -n -M prepared -h "$host" -p "$port" -U postgres \
            -c "$CLIENTS" -j 2 -T "$d" -f "$SCRIPT" postgres 2>&1) || true
    tps=$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' <<<"$out" | head -n 1)
    [ "$r" = 0 ] && return 0
    printf '%s\t%s\t%s\n' "$c" "$r" "${tps:-0}" >>"$RAW"
    printf '    %-7s round %s: %10s pairs/s\n' "$c" "$r" "${tps:-0}"
}

log "warm-up"
for c in direct proxy1 proxy2 proxy3; do run "$c" 0 1; done
for ((r = 1; r <= ROUNDS; r++)); do
    log "round $r of $ROUNDS"
    for c in direct proxy1 proxy2 proxy3; do run "$c" "$r"; done
done

median() {
    awk -F'\t' -v c="$1" '$1 == c { print $3 }' "$RAW" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
echo "dlock $REV; $CLIENTS clients, median of $ROUNDS interleaved rounds of ${DURATION} s; $(nproc) CPUs, one machine"
d=$(median direct)
printf '| %-28s | %12s | %9s |\n' "acquire+release pairs" "pairs/s" "vs direct"
printf '|%s|%s|%s|\n' ------------------------------ -------------: ----------:
printf '| %-28s | %12.0f | %9s |\n' "one server, direct" "$d" "1.00x"
for n in 1 2 3; do
    m=$(median "proxy$n")
    printf '| %-28s | %12.0f | %8.2fx |\n' "proxy over $n server(s)" "$m" "$(awk -v a="$m" -v b="$d" 'BEGIN { print (b > 0 ? a / b : 0) }')"
done
