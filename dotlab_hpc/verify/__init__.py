"""Stage 2, verify: the pinned inputs checked before anything is submitted: dataset and image
hashes, the clean checkout at the pinned commit, and folders that must not overlap."""
