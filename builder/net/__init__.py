"""Upstream HTTP: one client with retries, a budget, counters and a cache."""
