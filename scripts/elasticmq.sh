#!/usr/bin/env bash
# Runs a real ElasticMQ server (an SQS-compatible server, from Maven
# Central) for dlqctl's SQS tests and examples.
#
#   elasticmq.sh fetch            download org.elasticmq:elasticmq-server_2.13
#                                 and its dependencies (through Maven, cached
#                                 in ~/.m2) into one folder; prints it
#   elasticmq.sh start DATA_DIR   start a server whose config, data, log, PID
#                                 and env file live in DATA_DIR; prints
#                                 DATA_DIR/env (SQS_ENDPOINT=http://127.0.0.1:PORT)
#   elasticmq.sh stop DATA_DIR    stop it (TERM, then KILL after 20 s)
#
# start picks a free loopback port and records it in DATA_DIR/port; a later
# start on the same DATA_DIR reuses it, and queues (queues-storage) and
# messages (messages-storage, an H2 file) are kept in DATA_DIR, so a
# restarted server has the same endpoint, queue URLs and messages. The H2
# file is written at every commit (WRITE_DELAY=0; H2's default waits up to
# 500 ms), so that a server killed with -9 keeps every send and delete it
# acknowledged, as SQS does.
# Queues are created by the callers through the SQS API; a file
# DATA_DIR/queues.conf, when present, is included in the config as well
# (HOCON `queues { … }` blocks, with deadLettersQueue { name, maxReceiveCount }).
#
# Environment: ELASTICMQ_VERSION (1.7.1), MAVEN_REPO_LOCAL (~/.m2/repository),
# ELASTICMQ_CACHE (~/.cache/dlqctl/elasticmq), ELASTICMQ_READY_TIMEOUT (60 s),
# ELASTICMQ_HEAP (256m), JAVA_HOME, ELASTICMQ_WATCH_PID: when set, start
# leaves a watchdog that stops the server once that process has exited, and
# ELASTICMQ_JAVA_OPTS (-XX:+UseSerialGC -XX:TieredStopAtLevel=1: quick to
# start, small), ELASTICMQ_REQUEST_TIMEOUT (120 s) and
# ELASTICMQ_PERSIST (1): 0 keeps messages in memory only — a restart then
# loses them, but every receive and visibility change no longer waits for
# the H2 store (the benchmarks, which never restart, use it).
set -euo pipefail

VERSION=${ELASTICMQ_VERSION:-1.7.1}
CACHE=${ELASTICMQ_CACHE:-$HOME/.cache/dlqctl/elasticmq}
READY_TIMEOUT=${ELASTICMQ_READY_TIMEOUT:-60}
STOP_TIMEOUT=20
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "elasticmq: $*" >&2; exit 1; }
usage() { echo "usage: $0 fetch | start DATA_DIR | stop DATA_DIR" >&2; exit 2; }

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    echo "$JAVA_HOME/bin/java"
  elif command -v java >/dev/null 2>&1; then
    command -v java
  else
    die "java not found: install a JDK 11 or newer (apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
  fi
}

lib_dir() { echo "$CACHE/$VERSION/lib"; }

cmd_fetch() {
  java_bin >/dev/null
  local lib
  lib=$(lib_dir)
  if [ -f "$lib/.complete" ]; then echo "$lib"; return; fi
  mkdir -p "$CACHE"
  # Test packages may fetch at the same time: one at a time.
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.fetch.lock"
    flock 9
    if [ -f "$lib/.complete" ]; then echo "$lib"; return; fi
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: it is needed once to download ElasticMQ $VERSION (apt-get install maven)"
  local m2=${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}
  local tmp
  tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
  echo "elasticmq: downloading org.elasticmq:elasticmq-server_2.13:$VERSION and its dependencies" >&2
  # Copy into a fresh folder and rename it into place, so that an
  # interrupted fetch never leaves a partial classpath that looks complete.
  if ! (cd "$tmp" && mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$m2" -f "$HERE/elasticmq/pom.xml" \
      "-Delasticmq.version=$VERSION" \
      org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
      -DincludeScope=runtime "-DoutputDirectory=$tmp/lib" >&2); then
    rm -rf "$tmp"
    die "mvn could not download org.elasticmq:elasticmq-server_2.13:$VERSION"
  fi
  ls "$tmp/lib"/elasticmq-server_2.13-"$VERSION".jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "mvn finished but the server jar is missing"; }
  touch "$tmp/lib/.complete"
  rm -rf "$lib"
  mkdir -p "$(dirname "$lib")"
  mv "$tmp/lib" "$lib"
  rm -rf "$tmp"
  echo "$lib"
}

