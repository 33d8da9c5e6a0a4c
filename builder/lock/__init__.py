"""`torchyard lock export`: an image's exact distribution set, with hashes, as pylock.toml and requirements.txt."""
