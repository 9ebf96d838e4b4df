"""Write points of y = 3x + 2 (with a little noise) as CSV: the data set the next jobs read."""

from __future__ import annotations

import argparse
import os
import random


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--points", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(7)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    rows = [(x, 3 * x + 2 + rng.gauss(0, 0.1)) for x in (i / args.points for i in range(args.points))]
    partial = args.out + ".partial"
    with open(partial, "w") as out:
        out.writelines(f"{x:.6f},{y:.6f}\n" for x, y in rows)
    os.replace(partial, args.out)  # whole or absent: a reader never sees half a file
    print(f"prepare: wrote {len(rows)} points to {args.out}")


if __name__ == "__main__":
    main()
