#!/usr/bin/env bash
# Re-record what fio 3.33 reports for a stat job (fio's filestat engine, as
# iorig writes an `op: stat` workload) beside a reading job on the same files:
# every stat() counts as a read of bs bytes in fio's JSON and bw log, though
# it reads nothing (tests/test_assemble.py checks that iorig counts its ops
# and no bytes). Needs fio:
#   tests/data/filestat/record.sh [SCRATCH_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=${1:-/var/tmp/iorig-filestat}
mkdir -p "$scratch"
trap 'rm -rf "$scratch"' EXIT
cat > "$here/job.fio" <<JOB
[global]
directory=/scratch
filename_format=set.\$jobnum.\$filenum
nrfiles=2
filesize=65536
size=131072
time_based=1
runtime=3000ms
rate_process=poisson
log_avg_msec=1000

[st]
write_iops_log=st
write_bw_log=st
ioengine=filestat
rw=read
bs=4096
rate_iops=50

[rd]
write_iops_log=rd
write_bw_log=rd
ioengine=psync
rw=randread
bs=4096
rate_iops=50
JOB
sed "s#^directory=/scratch#directory=$scratch#" "$here/job.fio" > "$scratch/job.fio"
rm -f "$here"/*.log
(cd "$here" && fio --output-format=json --output=output.json --eta=never "$scratch/job.fio")
sed -i "s#$scratch#/scratch#g" "$here/output.json"
