"""Stage 1, the manifest: its models, the strict YAML/JSON reader, the light validator and its
generated schema, and the limits of every field."""
