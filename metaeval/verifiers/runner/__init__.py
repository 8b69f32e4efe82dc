"""Running a verifier over a study's items: one chunk at a time, many requests in flight.

Per chunk (docs/architecture.md, Mechanisms): take the next items after the run's cursor, compute
each item's cache key (a hash of model, rendered messages, temperature,
max_tokens, preset and parser), skip the items that already have an answer
for that key, and send the rest to the endpoint with ``AsyncOpenAI`` under
an ``asyncio.Semaphore`` (the verifier's concurrency), using the client's own
retries and timeouts. Every call ends as a prediction: an answer with its
parse status, or the error that stopped it (timeout, 429 after retries, 5xx,
a malformed response); no call failure stops the run. Finished predictions
are written in small batches while the others are still in flight, each
batch with the run's counters and heartbeat, so a killed worker loses at
most the calls it had in flight, and the resumed run asks only for those.

One concern per module:

- ``keys``: which URLs and key variables are allowed, and reading the key;
- ``client``: the ``AsyncOpenAI`` client, one completion call and its error text;
- ``limits``: chunk size, the semaphore and clients, flush and heartbeat;
- ``spec``: a run's fixed configuration as a ``RunSpec``, prompts per item;
- ``params``: that configuration, taken from the verifier when a run starts;
- ``cache``: cache keys and which items already have an answer;
- ``jobs`` / ``outcomes``: what to ask per item, and what its answers mean;
- ``chunks``: every write a chunk makes (shared with the run services);
- ``orchestration``: ``run_chunk``, ``run_to_completion``, ``dry_run_prompt``.

The runner never imports the services that start and queue runs; they
import it (through ``tasks``), so the import graph has no cycle.

This file imports nothing: importing ``runner.chunks`` or ``runner.keys`` (as
the run services and the verifier forms do in every web process) must not
load the openai client that ``client`` needs. Import from the module itself.
"""
