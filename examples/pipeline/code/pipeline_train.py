"""Fit y = a x + b to the prepared points (least squares) and save the model in $ARGUS_CHECKPOINT_DIR,
the checkpoint directory argus gives every command job (`${job:train.checkpoint_dir}` to its followers)."""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    with open(args.data) as data:
        points = [tuple(map(float, line.split(","))) for line in data if line.strip()]
    n = len(points)
    mean_x, mean_y = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    a = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    b = mean_y - a * mean_x
    directory = os.environ["ARGUS_CHECKPOINT_DIR"]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "model.json"), "w") as out:
        json.dump({"a": a, "b": b, "points": n, "data": args.data}, out)
    print(f"train: a={a:.3f} b={b:.3f} from {n} points; saved to {directory}/model.json")


if __name__ == "__main__":
    main()
