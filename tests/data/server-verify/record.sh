#!/usr/bin/env bash
# Re-record output.json: what a fio client writes (--output) when its fio
# server finds bad blocks: the server's messages, tagged "<server-name> ",
# beside the JSON (fio 3.33 prints a message's further lines untagged). The
# parser tests read it (parse.server_text). Needs fio; starts a server on
# 127.0.0.2:18799 for the time it takes:
#   tests/data/server-verify/record.sh [SCRATCH_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=${1:-/var/tmp/iorig-server-verify}
mkdir -p "$scratch"
data="$scratch/data"
rm -f "$data"
fio --server=ip:127.0.0.2,18799 > /dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
common="filename=$data
size=1m
verify=crc32c
verify_interval=4k
direct=1
ioengine=psync
verify_state_save=0"
printf '[write]\nrw=write\nbs=64k\ndo_verify=0\n%s\n' "$common" > "$scratch/write.fio"
printf '[check]\nrw=read\nbs=4k\ncontinue_on_error=verify\n%s\n' "$common" > "$scratch/check.fio"
fio --client=127.0.0.2,18799 "$scratch/write.fio" --output=/dev/null
python3 - "$data" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(5 * 4096 + 100); f.write(b"not what was written")  # crc32c mismatch
    f.seek(9 * 4096); f.write(bytes(4096))                     # no header
PY
fio --client=127.0.0.2,18799 "$scratch/check.fio" --output-format=json \
    --output="$here/output.json" || true
