# Redis 7 from Debian, on 127.0.0.1:6379 (plain) and 127.0.0.1:6380 (TLS, with a throwaway CA
# generated on first start, for the rediss:// tests), no persistence. Besides the default user
# (no password), an ACL user `bq-auth` with the password `bq-secret`, for the tests that
# connect with a wrong password.
BROKERS+=(redis)
REDIS_PORT=${BQ_REDIS_PORT:-6379}
REDIS_TLS_PORT=${BQ_REDIS_TLS_PORT:-6380}
REDIS_DIR="$BQ_BROKERS_DIR/redis"
install_redis() {
    command -v redis-server >/dev/null || apt_install redis-server
    command -v openssl >/dev/null || apt_install openssl
}
redis_tls_material() { test_tls_material "$REDIS_DIR/tls" babelqueue-test-ca; }
start_redis() {
    mkdir -p "$REDIS_DIR"
    redis_tls_material
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --tls-port "$REDIS_TLS_PORT" --tls-cert-file "$REDIS_DIR/tls/server.crt" \
        --tls-key-file "$REDIS_DIR/tls/server.key" --tls-ca-cert-file "$REDIS_DIR/tls/ca.crt" \
        --tls-auth-clients no \
        --user bq-auth on '>bq-secret' '~*' '&*' '+@all' \
        --dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log"
}
ready_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }
stop_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true; }
env_redis() {
    echo "export BQ_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
    echo "export BQ_REDISS_URL=rediss://127.0.0.1:$REDIS_TLS_PORT"
    echo "export BQ_REDIS_TLS_CA=$REDIS_DIR/tls/ca.crt"
}
