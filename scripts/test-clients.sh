#!/usr/bin/env bash
# scripts/test-clients.sh - the Python, Node, Go and Java clients (clients/)
# tested against a real server.
#
#   sudo bash scripts/test-clients.sh        (scripts/test.sh runs it too)
#
# On Debian 12, 13 or unstable, as root: installs what is missing (what
# scripts/lib.sh needs for dlock, and python3-psycopg python3-pytest python3-mypy
# python3-venv python3-setuptools, nodejs and npm unless a
# node and npm are on PATH, golang-go golang-github-lib-pq-dev
# golang-github-jackc-pgx-v4-dev, openjdk-17-jdk-headless libpostgresql-jdbc-java
# junit5, pgbouncer), builds and installs dlock (unless
# DLOCK_CLIENTS_NO_BUILD=1: scripts/test.sh has just done it), copies
# clients/ under /tmp (nothing is written into the checkout) and starts:
#   - a throwaway cluster (PostgreSQL as postgres, shared_preload_libraries
#     = 'dlock', log_statement = 'all' and each line's virtual transaction
#     id, `vxid=%v`: the tests read the log to show that nothing is renewed
#     after a loss, that renewals go on while the application's pool is
#     busy, and that a fenced write runs in its fence's transaction);
#   - pgbouncer (as postgres) in front of it, pool_mode = transaction,
#     default_pool_size = 2.
# Then, one after the other (the tests stop and restart the server):
#   Python: a virtualenv (--system-site-packages over Debian's psycopg and
#           pytest), `pip install --no-build-isolation --no-index` of
#           clients/python (no package index used), then pytest; and the
#           same install with the package's own wheel builder (what runs
#           where setuptools needs the absent wheel package), checked by an
#           import (one test); and mypy --strict over the package (one test);
#   Node:   `npm ci` in clients/node (pg, and TypeScript with pg's and
#           Node's types, from the npm registry, as locked in
#           package-lock.json), `tsc -p test/types` (a usage sample
#           against index.d.ts, one test), then `node --test`;
#   Go:     gofmt -l and go vet (one test), then `go test` in GOPATH mode
#           over Debian's /usr/share/gocode (no module proxy), each test
#           with lib/pq and with pgx's stdlib driver;
#   Java:   javac -Xlint:all -Werror --release 17 of clients/java (main and
#           tests) and javadoc -Xdoclint:all -Werror of its public API (one
#           test), over Debian's jars only (/usr/share/java: PostgreSQL's
#           JDBC driver, JUnit 5; no Maven repository), then JUnit 5's
#           console launcher, each test counted.
# Prints each runner's summary and, last, `N passed, N failed` (tests of
# all); exits non-zero on any failure or if a suite ran nothing.  Every
# process it started (cluster, pgbouncer, test runners) is stopped on
# every exit path.
#
# Environment (optional):
#   DLOCK_SRC                source tree whose clients/ to test (default: this repository)
#   DLOCK_CLIENTS_NO_BUILD=1 dlock is built and installed already (DLOCK_PG_BIN)
#   DLOCK_TIMEOUT_CLIENTS    time limit of each runner in seconds (default 900)
#   DLOCK_CLIENTS_ONLY       python, node, go or java: run only that one; or entries
#                            LANG:NAME (space separated): only LANG's tests
#                            whose names match NAME (pytest -k NAME, joined
#                            with "or"; node --test-name-pattern NAME, a
#                            regular expression; go test -run NAME; java: the
#                            JUnit test methods whose names match the regular
#                            expression NAME), e.g. "python:same_holder
#                            node:same.holder" (client mutants); with
#                            DLOCK_FAIL_FAST=1 pytest stops at its first failure
#   DLOCK_KEEP=1             keep the /tmp work directory
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO/scripts/lib.sh"

SRC=${DLOCK_SRC:-$REPO}
T_RUN=${DLOCK_TIMEOUT_CLIENTS:-900}
ONLY=${DLOCK_CLIENTS_ONLY:-}
PASSED=0
FAILED=0
NOTES=()
WORK=
BOUNCER_PID=
RUNNER_PID=

