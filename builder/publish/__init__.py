"""Publishing a family of images: expand the publish set, build/smoke/push each, move aliases last."""
