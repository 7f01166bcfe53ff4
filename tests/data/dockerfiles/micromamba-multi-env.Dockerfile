# Modeled on: mamba-org/micromamba-docker:examples/multi_env/Dockerfile (commit 013be6b66eb731e37e47ffe4063e8891dde38b03)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: copy-chown, chown-from-base-image-env, line-continuation
FROM mambaorg/micromamba:0.21.0@sha256:004651fcf4f775685cb3a8b6256dae0d71137b6d01ada465e6e8e5c6d26739d4
COPY --chown=$MAMBA_USER:$MAMBA_USER env1.yaml /tmp/env1.yaml
COPY --chown=$MAMBA_USER:$MAMBA_USER env2.yaml /tmp/env2.yaml
RUN micromamba create -y -f /tmp/env1.yaml && \
    micromamba create -y -f /tmp/env2.yaml && \
    micromamba clean --all --yes
