#!/usr/bin/env bash
# Runs a real single-node Apache Kafka broker (KRaft, broker+controller in
# one process) for dlqctl's tests.
#
#   kafka.sh fetch            copy the broker's jars from Maven Central
#                             (scripts/kafka/pom.xml) into the cache; prints
#                             the jar dir
#   kafka.sh start DATA_DIR   format DATA_DIR and start a broker whose config,
#                             log dirs, output and PID live in DATA_DIR;
#                             prints DATA_DIR/env (KAFKA_BOOTSTRAP=host:port,
#                             KAFKA_SASL_BOOTSTRAP, KAFKA_SASL_USER,
#                             KAFKA_SASL_PASSWORD, and with TLS
#                             KAFKA_SASL_SSL_BOOTSTRAP, KAFKA_TLS_CA)
#   kafka.sh stop DATA_DIR    stop it (TERM, then KILL after 30 s)
#
# start picks free loopback ports for the client listener, the controller and
# a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, one test
# user whose SCRAM credentials the format step writes) and records them in
# DATA_DIR/ports. The storage is formatted with share groups (share.version=2,
# so KIP-1191 dead-letter topics too). When DATA_DIR/tls/server.pem exists (a PEM keystore: the
# PKCS#8 private key, then the certificate chain; backends/kafka/kafkatest writes
# one with its CA in DATA_DIR/tls/ca.pem), it adds a SASL_SSL listener on a
# fourth port with the same user and mechanisms. A later start on the same DATA_DIR
# reuses them and its formatted storage, so a restarted broker keeps its
# address and its data.
#
# Environment: KAFKA_VERSION (4.4.0), KAFKA_CACHE (~/.cache/dlqctl),
# MAVEN_REPO_LOCAL (~/.m2/repository), KAFKA_READY_TIMEOUT (120 seconds),
# KAFKA_HEAP (-Xmx512m), JAVA_HOME, and KAFKA_WATCH_PID: when set, start
# also leaves a watchdog that stops the broker once that process (say, the
# test binary) has exited.
set -euo pipefail

KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
KAFKA_CACHE=${KAFKA_CACHE:-$HOME/.cache/dlqctl}
READY_TIMEOUT=${KAFKA_READY_TIMEOUT:-120}
HEAP=${KAFKA_HEAP:--Xmx512m}
STOP_TIMEOUT=30
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "kafka.sh: $*" >&2; exit 1; }

usage() {
  echo "usage: $0 fetch | start DATA_DIR | stop DATA_DIR" >&2
  exit 2
}

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    echo "$JAVA_HOME/bin/java"
  elif command -v java >/dev/null 2>&1; then
    command -v java
  else
    die "java not found: install a JDK 17 or newer (apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
  fi
}

libs_dir() { echo "$KAFKA_CACHE/kafka-$KAFKA_VERSION/libs"; }

fetched() { [ -f "$(libs_dir)/.complete" ] && [ -f "$(libs_dir)/kafka_2.13-$KAFKA_VERSION.jar" ]; }

