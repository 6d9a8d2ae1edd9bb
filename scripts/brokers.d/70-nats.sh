# NATS with JetStream, from Debian (nats-server 2.9), on 127.0.0.1:4222 (client) and
# 127.0.0.1:8222 (monitoring), file storage under $BQ_BROKERS_DIR/nats. Used by the
# babelqueue-transport-nats crate, the downstream-style transport built only on the public
# API of babelqueue-core and babelqueue-testkit.
BROKERS+=(nats)
NATS_PORT=${BQ_NATS_PORT:-4222}
NATS_HTTP_PORT=${BQ_NATS_HTTP_PORT:-8222}
NATS_DIR="$BQ_BROKERS_DIR/nats"

install_nats() {
    command -v nats-server >/dev/null || apt_install nats-server
}

start_nats() {
    mkdir -p "$NATS_DIR/jetstream"
    nohup nats-server --addr 127.0.0.1 --port "$NATS_PORT" --http_port "$NATS_HTTP_PORT" \
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

env_nats() { echo "export BQ_NATS_URL=nats://127.0.0.1:$NATS_PORT"; }
