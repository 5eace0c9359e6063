# shellcheck shell=bash
# scripts/lib.sh - shared helpers for dlock's scripts (test.sh, demo.sh, benchmarks).
#
# Source it from bash, as root, on Debian 12, 13 or unstable (it uses the
# PostgreSQL that release ships, or DLOCK_PG_MAJOR / DLOCK_PG_BIN):
#
#   . "$(dirname "$0")/lib.sh"
#   dlock_ensure_packages                      # apt-get only what is missing
#   dlock_build_install "$REPO"                # sets DLOCK_BUILD_DIR (postgres-owned copy)
#   dlock_cluster_start "$dir" auto            # sets DLOCK_PGHOST/DLOCK_PORT, exports PG*
#   dlock_psql -c 'CREATE EXTENSION dlock'
#   dlock_cluster_stop "$dir"                  # also done by the EXIT trap
#
# PostgreSQL never runs as root: initdb, pg_ctl and the build run as the
# `postgres` user (runuser); `make install` runs as root.
#
# Public functions (all return non-zero on failure, never exit the shell):
#   dlock_ensure_packages
#   dlock_build_install SRC_DIR [WORK_DIR]    (DLOCK_BUILD_CACHE: see there)
#   dlock_default_build_cache SRC_DIR
#   dlock_cluster_start DIR PORT [EXTRA_CONF_LINE...]
#   dlock_cluster_stop DIR
#   dlock_psql [PSQL_ARGS...]
#   dlock_as_postgres CMD [ARGS...]
#   dlock_free_port
#   dlock_cleanup
#   dlock_tagged_pids NAME=VALUE [DIR...]
#   dlock_list_pids PIDS...
#   dlock_stop_pids PIDS...
# See the comment above each function for details.

DLOCK_APT_UPDATED=${DLOCK_APT_UPDATED:-}

# dlock__pg_major: the PostgreSQL major version to build and test against:
# $DLOCK_PG_MAJOR if set; else the one $DLOCK_PG_BIN belongs to; else the
# newest server installed; else the one this Debian release ships (what its
# "postgresql" package depends on).
dlock__pg_major() {
    local m
    if [ -n "${DLOCK_PG_MAJOR:-}" ]; then
        echo "$DLOCK_PG_MAJOR"; return 0
    fi
    if [ -n "${DLOCK_PG_BIN:-}" ] && [ -x "$DLOCK_PG_BIN/pg_config" ]; then
        "$DLOCK_PG_BIN/pg_config" --version | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p'
        return 0
    fi
    m=$(ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sed -nE 's#^/usr/lib/postgresql/([0-9]+)/.*#\1#p' | sort -n | tail -n 1)
    if [ -z "$m" ]; then
        m=$(apt-cache depends postgresql 2>/dev/null | sed -nE 's/^ *Depends: postgresql-([0-9]+)$/\1/p' | head -n 1)
        if [ -z "$m" ] && [ "$(id -u)" -eq 0 ]; then
            DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 &&
                DLOCK_APT_UPDATED=1
            m=$(apt-cache depends postgresql 2>/dev/null | sed -nE 's/^ *Depends: postgresql-([0-9]+)$/\1/p' | head -n 1)
        fi
    fi
    echo "${m:-15}"
}

# DLOCK_PG_BIN may be set to another PostgreSQL installation's bin directory
# (for example a relocated copy, so that two checkouts can test side by side).
DLOCK_PG_MAJOR=$(dlock__pg_major)
DLOCK_PG_BIN=${DLOCK_PG_BIN:-/usr/lib/postgresql/$DLOCK_PG_MAJOR/bin}
DLOCK_PG_CONFIG=$DLOCK_PG_BIN/pg_config
# What a build of dlock and a throwaway cluster need (scripts/demo.sh needs
# no more), and what the whole test suite needs (dlock_ensure_packages
# installs DLOCK_PACKAGES; a script adds to it, or sets it, first).
DLOCK_BUILD_PACKAGES=(postgresql-$DLOCK_PG_MAJOR postgresql-server-dev-$DLOCK_PG_MAJOR
    libpq-dev make gcc)
