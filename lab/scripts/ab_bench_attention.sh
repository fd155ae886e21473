#!/usr/bin/env bash
# Same-GPU A/B of two bench_attention binaries (two commits' kernels), in alternating processes: A B A B ... Each
# process is bench_attention's default mode (both kernel families, modes none / mask / fused at hd $HD, causal and not,
# median of $REPS launches each); the logs go to OUTDIR/ab_<shape>_<k>_<A|B>.log and lab/scripts/ab_table.py OUTDIR
# tabulates B / A per row. Binaries built on the CPU machine run on the device (its glibc is newer); carry them with the
# export. The A/B session 11 left for the next: A = b76a1af (the build of its verdict, whose one-tile kernels session
# 10's refactor had recompiled to another SASS), B = a build whose one-tile kernels are 2aef497's SASS again
# (scripts/compare_cubins.py): it says whether that refactor made the fused kernel slower.
#   lab/scripts/ab_bench_attention.sh BIN_A BIN_B OUTDIR [PAIRS] [SHAPES]    SHAPES: "SQ:HEADS:KV ..." (default 8192:32:8)
set -uo pipefail
A=$1; B=$2; O=$3; PAIRS=${4:-3}; SHAPES=${5:-8192:32:8}
mkdir -p "$O"
for sh in $SHAPES; do
  IFS=: read -r sq hq hkv <<< "$sh"
  for k in $(seq "$PAIRS"); do
    for side in A B; do
      bin=$A; [ "$side" = B ] && bin=$B
      timeout 60 "$bin" "$sq" "$hq" "$hkv" "${REPS:-20}" "${HD:-128}" > "$O/ab_${sq}_${hq}_${k}_${side}.log" 2>&1
      echo "ab $sh pair $k $side: exit $?"
    done
  done
done
