# RabbitMQ (AMQP 0-9-1) from Debian, on 127.0.0.1:5672 (plain) and 127.0.0.1:5671 (amqps, with
# a throwaway CA generated on first start, for the amqps:// tests) only: the AMQP listeners, epmd
# and the Erlang distribution port are all kept on loopback. The management plugin's HTTP API
# listens on 127.0.0.1:15672 (the transport's in-flight count); it samples queue figures every
# second here (RabbitMQ's default is 5 s).
#
# `rabbitmqctl await_startup` exits 69 at once while the node is not yet registered with epmd,
# so readiness is a retry loop around it (wait_for polls ready_rabbitmq).
BROKERS+=(rabbitmq)
RABBITMQ_PORT=${BQ_RABBITMQ_PORT:-5672}
RABBITMQ_TLS_PORT=${BQ_RABBITMQ_TLS_PORT:-5671}
RABBITMQ_MANAGEMENT_PORT=${BQ_RABBITMQ_MANAGEMENT_PORT:-15672}
RABBITMQ_DIR="$BQ_BROKERS_DIR/rabbitmq"

rabbitmq_env() {
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$RABBITMQ_PORT"
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    # The Debian wrapper's `su` keeps the environment, so the node reads this file.
    export RABBITMQ_CONFIG_FILE="$RABBITMQ_DIR/rabbitmq.conf"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$RABBITMQ_DIR/enabled_plugins"
}

install_rabbitmq() {
    command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
    command -v openssl >/dev/null || apt_install openssl
}

# A private CA and a server certificate for 127.0.0.1/localhost, made once. The node runs as
# the rabbitmq user, which must be able to read the key.
rabbitmq_tls_material() {
    local d="$RABBITMQ_DIR/tls"
    test_tls_material "$d" babelqueue-amqp-test-ca
    if id rabbitmq >/dev/null 2>&1; then
        chown rabbitmq "$d/server.key" 2>/dev/null || chmod 644 "$d/server.key"
    fi
}

start_rabbitmq() {
    rabbitmq_env
    mkdir -p "$RABBITMQ_DIR"
    rabbitmq_tls_material
    # The plain listener comes from RABBITMQ_NODE_IP_ADDRESS/PORT; TLS is added here, without
    # client certificates.
    cat > "$RABBITMQ_DIR/rabbitmq.conf" <<CONF
listeners.ssl.default = 127.0.0.1:$RABBITMQ_TLS_PORT
ssl_options.cacertfile = $RABBITMQ_DIR/tls/ca.crt
ssl_options.certfile = $RABBITMQ_DIR/tls/server.crt
ssl_options.keyfile = $RABBITMQ_DIR/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
management.tcp.ip = 127.0.0.1
management.tcp.port = $RABBITMQ_MANAGEMENT_PORT
collect_statistics_interval = 1000
CONF
    echo '[rabbitmq_management].' > "$RABBITMQ_ENABLED_PLUGINS_FILE"
    # The Debian wrapper drops to the rabbitmq user; keep its log beside the other brokers'.
    rabbitmq-server -detached >"$BQ_BROKERS_DIR/rabbitmq-start.log" 2>&1
}

ready_rabbitmq() {
    rabbitmq_env
    timeout 20 rabbitmqctl await_startup --timeout 15 >/dev/null 2>&1 &&
        (exec 3<>"/dev/tcp/127.0.0.1/$RABBITMQ_PORT") 2>/dev/null &&
        (exec 3<>"/dev/tcp/127.0.0.1/$RABBITMQ_TLS_PORT") 2>/dev/null &&
        (exec 3<>"/dev/tcp/127.0.0.1/$RABBITMQ_MANAGEMENT_PORT") 2>/dev/null
}

stop_rabbitmq() {
    rabbitmq_env
    rabbitmqctl stop >/dev/null 2>&1 || true
    # epmd outlives the node; stop it too so `down` leaves nothing listening. It refuses while
    # a node is still registered, so wait for the node to leave first.
    local i
    for i in $(seq 50); do
        epmd -names 2>/dev/null | grep -q '^name ' || break
        sleep 0.2
    done
    epmd -kill >/dev/null 2>&1 || true
}

env_rabbitmq() {
    echo "export BQ_AMQP_URL=amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/%2f"
    echo "export BQ_AMQPS_URL=amqps://guest:guest@127.0.0.1:$RABBITMQ_TLS_PORT/%2f"
    echo "export BQ_AMQP_TLS_CA=$RABBITMQ_DIR/tls/ca.crt"
    echo "export BQ_AMQP_MANAGEMENT_URL=http://guest:guest@127.0.0.1:$RABBITMQ_MANAGEMENT_PORT"
}
