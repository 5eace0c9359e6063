# shellcheck shell=bash
# bench/common.sh - shared by the benchmark scripts in bench/: sourced first
# (it sources scripts/lib.sh), with REPO set to the checkout.  The setup
# every benchmark repeats lives here:
#
#   . "$REPO/bench/common.sh"           # lib.sh; BUILD=1, KEEP=0 by default; WORK=
#   bench_require_root bench/NAME.sh    # PostgreSQL runs as the postgres user
#   bench_on_exit [HOOK]                # traps: HOOK, stop the clusters, remove WORK
#   bench_install                       # BUILD=1: build and install this checkout
#   bench_work dlock-NAME               # WORK=/tmp/dlock-NAME.XXXXXX
#   bench_cluster "$WORK/c" [CONF...]   # a throwaway cluster with dlock created
#
# The clusters are scripts/lib.sh's (dlock_cluster_start): fsync on,
# synchronous_commit on, shared_preload_libraries = 'dlock', on this
# machine's PostgreSQL or DLOCK_PG_BIN's, which BUILD=1 installs into.

# shellcheck source=../scripts/lib.sh
. "$REPO/scripts/lib.sh"

BUILD=${BUILD:-1}   # 1: build and install dlock from this checkout first (0: the installed one)
KEEP=${KEEP:-0}     # 1: keep the work directory (clusters, logs, raw results)
WORK=               # the work directory (bench_work), none yet

log() { printf '==> %s\n' "$*" >&2; }

# bench_require_root NAME
#   Exits unless run as root (PostgreSQL itself runs as the postgres user).
bench_require_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "$1 must run as root (PostgreSQL runs as the postgres user)." >&2
        exit 1
    fi
}

# bench_on_exit [HOOK]
#   Installs the traps (bench_set_traps) of the common cleanup: on every
#   exit, HOOK (a function of the script stopping its own background
#   processes) runs first, then every cluster is stopped (dlock_cleanup) and
#   the work directory removed, unless KEEP=1, or BENCH_KEEP_FAILED=1 and
#   the script failed.  The exit status is the script's.
bench_on_exit() {
    BENCH_EXIT_HOOK=${1:-}
    bench_set_traps bench__exit
}
bench__exit() {
    local rc=$? keep=${KEEP:-0}
    trap - EXIT INT TERM
    if [ -n "${BENCH_EXIT_HOOK:-}" ]; then "$BENCH_EXIT_HOOK"; fi
    dlock_cleanup
    if [ $rc -ne 0 ] && [ "${BENCH_KEEP_FAILED:-0}" = 1 ]; then keep=1; fi
    bench_remove_work "$keep"
    exit $rc
}

# bench_install
#   Installs the packages the scripts need (dlock_ensure_packages; add to
#   DLOCK_PACKAGES first for more); with BUILD=1 (the default) builds this
#   checkout ($REPO) and installs it (dlock_build_install: into
#   DLOCK_PG_BIN's installation when that is set), else checks that dlock
#   is installed.  Exits on a failure.
bench_install() {
    dlock_ensure_packages || exit 1
    if [ "${BUILD:-1}" = 1 ]; then
        dlock_build_install "$REPO" || exit 1
        rm -rf "$DLOCK_BUILD_DIR"
    elif [ ! -f "$("$DLOCK_PG_CONFIG" --sharedir)/extension/dlock.control" ]; then
        echo "dlock is not installed; run without BUILD=0" >&2
        exit 1
    fi
}

# bench_work NAME
#   Makes the work directory WORK=/tmp/NAME.XXXXXX, readable by postgres.
bench_work() {
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$WORK"
}

# bench_cluster DIR [CONF_LINE...]
#   Starts a throwaway cluster in DIR (dlock_cluster_start: fsync on,
#   shared_preload_libraries = 'dlock', then the CONF_LINEs) and creates
#   extension dlock in its database postgres.  Sets what
#   dlock_cluster_start sets (DLOCK_PGHOST, DLOCK_PORT, PGHOST, PGPORT...).
#   Exits on a failure.
bench_cluster() {
    local dir=$1
    shift
    log "starting a cluster in $dir (fsync on, shared_preload_libraries = 'dlock')"
    dlock_cluster_start "$dir" auto "$@" >/dev/null || exit 1
    dlock_psql -q -c 'CREATE EXTENSION dlock' || exit 1
}

# bench_set_traps CLEANUP_FN
#   CLEANUP_FN runs on exit; INT and TERM exit with 130/143 so that it runs.
#   Also tells lib.sh not to install its own traps over ours.
bench_set_traps() {
    DLOCK_TRAP_SET=1
    trap "$1" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# bench_remove_work KEEP_IT
#   Removes the work directory $WORK, or says where it is kept when KEEP_IT
#   is 1.
bench_remove_work() {
    if [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
        if [ "$1" = 1 ]; then
            echo "work directory kept: $WORK" >&2
        else
            rm -rf "$WORK"
        fi
    fi
}

# bench_revision REPO BUILD
#   Prints which dlock is measured: the checkout's commit, "+dirty" if src/,
#   the Makefile or the install script differ from it, or the installed
#   build when BUILD is not 1.
bench_revision() {
    local rev
    # a copy without .git (bench/in_root.sh) is told its revision
    if [ -n "${DLOCK_BENCH_REV:-}" ]; then echo "$DLOCK_BENCH_REV"; return; fi
    rev=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [ "$rev" != unknown ] &&
            ! git -C "$1" diff --quiet HEAD -- src Makefile 'dlock--*.sql' 2>/dev/null; then
        rev+="+dirty"
    fi
    if [ "$2" = 1 ]; then
        echo "$rev"
    else
        echo "the installed build (BUILD=0; checkout at $rev)"
    fi
}

# bench_machine
#   Names the machine a figure comes from: CPU model, CPUs, memory, kernel.
bench_machine() {
    local cpu mem
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
    mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
    echo "${cpu:-unknown CPU} x $(nproc), $mem, Linux $(uname -r)"
}
