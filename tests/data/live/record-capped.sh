#!/usr/bin/env bash
# Re-record status-capped.*: fio's json+ status once a second and its
# one-second IOPS and bandwidth logs, two jobs reading a loop device in memory
# capped at 2,000 read IOPS by the block throttle (cgroup v1), as iorig logs
# them (log_avg_msec=1000). Needs root. tests/test_live.py reads the result.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
img=$(mktemp -p /dev/shm status-capped.XXXXXX)
truncate -s 64M "$img"
dev=$(losetup --find --show --direct-io=on "$img")
majmin=$(lsblk -dno MAJ:MIN "$dev" | tr -d ' ')
throttle=/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device
trap 'echo "$majmin 0" > $throttle; losetup -d $dev; rm -rf "$img" "$work"' EXIT
echo "$majmin 2000" > $throttle
sed "s#@DEV@#$dev#; s#@LOG@#$work/capped#" "$here/status-capped.fio" > "$work/job.fio"
fio --status-interval=1 --output-format=json+ --output="$work/status" "$work/job.fio"
cp "$work/status" "$here/status-capped.status"
for f in "$work"/capped_iops.*.log "$work"/capped_bw.*.log; do
    cp "$f" "$here/status-$(basename "$f")"
done
