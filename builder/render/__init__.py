"""Turn one combination (+ options) into a multi-stage Dockerfile, its build context and a plan."""
