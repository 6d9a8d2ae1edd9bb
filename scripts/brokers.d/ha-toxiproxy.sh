# Toxiproxy (Shopify's TCP fault proxy), an HA component: `scripts/brokers.sh up toxiproxy` (or
# `up ha`); a plain `up` leaves it alone. Built once with `go install` from the Go module proxy
# into $BQ_CACHE/tools (about 20 s on a new machine; the binary of its cmd/server package is
# called `server`). Its HTTP API listens on 127.0.0.1 on a free port taken at start and recorded
# in $BQ_BROKERS_DIR/toxiproxy/port; proxies are made through the API by whoever needs them
# (the chaos harness makes one per row, listening on 127.0.0.1, and deletes it after the row).
# It logs one JSON line per accepted client connection ("Accepted client", with the proxy's
# name) to $BQ_BROKERS_DIR/toxiproxy/toxiproxy.log: that is how the harness counts the
# connections a worker opened through its proxy. The log is emptied at each start.
HA+=(toxiproxy)
TOXIPROXY_VERSION=2.12.0
TOXIPROXY_BIN="$BQ_CACHE/tools/toxiproxy-$TOXIPROXY_VERSION/server"
TOXIPROXY_DIR="$BQ_BROKERS_DIR/toxiproxy"

install_toxiproxy() {
    [ -x "$TOXIPROXY_BIN" ] && return 0
    command -v go >/dev/null || { log "toxiproxy: Go is needed to build toxiproxy"; return 1; }
    command -v curl >/dev/null || apt_install curl
    log "toxiproxy: building toxiproxy $TOXIPROXY_VERSION (go install)"
    GOBIN="$(dirname "$TOXIPROXY_BIN")" GOFLAGS=-mod=mod \
        go install "github.com/Shopify/toxiproxy/v2/cmd/server@v$TOXIPROXY_VERSION"
}

toxiproxy_port() { cat "$TOXIPROXY_DIR/port" 2>/dev/null; }

# Starts the server on a free port; when another process took that port first (the server
# exits at once), again on another one, three times at most.
start_toxiproxy() {
    mkdir -p "$TOXIPROXY_DIR"
    local port pid attempt i
    : > "$TOXIPROXY_DIR/toxiproxy.log"
    for attempt in 1 2 3; do
        port=$(ha_free_port)
        echo "$port" > "$TOXIPROXY_DIR/port"
        LOG_LEVEL=info nohup "$TOXIPROXY_BIN" -host 127.0.0.1 -port "$port" \
            >>"$TOXIPROXY_DIR/toxiproxy.log" 2>&1 &
        pid=$!
        echo "$pid" > "$TOXIPROXY_DIR/toxiproxy.pid"
        for i in $(seq 50); do
            ready_toxiproxy && return 0
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && return 0 # still starting: wait_for goes on waiting
        log "toxiproxy exited at start on port $port (attempt $attempt): $(tail -n 2 "$TOXIPROXY_DIR/toxiproxy.log")"
    done
    return 1
}

# Up when the API on the recorded port answers and the process of the pid file is alive (so a
# server someone else runs on that port is not taken for ours).
ready_toxiproxy() {
    local port pid
    port=$(toxiproxy_port) || return 1
    pid=$(cat "$TOXIPROXY_DIR/toxiproxy.pid" 2>/dev/null) || return 1
    [ -n "$port" ] && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
        curl -fsS --max-time 2 "http://127.0.0.1:$port/version" >/dev/null 2>&1
}

stop_toxiproxy() {
    local pid
    pid=$(cat "$TOXIPROXY_DIR/toxiproxy.pid" 2>/dev/null) || return 0
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        local waited=0
        while kill -0 "$pid" 2>/dev/null && [ $waited -lt 50 ]; do
            sleep 0.2
            waited=$((waited + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$TOXIPROXY_DIR/toxiproxy.pid"
}

# Only while it runs: a recorded port of a stopped server would point the tests at nothing.
env_toxiproxy() {
    ready_toxiproxy || return 0
    echo "export BQ_TOXIPROXY_URL=http://127.0.0.1:$(toxiproxy_port)"
    echo "export BQ_TOXIPROXY_LOG=$TOXIPROXY_DIR/toxiproxy.log"
}
