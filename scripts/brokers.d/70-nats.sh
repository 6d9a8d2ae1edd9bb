# NATS with JetStream, nats-server 2.14.9 built once with `go install` from the Go module proxy
# into $BQ_CACHE/tools (about 1.5 min on a new machine), on 127.0.0.1:4222 (client) and
# 127.0.0.1:8222 (monitoring), file storage under $BQ_BROKERS_DIR/nats. Used by the
# babelqueue-transport-nats crate, the downstream-style transport built only on the public
# API of babelqueue-core and babelqueue-testkit.
#
# Not Debian's nats-server 2.9.10: it often ignores a -NAK's delay and redelivers only after
# the consumer's ack wait (the live retry test, a 200 ms delayed -NAK, failed 10 of 17 runs on
# it and 0 of 18 on 2.14.9).
BROKERS+=(nats)
NATS_PORT=${BQ_NATS_PORT:-4222}
NATS_HTTP_PORT=${BQ_NATS_HTTP_PORT:-8222}
NATS_DIR="$BQ_BROKERS_DIR/nats"

NATS_VERSION=2.14.9
NATS_BIN="$BQ_CACHE/tools/nats-server-$NATS_VERSION/nats-server"

install_nats() {
    [ -x "$NATS_BIN" ] && return 0
    command -v go >/dev/null || { log "nats: Go is needed to build nats-server"; return 1; }
    log "nats: building nats-server $NATS_VERSION (go install)"
    GOBIN="$(dirname "$NATS_BIN")" GOFLAGS=-mod=mod \
        go install "github.com/nats-io/nats-server/v2@v$NATS_VERSION"
}

start_nats() {
    mkdir -p "$NATS_DIR/jetstream"
    nohup "$NATS_BIN" --addr 127.0.0.1 --port "$NATS_PORT" --http_port "$NATS_HTTP_PORT" \
        --jetstream --store_dir "$NATS_DIR/jetstream" --pid "$NATS_DIR/nats.pid" \
        --log "$NATS_DIR/nats.log" >/dev/null 2>&1 &
}

ready_nats() {
    (exec 3<>"/dev/tcp/127.0.0.1/$NATS_PORT") 2>/dev/null &&
        command -v curl >/dev/null &&
        curl -fsS "http://127.0.0.1:$NATS_HTTP_PORT/jsz" >/dev/null 2>&1
}

stop_nats() {
    local pid
    pid=$(cat "$NATS_DIR/nats.pid" 2>/dev/null) || return 0
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        local waited=0
        while kill -0 "$pid" 2>/dev/null && [ $waited -lt 50 ]; do
            sleep 0.2
            waited=$((waited + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$NATS_DIR/nats.pid"
}

env_nats() {
    echo "export BQ_NATS_URL=nats://127.0.0.1:$NATS_PORT"
    echo "export BQ_NATS_SERVER=$NATS_BIN"
}
