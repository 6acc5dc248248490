#!/usr/bin/env bash
# Runs a real Apache Pulsar standalone broker for dlqctl's tests.
#
#   pulsar-standalone.sh fetch            download (Maven Central, cached in
#                                         ~/.m2) and unpack the distribution;
#                                         prints the install dir
#   pulsar-standalone.sh start DATA_DIR   start a broker whose config, data,
#                                         logs, PID and env file live in
#                                         DATA_DIR; prints DATA_DIR/env
#   pulsar-standalone.sh stop DATA_DIR    stop it (TERM, then KILL after 30 s)
#
# start picks free loopback ports for the broker (6650-like), the web/admin
# service (8080-like) and the local bookie (3181-like) and records them in
# DATA_DIR/ports; a later start on the same DATA_DIR reuses them, so a
# restarted broker keeps its URLs (and its bookie keeps the cookie it
# registered under 127.0.0.1:PORT). The metadata store is RocksDB inside
# DATA_DIR (no ZooKeeper port), and there is no stream storage or functions
# worker (-nss -nfw), so those three ports are all the process listens on.
#
# Environment: PULSAR_VERSION (4.0.8), MAVEN_REPO_LOCAL (~/.m2/repository),
# PULSAR_CACHE
# (~/.cache/dlqctl/pulsar), PULSAR_READY_TIMEOUT (180 seconds), PULSAR_MEM,
# PULSAR_GC, PULSAR_CDS (1; 0 turns class data sharing off), JAVA_HOME, and
# PULSAR_WATCH_PID: when set, start also leaves a watchdog that stops the
# broker once that process (say, the test binary) has exited.
#
# DATA_DIR/settings.conf, when the caller writes it before start, holds
# broker settings (KEY=VALUE lines) that replace or add to this script's,
# at every start in that folder (a test of what the retention check
# deletes sets retentionCheckIntervalInSeconds=5, say).
set -euo pipefail

PULSAR_VERSION=${PULSAR_VERSION:-4.0.8}
PULSAR_CACHE=${PULSAR_CACHE:-$HOME/.cache/dlqctl/pulsar}
READY_TIMEOUT=${PULSAR_READY_TIMEOUT:-180}
STOP_TIMEOUT=30
GROUP=org.apache.pulsar
ARTIFACT=pulsar-server-distribution

die() { echo "pulsar-standalone: $*" >&2; exit 1; }

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

install_dir() { echo "$PULSAR_CACHE/apache-pulsar-$PULSAR_VERSION"; }

cmd_fetch() {
  java_bin >/dev/null
  local dir
  dir=$(install_dir)
  if [ -x "$dir/bin/pulsar" ] && [ -f "$dir/.unpacked" ]; then
    echo "$dir"
    return
  fi
  mkdir -p "$PULSAR_CACHE"
  # Test packages run in parallel and each may fetch: one at a time.
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$PULSAR_CACHE/.fetch.lock"
    flock 9
    if [ -x "$dir/bin/pulsar" ] && [ -f "$dir/.unpacked" ]; then
      echo "$dir"
      return
    fi
  fi
  local m2=${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}
  local tarball="$m2/${GROUP//.//}/$ARTIFACT/$PULSAR_VERSION/$ARTIFACT-$PULSAR_VERSION-bin.tar.gz"
  if [ ! -s "$tarball" ]; then
    command -v mvn >/dev/null 2>&1 || die "mvn not found: it is needed once to download $ARTIFACT $PULSAR_VERSION (apt-get install maven)"
    echo "pulsar-standalone: downloading $GROUP:$ARTIFACT:$PULSAR_VERSION:tar.gz:bin (about 240 MB)" >&2
    mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$m2" \
      org.apache.maven.plugins:maven-dependency-plugin:3.6.1:get \
      "-Dartifact=$GROUP:$ARTIFACT:$PULSAR_VERSION:tar.gz:bin" -Dtransitive=false >&2 ||
      die "mvn could not download $GROUP:$ARTIFACT:$PULSAR_VERSION:tar.gz:bin"
    [ -s "$tarball" ] || die "mvn finished but $tarball is missing"
  fi
  if [ -s "$tarball.sha1" ] && command -v sha1sum >/dev/null 2>&1; then
    local want got
    want=$(cut -c1-40 "$tarball.sha1")
    got=$(sha1sum "$tarball" | cut -c1-40)
    [ "$want" = "$got" ] || die "$tarball is corrupt (sha1 $got, want $want): delete it and rerun"
  fi
  local tmp
  tmp=$(mktemp -d "$PULSAR_CACHE/.unpack.XXXXXX")
  # Unpack beside the final folder and rename it into place, so that an
  # interrupted unpack never leaves a half install that looks complete.
  if ! tar -xzf "$tarball" -C "$tmp"; then
    rm -rf "$tmp"
    die "could not unpack $tarball (corrupt download? delete it and rerun)"
  fi
  [ -x "$tmp/apache-pulsar-$PULSAR_VERSION/bin/pulsar" ] || { rm -rf "$tmp"; die "$tarball holds no apache-pulsar-$PULSAR_VERSION/bin/pulsar"; }
  touch "$tmp/apache-pulsar-$PULSAR_VERSION/.unpacked"
  rm -rf "$dir"
  mv "$tmp/apache-pulsar-$PULSAR_VERSION" "$dir"
  rmdir "$tmp"
  echo "$dir"
}

