#!/usr/bin/env bash
# Runs one phase of `make test` (the command after NAME) and prints when it
# started and how many seconds it took, also when it fails.
#   scripts/phase.sh NAME COMMAND...
set -uo pipefail
name=$1
shift
start=$(date +%s)
echo "== phase $name: start $(date -u +%H:%M:%S)"
"$@"
rc=$?
echo "== phase $name: $(($(date +%s) - start)) s (exit $rc)"
exit $rc