cmd_fetch() {
  java_bin >/dev/null
  local dir
  dir=$(libs_dir)
  if fetched; then
    echo "$dir"
    return
  fi
  mkdir -p "$dir"
  # Test packages run in parallel and each may fetch: one at a time.
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$dir/../.fetch.lock"
    flock 9
    if fetched; then
      echo "$dir"
      return
    fi
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: it is needed once to download Kafka $KAFKA_VERSION's jars (apt-get install maven)"
  echo "kafka.sh: downloading org.apache.kafka:kafka_2.13:$KAFKA_VERSION and its dependencies" >&2
  local m2=${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}
  rm -f "$dir"/*.jar
  mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$m2" -f "$HERE/kafka/pom.xml" \
    "-Dkafka.version=$KAFKA_VERSION" \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    "-DoutputDirectory=$dir" -DincludeScope=runtime >&2 ||
    die "mvn could not download Kafka $KAFKA_VERSION's jars"
  # kafka_2.13 pulls slf4j-api 1.7 in too; two APIs on the class path make
  # slf4j pick either. Keep only the 2.x one the log4j binding needs.
  find "$dir" -name 'slf4j-api-1.*.jar' -delete
  touch "$dir/.complete"
  echo "$dir"
}

free_port() {
  # Ask the kernel for a free port; python3 is on every machine the tests
  # run on, and bash cannot bind a socket.
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

running() {
  local pidfile=$1/kafka.pid
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

# ready: the client port answers and the broker has registered with the
# controller (it then logs "Kafka Server started").
ready() {
  local data=$1 port=$2
  grep -q "Kafka Server started" "$data/kafka.out" 2>/dev/null &&
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}

cmd_start() {
  local data=${1:-}
  [ -n "$data" ] || usage
  mkdir -p "$data"
  data=$(cd "$data" && pwd)
  if running "$data"; then
    echo "$data/env"
    return
  fi
  local libs java port cport sport tport
  libs=$(cmd_fetch)
  java=$(java_bin)
  if [ -f "$data/ports" ]; then
    read -r port cport sport tport <"$data/ports"
  else
    port=$(free_port)
    cport=$(free_port)
    while [ "$cport" = "$port" ]; do cport=$(free_port); done
    sport=$(free_port)
    while [ "$sport" = "$port" ] || [ "$sport" = "$cport" ]; do sport=$(free_port); done
    tport=$(free_port)
    while [ "$tport" = "$port" ] || [ "$tport" = "$cport" ] || [ "$tport" = "$sport" ]; do tport=$(free_port); done
    echo "$port $cport $sport $tport" >"$data/ports"
  fi
  local sasl_user=dlqctl-test sasl_pass=dlqctl-test-secret
  local listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport,SASL_PLAINTEXT://127.0.0.1:$sport"
  local advertised="PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$sport"
  local protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
  local tls=
  if [ -f "$data/tls/server.pem" ] && [ -n "$tport" ]; then
    tls=1
    listeners="$listeners,SASL_SSL://127.0.0.1:$tport"
    advertised="$advertised,SASL_SSL://127.0.0.1:$tport"
    protocols="$protocols,SASL_SSL:SASL_SSL"
  fi
  cat >"$data/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$sasl_user="$sasl_pass";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=$data/logs
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.cleaner.backoff.ms=1000
PROPS
  if [ -n "$tls" ]; then
    cat >>"$data/server.properties" <<PROPS
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$sasl_user="$sasl_pass";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$data/tls/server.pem
PROPS
  fi
  cat >"$data/log4j2.properties" <<'PROPS'
status=error
appender.out.type=Console
appender.out.name=out
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.out.ref=out
logger.kafka.name=org.apache.kafka
logger.kafka.level=WARN
logger.state.name=state.change.logger
logger.state.level=WARN
logger.server.name=kafka.server.KafkaRaftServer
logger.server.level=INFO
PROPS
  local -a jvm=("$HEAP" -Xms64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto
    "-Dlog4j2.configurationFile=$data/log4j2.properties" -cp "$libs/*")
  if [ ! -f "$data/logs/meta.properties" ]; then
    local uuid
    uuid=$("$java" "${jvm[@]}" kafka.tools.StorageTool random-uuid 2>>"$data/format.out")
    "$java" "${jvm[@]}" kafka.tools.StorageTool format --standalone -t "$uuid" \
      -c "$data/server.properties" \
      --add-scram "SCRAM-SHA-256=[name=$sasl_user,password=$sasl_pass]" \
      --add-scram "SCRAM-SHA-512=[name=$sasl_user,password=$sasl_pass]" \
      --feature share.version=2 >>"$data/format.out" 2>&1 ||
      die "formatting $data failed: $(tail -5 "$data/format.out")"
  fi
  : >"$data/kafka.out"
  nohup "$java" "${jvm[@]}" kafka.Kafka "$data/server.properties" >>"$data/kafka.out" 2>&1 &
  local pid=$!
  echo "$pid" >"$data/kafka.pid"
  {
    echo "KAFKA_BOOTSTRAP=127.0.0.1:$port"
    echo "KAFKA_SASL_BOOTSTRAP=127.0.0.1:$sport"
    echo "KAFKA_SASL_USER=$sasl_user"
    echo "KAFKA_SASL_PASSWORD=$sasl_pass"
    if [ -n "$tls" ]; then
      echo "KAFKA_SASL_SSL_BOOTSTRAP=127.0.0.1:$tport"
      echo "KAFKA_TLS_CA=$data/tls/ca.pem"
    fi
  } >"$data/env"
  if [ -n "${KAFKA_WATCH_PID:-}" ]; then
    # Stop the broker once the watched process is gone, so a test binary
    # killed before its cleanup leaves no broker behind.
    (
      while kill -0 "$KAFKA_WATCH_PID" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do sleep 2; done
      kill -0 "$pid" 2>/dev/null && "$0" stop "$data" >/dev/null 2>&1
    ) </dev/null >/dev/null 2>&1 &
    disown
  fi
  local waited=0
  until ready "$data" "$port"; do
    kill -0 "$pid" 2>/dev/null || die "the broker exited during start: $(tail -20 "$data/kafka.out")"
    [ "$waited" -lt $((READY_TIMEOUT * 5)) ] || {
      cmd_stop "$data" >/dev/null 2>&1 || true
      die "not ready after ${READY_TIMEOUT}s: $(tail -20 "$data/kafka.out")"
    }
    sleep 0.2
    waited=$((waited + 1))
  done
  echo "$data/env"
}

cmd_stop() {
  local data=${1:-}
  [ -n "$data" ] || usage
  local pidfile=$data/kafka.pid
  [ -f "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local waited=0
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$waited" -ge $((STOP_TIMEOUT * 5)) ]; then
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.2
      waited=$((waited + 1))
    done
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  *) usage ;;
esac