# ports_in_use prints every local TCP port in use (any state), from /proc.
ports_in_use() {
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    awk 'NR > 1 { split($2, a, ":"); print strtonum("0x" a[2]) }' "$f" 2>/dev/null ||
      awk 'NR > 1 { split($2, a, ":"); print a[2] }' "$f" | while read -r h; do echo $((16#$h)); done
  done
}

port_busy() {
  local p=$1
  ports_in_use | grep -qx "$p"
}

# pick_ports prints N distinct free ports from 20000-59999 (below the usual
# Linux ephemeral range, so outgoing connections do not take them).
pick_ports() {
  local n=$1 used picked=() p tries=0
  used=" $(ports_in_use | sort -un | tr '\n' ' ') "
  while [ ${#picked[@]} -lt "$n" ]; do
    tries=$((tries + 1))
    [ $tries -lt 1000 ] || die "no free port found"
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    case "$used" in *" $p "*) continue ;; esac
    case " ${picked[*]:-} " in *" $p "*) continue ;; esac
    picked+=("$p")
  done
  echo "${picked[@]}"
}

read_pid() {
  local data=$1
  [ -f "$data/pulsar.pid" ] || return 1
  local pid
  pid=$(cat "$data/pulsar.pid")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  echo "$pid"
}

# alive PID: the process exists and is not a zombie (in a container whose
# init does not reap orphans, a dead broker can stay a zombie).
alive() {
  local st
  if [ -d /proc/self ]; then
    st=""
    { read -r st <"/proc/$1/stat"; } 2>/dev/null
    [ -n "$st" ] || return 1
    st=${st##*) }
    [ "${st:0:1}" != Z ]
  else
    kill -0 "$1" 2>/dev/null
  fi
}

# write_conf SRC DST KEY=VALUE...: copies SRC without the given keys, then
# appends them. (BookKeeper reads this file too, through Commons
# Configuration, which turns a repeated key into a list; so no key may
# appear twice.)
write_conf() {
  local src=$1 dst=$2
  shift 2
  local keys=() kv
  for kv in "$@"; do keys+=("${kv%%=*}"); done
  awk -v keys="${keys[*]}" '
    BEGIN { n = split(keys, k, " "); for (i = 1; i <= n; i++) drop[k[i]] = 1 }
    {
      line = $0
      sub(/^[ \t]+/, "", line)
      if (line !~ /^#/ && index(line, "=") > 0) {
        key = substr(line, 1, index(line, "=") - 1)
        sub(/[ \t]+$/, "", key)
        if (key in drop) next
      }
      print
    }' "$src" >"$dst.tmp"
  {
    echo
    echo "# --- dlqctl test overrides (scripts/pulsar-standalone.sh) ---"
    printf '%s\n' "$@"
  } >>"$dst.tmp"
  mv "$dst.tmp" "$dst"
}

# with_settings DATA_DIR KEY=VALUE...: prints the settings given, one a
# line, with those of DATA_DIR/settings.conf in their place or after them.
with_settings() {
  local data=$1
  shift
  local file="$data/settings.conf"
  if [ ! -f "$file" ]; then
    printf '%s\n' "$@"
    return
  fi
  awk -v given="$(printf '%s\n' "$@")" '
    /^[ \t]*(#|$)/ { next }
    { sub(/^[ \t]+/, ""); sub(/[ \t]+$/, ""); k = substr($0, 1, index($0, "=") - 1); over[k] = $0; order[++n] = k }
    END {
      m = split(given, g, "\n")
      for (i = 1; i <= m; i++) {
        if (g[i] == "") continue
        k = substr(g[i], 1, index(g[i], "=") - 1)
        if (k in over) { print over[k]; done[k] = 1 } else print g[i]
      }
      for (i = 1; i <= n; i++) if (!(order[i] in done)) { print over[order[i]]; done[order[i]] = 1 }
    }' "$file"
}

# loopback_if prints the loopback interface's name (lo on Linux). With
# listeningInterface set, the bookie binds its advertisedAddress
# (127.0.0.1) instead of 0.0.0.0.
loopback_if() {
  local f
  for f in /sys/class/net/*; do
    [ -r "$f/flags" ] || continue
    # IFF_LOOPBACK = 0x8
    if (( $(cat "$f/flags") & 0x8 )); then basename "$f"; return; fi
  done
  echo lo
}

http_ok() { curl -fsS --max-time 5 "$1" 2>/dev/null; }

log_tail() {
  local data=$1
  echo "---- last lines of $data/logs ----" >&2
  tail -n 60 "$data/logs/pulsar-standalone.log" 2>/dev/null >&2 ||
    tail -n 60 "$data/logs/stdout.log" 2>/dev/null >&2 || true
  if [ -s "$data/logs/stdout.log" ] && [ -f "$data/logs/pulsar-standalone.log" ]; then
    echo "---- $data/logs/stdout.log ----" >&2
    tail -n 20 "$data/logs/stdout.log" >&2 || true
  fi
}

cmd_start() {
  local data=$1
  local java
  java=$(java_bin)
  command -v curl >/dev/null 2>&1 || die "curl not found: it is needed to wait for the broker (apt-get install curl)"
  local dir
  dir=$(install_dir)
  [ -x "$dir/bin/pulsar" ] && [ -f "$dir/.unpacked" ] || die "Pulsar $PULSAR_VERSION is not unpacked in $dir: run '$0 fetch' first"

  mkdir -p "$data"
  data=$(cd "$data" && pwd)

  local pid
  if pid=$(read_pid "$data") && alive "$pid"; then
    die "a broker (pid $pid) is already running for $data: stop it first"
  fi

  local broker_port web_port bk_port
  if [ -f "$data/ports" ]; then
    # shellcheck disable=SC1091
    . "$data/ports"
    broker_port=$BROKER_PORT web_port=$WEB_PORT bk_port=$BOOKIE_PORT
    local p
    for p in "$broker_port" "$web_port" "$bk_port"; do
      if port_busy "$p"; then
        # A port just released by the previous broker may linger in
        # TIME_WAIT; listeners use SO_REUSEADDR, so only a listener counts.
        if ss_listening "$p"; then
          die "port $p recorded in $data/ports is taken by another process"
        fi
      fi
    done
  else
    read -r broker_port web_port bk_port <<<"$(pick_ports 3)"
    printf 'BROKER_PORT=%s\nWEB_PORT=%s\nBOOKIE_PORT=%s\n' "$broker_port" "$web_port" "$bk_port" >"$data/ports"
  fi

  mkdir -p "$data/logs" "$data/metadata" "$data/bookkeeper" "$data/tmp" "$PULSAR_CACHE/cp-empty"
  local cds_opts
  cds_opts=$(cds_opts "$java" "$data")
  local conf="$data/standalone.conf"
  local settings
  # bookkeeperClientHealthCheckEnabled=false: the broker's BookKeeper
  # client quarantines a bookie that failed 5 times in a minute for 30
  # minutes; with the one bookie of a standalone, a crash test's failed
  # writes left no bookie ("Not enough non-faulty bookies") for every test
  # after it.
  mapfile -t settings < <(with_settings "$data" \
    "advertisedAddress=127.0.0.1" \
    "bindAddress=127.0.0.1" \
    "brokerServicePort=$broker_port" \
    "webServicePort=$web_port" \
    "clusterName=standalone" \
    "managedLedgerDefaultEnsembleSize=1" \
    "managedLedgerDefaultWriteQuorum=1" \
    "managedLedgerDefaultAckQuorum=1" \
    "brokerDeduplicationEnabled=false" \
    "allowAutoTopicCreation=true" \
    "allowAutoTopicCreationType=non-partitioned" \
    "brokerDeleteInactiveTopicsEnabled=false" \
    "webSocketServiceEnabled=false" \
    "functionsWorkerEnabled=false" \
    "transactionCoordinatorEnabled=false" \
    "narExtractionDirectory=$data/tmp" \
    "managedLedgerCacheSizeMB=32" \
    "dbStorage_writeCacheMaxSizeMb=16" \
    "dbStorage_readAheadCacheMaxSizeMb=16" \
    "dbStorage_rocksDB_blockCacheSize=16777216" \
    "journalSyncData=false" \
    "allowEphemeralPorts=true" \
    "listeningInterface=$(loopback_if)" \
    "numIOThreads=2" \
    "numHttpServerThreads=4" \
    "bookkeeperClientNumWorkerThreads=2" \
    "numOrderedExecutorThreads=2" \
    "numExecutorThreadPoolSize=2" \
    "numCacheExecutorThreadPoolSize=2" \
    "bookkeeperClientHealthCheckEnabled=false")
  write_conf "$dir/conf/standalone.conf" "$conf" "${settings[@]}"

  rm -f "$data/pulsar.pid" "$data/env"
  (
    cd "$data"
    # RocksDB metadata only: ZooKeeper mode would open a ZooKeeper port.
    unset PULSAR_STANDALONE_USE_ZOOKEEPER
    export PULSAR_STANDALONE_CONF="$conf"
    export PULSAR_LOG_DIR="$data/logs"
    export PULSAR_LOG_APPENDER=RollingFile
    export PULSAR_LOG_FILE=pulsar-standalone.log
    export PULSAR_LOG_IMMEDIATE_FLUSH=true
    # bin/pulsar puts the log config's folder (conf/) on the classpath, and
    # class data sharing refuses a non-empty folder there: point it at an
    # empty one and name the log config by absolute path instead (the last
    # -D wins). The folder must be the same for every broker, or the
    # class data archive would not match the classpath.
    export PULSAR_LOG_CONF="$PULSAR_CACHE/cp-empty/log4j2.yaml"
    export PULSAR_MEM=${PULSAR_MEM:-"-Xms256m -Xmx768m -XX:MaxDirectMemorySize=512m"}
    # C1 only (TieredStopAtLevel=1) halves the CPU spent starting; the
    # serial collector has the smallest footprint for a heap this size.
    export PULSAR_GC=${PULSAR_GC:-"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+PerfDisableSharedMem"}
    export PULSAR_GC_LOG=${PULSAR_GC_LOG:-"-Xlog:disable -Xlog:all=warning,cds*=off:stderr"}
    export PULSAR_EXTRA_OPTS="${PULSAR_EXTRA_OPTS:-"-Dpulsar.allocator.exit_on_oom=true -Dio.netty.recycler.maxCapacityPerThread=4096"} -Djava.io.tmpdir=$data/tmp -Dlog4j.configurationFile=$dir/conf/log4j2.yaml $cds_opts"
    export JAVA_HOME=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$java")")")}
    # setsid: the broker gets its own session and process group (pid ==
    # pgid), so stop can signal everything it started, and it does not die
    # with the caller's terminal. Its output goes to a file, never to the
    # caller's pipes, so a caller reading this script's output gets EOF.
    setsid "$dir/bin/pulsar" standalone -nfw -nss \
      --metadata-dir "$data/metadata" \
      --bookkeeper-dir "$data/bookkeeper" \
      --zookeeper-dir "$data/zookeeper" \
      --bookkeeper-port "$bk_port" \
      </dev/null >>"$data/logs/stdout.log" 2>&1 &
    echo $! >"$data/pulsar.pid"
  )
  pid=$(read_pid "$data") || die "could not record the broker's pid"
  if [ -n "${PULSAR_WATCH_PID:-}" ]; then
    start_watchdog "$data" "$PULSAR_WATCH_PID"
  fi

  local admin="http://127.0.0.1:$web_port"
  local deadline=$((SECONDS + READY_TIMEOUT))
  while :; do
    if ! alive "$pid"; then
      log_tail "$data"
      die "broker (pid $pid) exited during startup; logs in $data/logs"
    fi
    # The health check writes and reads a message: after a crash the
    # admin API answers before the bookie takes writes again ("Not enough
    # non-faulty bookies"), and a test that starts then fails.
    if http_ok "$admin/admin/v2/clusters" >/dev/null &&
      http_ok "$admin/admin/v2/namespaces/public" | grep -q '"public/default"' &&
      http_ok "$admin/admin/v2/brokers/health" | grep -q '^ok'; then
      break
    fi
    if [ $SECONDS -ge $deadline ]; then
      log_tail "$data"
      rm -f "$data/cds-target"
      cmd_stop "$data" >/dev/null 2>&1 || true
      die "broker not ready after ${READY_TIMEOUT}s; logs in $data/logs"
    fi
    sleep 0.25
  done

  printf 'PULSAR_URL=pulsar://127.0.0.1:%s\nPULSAR_ADMIN=%s\n' "$broker_port" "$admin" >"$data/env.tmp"
  mv "$data/env.tmp" "$data/env"
  cat "$data/env"
}

# cds_opts JAVA DATA_DIR prints the JVM options for class data sharing
# (PULSAR_CDS=0 turns it off). Loading the broker's classes from an archive
# saves about a fifth of its startup CPU. The archive is per Pulsar version
# and JDK, in PULSAR_CACHE/cds; when it is missing, this broker records one
# into DATA_DIR/tmp when it exits, and stop moves it into the cache.
cds_opts() {
  local java=$1 data=$2
  [ "${PULSAR_CDS:-1}" != 0 ] || return 0
  local jsa
  jsa=$(cds_archive "$java")
  rm -f "$data/cds-target" "$data/tmp/pulsar.jsa"
  if [ -s "$jsa" ]; then
    echo "-XX:SharedArchiveFile=$jsa"
  else
    echo "$jsa" >"$data/cds-target"
    echo "-XX:ArchiveClassesAtExit=$data/tmp/pulsar.jsa"
  fi
}

cds_archive() {
  local key
  key=$("$1" -version 2>&1 | cksum | cut -d' ' -f1)
  echo "$PULSAR_CACHE/cds/apache-pulsar-$PULSAR_VERSION-jdk$key.jsa"
}

# cds_promote DATA_DIR moves the archive a stopped broker wrote into the
# cache (copy beside it, then rename, so readers never see half a file).
cds_promote() {
  local data=$1 target
  [ -f "$data/cds-target" ] || return 0
  target=$(cat "$data/cds-target")
  rm -f "$data/cds-target"
  [ -s "$data/tmp/pulsar.jsa" ] || return 0
  mkdir -p "$(dirname "$target")"
  if [ ! -s "$target" ] && cp "$data/tmp/pulsar.jsa" "$target.tmp.$$" 2>/dev/null; then
    mv -f "$target.tmp.$$" "$target"
  fi
  rm -f "$target.tmp.$$" "$data/tmp/pulsar.jsa"
}

# ss_listening PORT: whether some socket listens on PORT (state 0A in /proc).
ss_listening() {
  local p=$1 hex f
  hex=$(printf '%04X' "$p")
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    if awk -v h="$hex" 'NR > 1 { split($2, a, ":"); if (toupper(a[2]) == h && $4 == "0A") found = 1 } END { exit !found }' "$f"; then
      return 0
    fi
  done
  return 1
}

# group_pids PGID: the pids in process group PGID.
group_pids() {
  local pg=$1 stat rest
  for stat in /proc/[0-9]*/stat; do
    rest=""
    { read -r rest <"$stat"; } 2>/dev/null
    [ -n "$rest" ] || continue
    rest=${rest##*) }
    # fields after "comm)": state ppid pgrp ...; zombies do not count
    # shellcheck disable=SC2086
    set -- $rest
    [ "${3:-}" = "$pg" ] && [ "${1:-}" != Z ] && { stat=${stat#/proc/}; echo "${stat%/stat}"; }
  done
  return 0
}

# start_watchdog DATA_DIR PID: a background process that stops the broker
# when PID (the test binary) has gone, so that a crashed or killed test run
# leaves no broker behind. It ends by itself when the broker stops.
start_watchdog() {
  local data=$1 watch=$2 self
  [[ "$watch" =~ ^[0-9]+$ ]] || die "PULSAR_WATCH_PID must be a pid, not '$watch'"
  self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
  setsid bash "$self" __watch "$data" "$watch" </dev/null >/dev/null 2>&1 &
  echo $! >"$data/watchdog.pid"
}

cmd_watch() {
  local data=$1 watch=$2 pid
  pid=$(read_pid "$data") || exit 0
  while alive "$pid"; do
    if ! alive "$watch"; then
      echo "pulsar-standalone: watched pid $watch has gone; stopping the broker" >>"$data/logs/stdout.log"
      rm -f "$data/watchdog.pid"
      cmd_stop "$data"
      exit 0
    fi
    sleep 1
  done
}

stop_watchdog() {
  local data=$1 wpid
  [ -f "$data/watchdog.pid" ] || return 0
  wpid=$(cat "$data/watchdog.pid")
  rm -f "$data/watchdog.pid"
  if [[ "$wpid" =~ ^[0-9]+$ ]] && [ "$wpid" != "$$" ]; then
    kill -TERM -- "-$wpid" 2>/dev/null || kill -TERM "$wpid" 2>/dev/null || true
  fi
}

cmd_stop() {
  local data=$1
  [ -d "$data" ] || die "no such data dir: $data"
  stop_watchdog "$data"
  local pid
  if ! pid=$(read_pid "$data"); then
    echo "pulsar-standalone: no pulsar.pid in $data, nothing to stop" >&2
    return 0
  fi
  local left
  left=$(group_pids "$pid")
  if ! alive "$pid" && [ -z "$left" ]; then
    # It died without stopping (a crash, or a test's SIGKILL): the next
    # start restarts once more (see crash_start).
    touch "$data/crashed"
  fi
  if alive "$pid" || [ -n "$left" ]; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    local grace=$STOP_TIMEOUT
    # Writing the class data archive at exit takes a while on a busy box.
    [ ! -f "$data/cds-target" ] || grace=$((STOP_TIMEOUT * 3))
    local deadline=$((SECONDS + grace))
    while :; do
      left=$(group_pids "$pid")
      if ! alive "$pid" && [ -z "$left" ]; then break; fi
      if [ $SECONDS -ge $deadline ]; then
        echo "pulsar-standalone: broker (pid $pid) still running after ${grace}s, killing" >&2
        kill -KILL -- "-$pid" 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
        break
      fi
      sleep 0.2
    done
    left=$(group_pids "$pid")
    if alive "$pid" || [ -n "$left" ]; then
      die "broker processes still running after KILL: $pid $left"
    fi
  fi
  cds_promote "$data"
  rm -f "$data/pulsar.pid" "$data/env"
}

# crash_start starts a broker; after a crash it stops it cleanly and
# starts it again. A bookie killed without stopping leaves its registration
# in the RocksDB metadata store, and the restarted bookie's registration
# lock then deletes and re-creates that node in a loop (Pulsar 4.0.8): the
# broker finds no writable bookie at random moments ("Not enough
# non-faulty bookies"). A clean stop removes the registration, so the
# second start registers once.
crash_start() {
  local data=$1
  cmd_start "$data"
  if [ -f "$data/crashed" ]; then
    cmd_stop "$data"
    rm -f "$data/crashed"
    cmd_start "$data"
  fi
}

[ $# -ge 1 ] || usage
case "$1" in
fetch) [ $# -eq 1 ] || usage; cmd_fetch ;;
start) [ $# -eq 2 ] || usage; crash_start "$2" ;;
stop) [ $# -eq 2 ] || usage; cmd_stop "$2" ;;
__watch) [ $# -eq 3 ] || usage; cmd_watch "$2" "$3" ;;
*) usage ;;
esac
