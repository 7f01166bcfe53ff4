# Modeled on: dynverse/ti_slicer:Dockerfile (commit 0b2d1c418e1f78b197774ce7538333c32b4bf667)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: label-legacy-space-form, add-local-dir, entrypoint-shell
FROM dynverse/dynwrap:r@sha256:05e8867443d77ba718e1cf418cc3fcc5811b3c91be36cd44cb0b929f614b7919

RUN R -e 'devtools::install_cran("SLICER")'

LABEL version 0.1.4

ADD . /code

ENTRYPOINT Rscript /code/run.R
