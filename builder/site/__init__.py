"""The compatibility page (`torchyard matrix html`): data from the resolver, one self-contained HTML file."""
