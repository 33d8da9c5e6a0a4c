"""Entry point for `python path/to/smoke` (a directory) and `python -m <package>.smoke`."""

import os
import sys

if not __package__:
    # Run as a directory: make its parent importable so the package's relative imports work.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(_here))
    __package__ = os.path.basename(_here)
    __import__(__package__)

from .cli import main

sys.exit(main(sys.argv[1:]))
