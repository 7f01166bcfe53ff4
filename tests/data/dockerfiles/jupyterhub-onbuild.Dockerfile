# Modeled on: jupyterhub/jupyterhub:onbuild/Dockerfile (commit 2372842b8a4e9056904a15bda0967916d3c4a49e)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: arg-before-from, onbuild, onbuild-copy, cmd-exec, comments
# Hub image that takes its configuration from the derived build:
# the trigger below copies jupyterhub_config.py from the derived image's
# build context, so that file must sit next to its Dockerfile.

ARG BASE_IMAGE=jupyterhub/jupyterhub:4.0.2@sha256:086b69c264618c09635a2493adbb1ba56a3e8875c962e3009757946c01d654d5
FROM $BASE_IMAGE

ONBUILD COPY jupyterhub_config.py /srv/jupyterhub/jupyterhub_config.py

CMD ["jupyterhub", "-f", "/srv/jupyterhub/jupyterhub_config.py"]
