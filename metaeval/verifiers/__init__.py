"""The verifier domain of metaeval, a room of its own (docs/architecture.md, Layout).

Laid out like the ``annotation`` app: ``presets/`` (prompts, parsers,
baselines; pure Python), ``runner/`` (one chunk of a run against an
OpenAI-compatible endpoint), ``services/`` (every write), ``selectors``
(reads), ``access`` (objects fetched through the user), ``views``/``urls``
(the verifiers page), ``api``/``serializers``/``api_urls`` (the DRF face),
``forms``, ``tasks`` (the background chunk task) and ``report`` (the
verifiers section of a study report). The statistics it reports come from
``metaeval.stats``.
"""
