# RabbitMQ (AMQP 0-9-1) from Debian, on 127.0.0.1:5672 only: the AMQP listener, epmd and the
# Erlang distribution port are all kept on loopback.
#
# `rabbitmqctl await_startup` exits 69 at once while the node is not yet registered with epmd,
# so readiness is a retry loop around it (wait_for polls ready_rabbitmq).
BROKERS+=(rabbitmq)
RABBITMQ_PORT=${BQ_RABBITMQ_PORT:-5672}

rabbitmq_env() {
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$RABBITMQ_PORT"
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

install_rabbitmq() { command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server; }

start_rabbitmq() {
    rabbitmq_env
    # The Debian wrapper drops to the rabbitmq user; keep its log beside the other brokers'.
    rabbitmq-server -detached >"$BQ_BROKERS_DIR/rabbitmq-start.log" 2>&1
}

ready_rabbitmq() {
    rabbitmq_env
    timeout 20 rabbitmqctl await_startup --timeout 15 >/dev/null 2>&1 &&
        (exec 3<>"/dev/tcp/127.0.0.1/$RABBITMQ_PORT") 2>/dev/null
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

env_rabbitmq() { echo "export BQ_AMQP_URL=amqp://guest:guest@127.0.0.1:$RABBITMQ_PORT/%2f"; }
