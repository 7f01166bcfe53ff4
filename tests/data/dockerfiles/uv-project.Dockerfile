# Modeled on: astral-sh/uv-docker-example:Dockerfile (commit ae60e46186cf5cfab660400c657120e409bf7802)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: run-mount-cache, run-mount-bind, mount-target-relative-to-workdir, copy-after-run, entrypoint-exec-empty, cmd-exec, comments
# a Python base image that already carries uv
FROM ghcr.io/astral-sh/uv:python3.12-bookworm-slim@sha256:7880f4dbb95f58a9a34f310138018e65bbc0ac83456e09c0dc1ce83f23cf5e6a

# the project lives in /app
WORKDIR /app

# byte-compile at install time
ENV UV_COMPILE_BYTECODE=1

# the cache is a mount, so copy out of it instead of hard-linking
ENV UV_LINK_MODE=copy

# tools installed with uv land on the default PATH
ENV UV_TOOL_BIN_DIR=/usr/local/bin

# dependencies only, straight from the lockfile (project files bind-mounted)
RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=bind,source=uv.lock,target=uv.lock \
    --mount=type=bind,source=pyproject.toml,target=pyproject.toml \
    uv sync --locked --no-install-project --no-dev

# then the sources, installed on top; a separate layer keeps dependency caching
COPY . /app
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev

# the environment's executables come first
ENV PATH="/app/.venv/bin:$PATH"

# drop the base image's `uv` entrypoint
ENTRYPOINT []

# development server with reload, reachable from outside the container
CMD ["fastapi", "dev", "--host", "0.0.0.0", "src/uv_docker_example"]
