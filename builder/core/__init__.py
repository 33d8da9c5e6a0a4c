"""The vocabulary and safe I/O every layer uses: errors, kinds, versions, names, files, processes.

Nothing here imports another part of torchyard."""
