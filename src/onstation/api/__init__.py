"""The operator's console: the HTTP service (``onstation serve``), its web page and alerts.

An interface layer, like :mod:`onstation.cli`: it reads and writes through the ledger's
public API only, and nothing below it imports it.
"""
