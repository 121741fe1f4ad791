"""The model layer: the `ChatModel` port, the OpenAI-compatible client and its streaming, dialects,
and the pool of model clients. A new provider kind is a `ChatModel` implementation here.

May import: `core`, `config`.
"""

