"""Nearest-centroid classifier on a small two-class dataset; writes /work/out/results.json."""

import csv
import json
import math
import os
import random

data_dir = os.environ["DOTLAB_DATA_DIR"]
out_dir = os.environ["DOTLAB_OUT_DIR"]
random.seed(int(os.environ.get("DOTLAB_SEED", "0")))

with open(os.path.join(data_dir, "points.csv"), newline="") as f:
    rows = [(float(r["x"]), float(r["y"]), r["label"]) for r in csv.DictReader(f)]

random.shuffle(rows)
cut = int(len(rows) * 0.7)
train, test = rows[:cut], rows[cut:]

centroids = {}
for label in sorted({r[2] for r in train}):
    pts = [r for r in train if r[2] == label]
    centroids[label] = (sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts))


def predict(x, y):
    return min(centroids, key=lambda k: math.dist((x, y), centroids[k]))


correct = sum(predict(x, y) == label for x, y, label in test)
accuracy = correct / len(test)
spread = sum(math.dist(c, (0.0, 0.0)) for c in centroids.values()) / len(centroids)

with open(os.path.join(out_dir, "results.json"), "w") as f:
    json.dump({"accuracy": round(accuracy, 6), "centroid_spread": round(spread, 6)}, f)
print(f"accuracy={accuracy:.4f} on {len(test)} test points")
