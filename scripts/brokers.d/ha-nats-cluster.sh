# A three-server NATS cluster with JetStream on 127.0.0.1, for the replicated-stream (R3) and
# stream-leader failover tests. Opt-in (an `ha-` file): `scripts/brokers.sh up nats-cluster`
# starts it, a plain `up` does not. The same nats-server binary as 70-nats.sh, separate from the
# shared server on 4222, which it never touches.
#
# The servers are n1, n2 and n3 of the cluster `bq-ha`, routed to each other. Each has three
# ports (client, cluster route, monitoring), free ones probed on a fresh start and written into
# its config, and its own directory $NATSC_DIR/<name>/ with nats.conf, nats.pid, nats.log and
# the JetStream store js/. A fresh start (no server of the cluster running) begins with empty
# stores; a start while some still run starts only the missing ones, with their old config, so
# a server a test killed comes back as itself.
#
# A test that kills the stream leader reads the leader's server name (STREAM.INFO's
# cluster.leader, or /jsz on a monitoring port), then $BQ_NATS_CLUSTER_DIR/<name>/nats.pid, and
# restarts it with `$BQ_NATS_SERVER -c $BQ_NATS_CLUSTER_DIR/<name>/nats.conf`.
#
# Ready: every server answers on its monitoring port and reports a JetStream meta leader.
HA+=(nats-cluster)
NATSC_DIR="$BQ_BROKERS_DIR/nats-cluster"
NATSC_NAMES=(n1 n2 n3)

install_nats-cluster() { install_nats; }

# natsc_port NAME KIND : the port of KIND (client, cluster, http) in NAME's config.
natsc_port() {
    sed -n "s/^# $2=//p" "$NATSC_DIR/$1/nats.conf" 2>/dev/null
}

# natsc_pid NAME : the pid of server NAME when it runs (a nats-server started with its config),
# else nothing.
natsc_pid() {
    local pid
    pid=$(cat "$NATSC_DIR/$1/nats.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && { tr "\\0" " " < "/proc/$pid/cmdline"; } 2>/dev/null |
        grep -qF -- "$NATSC_DIR/$1/nats.conf" && echo "$pid"
}

# natsc_configure : fresh ports and a config for each server.
natsc_configure() {
    local ports i n routes=""
    read -r -a ports <<< "$(ha_free_ports 9)"
    for i in 0 1 2; do
        routes="$routes, nats-route://127.0.0.1:${ports[$((i + 3))]}"
    done
    routes=${routes#, }
    for i in 0 1 2; do
        n=${NATSC_NAMES[$i]}
        mkdir -p "$NATSC_DIR/$n/js"
        cat > "$NATSC_DIR/$n/nats.conf" <<EOF
# client=${ports[$i]}
# cluster=${ports[$((i + 3))]}
# http=${ports[$((i + 6))]}
server_name: $n
listen: 127.0.0.1:${ports[$i]}
http: 127.0.0.1:${ports[$((i + 6))]}
pid_file: "$NATSC_DIR/$n/nats.pid"
log_file: "$NATSC_DIR/$n/nats.log"
jetstream {
    store_dir: "$NATSC_DIR/$n/js"
    max_memory_store: 256MB
    max_file_store: 2GB
}
cluster {
    name: bq-ha
    listen: 127.0.0.1:${ports[$((i + 3))]}
    routes: [$routes]
}
EOF
    done
}

start_nats-cluster() {
    local n running=0
    for n in "${NATSC_NAMES[@]}"; do
        [ -n "$(natsc_pid "$n")" ] && running=$((running + 1))
    done
    if [ "$running" -eq 0 ]; then
        rm -rf "$NATSC_DIR"
        natsc_configure
    fi
    for n in "${NATSC_NAMES[@]}"; do
        [ -n "$(natsc_pid "$n")" ] && continue
        nohup "$NATS_BIN" -c "$NATSC_DIR/$n/nats.conf" >/dev/null 2>&1 &
    done
}

ready_nats-cluster() {
    local n http
    command -v curl >/dev/null || return 1
    for n in "${NATSC_NAMES[@]}"; do
        http=$(natsc_port "$n" http)
        [ -n "$http" ] && [ -n "$(natsc_pid "$n")" ] || return 1
        curl -fsS "http://127.0.0.1:$http/jsz" 2>/dev/null |
            tr -d ' \n' | grep -q '"meta_cluster":{[^}]*"leader":"[^"]' || return 1
    done
}

stop_nats-cluster() {
    local n pid waited
    for n in "${NATSC_NAMES[@]}"; do
        pid=$(natsc_pid "$n") || continue
        kill "$pid"
        waited=0
        while kill -0 "$pid" 2>/dev/null && [ $waited -lt 50 ]; do
            sleep 0.2
            waited=$((waited + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        rm -f "$NATSC_DIR/$n/nats.pid"
    done
    return 0
}

# Nothing while none of the cluster's servers runs.
env_nats-cluster() {
    local n hosts="" http="" running=""
    for n in "${NATSC_NAMES[@]}"; do
        running="$running$(natsc_pid "$n" || true)"
    done
    [ -n "$running" ] || return 0
    for n in "${NATSC_NAMES[@]}"; do
        hosts="$hosts,127.0.0.1:$(natsc_port "$n" client)"
        http="$http,http://127.0.0.1:$(natsc_port "$n" http)"
    done
    echo "export BQ_NATS_CLUSTER_URL=nats://${hosts#,}"
    echo "export BQ_NATS_CLUSTER_MONITOR=${http#,}"
    echo "export BQ_NATS_CLUSTER_DIR=$NATSC_DIR"
    echo "export BQ_NATS_SERVER=$NATS_BIN"
}
