#!/usr/bin/env bash
# Stop the single-node Slurm that .ci/slurm/start.sh started (by pid file; packages stay installed).
set -u
grep -qs gemmlab-ci /etc/slurm/slurm.conf || { echo "not our Slurm (no gemmlab-ci slurm.conf): nothing stopped"; exit 0; }
for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/slurmdbd.pid; do
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill "$(cat "$pidfile")"
  fi
done
mariadb-admin shutdown 2>/dev/null || true
pid=$(cat /run/munge/munged.pid 2>/dev/null) && kill "$pid" 2>/dev/null || true
echo "slurm: stopped"
