"""kandev-dq's bench: each step timed against a raw-SQL floor measured in the same run.

Run ``python -m bench`` from the checkout (``--help`` for the options); see :mod:`bench.run`.
"""
