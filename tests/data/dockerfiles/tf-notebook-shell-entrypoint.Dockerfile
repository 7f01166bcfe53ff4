# Modeled on: FrantisekSefcik/labs-nn:Dockerfile (commit 2cea01d262c44bac4ef3532da6a9a68a49e6e416)
# Written for dotlab-hpc's converter tests: the original's instructions and constructs, not its text.
# Exercises: entrypoint-shell, run-relative-to-inherited-workdir, workdir-trailing-slash, copy-dot-slash-source, no-final-newline
FROM tensorflow/tensorflow:2.3.0-gpu-jupyter@sha256:30b59d3ad92f6aafcc605f16febaac237d0ba03d7714b1d66905310ca4940e25

RUN mkdir project

WORKDIR /project/

COPY ./requirements.txt /project/requirements.txt

RUN pip install --upgrade pip
RUN pip install -r requirements.txt

ENTRYPOINT jupyter notebook --ip=0.0.0.0 --port=8888 --no-browser --allow-root