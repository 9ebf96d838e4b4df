"""Evaluate the model in train's checkpoint directory on the prepared points; write a report."""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--trained-by", required=True)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    model_file = os.path.join(args.checkpoint, "model.json")
    with open(model_file) as saved:
        model = json.load(saved)
    with open(args.data) as data:
        points = [tuple(map(float, line.split(","))) for line in data if line.strip()]
    mse = sum((model["a"] * x + model["b"] - y) ** 2 for x, y in points) / len(points)
    report = {"model": model_file, "trained_by": args.trained_by, "a": model["a"], "b": model["b"], "mse": mse}
    directory = os.environ["ARGUS_CHECKPOINT_DIR"]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "report.json"), "w") as out:
        json.dump(report, out)
    print(f"eval: model {model_file} (trained by {args.trained_by}): mse={mse:.5f}")


if __name__ == "__main__":
    main()
