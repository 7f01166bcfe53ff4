# Modeled on: docker-library/docs:python/content.md (commit c4a9ba41443427b2ec1d5c4cc01879076aa4a1eb)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: workdir-then-relative-copy, copy-dot-dot-after-run, pip-requirements, cmd-exec-spaced-brackets, built-from-registry
# The python image's own "How to use this image" Dockerfile for an app project:
# requirements first (their layer is reused while only the code changes), then the code.
FROM python:3@sha256:ba47cd01bad425c9b0d5373e6de86c4fde85052076b0e9bb4a85ce2243b8b7cc

WORKDIR /usr/src/app

COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY . .

CMD [ "python", "./script.py" ]
