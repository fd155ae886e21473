#!/usr/bin/env python3
"""The statistics of dropbench's Python scripts (peers.py, peer_gemm.py, h2h_attention.py, h2h_table.py, and any
script that summarises timings): one definition of each figure, no torch, no numpy.

    import dbstats
    dbstats.summary(seconds)                      # the nine `stats` keys of a dropbench report
    dbstats.paired_ratios(samples, num, den)      # per round: num / den, both from the same round
    dbstats.boot_median_ci(xs, seed=0)            # (median, low, high): percentile bootstrap, deterministic
    dbstats.mean_ci_t(xs)                         # (mean, low, high): Student t interval of a mean (few samples)
    dbstats.swapped_ratio_ci(ab, ab_swapped)      # an A/B ratio from both role assignments, the slots' bias out

Definitions (the same as the C++ core harness, src/core/stats.cpp and src/core/bootstrap.cpp, docs/measurement.md,
except where stated):
  median      the middle value; for an even count the mean of the two middle values.
  mean        the arithmetic mean, math.fsum(x) / n.
  stdev       the sample standard deviation (n - 1 in the denominator); 0 for fewer than 2 samples.
  rel_stdev   stdev / mean; 0 when the mean is 0. This is the relative spread the harness's noise rule
              (measure.max_noise) and every report's `rel_stdev` use.
  percentile  linear interpolation between order statistics: position p/100 * (n - 1) in the sorted sample
              (the C++ quantile_sorted; numpy's default, statistics.quantiles(method="inclusive")).
  summary     samples, median, mean, min, max, stdev, rel_stdev, discarded, mean_clock_mhz: the keys and order of
              a report's `stats` object (docs/report-schema.md). An empty sample gives zeros, as compute_stats.
  t interval  95 % interval of the MEAN of a few independent replicates (e.g. one figure per training run):
              mean +- t(0.975, n - 1) stdev / sqrt(n). For 2-10 samples the bootstrap's interval is far too narrow
              (it cannot see beyond the sample's own range), the t interval is exact for normal data. t quantiles:
              the table of 0.975 quantiles for 1-30 degrees of freedom (3 decimals), above that the Cornish-Fisher
              expansion of Abramowitz & Stegun 26.7.5 (4 terms; it reproduces the table at 30 to 1e-3).
  paired ratio  time(num) / time(den) over the rounds where both ran (and the denominator is > 0): the two
              variants ran seconds apart in the same power / clock state, so a drift common to a round cancels.
  swapped ratio  an A/B ratio measured twice, with the two builds in opposite slots (h2h's lib A and lib B):
              x = sqrt(median(ab) x median(ab_swapped)), both sets the per-round ratios of A's time over B's. A
              slot that scales its variant's time by s reads s x in one run and x / s in the other, so x is free
              of it, and sqrt(median(ab) / median(ab_swapped)) estimates s. Its interval: the percentile bootstrap
              of x with the two sets resampled independently (seed as above).
  interval    95 % (CONFIDENCE) percentile bootstrap of the median, with a fixed seed: the same sample gives the
              same interval on every run and every machine (random.Random is specified by Python, not by the
              platform).

Where the interval differs from the C++ harness's `median_ci`, and why:
  - Rounds are resampled one by one (the iid bootstrap), not in circular blocks of a data-chosen length. The
    Python peers' samples are bursts (h2h: ~60 ms of back-to-back calls per sample, rounds seconds apart), and an
    h2h run has 4-30 rounds (the backward's default is 6): too few for the block-length rule's autocorrelation
    estimate (it needs >= 8 rounds and then allows at most n / 3), so the blocks would be a guess. Serially
    uncorrelated rounds give L = 1 in the C++ rule, i.e. the iid bootstrap used here.
  - REPLICATES = 2000 (C++: 1000), drawn with random.Random(seed).choices (C++: splitmix64), and the bounds are
    the outward order statistics of the sorted replicates, floor(a (B - 1)) and ceil((1 - a) (B - 1)) with
    a = (1 - level) / 2 (C++: interpolated between them). So the bounds are always values the median can take.
    These are the conventions every committed h2h report was written with; h2h_table.py recomputes intervals
    from committed reports' samples, and changing them would change its tables for the same data.
  - A sample of one value gives (x, x, x), an empty one (None, None, None); the C++ interval is "not valid"
    below 3 samples (its report writes no median_ci).
  - A figure of several variants in h2h is the median of per-round ratios (paired_ratios), not the ratio of
    medians with whole rounds resampled (C++ bootstrap_ratio); both cancel a drift common to a round.
  - mean sums with math.fsum (an exactly rounded sum) and stdev with statistics.stdev's exact arithmetic; the C++
    core sums in double, so the two can differ in the last bit or two of a figure, never more.

--self-test: known-answer checks (no GPU, no torch).
"""
import math
import os
import random
import statistics
import sys

