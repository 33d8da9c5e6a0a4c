"""A project's image: torchyard.toml (what the project asks) and torchyard.lock (what it resolved to)."""
