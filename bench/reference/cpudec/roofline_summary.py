#!/usr/bin/env python3
"""Prints decode's roofline fractions of `infera bench` result files: tokens/s, the run-wide
fraction (tokens/s p50 x bytes / every probe's p50), the per-repeat one (against the probe after
each repeat) and the adjacent-probe one (blocks of --decode-probe-steps steps against the probes
just before and after each block: median [min, max]), the probes' GB/s, run.cpu_share.

  python3 bench/reference/cpudec/roofline_summary.py bench/reference/cpudec/quiet/*.json
"""
import json
import statistics
import sys


def fmt(v):
    return "-" if v is None else f"{v:.3f}"


for path in sys.argv[1:]:
    j = json.load(open(path))
    m = j["metrics"]
    share = m.get("run.cpu_share", {}).get("samples", [])
    print(f"{path}: {j['environment'].get('weight_format')} threads {j['environment'].get('threads')}, "
          f"run.cpu_share {[round(s, 2) for s in share]}")
    for c, r in j["derived"]["roofline"].get("decode", {}).items():
        per_repeat = m.get(f"decode.{c}.bandwidth_roofline_fraction", {}).get("samples", [])
        line = (f"  decode@{c}: {r['tokens_per_second_p50']:.1f} tok/s x {r['bytes_per_token'] / 1e6:.1f} MB"
                f" = {r['tokens_per_second_p50'] * r['bytes_per_token'] / 1e9:.1f} GB/s; run-wide fraction "
                f"{fmt(r['fraction_of_bandwidth_roofline'])} of {j['derived']['roofline']['read_bandwidth_gbs_p50']:.1f} GB/s;"
                f" per repeat {[round(x, 3) for x in per_repeat]}")
        print(line)
        a = r.get("adjacent_probes")
        if a:
            probes = m[f"decode.{c}.adjacent_bandwidth_gbs"]["samples"]
            print(f"    adjacent probes: fraction {fmt(a['fraction_p50'])} [{fmt(a['fraction_min'])}, "
                  f"{fmt(a['fraction_max'])}] over {a['blocks']} blocks; probes {min(probes):.1f}-"
                  f"{max(probes):.1f} GB/s (p50 {a['bandwidth_gbs_p50']:.1f}); block tok/s p50 "
                  f"{a['block_tokens_per_second_p50']:.1f}")