DLOCK_PACKAGES=("${DLOCK_BUILD_PACKAGES[@]}" libipc-run-perl pgbouncer postgresql-$DLOCK_PG_MAJOR-plproxy)

case ":$PATH:" in
    "$DLOCK_PG_BIN:"*) ;;
    *) PATH="$DLOCK_PG_BIN:$PATH" ;;
esac
export PATH

# Clusters started by dlock_cluster_start and not stopped yet (their DIRs).
DLOCK_CLUSTERS=()
DLOCK_TRAP_SET=

dlock_log() { printf '==> %s\n' "$*" >&2; }
dlock_err() { printf 'ERROR: %s\n' "$*" >&2; }

# dlock_as_postgres CMD [ARGS...]
#   Runs CMD as the postgres user, keeping the environment (PATH, PGHOST,
#   PGPORT, ...). Runs it directly when already postgres.
dlock_as_postgres() {
    if [ "$(id -un)" = postgres ]; then
        "$@"
    else
        runuser -u postgres -- env HOME=/var/lib/postgresql PATH="$PATH" "$@"
    fi
}

# dlock_ensure_packages
#   Installs whichever of DLOCK_PACKAGES are missing (apt-get update once,
#   non-interactive), showing what it installs and apt's own progress lines
#   (downloads, "Setting up ..."; the whole output is in a log under /tmp).
#   Does not touch apt at all when everything is installed already.
dlock_ensure_packages() {
    local missing=() p st log rc start=$SECONDS
    for p in "${DLOCK_PACKAGES[@]}"; do
        st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
        [ "$st" = "install ok installed" ] || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        dlock_err "missing packages (${missing[*]}) and not root: cannot install them"
        return 1
    fi
    dlock_log "installing missing packages with apt-get (with what they need, this can take minutes on a fresh machine): ${missing[*]}"
    log=$(mktemp /tmp/dlock-apt.XXXXXX.log)
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "$DLOCK_APT_UPDATED" ]; then
        dlock_log "apt-get update"
        apt-get -q -y -o DPkg::Lock::Timeout=300 update 2>&1 </dev/null | tee -a "$log" |
            { grep --line-buffered -E '^(Get:|Fetched|Err:|E:|W:)' | sed -u 's/^/    /'; true; } &&
            rc=0 || rc=$?
        if [ "$rc" -ne 0 ]; then
            tail -n 30 "$log" >&2
            dlock_err "apt-get update failed (log: $log)"
            return 1
        fi
        DLOCK_APT_UPDATED=1
    fi
    apt-get -q -y -o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0 \
        --no-install-recommends install "${missing[@]}" 2>&1 </dev/null | tee -a "$log" |
        { grep --line-buffered -E '^([0-9]+ upgraded|Need to get|Get:|Fetched|Setting up|E:|W:)' |
            sed -u 's/^/    /'; true; } && rc=0 || rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -n 30 "$log" >&2
        dlock_err "apt-get install failed (log: $log)"
        return 1
    fi
    dlock_log "packages installed in $((SECONDS - start)) s"
    rm -f "$log"
    return 0
}

# dlock__source_list SRC: the sources of SRC (not build output), NUL-separated
# paths relative to SRC.  In a git work tree: tracked files plus untracked
# files that are not ignored, as they are in the work tree (so uncommitted
# edits are tested too); elsewhere every file but .git.
dlock__source_list() {
    local src=$1
    if command -v git >/dev/null 2>&1 &&
            git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (
            cd "$src" &&
            git ls-files -z --cached --others --exclude-standard |
                while IFS= read -r -d '' f; do
                    [ -e "$f" ] && printf '%s\0' "$f"
                done
        )
    else
        (cd "$src" && find . -path ./.git -prune -o ! -type d -print0 | sed -z 's#^\./##')
    fi
}

