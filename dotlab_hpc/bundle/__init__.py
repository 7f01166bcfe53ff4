"""Stage 7, bundle: the paper's handoff bundle (pack), its check (verify-bundle), its standard
metadata (RO-Crate, in-toto, DSSE signatures), and a reviewer's rerun (reproduce)."""
