"""SEAM: files: bounded reads, atomic writes, the one JSON layout, and sha256 at disk speed."""