finish() {
    echo
    echo "==================== dlock clients test summary ===================="
    local n
    for n in ${NOTES[@]+"${NOTES[@]}"}; do echo "  $n"; done
    [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ] && echo "  all client tests passed"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]
    exit $?
}

fail_early() {
    NOTES+=("FAIL: $1")
    FAILED=$((FAILED + 1))
    finish
}

# Stops what this script started, whatever the exit path.
cleanup() {
    local rc=$?
    if [ -n "$RUNNER_PID" ] && kill -0 "$RUNNER_PID" 2>/dev/null; then
        kill -TERM -- "-$RUNNER_PID" 2>/dev/null || kill -TERM "$RUNNER_PID" 2>/dev/null
        sleep 1
        kill -KILL -- "-$RUNNER_PID" 2>/dev/null || true
    fi
    if [ -n "$BOUNCER_PID" ]; then
        # pgbouncer itself (its pidfile), and runuser, its parent
        local bp
        bp=$(cat "$WORK/bouncer/pgbouncer.pid" 2>/dev/null || true)
        [ -n "$bp" ] && kill -TERM "$bp" 2>/dev/null
        kill -TERM "$BOUNCER_PID" 2>/dev/null
        wait "$BOUNCER_PID" 2>/dev/null
    fi
    dlock_cleanup
    if [ -n "$WORK" ]; then
        if [ $rc -eq 0 ] && [ "${DLOCK_KEEP:-0}" != 1 ]; then
            rm -rf "$WORK"
            [ -n "${DLOCK_BUILD_DIR:-}" ] && [ -z "${DLOCK_CLIENTS_NO_BUILD:-}" ] && rm -rf "$DLOCK_BUILD_DIR"
        else
            echo "(kept for inspection: $WORK)"
        fi
    fi
    return $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test-clients.sh must run as root (it installs packages; PostgreSQL runs as postgres)." >&2
    fail_early "not run as root"
fi

# ---------------------------------------------------------------------------
# packages
# ---------------------------------------------------------------------------
echo "==> dlock clients tests: source $SRC/clients"
[ -d "$SRC/clients/python" ] && [ -d "$SRC/clients/node" ] && [ -d "$SRC/clients/go" ] &&
    [ -d "$SRC/clients/java" ] || fail_early "$SRC/clients is missing"
LANGS=
PY_K=()       # pytest -k names, when only some Python tests run
NODE_PAT=()   # node --test-name-pattern patterns, likewise
GO_RUN=()     # go test -run patterns, likewise
JAVA_RUN=()   # regular expressions of JUnit test methods' names, likewise
PY_ALL=0
NODE_ALL=0
GO_ALL=0
JAVA_ALL=0
for e in $ONLY; do
    lang=${e%%:*}
    case "$lang" in
        python|node|go|java) ;;
        *) fail_early "DLOCK_CLIENTS_ONLY takes python, node, go, java, python:NAME, node:NAME, go:NAME or java:NAME, not '$e'" ;;
    esac
    LANGS+=" $lang"
    if [ "$e" = "$lang" ]; then
        case "$lang" in python) PY_ALL=1 ;; node) NODE_ALL=1 ;; go) GO_ALL=1 ;; java) JAVA_ALL=1 ;; esac
    elif [ "$lang" = python ]; then
        PY_K+=("${e#*:}")
    elif [ "$lang" = go ]; then
        GO_RUN+=("${e#*:}")
    elif [ "$lang" = java ]; then
        JAVA_RUN+=("${e#*:}")
    else
        NODE_PAT+=("--test-name-pattern=${e#*:}")
    fi