CONFIDENCE = 0.95   # docs/measurement.md, kConfidence in src/core/bootstrap.hpp
REPLICATES = 2000   # bootstrap replicates (the C++ harness: kBootstrapReplicates = 1000; see above)


def median(xs):
    """Median of a non-empty sample (the mean of the two middle values for an even count)."""
    return statistics.median(xs)


def mean(xs):
    """Arithmetic mean of a non-empty sample (math.fsum / n)."""
    return statistics.fmean(xs)


def stdev(xs):
    """Sample standard deviation (n - 1); 0 for fewer than 2 samples."""
    xs = list(xs)
    return statistics.stdev(xs) if len(xs) >= 2 else 0.0


def rel_stdev(xs):
    """stdev / mean; 0 for fewer than 2 samples or a zero mean."""
    xs = list(xs)
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return stdev(xs) / m if m else 0.0


def percentile(xs, p):
    """The p-th percentile (0 <= p <= 100) of a non-empty sample, interpolated linearly between order statistics
    at position p / 100 * (n - 1), as the C++ quantile_sorted."""
    s = sorted(xs)
    if not s:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile: p in [0, 100] (got {p})")
    pos = p / 100.0 * (len(s) - 1)
    i = int(pos)
    f = pos - i
    return s[i] * (1 - f) + s[i + 1] * f if i + 1 < len(s) else s[i]


def summary(xs, clock_mhz=0.0, discarded=0):
    """The nine `stats` keys of a dropbench report, in order, for samples in seconds (need not be sorted).
    clock_mhz: the mean SM clock during the samples (0: not measured); discarded: samples dropped before."""
    xs = list(xs)
    n = len(xs)
    if n == 0:
        return {"samples": 0, "median": 0, "mean": 0, "min": 0, "max": 0, "stdev": 0, "rel_stdev": 0,
                "discarded": discarded, "mean_clock_mhz": 0}
    m = mean(xs)
    sd = stdev(xs)
    return {"samples": n, "median": median(xs), "mean": m, "min": min(xs), "max": max(xs), "stdev": sd,
            "rel_stdev": sd / m if m else 0.0, "discarded": discarded, "mean_clock_mhz": float(clock_mhz or 0.0)}


def paired_ratios(samples, num, den, field="s_per_call"):
    """Per round: samples[num][field] / samples[den][field], both from the same round, in round order.
    samples: {variant: [{"round": r, field: value, ...}]}. Rounds where one side did not run, has no value (None)
    or the denominator is not > 0 are left out."""
    a = {s["round"]: s.get(field) for s in samples.get(num, [])}
    b = {s["round"]: s.get(field) for s in samples.get(den, [])}
    return [a[r] / b[r] for r in sorted(a) if r in b and a[r] is not None and b[r] is not None and b[r] > 0]


def percentile_bounds(sorted_reps, level=CONFIDENCE):
    """(low, high) of sorted bootstrap replicates: the outward order statistics at floor(a (B - 1)) and
    ceil((1 - a) (B - 1)), a = (1 - level) / 2."""
    n = len(sorted_reps)
    return (sorted_reps[int(math.floor((1 - level) / 2 * (n - 1)))],
            sorted_reps[int(math.ceil((1 + level) / 2 * (n - 1)))])


def boot_median_ci(xs, seed=0, n=REPLICATES, level=CONFIDENCE):
    """(median, low, high): the median of xs and its percentile bootstrap interval (n replicates of len(xs) draws
    with replacement, random.Random(seed)). (x, x, x) for one value, (None, None, None) for none."""
    xs = list(xs)
    if not xs:
        return None, None, None
    med = median(xs)
    if len(xs) < 2:
        return med, med, med
    rng = random.Random(seed)
    meds = sorted(median(rng.choices(xs, k=len(xs))) for _ in range(n))
    lo, hi = percentile_bounds(meds, level)
    return med, lo, hi


