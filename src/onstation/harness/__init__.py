"""Adapters at the edge: harnesses, process witnesses, git and workspace evidence."""
