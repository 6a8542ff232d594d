"""Command-line tools: ``bef_executor``, ``tfrt_translate``, ``tfrt_opt`` and ``pytfrt``.

Each tool is a console script -> ``main(argv=None) -> int`` so tests run it in-process.
"""
