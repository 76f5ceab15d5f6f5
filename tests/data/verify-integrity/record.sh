#!/usr/bin/env bash
# Re-record stderr.txt: what fio prints when blocks do not read back as
# written (the parser tests read it). Needs fio and a disk-backed scratch
# directory (O_DIRECT). Run only to refresh it, e.g. for a new fio version:
#   tests/data/verify-integrity/record.sh [SCRATCH_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=${1:-/var/tmp/iorig-verify-fixture}
mkdir -p "$scratch"
data="$scratch/data"
rm -f "$data"
common=(--filename="$data" --bs=4k --size=1m --verify=crc32c --direct=1
        --ioengine=psync --verify_state_save=0 --output=/dev/null)
fio --name=write "${common[@]}" --rw=write --do_verify=0
python3 - "$data" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    data = f.read()
    f.seek(5 * 4096 + 100); f.write(b"not what was written")  # data: crc32c mismatch
    f.seek(20 * 4096); f.write(data[10 * 4096 : 11 * 4096])   # block 10 written at 20
    f.seek(30 * 4096 + 9); f.write(b"\xff")                   # header: its own crc
    f.seek(40 * 4096); f.write(bytes(4096))                    # never written: zeros
PY
{
    fio --name=check "${common[@]}" --rw=read --continue_on_error=verify 2>&1 >/dev/null || true
    # an older generation where a newer one was written: fio checks the
    # generation (numberio) only while the writing job itself verifies, so a
    # second fio keeps rewriting the blocks under it
    fio --name=churn "${common[@]}" --rw=write --do_verify=0 --loops=100000 &
    churn=$!
    fio --name=write "${common[@]}" --rw=write --do_verify=1 --continue_on_error=verify \
        2>&1 >/dev/null | grep -m 2 numberio || true
    kill "$churn"; wait "$churn" 2>/dev/null || true
} > "$here/stderr.txt"
sed -i "s#$data#/scratch/data#g" "$here/stderr.txt"
rm -rf "$scratch"
