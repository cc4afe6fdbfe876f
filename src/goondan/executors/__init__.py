"""Executors: where agent instances run and how events reach them (``inline`` in the caller's process,
``process`` one OS process per instance). They drive the engine (``goondan.engine``) and never import
the ``Runtime`` facade (``goondan.runtime``)."""
