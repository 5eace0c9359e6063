# scripts/roots.sh - the Debian roots that scripts/test-matrix.sh and
# bench/in_root.sh run in (sourced; needs REPO and ROOTS set): one cached
# debootstrap root per suite (bookworm, trixie, sid) under ROOTS, made on
# first use; /proc, /sys and /dev mounted into it for a run; a copy of the
# checkout (tracked and untracked files, not ignored ones) put inside.

mirror() {
    if [ -n "${DLOCK_MIRROR:-}" ]; then echo "$DLOCK_MIRROR"; return; fi
    local m
    m=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
        grep -v security | head -n 1 | awk '{print $2}')
    echo "${m:-http://deb.debian.org/debian}"
}

MOUNTED=()
umount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        umount -l "${MOUNTED[$i]}" 2>/dev/null || true
    done
    MOUNTED=()
}
trap umount_all EXIT

mount_in() {    # mount_in ROOT: /proc, /sys, /dev, /dev/pts inside ROOT
    local r=$1
    mountpoint -q "$r/proc" || { mount -t proc proc "$r/proc" && MOUNTED+=("$r/proc"); }
    mountpoint -q "$r/sys" || { mount -t sysfs sys "$r/sys" && MOUNTED+=("$r/sys"); }
    mountpoint -q "$r/dev" || { mount --bind /dev "$r/dev" && MOUNTED+=("$r/dev"); }
    mkdir -p "$r/dev/pts"
    mountpoint -q "$r/dev/pts" || { mount --bind /dev/pts "$r/dev/pts" && MOUNTED+=("$r/dev/pts"); }
}

make_root() {   # make_root SUITE: the cached root, made if missing
    local suite=$1 r="$ROOTS/$1"
    if [ "${DLOCK_MATRIX_FRESH:-0}" = 1 ]; then
        rm -rf "$r"
    fi
    if [ ! -x "$r/bin/bash" ]; then
        command -v debootstrap >/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=300 install debootstrap >/dev/null ||
            return 1
        echo "==> [$suite] debootstrap into $r ($(mirror)); a few minutes, its phases below"
        rm -rf "$r.partial"
        mkdir -p "$ROOTS"
        # its phases, not one line per package (those are in the log)
        debootstrap --variant=minbase --include=ca-certificates "$suite" "$r.partial" "$(mirror)" 2>&1 |
            tee "$ROOTS/$suite.debootstrap.log" |
            { grep --line-buffered -vE '^I: (Retrieving|Validating|Extracting|Unpacking|Configuring) [a-z0-9]' |
                sed -u 's/^/    /'; true; } || {
            tail -n 20 "$ROOTS/$suite.debootstrap.log"; return 1; }
        mv "$r.partial" "$r"
    fi
    chmod 755 "$r"
    # the root's own settings: no service starts from package scripts, no
    # default cluster, and unstable's Release file may be past Valid-Until
    printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
    chmod 755 "$r/usr/sbin/policy-rc.d"
    mkdir -p "$r/etc/postgresql-common/createcluster.d"
    echo 'create_main_cluster = false' >"$r/etc/postgresql-common/createcluster.d/dlock-matrix.conf"
    echo 'Acquire::Check-Valid-Until "false";' >"$r/etc/apt/apt.conf.d/99dlock-matrix"
    cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
    return 0
}

copy_checkout() {   # copy_checkout ROOT [DIR]: the checkout at ROOT/root/DIR (default dlock)
    local dst="$1/root/${2:-dlock}"
    rm -rf "$dst"
    mkdir -p "$dst"
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$dst" -xf -
}

