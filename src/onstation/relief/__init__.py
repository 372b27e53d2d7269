"""Orchestration: hull monitoring in the harness hooks, relief, successor launch and settlement."""
