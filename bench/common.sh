# bench/common.sh - shared by the benchmark scripts in bench/ (sourced, after
# scripts/lib.sh). Each script keeps its own cleanup function (they stop
# different background processes) and calls these for the common parts.

log() { printf '==> %s\n' "$*" >&2; }

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
