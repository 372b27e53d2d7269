"""The handover benchmark's parts: a scratch world with a scripted body (:mod:`.world`), the
ground truth it made and how a document is scored against it (:mod:`.truth`), and the
measurements of one relief (:mod:`.measure`). ``bench/bench_handover.py`` runs them."""
