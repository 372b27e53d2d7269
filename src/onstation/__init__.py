"""onstation: keeps an AI agent's work alive while its bodies come and go.

The package is layered (imports point down only): ``core`` (pure domain), ``ledger`` (the
durable store), ``plan`` (capsules, schemas, validation), ``harness`` (adapters at the edge),
``relief`` (orchestration) and ``cli``/``api`` (interfaces). See DESIGN.md in the shared
material and ``docs/`` in this repository.
"""

__version__ = "0.1.0"
