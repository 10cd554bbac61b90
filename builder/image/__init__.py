"""The image: build inputs, install steps, the recipe, the files it carries, and the
Dockerfile and Apptainer .def laid out from it (``context`` lists them all)."""
