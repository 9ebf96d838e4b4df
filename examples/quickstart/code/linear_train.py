"""A tiny, real training loop: gradient descent on y = 3x + 2, checkpointing and resuming."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    args = _parse()
    ckpt = Path(args.checkpoint_dir) / "latest.json"
    state = json.loads(ckpt.read_text()) if ckpt.exists() else {"step": 0, "w": 0.0, "b": 0.0}
    if state["step"]:
        print(f"resuming from step {state['step']} ({ckpt})")
    rng = random.Random(state["step"])
    while state["step"] < args.steps:
        xs = [rng.uniform(-1, 1) for _ in range(32)]
        errors = [(state["w"] * x + state["b"]) - (3 * x + 2) for x in xs]
        state["w"] -= args.lr * sum(e * x for e, x in zip(errors, xs, strict=True)) / len(xs)
        state["b"] -= args.lr * sum(errors) / len(xs)
        state["step"] += 1
        if state["step"] % args.checkpoint_every == 0:
            _save(ckpt, state)
            loss = sum(e * e for e in errors) / len(errors)
            print(f"step {state['step']}: loss {loss:.5f} w={state['w']:.3f} b={state['b']:.3f}")
    print(f"done: w={state['w']:.3f} b={state['b']:.3f}")


def _save(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--lr", type=float, default=0.1)
    return parser.parse_args()


if __name__ == "__main__":
    main()
