"""The numbers the probe (templates/probe.sh) and the job script share with the Python that
renders them.

Apart from ``container.isolation``, which reads the probe's report: a submission only renders
them, and no longer imports that parser (its classes, enum and patterns: about 12 M
instructions of every submission)."""

# The least /tmp and the writable overlay must give: Apptainer's default session tmpfs
# (`sessiondir max size = 64`, in MiB), which docs/contract.md §1 names as what a claim can
# count on.
MIN_TMPFS_MIB = 64
# What the probe exits with (templates/probe.sh) when a property did not hold.
ISOLATION_FAILED_RC = 4
