"""torchyard's smoke suite: runs inside an image (ours or anyone's) with the standard library and torch.

Run it as `python path/to/smoke [--expect manifest.json] [--arch sm_89] [--require-gpu] [--json F]
[--junit F]`, or `python -m builder.smoke` from a checkout. Nothing here imports torchyard.
"""
