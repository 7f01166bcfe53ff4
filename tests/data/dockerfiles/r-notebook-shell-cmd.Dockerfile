# Modeled on: ICAN-aneurysms/RIA-predict:Dockerfile (commit 019881f4059ec4a9584e3076aa07e3f3647e7849)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: maintainer, user-then-run, shell, workdir-relative-copy, commented-out-instructions, cmd-shell, cmd-shell-nested-quotes
FROM jupyter/r-notebook:r-3.6.3@sha256:3e65f747f7d757ff9cb1b49d88f83bf789d1786c655e11cd68c9eb23b1846476

MAINTAINER Example Maintainer <maintainer@example.org>

USER root

SHELL ["/bin/bash", "-c"]
WORKDIR /home

# apt refresh, left disabled
# RUN apt-get update

COPY notebooks notebooks
#COPY data data

RUN pip install pandas numpy scipy matplotlib
RUN R -e "options(repos = list(CRAN = 'https://cloud.r-project.org')); install.packages(c('FactoMineR', 'factoextra', 'ROCR', 'pls'))"

CMD /bin/bash -c 'jupyter notebook --ip 0.0.0.0 --no-browser --allow-root'
