"""The isolation properties of docs/contract.md section 4, as the tests hold the probe to them."""

from __future__ import annotations

# every property the probe measures, in the order its report lists them
SECTION4 = [
    "network",
    "code_read_only",
    "data_read_only",
    "out_writable",
    "writable_tmpfs",
    "user",
    "capabilities",
    "pid_namespace",
    "ipc_namespace",
    "clean_environment",
    "host_mounts",
    "tmp_size",
    "overlay_size",
]
