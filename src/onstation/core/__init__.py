"""The pure domain: vocabulary, state machines, policies, canonical digests.

Nothing here performs I/O, reads a clock or draws randomness; time and identifiers are
passed in, so the simulator and the tests can drive every decision deterministically.
"""
