# Modeled on: astral-sh/uv-docker-example:multistage.Dockerfile (commit 00e63007faebe8fe33d5621a7a04f6b8ce8128e1)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: multi-stage-named, env-multi-pair, run-mount-cache, run-mount-bind, add-local-dir, copy-from-stage, copy-chown, cmd-exec, comments
# Build with uv in one image; ship a final image without uv.

# build the application in /app
FROM ghcr.io/astral-sh/uv:python3.12-bookworm-slim@sha256:7880f4dbb95f58a9a34f310138018e65bbc0ac83456e09c0dc1ce83f23cf5e6a AS builder
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy

# use the system interpreter in both stages; a managed interpreter would
# have to be copied across too
ENV UV_PYTHON_DOWNLOADS=0

WORKDIR /app
RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=bind,source=uv.lock,target=uv.lock \
    --mount=type=bind,source=pyproject.toml,target=pyproject.toml \
    uv sync --frozen --no-install-project --no-dev
ADD . /app
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev


# final image without uv
FROM python:3.12-bookworm-slim@sha256:bdfaa4258f6304f23dcf9ffa85d76c0f91aa70c3877241a097efb9913390bc1b
# must match the builder's interpreter path, or the venv breaks

# the application from the builder
COPY --from=builder --chown=app:app /app /app

# the environment's executables come first
ENV PATH="/app/.venv/bin:$PATH"

CMD ["fastapi", "dev", "--host", "0.0.0.0", "/app/src/uv_docker_example"]
