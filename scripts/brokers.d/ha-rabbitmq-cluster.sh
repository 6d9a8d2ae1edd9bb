# A three-node RabbitMQ cluster on 127.0.0.1, for the quorum-queue and failover tests. Opt-in
# (an `ha-` file): `scripts/brokers.sh up rabbitmq-cluster` starts it, a plain `up` does not.
#
# The nodes are bq-ha-1@localhost, bq-ha-2@localhost and bq-ha-3@localhost, separate from the
# shared `rabbit` node of 20-rabbitmq.sh (which they never touch): each has its own AMQP port and
# distribution port (free ones, probed on the first start and kept in $RMQC_DIR/ports), its own
# data, log and config under $RMQC_DIR/<node>/, and the three share an Erlang cookie of their
# own ($RMQC_DIR/.erlang.cookie: HOME points there for the nodes and for rabbitmqctl). They run
# as the calling user straight from /usr/lib/rabbitmq/bin, not through the Debian wrapper that
# switches to the rabbitmq user, so a test that kills the shared node's VM (pgrep -u rabbitmq)
# never hits them. No plugins (no management listener). epmd is the shared one on 4369.
#
# Memory is kept small: vm_memory_high_watermark.absolute = 512MiB per node (the nodes idle at
# about 110 MiB), the quorum queues' write-ahead log rolls over at 64 MB instead of 512 MB, and
# the Erlang VM runs one scheduler (+S 1:1) with a process limit of 262 144 (+P) instead of a
# million; the allocator flags (+MBas ageffcbf …) stay RabbitMQ's own.
#
# The first start clusters nodes 2 and 3 with node 1 (join_cluster); later starts find each
# other from their data. `$RMQC_DIR/rabbitmqctl -n bq-ha-2@localhost …` runs rabbitmqctl with
# the cluster's cookie; env exports it as BQ_AMQP_CLUSTER_CTL.
HA+=(rabbitmq-cluster)
RMQC_DIR="$BQ_BROKERS_DIR/rabbitmq-cluster"
RMQC_NODES=(bq-ha-1 bq-ha-2 bq-ha-3)
RMQC_BIN=/usr/lib/rabbitmq/bin

# rmqc_port_free PORT : nothing listens on 127.0.0.1:PORT.
rmqc_port_free() {
    ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q . &&
        ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# rmqc_pick FROM TAKEN... : the first free port from FROM up that is not among TAKEN.
rmqc_pick() {
    local p=$1
    shift
    while [ "$p" -lt 65000 ]; do
        case " $* " in
            *" $p "*) ;;
            *) rmqc_port_free "$p" && { echo "$p"; return 0; } ;;
        esac
        p=$((p + 1))
    done
    return 1
}

# rmqc_is PID NODE : PID is NODE's Erlang VM (a process of this cluster whose environment names
# the node).
rmqc_is() {
    grep -qxz "RABBITMQ_NODENAME=$2@localhost" "/proc/$1/environ" 2>/dev/null &&
        grep -qxz "HOME=$RMQC_DIR" "/proc/$1/environ" 2>/dev/null
}

# rmqc_pid NODE : the pid of NODE's Erlang VM when it runs (from its pid file, else found among
# this user's Erlang VMs), else nothing.
rmqc_pid() {
    local pid=""
    [ -s "$RMQC_DIR/$1/pid" ] && pid=$(cat "$RMQC_DIR/$1/pid")
    if [ -n "$pid" ] && rmqc_is "$pid" "$1"; then
        echo "$pid"
        return 0
    fi
    for pid in $(pgrep -u "$(id -u)" beam.smp); do
        rmqc_is "$pid" "$1" && { echo "$pid"; return 0; }
    done
    return 1
}

# rmqc_running NODE : NODE runs (its VM is alive, or it is still registered with epmd).
rmqc_running() {
    [ -n "$(rmqc_pid "$1")" ] || epmd -names 2>/dev/null | grep -q "^name $1 at port "
}

# rmqc_await NODE SECONDS : waits until NODE has booted (await_startup fails at once while the
# node is not registered with epmd yet, hence the loop).
rmqc_await() {
    local waited=0
    until rmqc_ctl "$1" await_startup --timeout 10 >/dev/null 2>&1; do
        [ "$waited" -ge "$2" ] && return 1
        sleep 1
        waited=$((waited + 1))
    done
}

