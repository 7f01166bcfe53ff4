"""Stage 6, collect: what a finished job left behind, classified into an honest outcome, and the
record written."""
