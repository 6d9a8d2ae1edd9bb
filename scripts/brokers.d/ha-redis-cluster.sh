# Redis Cluster (opt-in: `scripts/brokers.sh up redis-cluster`): three masters and three
# replicas (one each), every node on 127.0.0.1 on a free port with its cluster bus on another
# free port (`cluster-port`), no persistence, a node declared failed after 2 s. Each node's
# directory $BQ_BROKERS_DIR/redis-cluster/<port> holds its redis.conf (a test that kills a node
# starts it again with `redis-server <dir>/<port>/redis.conf`: it rejoins from its nodes.conf).
# The ports are recorded in $BQ_BROKERS_DIR/redis-cluster/ports, which `env` reads.
HA+=(redis-cluster)
CLUSTER_DIR="$BQ_BROKERS_DIR/redis-cluster"

install_redis-cluster() { command -v redis-server >/dev/null || apt_install redis-server; }

cluster_nodes() { cat "$CLUSTER_DIR/ports" 2>/dev/null; }

start_redis-cluster() {
    rm -rf "$CLUSTER_DIR"
    mkdir -p "$CLUSTER_DIR"
    local nodes=() p i ports=()
    # Six client ports, then six cluster-bus ports.
    read -r -a ports <<< "$(ha_free_ports 12)"
    for i in 0 1 2 3 4 5; do
        p=${ports[$i]}
        nodes+=("$p")
        mkdir -p "$CLUSTER_DIR/$p"
        {
            echo "port $p"
            echo "cluster-port ${ports[$((i + 6))]}"
            echo "bind 127.0.0.1"
            echo "daemonize yes"
            echo "dir $CLUSTER_DIR/$p"
            echo "pidfile $CLUSTER_DIR/$p/redis.pid"
            echo "logfile $CLUSTER_DIR/$p/redis.log"
            echo 'save ""'
            echo "appendonly no"
            echo "cluster-enabled yes"
            echo "cluster-config-file nodes.conf"
            echo "cluster-node-timeout 2000"
        } > "$CLUSTER_DIR/$p/redis.conf"
        redis-server "$CLUSTER_DIR/$p/redis.conf"
    done
    for p in "${nodes[@]}"; do
        local waited=0
        until redis-cli -p "$p" ping 2>/dev/null | grep -q PONG; do
            [ $waited -lt 50 ] || { log "redis-cluster: node $p did not start"; return 1; }
            sleep 0.1
            waited=$((waited + 1))
        done
    done
    local addresses=()
    for p in "${nodes[@]}"; do addresses+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${addresses[@]}" --cluster-replicas 1 --cluster-yes >"$CLUSTER_DIR/create.log" 2>&1 || {
        log "redis-cluster: redis-cli --cluster create failed (see $CLUSTER_DIR/create.log)"
        return 1
    }
    echo "${nodes[*]}" > "$CLUSTER_DIR/ports"
}

# Up: every node sees the cluster whole (all 16384 slots served, six nodes known) and three of
# them are masters with a replica each.
ready_redis-cluster() {
    local p info masters
    [ -s "$CLUSTER_DIR/ports" ] || return 1
    for p in $(cluster_nodes); do
        info=$(redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r') || return 1
        echo "$info" | grep -qx 'cluster_state:ok' || return 1
        echo "$info" | grep -qx 'cluster_slots_ok:16384' || return 1
        echo "$info" | grep -qx 'cluster_known_nodes:6' || return 1
    done
    masters=$(redis-cli -p "$(cluster_nodes | cut -d' ' -f1)" cluster nodes 2>/dev/null |
        awk '$3 ~ /master/ && $3 !~ /fail/ && NF > 8' | wc -l)
    [ "$masters" -eq 3 ]
}

stop_redis-cluster() {
    local p
    [ -s "$CLUSTER_DIR/ports" ] || return 0
    for p in $(cluster_nodes); do
        redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
    done
    rm -f "$CLUSTER_DIR/ports"
}

env_redis-cluster() {
    [ -s "$CLUSTER_DIR/ports" ] || return 0
    local hosts="" p
    for p in $(cluster_nodes); do hosts="$hosts${hosts:+,}127.0.0.1:$p"; done
    echo "export BQ_REDIS_CLUSTER_URL=redis+cluster://$hosts"
    echo "export BQ_REDIS_CLUSTER_DIR=$CLUSTER_DIR"
}
