"""Reproduce a claim from Python: dotlab-hpc's API (README, "Python API").

Run it in a folder holding claim.yaml, the code checkout code/, the data folder data/ and
image.sif (what examples/run.sh leaves in /tmp/dotlab-example).
"""

from dotlab_hpc import api

runs = api.submit(
    ["claim.yaml"], code_dir="code", data_dir="data", image="image.sif", out_dir="out-api"
)
api.wait(runs)  # files every 2 s, Slurm at most once every 10 minutes
for record in api.collect(runs):
    print(record.claim, record.outcome, "-", record.reason)
    for name, t in record.targets.items():
        print(f"  {name}: expected {t.expected}, got {t.actual}, within: {t.within}")
