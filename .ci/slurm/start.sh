#!/usr/bin/env bash
# Install and start a single-node Slurm on localhost (Debian's packages): munge, MariaDB + slurmdbd
# (so sacct answers, which submitit needs to see a cancelled job end), slurmctld and slurmd, with
# .ci/slurm/slurm.conf: one node, 4 CPUs, partition "debug". Idempotent: what already runs is kept.
#
#   bash .ci/slurm/start.sh        # exit 0: Slurm is up; 77: cannot be set up here (reason on stderr)
#
# Needs root and apt-get (CI: Debian 12 as root). Leaves the daemons running; .ci/slurm/stop.sh
# stops them. Logs: /var/log/slurm/*.log.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
marker="gemmlab-ci"
log_dir=/var/log/slurm

skip() { echo "slurm setup skipped: $*" >&2; exit 77; }
fail() {
  echo "slurm setup failed: $*" >&2
  for f in "$log_dir"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }  # pid file -> alive?

node_up() {
  local state
  state=$(sinfo -h -n localhost -o %T 2>/dev/null | head -n1)
  case "$state" in idle*|mixed*|allocated*|completing*) return 0 ;; *) return 1 ;; esac
}

# Already up (an earlier call, or .ci/run before the tests)?
if command -v sinfo >/dev/null && grep -qs "$marker" /etc/slurm/slurm.conf && node_up \
   && sacct -n -X -S now >/dev/null 2>&1; then
  echo "slurm: already running"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || skip "needs root to install and start slurmctld/slurmd (running as $(id -un))"
if [ -f /etc/slurm/slurm.conf ] && ! grep -qs "$marker" /etc/slurm/slurm.conf; then
  skip "/etc/slurm/slurm.conf exists and is not ours: this machine has its own Slurm, not touching it"
fi

# -- packages ----------------------------------------------------------------------------------
pkgs=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || skip "no apt-get to install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "slurm: installing ${missing[*]}"
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/gemmlab-slurm-apt.log 2>&1; then
    apt-get update -q >>/tmp/gemmlab-slurm-apt.log 2>&1
    apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/gemmlab-slurm-apt.log 2>&1 \
      || { tail -n 20 /tmp/gemmlab-slurm-apt.log >&2; skip "apt-get could not install ${missing[*]}"; }
  fi
fi

# -- configuration -----------------------------------------------------------------------------
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$log_dir" /run/munge /run/mysqld
install -m 644 "$here/slurm.conf" /etc/slurm/slurm.conf
install -m 600 "$here/slurmdbd.conf" /etc/slurm/slurmdbd.conf  # slurmdbd refuses a readable one
chown munge:munge /run/munge
chown mysql:mysql /run/mysqld
[ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key --force && chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key; } \
  || fail "no munge key and mungekey could not make one"

# -- daemons, each only if not running ---------------------------------------------------------
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null 2>&1 || fail "munge does not answer"
fi

if ! mariadb-admin ping >/dev/null 2>&1; then
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"$log_dir/mariadb.log" 2>&1 \
    || fail "could not initialise MariaDB's data folder"
  # The socket alone (no TCP port); root logs in through it (unix_socket authentication).
  setsid /usr/sbin/mariadbd --user=mysql --skip-networking >"$log_dir/mariadb.log" 2>&1 < /dev/null &
  for _ in $(seq 100); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.2; done
  mariadb-admin ping >/dev/null 2>&1 || fail "MariaDB did not start"
fi
mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db" || fail "could not create slurm_acct_db"

if ! running /run/slurmdbd.pid; then
  /usr/sbin/slurmdbd || fail "slurmdbd did not start"
fi
for _ in $(seq 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
sacctmgr -n list cluster >/dev/null 2>&1 || fail "slurmdbd does not answer"

if ! running /run/slurmctld.pid; then
  /usr/sbin/slurmctld || fail "slurmctld did not start"
fi
if ! running /run/slurmd.pid; then
  /usr/sbin/slurmd -N localhost || fail "slurmd did not start"
fi

for _ in $(seq 120); do node_up && break; sleep 0.5; done
if ! node_up; then
  # A node left down or drained by an earlier, unclean stop comes back on request.
  scontrol update nodename=localhost state=resume >/dev/null 2>&1
  for _ in $(seq 20); do node_up && break; sleep 0.5; done
fi
node_up || fail "node localhost is not up: $(sinfo -h -N -o '%N %T %E' 2>&1)"
# slurmctld registers the cluster with slurmdbd on start; sacct works once it has.
for _ in $(seq 60); do sacct -n -X -S now >/dev/null 2>&1 && break; sleep 0.5; done
sacct -n -X -S now >/dev/null 2>&1 || fail "sacct does not answer"
echo "slurm: up ($(sinfo -h -o '%P %D %C %T' | head -n1))"
