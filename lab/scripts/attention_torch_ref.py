# Same-machine reference numbers for docs/attention.md: PyTorch SDPA (flash = FlashAttention-2, cudnn) on the
# benchmark shape, with and without dropout. CUDA events, warm-up, median. Run by lab/scripts/attention.sh run.
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sq = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
h, d, reps = 32, 128, 30
torch.manual_seed(0)
q, k, v = (torch.randn(1, h, sq, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))


def med(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[reps // 2]


for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
    for causal in (False, True):
        for p in (0.0, 0.1):
            try:
                with sdpa_kernel(be):
                    ms = med(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal))
                fl = 4 * h * sq * sq * d / (2 if causal else 1)
                print(f"torch {name:5s} causal={int(causal)} p={p:.1f}: {ms:7.3f} ms {fl / ms / 1e9:7.1f} TFLOP/s")
            except Exception as e:  # backend unavailable for this setting
                print(f"torch {name:5s} causal={int(causal)} p={p:.1f}: n/a ({type(e).__name__})")
