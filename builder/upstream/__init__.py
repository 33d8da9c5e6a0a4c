"""The matrix against upstream: package indexes (PEP 691 / PEP 503), wheel metadata read by HTTP range
requests, base images on their registries. `torchyard matrix verify` and `matrix sync` live here."""
