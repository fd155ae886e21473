#!/bin/bash
# Submits a dropbench sweep as a Slurm job array (scripts/slurm/sweep.sbatch: one shard per task, one GPU each)
# and a merge job that runs when every task has succeeded (--dependency=afterok).
#
#   scripts/slurm/submit.sh -n 8 -o sweeps/70b [-p PARTITION] [-t TIME] -- \
#       build/dropbench run --config configs/llama3-70b.json --set measure.throttle=0
#
# Writes OUTDIR/shard-i-of-N.json per task and OUTDIR/all.json (dropbench merge). If a task fails, the merge job
# does not run: resubmit the same command line, finished shards are kept, incomplete ones resume (see README.md).
set -euo pipefail

usage() {
  echo "usage: $0 -n SHARDS -o OUTDIR [-p PARTITION] [-t TIME] [-A ACCOUNT] -- DROPBENCH COMMAND [ARGS...]" >&2
  exit 2
}

shards="" outdir="" extra=()
while [ $# -gt 0 ]; do
  case $1 in
    -n) shards=$2; shift 2 ;;
    -o) outdir=$2; shift 2 ;;
    -p) extra+=(--partition "$2"); shift 2 ;;
    -t) extra+=(--time "$2"); shift 2 ;;
    -A) extra+=(--account "$2"); shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
if [ -z "$shards" ] || [ -z "$outdir" ] || [ $# -lt 2 ]; then usage; fi
case $shards in '' | *[!0-9]* | 0) echo "$0: -n: '$shards' is not a positive shard count" >&2; exit 2 ;; esac

here=$(cd "$(dirname "$0")" && pwd)
dropbench=$1
mkdir -p "$outdir"

array=$(sbatch --parsable "${extra[@]}" --array="0-$((shards - 1))" --export=ALL,DROPBENCH_SHARDS="$shards" \
  "$here/sweep.sbatch" "$outdir" "$@")
array=${array%%;*}  # --parsable prints "jobid[;cluster]"

inputs=()
for ((i = 0; i < shards; i++)); do inputs+=("$outdir/shard-$i-of-$shards.json"); done
printf -v merge_cmd '%q ' "$dropbench" merge "${inputs[@]}" -o "$outdir/all.json"
merge=$(sbatch --parsable "${extra[@]}" --dependency="afterok:$array" --job-name=dropbench-merge \
  --ntasks=1 --output="$outdir/merge-%j.log" --wrap="$merge_cmd")
merge=${merge%%;*}

echo "sweep array $array ($shards tasks) -> $outdir/shard-*-of-$shards.json; merge job $merge -> $outdir/all.json"