def swapped_ratio_ci(ab, ab_swapped, seed=0, n=REPLICATES, level=CONFIDENCE):
    """(x, low, high, slot) of an A/B measured in both slot assignments (see "swapped ratio" above); ab and
    ab_swapped are per-round ratios time(A) / time(B), A in the first slot and in the second. None for each figure
    when either set is empty."""
    ab, sw = list(ab), list(ab_swapped)
    if not ab or not sw:
        return None, None, None, None
    m1, m2 = median(ab), median(sw)
    rng = random.Random(seed)
    reps = sorted(math.sqrt(median(rng.choices(ab, k=len(ab))) * median(rng.choices(sw, k=len(sw))))
                  for _ in range(n))
    lo, hi = percentile_bounds(reps, level)
    return math.sqrt(m1 * m2), lo, hi, math.sqrt(m1 / m2)


# Student t 0.975 quantiles for 1..30 degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959963984540054


def t_quantile_975(df):
    """The 0.975 quantile of Student's t with df >= 1 degrees of freedom (the table to 30, then A&S 26.7.5)."""
    if df < 1:
        raise ValueError(f"t_quantile_975: df >= 1 (got {df})")
    if df <= len(_T975):
        return _T975[int(df) - 1]
    x, v = _Z975, float(df)
    g1 = (x ** 3 + x) / 4
    g2 = (5 * x ** 5 + 16 * x ** 3 + 3 * x) / 96
    g3 = (3 * x ** 7 + 19 * x ** 5 + 17 * x ** 3 - 15 * x) / 384
    g4 = (79 * x ** 9 + 776 * x ** 7 + 1482 * x ** 5 - 1920 * x ** 3 - 945 * x) / 92160
    return x + g1 / v + g2 / v ** 2 + g3 / v ** 3 + g4 / v ** 4


def mean_ci_t(xs):
    """(mean, low, high): the 95 % Student t interval of the mean of independent samples; (x, x, x) for one
    value (no spread to estimate), (None, None, None) for none."""
    xs = list(xs)
    if not xs:
        return None, None, None
    m = mean(xs)
    if len(xs) < 2:
        return m, m, m
    h = t_quantile_975(len(xs) - 1) * stdev(xs) / math.sqrt(len(xs))
    return m, m - h, m + h


def intervals_apart(intervals):
    """True when two of the (value, low, high) intervals do not overlap."""
    return any(a[2] < b[1] or b[2] < a[1] for i, a in enumerate(intervals) for b in intervals[i + 1:])


# ---------------------------------------------------------------------------------------------------------------
# self-test: answers computed by hand (no GPU, no torch)
# ---------------------------------------------------------------------------------------------------------------

