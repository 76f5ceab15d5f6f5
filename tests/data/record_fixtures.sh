#!/usr/bin/env bash
# Re-record the fio output fixtures used by the parser and histogram tests.
# Needs fio and a disk-backed scratch directory (O_DIRECT). The fixtures are
# committed; run this only to refresh them (e.g. for a new fio version).
#   tests/data/record_fixtures.sh [SCRATCH_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=${1:-/var/tmp/iorig-fixtures}
mkdir -p "$scratch"
data="$scratch/data"
fio --name=fill --filename="$data" --rw=write --bs=1m --size=32m --direct=1 \
    --refill_buffers --output=/dev/null

record() {  # name, then fio job options (one per argument)
    local name=$1; shift
    local dir="$here/$name"
    rm -rf "$dir"; mkdir -p "$dir"
    {
        echo "[$name]"
        echo "filename=$data"
        echo "size=32m"
        printf '%s\n' "$@"
    } > "$dir/job.fio"
    (cd "$dir" && fio --output-format=json+ --output=output.json --eta=never \
        ${STATUS:+--status-interval=1} job.fio)
    # The data path is machine-specific; the tests only parse the output.
    sed -i "s#$data#/scratch/data#g" "$dir/job.fio" "$dir/output.json"
}

# write_lat_log is no longer in iorig's jobs; its averaged clat log is kept
# here as fio's own per-second mean, the reference for the mean iorig reads
# from each second's histogram (tests/test_assemble.py)
common=(ioengine=psync direct=1 time_based=1 norandommap=1 randrepeat=0
        write_iops_log=rr write_bw_log=rr write_lat_log=rr write_hist_log=rr
        log_avg_msec=1000 log_hist_msec=1000)
STATUS=1 record randread-2jobs "${common[@]}" rw=randread bs=4k numjobs=2 runtime=3
STATUS=1 record randrw-mixed "${common[@]}" rw=randrw rwmixread=70 bs=4k numjobs=1 runtime=2
STATUS= record group-reporting ioengine=psync direct=1 time_based=1 norandommap=1 \
    rw=randread bs=4k numjobs=2 runtime=2 group_reporting=1
rm -f "$here"/*/*_slat.*.log "$here"/*/*_lat.*.log  # unused by iorig
rm -rf "$scratch"
