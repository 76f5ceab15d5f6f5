#!/usr/bin/env bash
# Re-record the client/server fixture: three fio servers on 127.0.0.2-4, one
# local fio client running a per-host job file on each (see README.md).
# Needs fio (the same build for client and servers) and a scratch directory
# that supports O_DIRECT (/tmp on tmpfs does not; pass another one).
#   tests/data/clientserver-3hosts/record.sh [SCRATCH_DIR] [FIRST_PORT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=${1:-/var/tmp/iorig-cs-fixture}
first_port=${2:-18791}
hosts=(127.0.0.2 127.0.0.3 127.0.0.4)
rm -rf "$scratch"; mkdir -p "$scratch"

pids=()
descendants() { local c; for c in $(pgrep -P "$1" || true); do echo "$c"; descendants "$c"; done; }
stop_servers() {  # the servers and everything they forked (fio jobs call setsid)
    local pid all=()
    for pid in "${pids[@]}"; do all+=("$pid" $(descendants "$pid")); done
    [ ${#all[@]} -gt 0 ] && kill -TERM "${all[@]}" 2>/dev/null || true
    sleep 1
    [ ${#all[@]} -gt 0 ] && kill -KILL "${all[@]}" 2>/dev/null || true
}
trap stop_servers EXIT

client_args=()
: > "$scratch/hosts.txt"
for i in 0 1 2; do
    ip=${hosts[$i]}; port=$((first_port + i)); dir="$scratch/server-$i"
    mkdir -p "$dir"
    # Written once before it is read: the measured run reads real data.
    (cd "$dir" && fio --name=fill --filename=cs-data --rw=write --bs=1m --size=16m \
        --direct=1 --refill_buffers --output=/dev/null)
    (cd "$dir" && exec fio --server="ip:$ip,$port" > "$scratch/server-$i.log" 2>&1) &
    pids+=($!)
    # One job file per host, with its own log prefix: fio suffixes client-mode
    # logs with the address only, so hosts sharing an address would collide.
    cat > "$scratch/job-h$i.fio" <<JOB
; host $i of 3: $ip:$port
[global]
ioengine=libaio
direct=1
rw=randread
bs=4k
iodepth=4
numjobs=2
size=16m
norandommap=1
randrepeat=0
time_based=1
runtime=3s
write_iops_log=cs-h$i
write_bw_log=cs-h$i
write_lat_log=cs-h$i
write_hist_log=cs-h$i
log_avg_msec=1000
log_hist_msec=1000
log_unix_epoch=1

[randread-h$i]
filename=cs-data
JOB
    client_args+=("--client=ip:$ip,$port" "job-h$i.fio")
    echo "$ip:$port" >> "$scratch/hosts.txt"
done
for i in 0 1 2; do  # wait until each server listens
    for _ in $(seq 50); do
        ss -Hltn "src ${hosts[$i]}:$((first_port + i))" | grep -q . && break; sleep 0.1
    done
done

# The recorded run: --status-interval=1 given locally (as iorig's runner does);
# in client mode it produces no snapshots, the output file is written at the end.
run_dir="$scratch/run"; mkdir -p "$run_dir"; cp "$scratch"/job-h*.fio "$scratch/hosts.txt" "$run_dir"
(cd "$run_dir" && fio --output-format=json+ --output=output.json --status-interval=1 \
    --eta=always "${client_args[@]}" > client-stdout.txt 2> client-stderr.txt)

# A second run with --status-interval=1 forwarded to every server (placed after
# each job file): snapshots then appear as extra client_stats entries in the
# one final document, and "All clients" sums the first snapshots. Output only.
fwd_dir="$scratch/forwarded"; mkdir -p "$fwd_dir"; cp "$scratch"/job-h*.fio "$fwd_dir"
fwd_args=()
for ((k = 0; k < ${#client_args[@]}; k += 2)); do
    fwd_args+=("${client_args[k]}" "${client_args[k + 1]}" --status-interval=1)
done
(cd "$fwd_dir" && fio --output-format=json+ --output=output.json --eta=always \
    "${fwd_args[@]}" > /dev/null 2>&1)

find "$here" -mindepth 1 -maxdepth 1 ! -name record.sh ! -name README.md -exec rm -rf {} +
cp "$run_dir"/* "$here/"
cp "$fwd_dir/output.json" "$here/output-status-forwarded.json"
stop_servers; trap - EXIT
rm -rf "$scratch"
ls -la "$here"
