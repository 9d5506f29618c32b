# On PYTHONPATH of the subprocesses that tests marked `offline` start (tests/conftest.py): such a test never needs torch.
raise ImportError("torch was imported under a test marked offline (tests/conftest.py): remove the mark or the import")
