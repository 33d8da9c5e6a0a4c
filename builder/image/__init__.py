"""Code that runs inside builds, with the image's own Python (3.8 and later, standard library only): torchyard
copies these files into the build context; nothing here imports the rest of the package."""
