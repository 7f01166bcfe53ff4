"""Stage 3, render: the sbatch script, each task's facts and the Apptainer .def, from the Jinja
templates beside this package (templates/); and building the image from the .def."""
