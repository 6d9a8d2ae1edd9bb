#!/usr/bin/env bash
# Installs, starts, checks and stops every broker the tests need, on 127.0.0.1 only.
#
#   scripts/brokers.sh up [NAME...]     install what is missing, start, wait until ready
#   scripts/brokers.sh down [NAME...]   stop
#   scripts/brokers.sh status [NAME...] one line per broker: up / down
#   scripts/brokers.sh env [NAME...]    export lines for the test environment (eval them)
#   scripts/brokers.sh list [ha]        the known brokers (or the HA components)
#
# Each broker lives in scripts/brokers.d/<name>.sh and defines install_<name>, start_<name>,
# ready_<name>, stop_<name> and env_<name>. Downloads and data go to $BQ_CACHE (default:
# ../cache next to the checkout), never into the checkout.
#
# The `ha` group: scripts/brokers.d/ha-*.sh declare components for the high-availability and
# network-fault runs (`cargo xtask chaos --ha`): Toxiproxy, clusters. They add themselves to
# HA instead of BROKERS, so a plain `up` does not start them; `up ha` starts all of them,
# `up NAME` one. `status`, `env` and `down` without names cover both groups. Each takes free
# ports of 127.0.0.1 when it starts (ha_free_port) and records them under
# $BQ_BROKERS_DIR/<name>/, where `env` reads them back.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export BQ_CACHE=${BQ_CACHE:-$(cd "$ROOT/.." && pwd)/cache}
export BQ_BROKERS_DIR=${BQ_BROKERS_DIR:-$BQ_CACHE/brokers}
mkdir -p "$BQ_BROKERS_DIR"

log() { printf 'brokers: %s\n' "$*" >&2; }

# test_tls_material DIR CA_NAME : a throwaway CA (DIR/ca.crt, ca.key) and a server certificate
# for 127.0.0.1 and localhost (DIR/server.crt, server.key) signed by it, made once.
test_tls_material() {
    local d=$1
    [ -s "$d/server.crt" ] && return 0
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$2" \
        -keyout "$d/ca.key" -out "$d/ca.crt" >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$d/ext.cnf"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -days 3650 -extfile "$d/ext.cnf" -out "$d/server.crt" >/dev/null 2>&1
}

APT_UPDATED=0
# apt_install PACKAGE... : installs the Debian packages that are not installed yet.
apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if [ $APT_UPDATED -eq 0 ]; then
        log "apt-get update"
        DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >/dev/null
        APT_UPDATED=1
    fi
    log "apt-get install ${missing[*]}"
    # Keep package post-install scripts from starting services: we start them ourselves.
    printf '#!/bin/sh\nexit 101\n' > "$BQ_BROKERS_DIR/policy-rc.d"
    $sudo cp "$BQ_BROKERS_DIR/policy-rc.d" /usr/sbin/policy-rc.d 2>/dev/null && $sudo chmod +x /usr/sbin/policy-rc.d || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    $sudo rm -f /usr/sbin/policy-rc.d || true
}

# maven_fetch GROUP:ARTIFACT:VERSION[:TYPE[:CLASSIFIER]] DEST_DIR : copies one artifact (and, for
# jars, its runtime dependencies) from Maven Central into DEST_DIR.
maven_fetch() {
    local coords=$1 dest=$2
    mkdir -p "$dest"
    mvn -q -B dependency:copy -Dartifact="$coords" -DoutputDirectory="$dest" \
        -Dmaven.repo.local="$BQ_CACHE/m2" >/dev/null
}

# ha_free_ports N : prints N distinct ports of 127.0.0.1 that nothing listens on, from
# 20000-29999 (below the kernel's ephemeral range, so no outgoing connection holds one).
# Another process may still take one before the server binds it: a start checks that the
# server it started answers there.
ha_free_ports() {
    local want=${1:-1} i p picked=" "
    for i in $(seq 2000); do
        [ "$want" -gt 0 ] || break
        p=$((20000 + RANDOM % 10000))
        case "$picked" in *" $p "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            picked="$picked$p "
            want=$((want - 1))
        fi
    done
    if [ "$want" -gt 0 ]; then
        log "not enough free ports in 20000-29999"
        return 1
    fi
    echo $picked
}

# ha_free_port : one port, as ha_free_ports gives them.
ha_free_port() { ha_free_ports 1; }

# ha_conf_port CONF KIND : the port of KIND a component's start wrote into its config file CONF
# as a `# KIND=PORT` comment line.
ha_conf_port() {
    sed -n "s/^# $2=//p" "$1" 2>/dev/null
}

# ha_stop_pid PID PIDFILE : stops PID (TERM, up to 30 s for a JVM to flush, then KILL) and
# removes PIDFILE.
ha_stop_pid() {
    local waited=0
    kill "$1"
    while kill -0 "$1" 2>/dev/null && [ $waited -lt 150 ]; do
        sleep 0.2
        waited=$((waited + 1))
    done
    kill -0 "$1" 2>/dev/null && kill -9 "$1"
    rm -f "$2"
    return 0
}

# ha_jvm_pid PIDFILE CONF : the pid in PIDFILE when that process runs with CONF on its command
# line (a JVM started with its config, not a recycled pid), else nothing.
ha_jvm_pid() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && { tr "\\0" " " < "/proc/$pid/cmdline"; } 2>/dev/null |
        grep -qF -- "$2" && echo "$pid"
}

# wait_for NAME SECONDS : polls ready_NAME until it succeeds or the time is up.
wait_for() {
    local name=$1 limit=$2 waited=0
    until "ready_$name" >/dev/null 2>&1; do
        if [ "$waited" -ge "$((limit * 5))" ]; then
            log "$name did not become ready within ${limit}s"
            return 1
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
}

BROKERS=()
HA=()
for f in "$ROOT"/scripts/brokers.d/*.sh; do
    # shellcheck source=/dev/null
    . "$f"
done

cmd=${1:-status}
shift || true
# Without names: the brokers (for `up`), or the brokers and the HA components (the other
# commands). The name `ha` stands for every HA component.
if [ $# -gt 0 ]; then
    names=()
    for n in "$@"; do
        if [ "$n" = ha ]; then names+=("${HA[@]}"); else names+=("$n"); fi
    done
elif [ "$cmd" = up ] || [ "$cmd" = list ]; then
    names=("${BROKERS[@]}")
else
    names=("${BROKERS[@]}" "${HA[@]}")
fi

case "$cmd" in
    up)
        for n in "${names[@]}"; do
            "install_$n"
            if "ready_$n" >/dev/null 2>&1; then
                log "$n already up"
            else
                log "starting $n"
                "start_$n"
                wait_for "$n" "${READY_TIMEOUT:-120}"
                log "$n up"
            fi
        done
        ;;
    down)
        for ((i = ${#names[@]} - 1; i >= 0; i--)); do
            "stop_${names[$i]}" || true
        done
        ;;
    status)
        for n in "${names[@]}"; do
            if "ready_$n" >/dev/null 2>&1; then echo "$n up"; else echo "$n down"; fi
        done
        ;;
    env)
        for n in "${names[@]}"; do "env_$n"; done
        ;;
    list)
        if [ ${#names[@]} -gt 0 ]; then printf '%s\n' "${names[@]}"; fi
        ;;
    *)
        echo "usage: $0 up|down|status|env|list [NAME...]" >&2
        exit 2
        ;;
esac
