#!/usr/bin/env bash
# Re-record what fio 3.33 prints when I/O fails under continue_on_error=all
# with error_dump=1 (the parser tests read it):
#   stderr.txt, output.json         a local run: one "fio: io_u error on file F:
#                                   <error>: <read|write> offset=…, buflen=…" line
#                                   per error on stderr (fio also copies them into
#                                   --output), total_err and first_error in the JSON
#   client-output.json              the same through a fio server on 127.0.0.2:18798:
#                                   the lines tagged "<server-name> " in the client's
#                                   --output beside the JSON
# The errors are real EIO: the job's file is on an ext4 filesystem (a loop
# device) that is shut down mid-run (FS_IOC_SHUTDOWN): from then on every read
# and write of the file fails with EIO until it is unmounted. rate_iops keeps
# the count small. Needs root (loop device, mount) and fio:
#   tests/data/io-errors/record.sh [SCRATCH_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=${1:-/var/tmp/iorig-io-errors}
mkdir -p "$scratch/mnt"
truncate -s 64M "$scratch/fs.img"
mkfs.ext4 -q -F "$scratch/fs.img"
loop=$(losetup -f --show "$scratch/fs.img")
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    umount "$scratch/mnt" 2>/dev/null || true
    losetup -d "$loop" 2>/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT
shutdown_fs() {  # FS_IOC_SHUTDOWN (XFS_IOC_GOINGDOWN), flag 2: no log flush
    python3 -c 'import fcntl, os, struct, sys
fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), 0x8004587D, struct.pack("I", 2))' "$1"
}
job="[rw]
filename=$scratch/mnt/data
size=4m
bs=4k
direct=1
ioengine=psync
rw=randrw
rate_iops=40
time_based=1
runtime=2
continue_on_error=all
error_dump=1"
printf '%s\n' "$job" > "$scratch/job.fio"

mount "$loop" "$scratch/mnt"
fio --create_only=1 "$scratch/job.fio" --output=/dev/null
( sleep 1; shutdown_fs "$scratch/mnt" ) &
fio "$scratch/job.fio" --output-format=json --output="$here/output.json" \
    2> "$here/stderr.txt" || true
wait
umount "$scratch/mnt"

mkfs.ext4 -q -F "$loop"
mount "$loop" "$scratch/mnt"
fio --create_only=1 "$scratch/job.fio" --output=/dev/null
fio --server=ip:127.0.0.2,18798 > /dev/null 2>&1 &
server=$!
sleep 1
( sleep 1.5; shutdown_fs "$scratch/mnt" ) &
fio --client=127.0.0.2,18798 "$scratch/job.fio" --output-format=json \
    --output="$here/client-output.json" 2> "$scratch/client-stderr.txt" || true
wait "$!" 2>/dev/null || true
# the client's own stderr repeats nothing of the server's (checked here)
if grep -q "io_u error" "$scratch/client-stderr.txt"; then
    echo "fio's client printed the server's errors on its stderr too" >&2
    exit 1
fi
sed -i "s#$scratch#/scratch#g" "$here/stderr.txt" "$here/output.json" "$here/client-output.json"
