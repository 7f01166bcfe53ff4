# Modeled on: sanger-pathogens/enadownloader:Dockerfile (commit c39a55bdc77852241041e5ccc6a8db840b66255c)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: multi-stage-named, arg-after-from-repeated, quoted-workdir-from-arg, venv-copied-from-stage, copy-from-relative-dest, env-path-prepend, apt-in-final-stage, built-from-registry
# A virtual environment built in the full image and shipped in the slim one.
# Left out: the original's CI stage (FROM compile-image AS test, pytest as its CMD),
# which the final stage does not use; a stage built on an earlier one cannot be converted.
# Changed: `python -m venv` is `python3 -m venv`, which every Debian python3 has.
FROM python:3.10@sha256:0cab788a2bd3408091850ee010055b463370b7c3475d0ecfad2c3ed79c11a8ef AS compile-image

ARG WORK="/opt"
WORKDIR "$WORK"

RUN python3 -m venv venv
# the venv's python and pip come first from here on
ENV PATH="$WORK/venv/bin:$PATH"

COPY setup.cfg pyproject.toml ./
COPY src src

# the package and its pinned requirements, into the venv
RUN pip install --no-cache-dir .

FROM python:3.10-slim-bookworm@sha256:bf45272d11c772fe9bcabfb81f20f8ad352762a6018f27d98ab07e9243090376 AS runner

RUN apt-get update && apt-get install -y \
   procps \
   && rm -rf /var/lib/apt/lists/*

ARG WORK="/opt"
WORKDIR "$WORK"

COPY --from=compile-image $WORK/venv venv
# so that the venv's tools are found first
ENV PATH="$WORK/venv/bin:$PATH"
