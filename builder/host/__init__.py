"""The user's machine: what driver, GPUs, CPU and container runtime it has (probe), and what runs there (doctor)."""