# ports_in_use prints every local TCP port in use (any state), from /proc.
ports_in_use() {
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    awk 'NR > 1 { split($2, a, ":"); print a[2] }' "$f" | while read -r h; do echo $((16#$h)); done
  done
}

# listening PORT: some socket listens on PORT (state 0A).
listening() {
  local hex f
  hex=$(printf '%04X' "$1")
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    if awk -v h="$hex" 'NR > 1 { split($2, a, ":"); if (toupper(a[2]) == h && $4 == "0A") found = 1 } END { exit !found }' "$f"; then
      return 0
    fi
  done
  return 1
}

# pick_port prints a free port from 20000-59999 (below the usual ephemeral
# range, so that outgoing connections do not take it).
pick_port() {
  local used p tries=0
  used=" $(ports_in_use | sort -un | tr '\n' ' ') "
  while :; do
    tries=$((tries + 1))
    [ $tries -lt 1000 ] || die "no free port found"
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    case "$used" in *" $p "*) continue ;; esac
    echo "$p"
    return
  done
}

read_pid() {
  [ -f "$1/elasticmq.pid" ] || return 1
  local pid
  pid=$(cat "$1/elasticmq.pid")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  echo "$pid"
}

# alive PID: the process exists and is not a zombie.
alive() {
  local st=""
  { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
  st=${st##*) }
  [ "${st:0:1}" != Z ]
}

ready() {
  # ListQueues through the query protocol: answers once the SQS API is up.
  curl -fsS --max-time 3 -o /dev/null "http://127.0.0.1:$1/?Action=ListQueues" 2>/dev/null
}

cmd_start() {
  local data=$1 java lib pid port
  java=$(java_bin)
  command -v curl >/dev/null 2>&1 || die "curl not found: it is needed to wait for the server (apt-get install curl)"
  lib=$(lib_dir)
  [ -f "$lib/.complete" ] || die "ElasticMQ $VERSION is not fetched into $lib: run '$0 fetch' first"
  mkdir -p "$data"
  data=$(cd "$data" && pwd)
  if pid=$(read_pid "$data") && alive "$pid"; then
    die "a server (pid $pid) is already running for $data: stop it first"
  fi
  if [ -f "$data/port" ]; then
    port=$(cat "$data/port")
    ! listening "$port" || die "port $port recorded in $data/port is taken by another process"
  else
    port=$(pick_port)
    echo "$port" >"$data/port"
  fi
  touch "$data/queues-storage.conf"
  {
    echo 'include classpath("application.conf")'
    echo "node-address { protocol = http, host = \"127.0.0.1\", port = $port, context-path = \"\" }"
    echo "rest-sqs { enabled = true, bind-port = $port, bind-hostname = \"127.0.0.1\", sqs-limits = strict }"
    echo "rest-stats { enabled = false }"
    # Under load (a shared CI machine, 100,000 messages) an answer can take
    # longer than pekko-http's 20 s default, which answers 503 while the
    # queue still does the work: a receive's messages are then handed out
    # to nobody.
    echo "pekko.http.server.request-timeout = ${ELASTICMQ_REQUEST_TIMEOUT:-120 s}"
    echo "pekko.http.server.idle-timeout = infinite"
    echo "queues-storage { enabled = true, path = \"$data/queues-storage.conf\" }"
    if [ "${ELASTICMQ_PERSIST:-1}" = 1 ]; then
      echo "messages-storage { enabled = true, uri = \"jdbc:h2:$data/messages;WRITE_DELAY=0\" }"
    fi
    if [ -f "$data/queues.conf" ]; then echo "include file(\"$data/queues.conf\")"; fi
  } >"$data/elasticmq.conf"
  rm -f "$data/elasticmq.pid" "$data/env"
  (
    cd "$data"
    # setsid: its own process group, so that stop can signal all of it,
    # and output to a file, never to the caller's pipes.
    # shellcheck disable=SC2086 # ELASTICMQ_JAVA_OPTS is a list of options
    setsid "$java" "-Xmx${ELASTICMQ_HEAP:-256m}" ${ELASTICMQ_JAVA_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1} \
      "-Djava.io.tmpdir=$data" "-Dconfig.file=$data/elasticmq.conf" \
      -cp "$lib/*" org.elasticmq.server.Main </dev/null >>"$data/elasticmq.log" 2>&1 &
    echo $! >"$data/elasticmq.pid"
  )
  pid=$(read_pid "$data") || die "could not record the server's pid"
  if [ -n "${ELASTICMQ_WATCH_PID:-}" ]; then
    [[ "$ELASTICMQ_WATCH_PID" =~ ^[0-9]+$ ]] || die "ELASTICMQ_WATCH_PID must be a pid"
    setsid bash "$HERE/$(basename "${BASH_SOURCE[0]}")" __watch "$data" "$ELASTICMQ_WATCH_PID" </dev/null >/dev/null 2>&1 &
    echo $! >"$data/watchdog.pid"
  fi
  local deadline=$((SECONDS + READY_TIMEOUT))
  until ready "$port"; do
    if ! alive "$pid"; then
      tail -n 40 "$data/elasticmq.log" >&2 || true
      die "server (pid $pid) exited during startup; log in $data/elasticmq.log"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$data/elasticmq.log" >&2 || true
      cmd_stop "$data" >/dev/null 2>&1 || true
      die "server not ready after ${READY_TIMEOUT}s; log in $data/elasticmq.log"
    fi
    sleep 0.2
  done
  printf 'SQS_ENDPOINT=http://127.0.0.1:%s\nSQS_PID=%s\n' "$port" "$pid" >"$data/env.tmp"
  mv "$data/env.tmp" "$data/env"
  cat "$data/env"
}

cmd_watch() {
  local data=$1 watch=$2 pid
  pid=$(read_pid "$data") || exit 0
  while alive "$pid"; do
    if ! alive "$watch"; then
      rm -f "$data/watchdog.pid"
      cmd_stop "$data"
      exit 0
    fi
    sleep 1
  done
}

cmd_stop() {
  local data=$1 pid wpid
  [ -d "$data" ] || die "no such data dir: $data"
  if [ -f "$data/watchdog.pid" ]; then
    wpid=$(cat "$data/watchdog.pid")
    rm -f "$data/watchdog.pid"
    if [[ "$wpid" =~ ^[0-9]+$ ]] && [ "$wpid" != "$$" ]; then kill -TERM "$wpid" 2>/dev/null || true; fi
  fi
  if ! pid=$(read_pid "$data"); then
    echo "elasticmq: no elasticmq.pid in $data, nothing to stop" >&2
    return 0
  fi
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid"; do
      if [ $SECONDS -ge $deadline ]; then
        echo "elasticmq: server (pid $pid) still running after ${STOP_TIMEOUT}s, killing" >&2
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
        break
      fi
      sleep 0.1
    done
    ! alive "$pid" || die "server (pid $pid) still running after KILL"
  fi
  rm -f "$data/elasticmq.pid" "$data/env"
}

[ $# -ge 1 ] || usage
case "$1" in
fetch) [ $# -eq 1 ] || usage; cmd_fetch ;;
start) [ $# -eq 2 ] || usage; cmd_start "$2" ;;
stop) [ $# -eq 2 ] || usage; cmd_stop "$2" ;;
__watch) [ $# -eq 3 ] || usage; cmd_watch "$2" "$3" ;;
*) usage ;;
esac
