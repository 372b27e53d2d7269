"""Resurrection plans: sealed capsules, signature receipts, schemas, the semantic validator,
capability tables, the incident-to-plan pipeline and the operator review.

Pure decisions (the verdict, capability translation) live in :mod:`onstation.core`; this
package adds what needs package data, keys or the file system. See ``docs/plan.md``.
"""