# dlock__copy_files SRC DST: copies the files named (NUL-separated) on stdin
# from SRC into DST.
dlock__copy_files() {
    (cd "$1" && tar --null -T - -cf -) | tar -C "$2" -xf -
}

# dlock__copy_tree SRC DST: copies the sources (not build output) of SRC into DST.
dlock__copy_tree() {
    dlock__source_list "$1" | dlock__copy_files "$1" "$2"
}

# dlock__cache_locked [-s] CACHE CMD...: runs CMD holding CACHE's lock
# (shared with -s: a copy out of it; exclusive: its replacement), so that a
# build never copies a cache another build is replacing.
dlock__cache_locked() {
    local mode=-x
    if [ "$1" = -s ]; then mode=-s; shift; fi
    local cache=$1
    shift
    mkdir -p "$(dirname "$cache")" || return 1
    if command -v flock >/dev/null 2>&1; then
        flock "$mode" "$cache.lock" "$@"
    else
        "$@"
    fi
}

# dlock_default_build_cache SRC: the persistent build cache of the source
# tree SRC (a git work tree; nothing for any other tree), one per tree,
# PostgreSQL (DLOCK_PG_CONFIG and its version), compiler and
# DLOCK_MAKE_FLAGS: ${DLOCK_BUILD_CACHE_ROOT:-/var/tmp/dlock-build-cache}/NAME-KEY.
# scripts/test.sh and scripts/demo.sh use it when DLOCK_BUILD_CACHE is unset.
dlock_default_build_cache() {
    local src key
    src=$(cd "$1" && pwd -P) || return 1
    command -v git >/dev/null 2>&1 &&
        git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
    key=$(printf '%s|%s|%s|%s|%s' "$src" "$DLOCK_PG_CONFIG" "$("$DLOCK_PG_CONFIG" --version 2>/dev/null)" \
        "$(gcc --version 2>/dev/null | head -n 1)" "${DLOCK_MAKE_FLAGS:-}" | md5sum | cut -c1-12)
    echo "${DLOCK_BUILD_CACHE_ROOT:-/var/tmp/dlock-build-cache}/$(basename "$src")-$key"
}

