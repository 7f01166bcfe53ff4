# Modeled on: snakemake/snakemake:Dockerfile (commit 0164aafba0e43fb1a1e8f3156fda723e5deb05b3)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: unpinned-from-no-tag, maintainer, add-local-dir, no-cmd-no-entrypoint
# DELIBERATELY UNPINNED: the FROM below has neither tag nor digest; the converter's pin rule must refuse this file.
FROM continuumio/miniconda3
MAINTAINER Example Maintainer <maintainer@example.org>
ADD . /tmp/repo
RUN apt-get upgrade -y
RUN conda update conda
RUN conda env update --name root --file /tmp/repo/environment.yml
RUN pip install /tmp/repo
