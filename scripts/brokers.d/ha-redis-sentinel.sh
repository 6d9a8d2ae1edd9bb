# Redis Sentinel (opt-in: `scripts/brokers.sh up redis-sentinel`): one master, two replicas and
# three sentinels watching the service `mymaster` (quorum 2), every process on 127.0.0.1 on a
# free port, no persistence. The ports are recorded in $BQ_BROKERS_DIR/redis-sentinel/ports
# (`master=… replicas=… … sentinels=… …`), which `env` reads.
#
# Replication authenticates as the ACL user `bq-repl` (password `bq-repl-secret`, on every
# server), so a test can cut replication from the master (`ACL SETUSER bq-repl off` and
# `CLIENT KILL USER bq-repl`), as a partition between the master and its replicas would. Clients
# and sentinels use the default user (no password). A sentinel declares the master down after
# 1 s without an answer.
HA+=(redis-sentinel)
SENTINEL_DIR="$BQ_BROKERS_DIR/redis-sentinel"
SENTINEL_SERVICE=mymaster

install_redis-sentinel() { command -v redis-server >/dev/null || apt_install redis-server; }

# sentinel_ports KIND : the ports of KIND (servers: the master and the replicas as started;
# sentinels) from the ports file.
sentinel_ports() {
    sed -n "s/^$1=//p" "$SENTINEL_DIR/ports" 2>/dev/null
}

start_redis-sentinel() {
    rm -rf "$SENTINEL_DIR"
    mkdir -p "$SENTINEL_DIR"
    local master replicas=() sentinels=() p ports=()
    read -r -a ports <<< "$(ha_free_ports 6)"
    master=${ports[0]}
    replicas=("${ports[1]}" "${ports[2]}")
    sentinels=("${ports[3]}" "${ports[4]}" "${ports[5]}")
    for p in "$master" "${replicas[@]}"; do
        mkdir -p "$SENTINEL_DIR/$p"
        {
            echo "port $p"
            echo "bind 127.0.0.1"
            echo "daemonize yes"
            echo "dir $SENTINEL_DIR/$p"
            echo "pidfile $SENTINEL_DIR/$p/redis.pid"
            echo "logfile $SENTINEL_DIR/$p/redis.log"
            echo 'save ""'
            echo "appendonly no"
            echo "user bq-repl on >bq-repl-secret ~* &* +@all"
            echo "masteruser bq-repl"
            echo "masterauth bq-repl-secret"
            [ "$p" = "$master" ] || echo "replicaof 127.0.0.1 $master"
        } > "$SENTINEL_DIR/$p/redis.conf"
        redis-server "$SENTINEL_DIR/$p/redis.conf"
    done
    for p in "${sentinels[@]}"; do
        mkdir -p "$SENTINEL_DIR/$p"
        {
            echo "port $p"
            echo "bind 127.0.0.1"
            echo "daemonize yes"
            echo "dir $SENTINEL_DIR/$p"
            echo "pidfile $SENTINEL_DIR/$p/sentinel.pid"
            echo "logfile $SENTINEL_DIR/$p/sentinel.log"
            echo "sentinel monitor $SENTINEL_SERVICE 127.0.0.1 $master 2"
            echo "sentinel down-after-milliseconds $SENTINEL_SERVICE 1000"
            echo "sentinel failover-timeout $SENTINEL_SERVICE 6000"
            echo "sentinel parallel-syncs $SENTINEL_SERVICE 2"
        } > "$SENTINEL_DIR/$p/sentinel.conf"
        redis-server "$SENTINEL_DIR/$p/sentinel.conf" --sentinel
    done
    {
        echo "servers=$master ${replicas[*]}"
        echo "sentinels=${sentinels[*]}"
    } > "$SENTINEL_DIR/ports"
}

# Up: every sentinel names a master that has two connected replicas, and knows the other two
# sentinels and both replicas.
ready_redis-sentinel() {
    local s master port
    [ -s "$SENTINEL_DIR/ports" ] || return 1
    for s in $(sentinel_ports sentinels); do
        master=$(redis-cli -p "$s" sentinel get-master-addr-by-name "$SENTINEL_SERVICE" 2>/dev/null) || return 1
        port=$(echo "$master" | sed -n 2p)
        [ -n "$port" ] || return 1
        redis-cli -p "$port" info replication 2>/dev/null | grep -q '^connected_slaves:2' || return 1
        redis-cli -p "$s" sentinel master "$SENTINEL_SERVICE" 2>/dev/null |
            tr -d '\r' | paste - - | grep -qx $'num-other-sentinels\t2' || return 1
        redis-cli -p "$s" sentinel master "$SENTINEL_SERVICE" 2>/dev/null |
            tr -d '\r' | paste - - | grep -qx $'num-slaves\t2' || return 1
    done
}

stop_redis-sentinel() {
    local p
    [ -s "$SENTINEL_DIR/ports" ] || return 0
    for p in $(sentinel_ports sentinels) $(sentinel_ports servers); do
        redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
    done
    rm -f "$SENTINEL_DIR/ports"
}

env_redis-sentinel() {
    [ -s "$SENTINEL_DIR/ports" ] || return 0
    local hosts="" s
    for s in $(sentinel_ports sentinels); do hosts="$hosts${hosts:+,}127.0.0.1:$s"; done
    echo "export BQ_REDIS_SENTINEL_URL=redis+sentinel://$hosts/$SENTINEL_SERVICE"
}
