"""OpenAI's wire format, with no I/O: parsing and building what goes over the wire.

- :mod:`~gateway.wire.sse` — server-sent events: a parser, the stream accumulator
  and summary, encoders.
"""