done
[ "$PY_ALL" = 1 ] && PY_K=()
[ "$NODE_ALL" = 1 ] && NODE_PAT=()
[ "$GO_ALL" = 1 ] && GO_RUN=()
[ "$JAVA_ALL" = 1 ] && JAVA_RUN=()
# the node file's 'setup' test makes what the others use
[ ${#NODE_PAT[@]} -gt 0 ] && NODE_PAT+=("--test-name-pattern=^setup\$")
want() { [ -z "$ONLY" ] || [[ "$LANGS " == *" $1 "* ]]; }
PYTEST_ARGS=()
if [ ${#PY_K[@]} -gt 0 ]; then
    k=${PY_K[0]}
    for n in "${PY_K[@]:1}"; do k+=" or $n"; done
    PYTEST_ARGS+=(-k "$k")
fi
[ "${DLOCK_FAIL_FAST:-0}" = 1 ] && PYTEST_ARGS+=(-x)
DLOCK_PACKAGES+=(pgbouncer)
want python && DLOCK_PACKAGES+=(python3-psycopg python3-pytest python3-venv python3-setuptools python3-mypy)
# Go: Debian's compiler and drivers, built in GOPATH mode (no module proxy)
want go && DLOCK_PACKAGES+=(golang-go golang-github-lib-pq-dev golang-github-jackc-pgx-v4-dev)
# Java: Debian's JDK and jars (/usr/share/java), no Maven repository
want java && DLOCK_PACKAGES+=(openjdk-17-jdk-headless libpostgresql-jdbc-java junit5)
# node and npm: Debian's, unless some are on PATH already (a NodeSource
# nodejs brings its own npm, which Debian's npm package would conflict with)
if want node; then
    command -v node >/dev/null 2>&1 || DLOCK_PACKAGES+=(nodejs)
    command -v npm >/dev/null 2>&1 || DLOCK_PACKAGES+=(npm)
fi
dlock_ensure_packages || fail_early "installing packages"
PY=/usr/bin/python3   # Debian's, whose psycopg and pytest the venv sees
want python &&
    echo "==> $($PY --version), psycopg $($PY -c 'import psycopg; print(psycopg.__version__)'), pytest $($PY -c 'import pytest; print(pytest.__version__)')"
want node && echo "==> node $(node --version), npm $(npm --version)"

if [ -z "${DLOCK_CLIENTS_NO_BUILD:-}" ]; then
    dlock_build_install "$SRC" || fail_early "build or make install of dlock"
fi

# ---------------------------------------------------------------------------
# the work directory, the server and pgbouncer
# ---------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/dlock-clients.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/src"
# the clients' sources as in the work tree (tracked and untracked, not ignored)
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -z --cached --others --exclude-standard -- clients |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$WORK/src" -xf -
else
    tar -C "$SRC" --exclude=node_modules --exclude=build -cf - clients | tar -C "$WORK/src" -xf -
fi

dlock_cluster_start "$WORK/cluster" auto "log_statement = 'all'" "max_connections = 100" \
        "log_line_prefix = '%m [%p] %qvxid=%v %a '" ||
    fail_early "starting the test cluster"
trap cleanup EXIT   # dlock_cluster_start installed its own EXIT trap: ours calls it too
dlock_psql -qc 'CREATE EXTENSION dlock' || fail_early "CREATE EXTENSION dlock"
DSN="host=127.0.0.1 port=$DLOCK_PORT user=postgres dbname=postgres"
echo "==> test cluster: port $DLOCK_PORT, log $DLOCK_SERVER_LOG"

cat >"$WORK/pgctl" <<EOF
#!/bin/sh
# stop or start the test server, as postgres
exec runuser -u postgres -- env PATH="$PATH" pg_ctl -D "$DLOCK_PGDATA" -l "$DLOCK_SERVER_LOG" -m fast -w -t 60 "\$1"
EOF
chmod 755 "$WORK/pgctl"

BOUNCER_PORT=$(dlock_free_port) || fail_early "no free port for pgbouncer"
mkdir -p "$WORK/bouncer"
echo '"postgres" ""' >"$WORK/bouncer/userlist.txt"
cat >"$WORK/bouncer/pgbouncer.ini" <<EOF
[databases]
postgres = host=127.0.0.1 port=$DLOCK_PORT dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $WORK/bouncer/userlist.txt
pool_mode = transaction
default_pool_size = 2
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 100
server_login_retry = 1
logfile = $WORK/bouncer/pgbouncer.log
pidfile = $WORK/bouncer/pgbouncer.pid
EOF
chown -R postgres:postgres "$WORK/bouncer"
runuser -u postgres -- /usr/sbin/pgbouncer "$WORK/bouncer/pgbouncer.ini" >"$WORK/bouncer/stdout" 2>&1 &
BOUNCER_PID=$!
BOUNCER_DSN="host=127.0.0.1 port=$BOUNCER_PORT user=postgres dbname=postgres"
for _ in $(seq 1 100); do
    psql -XAtq "$BOUNCER_DSN" -c 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.1
done
psql -XAtq "$BOUNCER_DSN" -c 'SELECT 1' >/dev/null 2>&1 ||
    { cat "$WORK/bouncer/stdout" "$WORK/bouncer/pgbouncer.log" 2>/dev/null | tail -n 20; fail_early "pgbouncer did not start"; }
echo "==> pgbouncer (transaction mode): port $BOUNCER_PORT"
DEAD_PORT=$(dlock_free_port) || fail_early "no free port"

export DLOCK_TEST_DSN="$DSN" DLOCK_TEST_BOUNCER_DSN="$BOUNCER_DSN" DLOCK_TEST_PGCTL="$WORK/pgctl" \
    DLOCK_TEST_SERVER_LOG="$DLOCK_SERVER_LOG" DLOCK_TEST_DEAD_PORT="$DEAD_PORT"

# run_bounded NAME DIR LOG CMD...: CMD run in DIR, in a session of its own
# (so that the clean-up reaches its children), its output to the terminal
# and to LOG, killed after T_RUN seconds; sets RUN_RC.
run_bounded() {
    local name=$1 dir=$2 log=$3
    shift 3
    (cd "$dir" && exec setsid timeout -k 20 "$T_RUN" "$@") > >(tee "$log") 2>&1 &
    RUNNER_PID=$!
    wait "$RUNNER_PID"
    RUN_RC=$?
    RUNNER_PID=
    sleep 0.5   # let tee write the last lines
    if [ "$RUN_RC" -eq 124 ] || [ "$RUN_RC" -eq 137 ]; then
        NOTES+=("FAIL: [$name] timed out after $T_RUN s (DLOCK_TIMEOUT_CLIENTS raises the limit)")
    fi
}

# server_up: the server may be left stopped by a test that died
server_up() {
    "$WORK/pgctl" status >/dev/null 2>&1 || "$WORK/pgctl" start >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------------------
# Python
# ---------------------------------------------------------------------------
if want python; then
    echo
    echo "==> [python] virtualenv and pip install --no-build-isolation --no-index clients/python"
    if $PY -m venv --system-site-packages "$WORK/venv" >"$WORK/pip.log" 2>&1 &&
            "$WORK/venv/bin/pip" install --no-build-isolation --no-index "$WORK/src/clients/python" \
                >>"$WORK/pip.log" 2>&1; then
        echo "==> [python] pytest"
        run_bounded python "$WORK/src/clients/python" "$WORK/pytest.log" \
            "$WORK/venv/bin/python" -m pytest -v -p no:cacheprovider ${PYTEST_ARGS[@]+"${PYTEST_ARGS[@]}"} tests
        server_up
        line=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$WORK/pytest.log" | tail -n 1)
        p=$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line")
        f=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")
        e=$(sed -nE 's/.* ([0-9]+) errors?.*/\1/p' <<<"$line")
        p=${p:-0}; f=$(( ${f:-0} + ${e:-0} ))
        if [ "$f" -eq 0 ] && { [ "$p" -eq 0 ] || ! grep -qE '^=+ .* in [0-9.]+s' "$WORK/pytest.log"; }; then
            f=1; NOTES+=("FAIL: [python] pytest did not run to its summary")
        elif [ "$f" -gt 0 ]; then
            NOTES+=("FAIL: [python] $f test(s) failed: $(grep -E '^(FAILED|ERROR) ' "$WORK/pytest.log" | sed -E 's/ - .*//' | tr '\n' ' ')")
        fi
        echo "==> [python] $p passed, $f failed   (pytest: ${line:-no summary})"
        PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
        echo "==> [python] the same install by the package's own wheel builder (DLOCK_BUILD_FALLBACK=1)"
        if [ ${#PY_K[@]} -gt 0 ]; then
            echo "==> [python] left out: only the tests named ${PY_K[*]} run"
        # imported from / : "import dlock" in the source tree would find a
        # dlock.so that "make" left there (the extension, not this package)
        elif $PY -m venv --system-site-packages "$WORK/venv2" >>"$WORK/pip.log" 2>&1 &&
                DLOCK_BUILD_FALLBACK=1 "$WORK/venv2/bin/pip" install --no-build-isolation --no-index \
                    "$WORK/src/clients/python" >>"$WORK/pip.log" 2>&1 &&
                (cd / && "$WORK/venv2/bin/python" -c 'import dlock, dlock.aio, importlib.metadata as m
assert m.version("pg-dlock") == dlock.__version__
assert any(str(f).endswith("dlock/py.typed") for f in m.files("pg-dlock"))
assert any(r.startswith("psycopg") for r in m.requires("pg-dlock"))'); then
            echo "==> [python] 1 passed, 0 failed   (installed and imported)"
            PASSED=$((PASSED + 1))
        else
            tail -n 30 "$WORK/pip.log"
            NOTES+=("FAIL: [python] installing clients/python with its own wheel builder (log $WORK/pip.log)")
            FAILED=$((FAILED + 1))
        fi
        # the package is typed (py.typed): its annotations must check
        if [ ${#PY_K[@]} -eq 0 ]; then
            echo "==> [python] mypy --strict src/dlock"
            if (cd "$WORK/src/clients/python" && $PY -m mypy --strict --cache-dir "$WORK/mypy-cache" src/dlock) \
                    >"$WORK/mypy.log" 2>&1; then
                echo "==> [python] 1 passed, 0 failed   ($(tail -n 1 "$WORK/mypy.log"))"
                PASSED=$((PASSED + 1))
            else
                tail -n 30 "$WORK/mypy.log"
                NOTES+=("FAIL: [python] mypy --strict found type errors (log $WORK/mypy.log)")
                FAILED=$((FAILED + 1))
            fi
        fi
    else
        tail -n 30 "$WORK/pip.log"
        NOTES+=("FAIL: [python] installing clients/python into a virtualenv (log $WORK/pip.log)")
        FAILED=$((FAILED + 1))
    fi
fi

# ---------------------------------------------------------------------------
# Node
# ---------------------------------------------------------------------------
if want node; then
    echo
    echo "==> [node] npm ci (clients/node, as locked)"
    if (cd "$WORK/src/clients/node" && npm ci --no-audit --no-fund) >"$WORK/npm.log" 2>&1; then
        # the package is typed (index.d.ts): a usage sample must check
        # against it, and its marked misuses must not (TypeScript as locked)
        if [ ${#NODE_PAT[@]} -eq 0 ]; then
            echo "==> [node] tsc -p test/types (index.d.ts against a usage sample)"
            if (cd "$WORK/src/clients/node" && npx --no-install tsc -p test/types) >"$WORK/tsc.log" 2>&1; then
                echo "==> [node] 1 passed, 0 failed   (tsc: no type errors)"
                PASSED=$((PASSED + 1))
            else
                tail -n 30 "$WORK/tsc.log"
                NOTES+=("FAIL: [node] tsc found type errors in test/types/usage.ts against index.d.ts (log $WORK/tsc.log)")
                FAILED=$((FAILED + 1))
            fi
        fi
        echo "==> [node] node --test"
        run_bounded node "$WORK/src/clients/node" "$WORK/node.log" \
            bash -c 'exec node --test "$@" test/*.test.js' node ${NODE_PAT[@]+"${NODE_PAT[@]}"}
        server_up
        p=$(sed -nE 's/^(# |ℹ )pass ([0-9]+)$/\2/p' "$WORK/node.log" | tail -n 1)
        f=$(sed -nE 's/^(# |ℹ )fail ([0-9]+)$/\2/p' "$WORK/node.log" | tail -n 1)
        c=$(sed -nE 's/^(# |ℹ )cancelled ([0-9]+)$/\2/p' "$WORK/node.log" | tail -n 1)
        if [ -z "$p" ]; then
            p=0; f=1; NOTES+=("FAIL: [node] node --test did not run to its summary")
        else
            f=$(( ${f:-0} + ${c:-0} ))
            [ "$f" -gt 0 ] && NOTES+=("FAIL: [node] $f test(s) failed or were cancelled (see above)")
            [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && { f=1; NOTES+=("FAIL: [node] ran no test"); }
        fi
        [ "$RUN_RC" -ne 0 ] && [ "$f" -eq 0 ] && { f=1; NOTES+=("FAIL: [node] exit $RUN_RC"); }
        echo "==> [node] $p passed, $f failed   (node --test: $(grep -E '^(# |ℹ )(tests|pass|fail) ' "$WORK/node.log" | tr '\n' ' '))"
        PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
    else
        tail -n 30 "$WORK/npm.log"
        NOTES+=("FAIL: [node] npm ci in clients/node (log $WORK/npm.log)")
        FAILED=$((FAILED + 1))
    fi
fi

# ---------------------------------------------------------------------------
# Go
# ---------------------------------------------------------------------------

if want go; then
    echo
    # GOPATH mode over Debian's /usr/share/gocode: the package is
    # $GOPATH/src/dlock, its tests import lib/pq and pgx's stdlib from there
    mkdir -p "$WORK/gopath/src"
    ln -s "$WORK/src/clients/go" "$WORK/gopath/src/dlock"
    export GOPATH="$WORK/gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS= GOCACHE="${GOCACHE:-$WORK/go-cache}"
    echo "==> [go] gofmt -l, go vet"
    if [ -z "$(cd "$WORK/gopath/src/dlock" && gofmt -l .)" ] &&
            (cd "$WORK/gopath/src/dlock" && go vet .) >"$WORK/govet.log" 2>&1; then
        echo "==> [go] 1 passed, 0 failed   (gofmt and go vet clean)"
        PASSED=$((PASSED + 1))
    else
        (cd "$WORK/gopath/src/dlock" && gofmt -l .); tail -n 30 "$WORK/govet.log"
        NOTES+=("FAIL: [go] gofmt or go vet (log $WORK/govet.log)")
        FAILED=$((FAILED + 1))
    fi
    GO_ARGS=(-count=1 -v)
    if [ ${#GO_RUN[@]} -gt 0 ]; then
        r=${GO_RUN[0]}
        for n in "${GO_RUN[@]:1}"; do r+="|$n"; done
        GO_ARGS+=(-run "$r")
    fi
    echo "==> [go] go test"
    run_bounded go "$WORK/gopath/src/dlock" "$WORK/gotest.log" go test "${GO_ARGS[@]}" .
    server_up
    p=$(grep -cE '^--- PASS: ' "$WORK/gotest.log")
    f=$(grep -cE '^--- FAIL: ' "$WORK/gotest.log")
    if ! grep -qE '^(ok|FAIL)[[:space:]]+dlock' "$WORK/gotest.log"; then
        f=$((f + 1)); NOTES+=("FAIL: [go] go test did not run to its summary")
    elif [ "$f" -gt 0 ]; then
        NOTES+=("FAIL: [go] $f test(s) failed: $(grep -E '^--- FAIL: ' "$WORK/gotest.log" | sed -E 's/^--- FAIL: ([^ ]+).*/\1/' | tr '\n' ' ')")
    fi
    [ "$RUN_RC" -ne 0 ] && [ "$f" -eq 0 ] && { f=1; NOTES+=("FAIL: [go] exit $RUN_RC"); }
    [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && { f=1; NOTES+=("FAIL: [go] ran no test"); }
    echo "==> [go] $p passed, $f failed"
    PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
fi

# ---------------------------------------------------------------------------
# Java
# ---------------------------------------------------------------------------

if want java; then
    echo
    # Debian's jars only: the JDBC driver (libpostgresql-jdbc-java) and
    # JUnit 5 (junit5); the classes are compiled under $WORK, not the checkout
    JSRC="$WORK/src/clients/java"
    JOUT="$WORK/java-build"
    JAR=/usr/share/java
    JDBC="$JAR/postgresql.jar"
    JUNIT_API="$JAR/junit-jupiter-api.jar:$JAR/opentest4j.jar:$JAR/junit-platform-commons.jar:$JAR/apiguardian-api.jar"
    echo "==> [java] $(javac -version 2>&1): javac -Xlint:all -Werror --release 17, javadoc -Xdoclint:all -Werror"
    mkdir -p "$JOUT/main" "$JOUT/test" "$JOUT/doc"
    if (cd "$JSRC" &&
            javac -Xlint:all -Werror --release 17 -encoding UTF-8 -cp "$JDBC" -d "$JOUT/main" src/main/java/dlock/*.java &&
            javac -Xlint:all -Werror --release 17 -encoding UTF-8 -cp "$JOUT/main:$JDBC:$JUNIT_API" -d "$JOUT/test" \
                src/test/java/dlock/*.java &&
            javadoc -quiet -Xdoclint:all -Werror --release 17 -encoding UTF-8 -cp "$JDBC" -d "$JOUT/doc" \
                src/main/java/dlock/*.java) >"$WORK/javac.log" 2>&1; then
        echo "==> [java] 1 passed, 0 failed   (javac and javadoc: no warning)"
        PASSED=$((PASSED + 1))
        JAVA_SEL=()
        if [ ${#JAVA_RUN[@]} -gt 0 ]; then
            # the @Test methods whose names match one of the expressions,
            # in each test class (a file's name)
            for tf in "$JSRC"/src/test/java/dlock/*.java; do
                tc=$(basename "$tf" .java)
                for m in $(grep -A1 '@Test' "$tf" | sed -nE 's/^ *void ([A-Za-z0-9_]+)\(\).*/\1/p'); do
                    for r in "${JAVA_RUN[@]}"; do
                        grep -qE -- "$r" <<<"$m" && { JAVA_SEL+=("--select-method=dlock.$tc#$m"); break; }
                    done
                done
            done
            [ ${#JAVA_SEL[@]} -gt 0 ] || JAVA_SEL=(--select-method=dlock.LeaseTest#no_test_matches)
        else
            JAVA_SEL=(--select-package=dlock)
        fi
        echo "==> [java] JUnit 5 (console launcher)"
        run_bounded java "$JSRC" "$WORK/junit.log" \
            java -jar "$JAR/junit-platform-console-standalone.jar" --disable-banner --disable-ansi-colors --details=tree \
                --details-theme=ascii --fail-if-no-tests \
                --class-path "$JOUT/main:$JOUT/test:$JDBC" "${JAVA_SEL[@]}"
        server_up
        p=$(sed -nE 's/^\[ *([0-9]+) tests successful *\]$/\1/p' "$WORK/junit.log" | tail -n 1)
        f=$(sed -nE 's/^\[ *([0-9]+) tests failed *\]$/\1/p' "$WORK/junit.log" | tail -n 1)
        a=$(sed -nE 's/^\[ *([0-9]+) tests aborted *\]$/\1/p' "$WORK/junit.log" | tail -n 1)
        s=$(sed -nE 's/^\[ *([0-9]+) tests skipped *\]$/\1/p' "$WORK/junit.log" | tail -n 1)
        if [ -z "$p" ] || [ -z "$f" ]; then
            p=${p:-0}; f=$(( ${f:-0} + 1 )); NOTES+=("FAIL: [java] JUnit did not run to its summary")
        else
            # an aborted test (a failed assumption) or a skipped one is not a pass
            f=$(( f + ${a:-0} + ${s:-0} ))
            [ "$f" -gt 0 ] && NOTES+=("FAIL: [java] $f test(s) failed: $(sed -nE 's/.*-- ([A-Za-z0-9_]+)\(\)( [0-9]+ ms)? \[[XA]\].*/\1/p' "$WORK/junit.log" | tr '\n' ' ')")
        fi
        [ "$RUN_RC" -ne 0 ] && [ "$f" -eq 0 ] && { f=1; NOTES+=("FAIL: [java] exit $RUN_RC"); }
        [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && { f=1; NOTES+=("FAIL: [java] ran no test"); }
        echo "==> [java] $p passed, $f failed"
        PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
    else
        tail -n 30 "$WORK/javac.log"
        NOTES+=("FAIL: [java] javac -Xlint:all -Werror or javadoc -Xdoclint:all (log $WORK/javac.log)")
        FAILED=$((FAILED + 1))
    fi
fi

if grep -qE 'terminated by signal|was terminated by exception' "$DLOCK_SERVER_LOG" 2>/dev/null; then
    NOTES+=("FAIL: a backend of the test cluster crashed: $(grep -m1 -E 'terminated by signal|was terminated by exception' "$DLOCK_SERVER_LOG")")
    FAILED=$((FAILED + 1))
fi
finish
