"""The OCI distribution API (registry v2): one client for reading labels, verifying and locking base
images, promoting candidates and writing multi-platform indexes."""
