# The reference SDK (babelqueue==1.24.0 from PyPI) in a venv, for interop tests and benchmarks,
# with the drivers of every binding it is tested against, moto's SQS server, and `cryptography`
# (the GDPR interop peer's AES-GCM).
BROKERS+=(python)
export BQ_VENV=${BQ_VENV:-$BQ_CACHE/venv}
PY_PACKAGES=(
    "babelqueue[redis,amqp,sqs,kafka,artemis]==1.24.0"
    "moto[server]==5.1.*"
    "jsonschema==4.*"
    "rfc3339-validator==0.1.*"
    "cryptography>=42"
)
install_python() {
    if [ ! -x "$BQ_VENV/bin/python" ]; then
        log "creating $BQ_VENV"
        python3 -m venv "$BQ_VENV"
    fi
    if ! "$BQ_VENV/bin/python" -c 'import babelqueue, redis, pika, boto3, confluent_kafka, proton, moto, cryptography' >/dev/null 2>&1; then
        log "pip install ${PY_PACKAGES[*]}"
        "$BQ_VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    fi
}
start_python() { :; }
ready_python() { "$BQ_VENV/bin/python" -c 'import babelqueue; assert babelqueue.__version__ == "1.24.0"' 2>/dev/null; }
stop_python() { :; }
env_python() { echo "export BQ_PYTHON=$BQ_VENV/bin/python"; }