# dlock_build_install SRC_DIR [WORK_DIR]
#   Copies SRC_DIR (sources only, no .git, no build output) to WORK_DIR
#   (default: a new mktemp dir /tmp/dlock-build.XXXXXX), chowns it to postgres,
#   builds it there as postgres with `make PG_CONFIG=$DLOCK_PG_CONFIG`, then
#   runs `make install` as root. Nothing is written to SRC_DIR.
#   Sets:
#     DLOCK_BUILD_DIR       the postgres-owned copy (run `make installcheck` there)
#     DLOCK_BUILD_LOG       the build's output (compiler messages)
#     DLOCK_BUILD_WARNINGS  number of lines with `warning:` in the build output
#   Prints the warning lines (if any) to stderr; returns 1 if make or make
#   install fails (with the tail of the log). Warnings alone do not fail here:
#   the caller decides (test.sh fails on them).
#   DLOCK_BUILD_CACHE=DIR: a directory holding an earlier build of a tree
#   with the same files (scripts/mutate.sh: the control run's; scripts/test.sh
#   and demo.sh: dlock_default_build_cache's).  The copy starts from it: a
#   file whose content is the cached one keeps the cached file's time, every
#   other file gets a new one, so make rebuilds only the objects of changed
#   files (and all of them when a header changed: the Makefile's rule).  A
#   tree with other files (one added or removed) gets a full build.  The
#   first build without compiler warnings fills the cache;
#   DLOCK_BUILD_CACHE_REFRESH=1 replaces it after every such build (so the
#   next run compares with the latest).  A build with warnings never fills
#   it: an object the cache gives was compiled without any.
dlock_build_install() {
    local src=${1:?usage: dlock_build_install SRC_DIR [WORK_DIR]} work=${2:-}
    src=$(cd "$src" && pwd) || return 1
    if [ -z "$work" ]; then
        work=$(mktemp -d /tmp/dlock-build.XXXXXX) || return 1
    else
        rm -rf "$work" && mkdir -p "$work" || return 1
    fi
    DLOCK_BUILD_DIR=$work
    DLOCK_BUILD_LOG=$work/build.log
    DLOCK_BUILD_WARNINGS=0
    local cache=${DLOCK_BUILD_CACHE:-} cached= sources changed
    sources=$(mktemp /tmp/dlock-sources.XXXXXX) || return 1
    dlock__source_list "$src" | LC_ALL=C sort -z >"$sources"
    if [ -n "$cache" ] && [ -f "$cache/dlock.so" ] && [ -f "$cache/.dlock-cache/sources" ]; then
        if ! cmp -s "$sources" "$cache/.dlock-cache/sources"; then
            dlock_log "the build cache $cache is of a tree with other files: a full build"
        elif dlock__cache_locked -s "$cache" cp -a "$cache/." "$work/"; then
            cached=1
        else
            dlock_log "copying the build cache $cache failed: a full build"
            find "$work" -mindepth 1 -delete
        fi
    fi
    if [ -n "$cached" ]; then
        # the copy holds the cached sources: replace (and date now) the
        # files that differ from them
        # (a checksum of each side, two processes: a cmp per file would
        # fork hundreds of times)
        changed=$(mktemp /tmp/dlock-changed.XXXXXX) || return 1
        local -a names sums_src sums_work
        local i
        mapfile -d '' -t names <"$sources"
        mapfile -d '' -t sums_src < <(cd "$src" && xargs -0 -r md5sum -z -- <"$sources" 2>/dev/null)
        mapfile -d '' -t sums_work < <(cd "$work" && xargs -0 -r md5sum -z -- <"$sources" 2>/dev/null)
        for i in "${!names[@]}"; do
            if [ ${#sums_src[@]} -ne ${#names[@]} ] || [ ${#sums_work[@]} -ne ${#names[@]} ] ||
                    [ "${sums_src[$i]}" != "${sums_work[$i]}" ]; then
                printf '%s\0' "${names[$i]}"
            fi
        done >"$changed"
        dlock__copy_files "$src" "$work" <"$changed" ||
            { dlock_err "copying $src to $work failed"; rm -f "$sources" "$changed"; return 1; }
        (cd "$work" && xargs -0 -r touch -h -c -- <"$changed")
        dlock_log "build cache $cache: $(tr -cd '\0' <"$changed" | wc -c) file(s) differ from its build: $(tr '\0' ' ' <"$changed" | cut -c1-200)"
        rm -f "$changed"
    else
        dlock__copy_files "$src" "$work" <"$sources" ||
            { dlock_err "copying $src to $work failed"; rm -f "$sources"; return 1; }
    fi
    chown -R postgres:postgres "$work" || return 1
    chmod 755 "$work"

    local jobs start=$SECONDS
    jobs=$(nproc 2>/dev/null || echo 2)
    dlock_log "building dlock in $work (as postgres, make -j$jobs; compiler output in $DLOCK_BUILD_LOG)"
    # DLOCK_MAKE_FLAGS: extra make arguments (scripts/mutate.sh: with_llvm=no)
    # shellcheck disable=SC2086
    if ! (cd "$work" && dlock_as_postgres make -j"$jobs" PG_CONFIG="$DLOCK_PG_CONFIG" ${DLOCK_MAKE_FLAGS:-}) \
            >"$DLOCK_BUILD_LOG" 2>&1; then
        grep -E 'error:|warning:' "$DLOCK_BUILD_LOG" | head -n 40 >&2 || true
        tail -n 30 "$DLOCK_BUILD_LOG" >&2
        dlock_err "make failed (full log: $DLOCK_BUILD_LOG)"
        rm -f "$sources"
        return 1
    fi
    chown postgres:postgres "$DLOCK_BUILD_LOG"
    DLOCK_BUILD_WARNINGS=$(grep -c 'warning:' "$DLOCK_BUILD_LOG" || true)
    if [ "$DLOCK_BUILD_WARNINGS" -gt 0 ]; then
        dlock_err "the build printed $DLOCK_BUILD_WARNINGS compiler warning line(s):"
        grep -B2 -A3 'warning:' "$DLOCK_BUILD_LOG" >&2 || true
    fi

    if [ -n "$cache" ] && [ "$DLOCK_BUILD_WARNINGS" -eq 0 ] &&
            { [ -z "$cached" ] || [ "${DLOCK_BUILD_CACHE_REFRESH:-0}" = 1 ]; }; then
        # a full copy beside it, then swapped in under the lock
        local new=$cache.new.$$
        rm -rf "$new"
        if mkdir -p "$new/.dlock-cache" && cp -a "$work/." "$new/" &&
                cp "$sources" "$new/.dlock-cache/sources" &&
                dlock__cache_locked "$cache" sh -c 'rm -rf "$1" && mv "$2" "$1"' sh "$cache" "$new"; then
            :
        else
            rm -rf "$new"
            dlock_log "could not fill the build cache $cache (builds go on without it)"
        fi
    fi
    rm -f "$sources"
    dlock_log "built in $((SECONDS - start)) s; installing (make install, as root, into $("$DLOCK_PG_CONFIG" --pkglibdir))"
    # shellcheck disable=SC2086
    if ! (cd "$work" && make install PG_CONFIG="$DLOCK_PG_CONFIG" ${DLOCK_MAKE_FLAGS:-}) >>"$DLOCK_BUILD_LOG" 2>&1; then
        tail -n 30 "$DLOCK_BUILD_LOG" >&2
        dlock_err "make install failed (full log: $DLOCK_BUILD_LOG)"
        return 1
    fi
    # make install as root may have written files in the copy; hand them back.
    chown -R postgres:postgres "$work"
    return 0
}

# dlock_free_port: prints a TCP port on 127.0.0.1 that nothing listens on now.
dlock_free_port() {
    local i p
    for i in $(seq 1 200); do
        p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 20000 ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    dlock_err "no free port found"
    return 1
}

dlock__exit_handler() {
    local rc=$?
    dlock_cleanup
    return $rc
}

# dlock_cleanup: stops every cluster started by dlock_cluster_start that is
# still running. Installed as the EXIT trap by dlock_cluster_start; if a
# script sets its own EXIT trap afterwards, it must call dlock_cleanup in it.
dlock_cleanup() {
    local d
    for d in ${DLOCK_CLUSTERS[@]+"${DLOCK_CLUSTERS[@]}"}; do
        dlock_cluster_stop "$d" || true
    done
}

# dlock_cluster_start DIR PORT [EXTRA_CONF_LINE...]
#   Creates and starts a throwaway cluster as the postgres user:
#     DIR/data          PGDATA (initdb -A trust -U postgres -E UTF8 --locale=C)
#     DIR               unix socket directory (DIR is created and chowned to postgres)
#     DIR/postgres.log  server log
#   listen_addresses = '127.0.0.1', fsync on (the default), and
#   shared_preload_libraries = 'dlock'. Each EXTRA_CONF_LINE is appended to
#   postgresql.conf after those, so it wins (e.g. "shared_preload_libraries = ''",
#   "max_connections = 300", "wal_level = replica").
#   PORT: a number, or `auto` / `0` / "" to pick a free one.
#   Sets DLOCK_PGDATA, DLOCK_PGHOST (= DIR), DLOCK_PORT, DLOCK_CLUSTER_DIR,
#   DLOCK_SERVER_LOG, and exports PGHOST, PGPORT, PGUSER=postgres so that
#   psql/pgbench/make installcheck reach this cluster. Installs an EXIT trap
#   (and INT/TERM traps) that stops every started cluster.
dlock_cluster_start() {
    local dir=${1:?usage: dlock_cluster_start DIR PORT [EXTRA_CONF_LINE...]} port=${2:-auto}
    shift; [ $# -gt 0 ] && shift
    local auto=0 try line
    case "$port" in auto|0|'') auto=1 ;; esac

    mkdir -p "$dir" || return 1
    dir=$(cd "$dir" && pwd)
    if [ -e "$dir/data" ]; then
        dlock_err "$dir/data exists already; use a new directory"
        return 1
    fi
    chown postgres:postgres "$dir" && chmod 755 "$dir" || return 1
    if ! dlock_as_postgres test -w "$dir"; then
        dlock_err "the postgres user cannot reach $dir (a parent directory is not searchable by postgres, e.g. a mktemp -d dir: chmod 755 or chown postgres it)"
        return 1
    fi

    if ! dlock_as_postgres initdb -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C \
            --no-instructions >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        dlock_err "initdb failed in $dir/data"
        return 1
    fi
    cp "$dir/data/postgresql.conf" "$dir/postgresql.conf.orig"

    if [ -z "$DLOCK_TRAP_SET" ]; then
        trap dlock__exit_handler EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        DLOCK_TRAP_SET=1
    fi
    # Registered before the start, so the EXIT trap also stops a half-started one.
    DLOCK_CLUSTERS+=("$dir")

    for try in 1 2 3 4 5; do
        if [ $auto = 1 ]; then port=$(dlock_free_port) || return 1; fi
        {
            cat "$dir/postgresql.conf.orig"
            echo
            echo "# --- added by scripts/lib.sh dlock_cluster_start ---"
            echo "listen_addresses = '127.0.0.1'"
            echo "port = $port"
            echo "unix_socket_directories = '$dir'"
            echo "shared_preload_libraries = 'dlock'"
            echo "logging_collector = off"
            echo "log_line_prefix = '%m [%p] %q%a '"
            for line in "$@"; do echo "$line"; done
        } >"$dir/data/postgresql.conf"
        chown postgres:postgres "$dir/data/postgresql.conf"

        if dlock_as_postgres pg_ctl -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start \
                >"$dir/pg_ctl.log" 2>&1; then
            DLOCK_CLUSTER_DIR=$dir
            DLOCK_PGDATA=$dir/data
            DLOCK_PGHOST=$dir
            DLOCK_PORT=$port
            DLOCK_SERVER_LOG=$dir/postgres.log
            export PGHOST=$dir PGPORT=$port PGUSER=postgres
            return 0
        fi
        # A port taken between the check and the start: try another one.
        if [ $auto = 1 ] && grep -q 'could not bind\|Address already in use' "$dir/postgres.log" 2>/dev/null; then
            continue
        fi
        break
    done
    cat "$dir/pg_ctl.log" >&2
    tail -n 30 "$dir/postgres.log" >&2 2>/dev/null || true
    dlock_err "could not start the cluster in $dir (log: $dir/postgres.log)"
    return 1
}

# dlock_cluster_stop DIR
#   Stops the cluster in DIR/data (fast shutdown; immediate if that times out).
#   Does nothing if it is not running. Leaves DIR in place (remove it yourself).
dlock_cluster_stop() {
    local dir=${1:?usage: dlock_cluster_stop DIR} d keep=()
    if [ -f "$dir/data/postmaster.pid" ]; then
        dlock_as_postgres pg_ctl -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
            dlock_as_postgres pg_ctl -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
            true
    fi
    for d in ${DLOCK_CLUSTERS[@]+"${DLOCK_CLUSTERS[@]}"}; do
        [ "$d" = "$dir" ] || keep+=("$d")
    done
    DLOCK_CLUSTERS=(${keep[@]+"${keep[@]}"})
    return 0
}

# dlock_tagged_pids NAME=VALUE [DIR...]
#   Prints (space-separated) the pids of the processes whose environment has
#   NAME=VALUE (a script exports a tag of its own before it starts anything:
#   every process it starts, and every process those start, inherits it,
#   even a daemon that detached with setsid, such as a postmaster started
#   by pg_ctl), and of the processes whose working directory is under one
#   of the DIRs (a postmaster and its backends work in their data
#   directory, also after it was deleted).  Only bash builtins read /proc
#   after one find has read every working directory, so the scan does not
#   find itself; the calling shell is left out.
dlock_tagged_pids() {
    local want=${1:?usage: dlock_tagged_pids NAME=VALUE [DIR...]} p pid cwd d x out=()
    shift
    local -a env
    # every process's working directory, read by one find (a readlink per
    # process forks as many times as there are processes: seconds on a
    # loaded machine, for each scan)
    local -A cwds=()
    if [ $# -gt 0 ]; then
        while IFS=$'\t' read -r -d '' p cwd; do
            cwds[${p#/proc/}]=$cwd
        done < <(find /proc/[0-9]*/cwd -maxdepth 0 -printf '%h\t%l\0' 2>/dev/null)
    fi
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = "$$" ] || [ "$pid" = "${BASHPID:-}" ] && continue
        if mapfile -d "" -t env 2>/dev/null <"$p/environ"; then
            for x in ${env[@]+"${env[@]}"}; do
                if [ "$x" = "$want" ]; then out+=("$pid"); continue 2; fi
            done
        fi
        [ $# -gt 0 ] || continue
        cwd=${cwds[$pid]-}
        [ -n "$cwd" ] || continue
        for d in "$@"; do
            [ -n "$d" ] || continue
            case "$cwd" in "$d" | "$d"/* | "$d (deleted)") out+=("$pid"); continue 2 ;; esac
        done
    done
    echo "${out[*]}"
}

# dlock_list_pids PIDS...: one line per live process on stderr: pid, user,
# command line.
dlock_list_pids() {
    local p cmd
    for p in "$@"; do
        cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | cut -c1-160)
        [ -n "$cmd" ] || continue
        printf '    pid %s (%s): %s\n' "$p" "$(stat -c %U "/proc/$p" 2>/dev/null)" "$cmd" >&2
    done
}

# dlock_stop_pids PIDS...
#   Stops these processes, by pid: SIGQUIT to the PostgreSQL ones (an
#   immediate shutdown: a postmaster stops its backends and frees its shared
#   memory), SIGTERM to the others, SIGKILL to whatever is left 10 s later.
#   Prints one line per process (pid, user, command line) on stderr first.
dlock_stop_pids() {
    local p comm n
    [ $# -gt 0 ] || return 0
    dlock_list_pids "$@"
    for p in "$@"; do
        comm=$(cat "/proc/$p/comm" 2>/dev/null)
        if [ "$comm" = postgres ]; then kill -QUIT "$p" 2>/dev/null; else kill -TERM "$p" 2>/dev/null; fi
    done
    for n in $(seq 1 100); do
        for p in "$@"; do
            # a zombie is gone for our purposes (its parent has to reap it)
            [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && break
            p=
        done
        [ -z "${p:-}" ] && return 0
        sleep 0.1
    done
    for p in "$@"; do kill -KILL "$p" 2>/dev/null; done
    return 0
}

# dlock_psql [PSQL_ARGS...]
#   psql -X -v ON_ERROR_STOP=1 as user postgres against the last cluster
#   started (DLOCK_PGHOST/DLOCK_PORT), database ${DLOCK_DB:-postgres} unless
#   PSQL_ARGS give -d. Example: dlock_psql -Atc 'SELECT dlock_acquire($$k$$, $$me$$)'
dlock_psql() {
    psql -X -v ON_ERROR_STOP=1 -h "${DLOCK_PGHOST:?no cluster started}" -p "$DLOCK_PORT" \
        -U postgres -d "${DLOCK_DB:-postgres}" "$@"
}
