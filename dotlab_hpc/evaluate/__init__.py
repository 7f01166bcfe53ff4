"""Stage 8: an evaluation track: many artifacts' bundles checked, reproduced together, each
given the badges its evidence supports and a signed verdict, and a report (SPEC §14)."""
