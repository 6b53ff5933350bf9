#!/usr/bin/env python3
"""Turns what train.py wrote (sharded bf16 weights, small enough for the device tool's transfer
limit) into the folder infera ships: one model.safetensors, config.json, generation_config.json,
tokenizer.json and tokenizer_config.json.

Usage: assemble_model.py --trained DIR/model --tokenizer build/demo_model/tok --out models/infera-demo
"""
import argparse
import json
import shutil
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trained", type=Path, required=True)
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    index_path = args.trained / "model.safetensors.index.json"
    shards = (sorted(set(json.loads(index_path.read_text())["weight_map"].values()))
              if index_path.exists() else ["model.safetensors"])
    tensors = {}
    for shard in shards:
        with safe_open(args.trained / shard, framework="pt") as f:
            for name in f.keys():
                if name in tensors:
                    raise SystemExit(f"{shard}: tensor {name} is in two shards")
                tensors[name] = f.get_tensor(name)
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob("model*.safetensors*"):
        stale.unlink()
    # sorted names: the same weights always give the same file
    save_file({k: tensors[k].contiguous() for k in sorted(tensors)},
              args.out / "model.safetensors", metadata={"format": "pt"})
    (args.out / "model.safetensors").chmod(0o644)
    for name in ("config.json", "generation_config.json"):
        shutil.copyfile(args.trained / name, args.out / name)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(args.tokenizer / name, args.out / name)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    print(f"{len(tensors)} tensors, {total} bytes of weights -> {args.out}")


if __name__ == "__main__":
    main()
