# The attention backward's commands of record (the files of results/<gpu>/attention/backward/ and its modes/), in one
# place for the two scripts that run them: scripts/bwd_device.sh (its timing part, on a device build) and
# scripts/device_stages.sh (stage bwdrec, on a build or a package). Sourced; defines arrays and one function.
#   BWD_MODES_ARGS  scripts/h2h_attention_bwd.py's arguments for the modes alone (ours none / mask / regen beside cuDNN
#                   with and without dropout, 20 rounds: the mask / none resolution the 5 % target needs)
#   BWD_CLI_WGMMA   `dropbench` arguments: both backward families through the core harness, SQ 8192, dH 128 and 64,
#                   causal and not (one report; the family is an axis)
#   BWD_CLI_PASS    `dropbench` arguments: the pass axis (fwd, bwd, fwd+bwd) at one point, SQ 4096 causal, dH 128
BWD_MODES_ARGS=(--rounds 20 --variants bwd:ours:none,bwd:ours:mask,bwd:ours:fused,bwd:cudnn:none,bwd:cudnn:dropout)
BWD_CLI_COMMON=(attention --set workload.q_heads=32 --set workload.kv_heads=8 --min-time 0.03 --max-noise 0.02
                --set measure.timeout=1)
BWD_CLI_WGMMA=("${BWD_CLI_COMMON[@]}" --set 'sweep.head_dim=[128,64]' --set 'sweep.sq=[8192]' --set 'sweep.causal=[false,true]'
               --set 'sweep.attention_kernel=[mma,wgmma]' --set 'sweep.pass=[bwd]')
BWD_CLI_PASS=("${BWD_CLI_COMMON[@]}" --set workload.head_dim=128 --set 'sweep.sq=[4096]' --set 'sweep.causal=[true]'
              --set 'sweep.pass=[fwd,bwd,fwd+bwd]')
# bwd_context: the run's context.log lines (time, sha, GPU, toolkit, PyTorch), as results/<gpu>/attention/backward/ keeps it
bwd_context() {
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
}
