"""Test and demo tools for the feedback loop: a vLLM simulator, a load generator and a pod runner.

Not part of `capacity` and not used by the operator at run time.
"""
