# The Prometheus server (Debian's build), for the test in which a real Prometheus scrapes a
# worker's `/metrics`. Only its binaries are unpacked into $BQ_CACHE/tools/prometheus (the
# package's service is never installed or started); each test starts its own server on a port
# it probed free, on 127.0.0.1, with a throwaway storage directory.
BROKERS+=(prometheus)
PROMETHEUS_DIR="$BQ_CACHE/tools/prometheus"
install_prometheus() {
    [ -x "$PROMETHEUS_DIR/usr/bin/prometheus" ] && return 0
    local tmp sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    tmp=$(mktemp -d)
    chmod 755 "$tmp" # apt's download user must be able to write there
    log "apt-get download prometheus"
    if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
        DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >/dev/null
        (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1) || {
            log "prometheus: apt-get download failed"
            return 1
        }
    fi
    mkdir -p "$PROMETHEUS_DIR"
    dpkg -x "$tmp"/prometheus_*.deb "$PROMETHEUS_DIR"
    rm -rf "$tmp"
}
start_prometheus() { :; }
ready_prometheus() { "$PROMETHEUS_DIR/usr/bin/prometheus" --version >/dev/null 2>&1; }
stop_prometheus() { :; }
env_prometheus() { echo "export BQ_PROMETHEUS=$PROMETHEUS_DIR/usr/bin/prometheus"; }