def self_test():
    fails = []

    import selftest  # the self-tests' shared checks (scripts/selftest.py)

    ok = selftest.collector(fails)

    def close(a, b, tol=1e-12):
        return a is not None and abs(a - b) <= tol * max(1.0, abs(b))

    # summary of [4, 1, 3, 2]: median (2 + 3) / 2, mean 2.5, stdev sqrt(((1.5^2 + 0.5^2) * 2) / 3) = sqrt(5/3)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import dropbench_report as dr  # the keys of a report's stats object, as the C++ writes them (STATS_KEYS)
    s = summary([4.0, 1.0, 3.0, 2.0], clock_mhz=1980, discarded=2)
    ok(tuple(s) == tuple(dr.STATS_KEYS), f"summary keys {tuple(s)}")
    ok(s["samples"] == 4 and s["median"] == 2.5 and s["mean"] == 2.5 and s["min"] == 1.0 and s["max"] == 4.0
       and close(s["stdev"], math.sqrt(5 / 3)) and close(s["rel_stdev"], math.sqrt(5 / 3) / 2.5)
       and s["discarded"] == 2 and s["mean_clock_mhz"] == 1980.0 and isinstance(s["mean_clock_mhz"], float),
       f"summary {s}")
    s1 = summary([3e-4])
    ok(s1["median"] == 3e-4 and s1["stdev"] == 0.0 and s1["rel_stdev"] == 0.0 and s1["mean_clock_mhz"] == 0.0,
       f"one sample {s1}")
    s0 = summary([], discarded=5)
    ok(s0["samples"] == 0 and s0["median"] == 0 and s0["discarded"] == 5 and tuple(s0) == tuple(dr.STATS_KEYS),
       f"empty {s0}")
    ok(median([5.0, 1.0, 3.0]) == 3.0 and mean([1.0, 2.0, 6.0]) == 3.0, "median, mean")
    ok(stdev([7.0]) == 0.0 and close(stdev([1.0, 3.0]), math.sqrt(2)), "stdev")
    ok(rel_stdev([0.0, 0.0]) == 0.0 and close(rel_stdev([1.0, 3.0]), math.sqrt(2) / 2), "rel_stdev")
    # exactly rounded: 1e-3 ten times has mean 1e-3 and stdev 0 (a naive sum gives 0.0010000000000000002)
    ok(mean([1e-3] * 10) == 1e-3 and stdev([1e-3] * 10) == 0.0, "exact mean / stdev of equal values")

    # percentiles: position p/100 (n - 1), interpolated
    ok(percentile([4, 1, 3, 2], 50) == 2.5 and percentile([1, 2, 3, 4], 25) == 1.75
       and percentile([1, 2, 3, 4], 0) == 1 and percentile([1, 2, 3, 4], 100) == 4
       and close(percentile([10.0, 20.0], 90), 19.0) and percentile([7.0], 37) == 7.0, "percentiles")
    for bad in (([], 50), ([1.0], 101), ([1.0], -1)):
        try:
            percentile(*bad)
            fails.append(f"percentile{bad} accepted")
        except ValueError:
            pass
    xs = [float(i) for i in range(101)]
    ok(percentile(xs, 95) == 95.0 and statistics.quantiles(xs, n=100, method="inclusive")[94] == 95.0,
       "percentile = statistics.quantiles(inclusive)")

    # the bootstrap's bounds: replicates 0..1999 at 95 % -> floor(0.025 * 1999) = 49, ceil(0.975 * 1999) = 1950
    ok(percentile_bounds(list(range(2000))) == (49, 1950), f"bounds {percentile_bounds(list(range(2000)))}")
    ok(percentile_bounds([10, 11, 12, 13, 14], 0.5) == (11, 13), "bounds at 50 % of 5 (positions 1 and 3)")
    # The median of 3 draws from {1, 2, 3} is 1 with probability 7/27 (two or three 1s), 3 likewise, 2 with 13/27:
    # 2.5 % and 97.5 % of 2000 replicates fall on 1 and 3 (the chance that fewer than 50 of 2000 are 1: ~1e-100).
    ok(boot_median_ci([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0), f"interval of [1, 2, 3]: {boot_median_ci([1.0, 2.0, 3.0])}")
    ok(boot_median_ci([5.0] * 7) == (5.0, 5.0, 5.0), "a constant sample")
    ok(boot_median_ci([]) == (None, None, None) and boot_median_ci([4.0]) == (4.0, 4.0, 4.0), "0 and 1 samples")
    # odd n: every replicate's median is a sample value, so are the bounds; the interval holds the median
    odd = [1.0, 2.0, 3.0, 4.0, 100.0]
    m, lo, hi = boot_median_ci(odd)
    ok(m == 3.0 and lo in odd and hi in odd and lo <= m <= hi, f"interval of {odd}: {(m, lo, hi)}")
    # even n: a replicate's median is a midpoint of two sample values
    ev = [1.0, 2.0, 4.0, 8.0]
    mids = {(x + y) / 2 for x in ev for y in ev}
    m, lo, hi = boot_median_ci(ev, seed=7)
    ok(m == 3.0 and lo in mids and hi in mids and lo <= m <= hi, f"interval of {ev}: {(m, lo, hi)}")
    # deterministic: the same seed gives the same interval, in any order of calls; wider with a lower level
    rng = random.Random(5)
    g = [1.0 + rng.gauss(0, 0.01) for _ in range(200)]
    a1, a2 = boot_median_ci(g, seed=3), boot_median_ci(list(g), seed=3)
    ok(a1 == a2, f"seeded: {a1} vs {a2}")
    ok(a1[2] - a1[1] < 0.01 and a1[1] < 1.005 and a1[2] > 0.995, f"width of 200 N(1, 0.01): {a1}")
    b80 = boot_median_ci(g, seed=3, level=0.8)
    ok(a1[1] <= b80[1] <= b80[2] <= a1[2], f"80 % inside 95 %: {b80} {a1}")

    # swapped ratio: a true ratio 1.1 read through a slot that scales the first slot's time by 0.97
    ab = [1.1 * 0.97 * (1 + 0.01 * k) for k in (-2, -1, 0, 1, 2)]
    sw = [1.1 / 0.97 * (1 + 0.01 * k) for k in (-2, -1, 0, 1, 2)]
    x, lo, hi, slot = swapped_ratio_ci(ab, sw)
    ok(close(x, 1.1) and close(slot, 0.97) and lo <= x <= hi and hi - lo < 0.05, f"swapped ratio {(x, lo, hi, slot)}")
    ok(swapped_ratio_ci(ab, sw) == (x, lo, hi, slot), "swapped ratio seeded")
    ok(swapped_ratio_ci([], sw) == (None, None, None, None), "swapped ratio of an empty set")

    # paired ratios: by round, only where both ran with a value and a positive denominator
    smp = {"x": [{"round": r, "s_per_call": 2.0 * (1 + 0.1 * r), "j_per_call": 3.0} for r in range(5)],
           "y": [{"round": r, "s_per_call": 1.0 * (1 + 0.1 * r), "j_per_call": (None if r == 1 else 1.5)}
                 for r in (4, 3, 1, 0)]}
    smp["y"].append({"round": 2, "s_per_call": 0.0, "j_per_call": 0.0})
    pr = paired_ratios(smp, "x", "y")
    ok(len(pr) == 4 and all(close(v, 2.0) for v in pr), f"time ratios {pr} (round 2: denominator 0)")
    pe = paired_ratios(smp, "x", "y", "j_per_call")
    ok(pe == [2.0, 2.0, 2.0], f"energy ratios {pe} (round 1: no energy, round 2: 0)")
    ok(paired_ratios(smp, "x", "nope") == [] and paired_ratios(smp, "y", "x", "j_per_call") == [0.5, 0.0, 0.5, 0.5],
       "missing variant; a None numerator left out, a 0 kept")
    ok(paired_ratios({"a": [{"round": 0, "s_per_call": 3.0}, {"round": 1, "s_per_call": 8.0}],
                      "b": [{"round": 1, "s_per_call": 2.0}, {"round": 0, "s_per_call": 1.0}]}, "a", "b") == [3.0, 4.0],
       "round order")
    ok(intervals_apart([(1, 0.9, 1.1), (2, 1.2, 2.2)]) and not intervals_apart([(1, 0.9, 1.1), (1.1, 1.0, 1.2)])
       and not intervals_apart([(1, 1, 1)]), "apart")

    # t quantiles: the table's ends, the expansion continuous with it at 30 and tending to the normal's
    ok(t_quantile_975(1) == 12.706 and t_quantile_975(2) == 4.303 and t_quantile_975(30) == 2.042, "t table")
    ok(abs(t_quantile_975(31) - 2.0395) < 1e-3 and abs(t_quantile_975(120) - 1.9799) < 1e-3
       and abs(t_quantile_975(10 ** 6) - _Z975) < 1e-5, f"t expansion {t_quantile_975(31)} {t_quantile_975(120)}")
    ok(all(t_quantile_975(d) > t_quantile_975(d + 1) for d in range(1, 200)), "t quantiles decrease with df")
    # [1, 2, 3]: mean 2, stdev 1, half-width 4.303 / sqrt(3)
    m, lo, hi = mean_ci_t([3.0, 1.0, 2.0])
    ok(m == 2.0 and close(hi - m, 4.303 / math.sqrt(3)) and close(m - lo, 4.303 / math.sqrt(3)), f"t ci {m, lo, hi}")
    ok(mean_ci_t([]) == (None, None, None) and mean_ci_t([5.0]) == (5.0, 5.0, 5.0)
       and mean_ci_t([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0), "t ci of 0, 1, constant samples")
    # coverage: of 2000 samples of 4 N(0, 1) values, ~95 % of the intervals hold 0 (binomial sd ~0.5 %)
    rng = random.Random(11)
    cover = sum(lo <= 0.0 <= hi for _, lo, hi in (mean_ci_t([rng.gauss(0, 1) for _ in range(4)])
                                                  for _ in range(2000))) / 2000
    ok(0.93 <= cover <= 0.97, f"t ci coverage {cover}")
    try:
        t_quantile_975(0)
        fails.append("t_quantile_975(0) accepted")
    except ValueError:
        pass

    return selftest.report("dbstats", fails)


if __name__ == "__main__":
    if sys.argv[1:] != ["--self-test"]:
        print("usage: dbstats.py --self-test (a module: import dbstats)", file=sys.stderr)
        sys.exit(2)
    sys.exit(self_test())
