"""One seed of a (toy) training run: the test accuracy a seeded model reaches.

A stand-in for the usual paper claim "91.2 ± 0.4 over 5 seeds": each seed gives a slightly
different number (initialisation, data order), and the claim is about their mean and spread,
which dotlab-hpc computes over the runs. The seed is DOTLAB_SEED; the accuracy is written to
results.json.
"""

import json
import os
import random

seed = int(os.environ["DOTLAB_SEED"])
rng = random.Random(seed)
# "training": 200 noisy steps towards 0.912; what is left of the noise differs from seed to seed
accuracy = 0.5
for _ in range(200):
    accuracy += 0.03 * (0.912 - accuracy) + rng.gauss(0.0, 0.002)
with open(os.path.join(os.environ["DOTLAB_OUT_DIR"], "results.json"), "w") as f:
    json.dump({"accuracy": accuracy}, f)
