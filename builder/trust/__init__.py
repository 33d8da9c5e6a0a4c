"""SBOM, provenance and signatures: what a platform team needs to trust an image (docs/trust.md)."""
