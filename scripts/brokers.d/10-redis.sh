# Redis 7 from Debian, on 127.0.0.1:6379, no persistence.
BROKERS+=(redis)
REDIS_PORT=${BQ_REDIS_PORT:-6379}
install_redis() { command -v redis-server >/dev/null || apt_install redis-server; }
start_redis() {
    mkdir -p "$BQ_BROKERS_DIR/redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --dir "$BQ_BROKERS_DIR/redis" --pidfile "$BQ_BROKERS_DIR/redis/redis.pid" \
        --logfile "$BQ_BROKERS_DIR/redis/redis.log"
}
ready_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }
stop_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true; }
env_redis() { echo "export BQ_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"; }
