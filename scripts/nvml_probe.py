#!/usr/bin/env python3
"""What NVML offers on this GPU for dropbench's power sampler: the power cap, idle power, how often the
total-energy counter and the power readings change, how long each query takes, and how the readings follow a step
from idle to a power-capped GEMM loop. Writes one JSON document (stdout or -o FILE).
Needs pynvml; the busy phase needs torch with CUDA."""
import argparse, json, sys, time
from pathlib import Path

import pynvml as N

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dbstats  # noqa: E402  (the scripts' one statistics module)


def poll(h, seconds, work=None):
    """Polls energy, power (average and instant) as fast as possible for `seconds`; returns change intervals."""
    t0 = time.perf_counter()
    last_e = last_p = last_i = None
    t_e, t_p, t_i = [], [], []
    samples = []
    cost = []
    while True:
        if work:
            work()
        t = time.perf_counter()
        if t - t0 > seconds:
            break
        a = time.perf_counter()
        e = N.nvmlDeviceGetTotalEnergyConsumption(h)  # mJ
        b = time.perf_counter()
        p = N.nvmlDeviceGetPowerUsage(h)  # mW
        try:
            fi = N.nvmlDeviceGetFieldValues(h, [N.NVML_FI_DEV_POWER_INSTANT])[0]
            inst = fi.value.uiVal if fi.nvmlReturn == 0 else None
        except Exception:
            inst = None
        c = time.perf_counter()
        cost.append((b - a, c - b))
        samples.append((t - t0, e, p, inst))
        if e != last_e:
            t_e.append(t)
            last_e = e
        if p != last_p:
            t_p.append(t)
            last_p = p
        if inst is not None and inst != last_i:
            t_i.append(t)
            last_i = inst
    def iv(ts):
        d = [y - x for x, y in zip(ts, ts[1:])]
        return {"changes": len(ts), "median_interval_ms": dbstats.median(d) * 1e3 if d else None}
    e0, e1 = samples[0][1], samples[-1][1]
    span = samples[-1][0] - samples[0][0]
    return {
        "seconds": span,
        "polls": len(samples),
        "energy_counter": iv(t_e),
        "power_usage": iv(t_p),
        "power_instant": iv(t_i),
        "energy_mean_w": (e1 - e0) * 1e-3 / span if span > 0 else None,
        "power_usage_mean_w": dbstats.mean(s[2] for s in samples) * 1e-3,
        "power_instant_mean_w": (dbstats.mean(s[3] for s in samples if s[3] is not None) * 1e-3
                                 if any(s[3] is not None for s in samples) else None),
        "query_us": {"energy": dbstats.median(c[0] for c in cost) * 1e6,
                     "power_and_instant": dbstats.median(c[1] for c in cost) * 1e6},
        "trace": [(round(s[0], 4), s[1], s[2], s[3]) for s in samples[:: max(1, len(samples) // 400)]],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", default="-")
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    N.nvmlInit()
    h = N.nvmlDeviceGetHandleByIndex(0)
    out = {"device": N.nvmlDeviceGetName(h), "driver": N.nvmlSystemGetDriverVersion(),
           "enforced_power_limit_w": N.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
           "power_limit_constraints_w": [x / 1e3 for x in N.nvmlDeviceGetPowerManagementLimitConstraints(h)],
           "max_sm_clock_mhz": N.nvmlDeviceGetMaxClockInfo(h, N.NVML_CLOCK_SM)}
    time.sleep(1.0)
    out["idle"] = poll(h, a.seconds)
    try:
        import torch
        x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        def work():
            for _ in range(2):
                torch.matmul(x, x, out=y)
        torch.cuda.synchronize()
        out["busy_bf16_gemm"] = poll(h, a.seconds, work)
        torch.cuda.synchronize()
        out["busy_clocks_mhz"] = N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM)
        out["busy_reasons"] = hex(N.nvmlDeviceGetCurrentClocksEventReasons(h))
        time.sleep(0.5)
        out["after_busy"] = poll(h, 1.0)
    except Exception as e:  # no torch / no CUDA: idle figures only
        out["busy_error"] = str(e)
    s = json.dumps(out, indent=1)
    (sys.stdout.write(s + "\n") if a.o == "-" else open(a.o, "w").write(s + "\n"))


if __name__ == "__main__":
    main()