# rmqc_ports_free PORT PORT : both ports are free, within 10 s (a node just killed holds its
# sockets until its VM has exited).
rmqc_ports_free() {
    local n
    for n in $(seq 50); do
        rmqc_port_free "$1" && rmqc_port_free "$2" && return 0
        sleep 0.2
    done
    return 1
}

# The ports, chosen once: "AMQP1 AMQP2 AMQP3 DIST1 DIST2 DIST3" (the URL the tests read stays
# valid across restarts). A node that is down and whose port something else has taken since
# gets another one.
rmqc_ports() {
    local ports=() i taken
    [ -s "$RMQC_DIR/ports" ] && read -r -a ports < "$RMQC_DIR/ports"
    [ ${#ports[@]} -eq 6 ] || ports=(0 0 0 0 0 0)
    for i in 0 1 2; do
        if [ "${ports[$i]}" != 0 ] && { rmqc_running "${RMQC_NODES[$i]}" ||
            rmqc_ports_free "${ports[$i]}" "${ports[$((i + 3))]}"; }; then
            continue
        fi
        [ "${ports[$i]}" = 0 ] ||
            log "${RMQC_NODES[$i]} is down (pid file: $(cat "$RMQC_DIR/${RMQC_NODES[$i]}/pid" 2>/dev/null)) and port ${ports[$i]} or ${ports[$((i + 3))]} is taken: $(ss -Hltnp "sport = :${ports[$i]} or sport = :${ports[$((i + 3))]}" 2>/dev/null | tr -s ' ' | tr '\n' ';'); choosing others"
        taken=("${ports[@]}")
        ports[$i]=$(rmqc_pick 5681 "${taken[@]}")
        taken=("${ports[@]}")
        ports[$((i + 3))]=$(rmqc_pick 25681 "${taken[@]}")
    done
    mkdir -p "$RMQC_DIR"
    echo "${ports[*]}" > "$RMQC_DIR/ports"
}

# rmqc_node_env I : the environment of node I (0-based) for rabbitmq-server and rabbitmqctl.
rmqc_node_env() {
    local i=$1 node=${RMQC_NODES[$1]} ports=()
    read -r -a ports < "$RMQC_DIR/ports"
    export HOME="$RMQC_DIR"
    export RABBITMQ_CONF_ENV_FILE=/dev/null
    export RABBITMQ_NODENAME="$node@localhost"
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="${ports[$i]}"
    export RABBITMQ_DIST_PORT="${ports[$((i + 3))]}"
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_CONFIG_FILE="$RMQC_DIR/$node/rabbitmq.conf"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$RMQC_DIR/enabled_plugins"
    export RABBITMQ_MNESIA_BASE="$RMQC_DIR/$node/data"
    export RABBITMQ_LOG_BASE="$RMQC_DIR/$node/log"
    export RABBITMQ_PID_FILE="$RMQC_DIR/$node/pid"
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} +S 1:1 +P 262144"
    export ERL_CRASH_DUMP="$RMQC_DIR/$node/erl_crash.dump"
}

# rmqc_ctl NODE ARGS... : rabbitmqctl against NODE (bq-ha-N), with the cluster's cookie.
rmqc_ctl() {
    local node=$1
    shift
    (cd "$RMQC_DIR" && HOME="$RMQC_DIR" RABBITMQ_CONF_ENV_FILE=/dev/null ERL_EPMD_ADDRESS=127.0.0.1 \
        ERL_CRASH_DUMP="$RMQC_DIR/erl_crash.dump" timeout 60 "$RMQC_BIN/rabbitmqctl" -n "$node@localhost" "$@")
}

install_rabbitmq-cluster() {
    command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
    [ -x "$RMQC_BIN/rabbitmq-server" ] || { log "no $RMQC_BIN/rabbitmq-server"; return 1; }
}

start_rabbitmq-cluster() {
    mkdir -p "$RMQC_DIR"
    if [ ! -s "$RMQC_DIR/.erlang.cookie" ]; then
        (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$RMQC_DIR/.erlang.cookie")
    fi
    chmod 400 "$RMQC_DIR/.erlang.cookie"
    echo '[].' > "$RMQC_DIR/enabled_plugins"
    cat > "$RMQC_DIR/rabbitmqctl" <<CTL
#!/bin/sh
# rabbitmqctl for the bq-ha-* cluster nodes (their cookie); pass -n bq-ha-N@localhost.
HOME='$RMQC_DIR' RABBITMQ_CONF_ENV_FILE=/dev/null ERL_EPMD_ADDRESS=127.0.0.1 \\
    ERL_CRASH_DUMP='$RMQC_DIR/erl_crash.dump' exec '$RMQC_BIN/rabbitmqctl' "\$@"
CTL
    chmod +x "$RMQC_DIR/rabbitmqctl"
    rmqc_ports
    local i node
    for i in 0 1 2; do
        node=${RMQC_NODES[$i]}
        rmqc_running "$node" && continue
        mkdir -p "$RMQC_DIR/$node/data" "$RMQC_DIR/$node/log"
        cat > "$RMQC_DIR/$node/rabbitmq.conf" <<CONF
vm_memory_high_watermark.absolute = 512MiB
disk_free_limit.absolute = 64MB
raft.wal_max_size_bytes = 64000000
log.console = false
log.file.level = info
CONF
        log "starting $node@localhost"
        (cd "$RMQC_DIR" && rmqc_node_env "$i" && "$RMQC_BIN/rabbitmq-server" -detached \
            >"$RMQC_DIR/$node/start.log" 2>&1)
    done
    # The first start: nodes 2 and 3 join node 1 (later starts find each other from their data).
    local first="${RMQC_NODES[0]}@localhost"
    for node in "${RMQC_NODES[@]:1}"; do
        [ -f "$RMQC_DIR/$node/data/joined" ] && continue
        rmqc_await "${RMQC_NODES[0]}" 120 && rmqc_await "$node" 120 ||
            { log "$node did not start: see $RMQC_DIR/$node/log"; return 1; }
        { rmqc_ctl "$node" stop_app && rmqc_ctl "$node" join_cluster "$first" &&
            rmqc_ctl "$node" start_app; } >>"$RMQC_DIR/$node/start.log" 2>&1 ||
            { log "$node could not join $first"; return 1; }
        touch "$RMQC_DIR/$node/data/joined"
    done
}

# Ready: every node's AMQP port answers and node 1 (or any node that answers) counts three
# running nodes.
ready_rabbitmq-cluster() {
    [ -s "$RMQC_DIR/ports" ] || return 1
    local ports=() i node running=""
    read -r -a ports < "$RMQC_DIR/ports"
    for i in 0 1 2; do
        (exec 3<>"/dev/tcp/127.0.0.1/${ports[$i]}") 2>/dev/null || return 1
    done
    for node in "${RMQC_NODES[@]}"; do
        running=$(rmqc_ctl "$node" eval 'length(rabbit_nodes:all_running()).' 2>/dev/null) && break
    done
    [ "$running" = 3 ]
}

stop_rabbitmq-cluster() {
    local node pid i pids=()
    for node in "${RMQC_NODES[@]}"; do
        pid=$(rmqc_pid "$node") || continue
        pids+=("$pid")
        rmqc_ctl "$node" stop >/dev/null 2>&1 || true
    done
    # A node that does not stop within 10 s is killed (only the pids read above: ours).
    for pid in "${pids[@]}"; do
        for i in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$pid" 2>/dev/null || true
    done
    for node in "${RMQC_NODES[@]}"; do rm -f "$RMQC_DIR/$node/pid"; done
}

env_rabbitmq-cluster() {
    [ -s "$RMQC_DIR/ports" ] || return 0
    # Nothing while no node of the cluster runs (the tests then skip, or fail under BQ_REQUIRE_HA).
    local node up=0
    for node in "${RMQC_NODES[@]}"; do rmqc_running "$node" && up=1; done
    [ "$up" = 1 ] || return 0
    local ports=()
    read -r -a ports < "$RMQC_DIR/ports"
    echo "export BQ_AMQP_CLUSTER_URL=amqp://guest:guest@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}/%2f"
    echo "export BQ_AMQP_CLUSTER_DIR=$RMQC_DIR"
    echo "export BQ_AMQP_CLUSTER_CTL=$RMQC_DIR/rabbitmqctl"
}
