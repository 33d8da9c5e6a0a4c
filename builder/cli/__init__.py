"""The torchyard command line: thin click commands over the library (which never imports click)."""
